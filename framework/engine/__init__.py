"""A warm engine: a long-running lake process that holds a started Spark driver (its JVM, its JIT,
lake's and Great Expectations' Python modules) and runs `lake` commands sent to it, so a command
pays a socket round trip instead of a JVM start and ~10 s of imports.

- `wire`: the framing both sides speak (length-prefixed frames over a loopback TCP socket).
- `client`: what the `lake` console script does first: find an engine, send the command, stream
  its output back, exit with its code. Imports nothing heavy.
- `server`: the engine's loop: one command at a time, each in a fresh SparkSession of the one
  SparkContext, with the client's working directory, environment and terminal.
- `control`: `lake engine start|stop|status`: the engine file, start-up, a dead engine detected.
"""
