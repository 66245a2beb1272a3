"""DWD/DWS models: loading, dependency graph, strategy inference, incremental engine."""
