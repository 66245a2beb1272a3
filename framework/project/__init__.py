"""A lake project as declared: lake.yaml, the layers' YAML, targets and `${VAR}`, cron text and
the `lake init` scaffold. Pure Python: loading a project never starts Spark."""
