"""What lake tells the outside world when it runs unattended: alerts (once per incident, and on
recovery), Prometheus metrics, OpenLineage run events; all derived from the run records."""
