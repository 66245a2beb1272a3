"""`lake test`: unit tests of model logic on given rows, on a tiny local Spark, with nothing read
from or written to the warehouse.

- cases.py finds the tests of the selected models and checks them against the project (no Spark);
  rows.py reads and types their rows, events.py applies their change events;
- frames.py turns rows into DataFrames, compare.py compares the model's rows with the expected;
- incremental.py runs a model's real incremental strategy over the change events, in a
  throw-away Hudi warehouse in a temporary folder;
- run.py runs the cases (on `lake test`'s own session, or a build's), render.py prints them.
"""
