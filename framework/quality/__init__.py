"""Quality: checks declared under `checks:` evaluated with Great Expectations, and the gates that
run them before every Hudi commit.

- `checks.py`: `evaluate(...)` -> QualityOutcome (GE validation, failing rows, drop split);
- `model_gate.py` / `ods_gate.py`: the gate of a model build and of an ODS table's micro-batch,
  both answering with a `GateResult`;
- `store.py`, `quarantine.py`: where results and rejected rows go;
- `report.py`, `docs.py`: the run pages and GE Data Docs of `lake report`.
"""
