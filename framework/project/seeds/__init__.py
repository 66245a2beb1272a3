"""Seeds: small reference tables kept as CSV files in the project, `layers/seed/<name>.csv` with an
optional `<name>.yaml` (models/seed_config.py), read and typed here without Spark so a bad file is
a config error before any session starts. The build loads them as Hudi tables named
`seed.<name>` (framework/transform/seed.py)."""
