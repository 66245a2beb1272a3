"""The Hudi table: the Spark session, write options and layouts, commits with lake's metadata,
the timeline (with and without a JVM), column conventions and the catalog."""
