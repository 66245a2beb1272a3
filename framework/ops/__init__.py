"""Running unattended: `lake run` (once or continuous), `lake schedule` on cron times, the
Airflow export and source freshness."""
