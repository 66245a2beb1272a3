"""lake: a medallion ETL framework on PySpark and Apache Hudi."""

__version__ = "0.1.0"
