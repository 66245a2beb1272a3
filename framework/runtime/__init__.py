"""What a running lake process stands on: storage (local or Hadoop file systems), warehouse
locations, locks and S3 leases, JVM jars, run history, rebuild records and fault injection."""
