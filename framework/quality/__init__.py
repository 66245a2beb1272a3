"""Quality gates: evaluate declared checks with Great Expectations before a Hudi commit.

`evaluate(...)` -> QualityOutcome (gate.py); results stored with `store.save`; Data Docs and the
run page built by `docs.build_data_docs` and `report.write_run_page`.
"""

from __future__ import annotations

from framework.quality.gate import FAILED_CHECKS, MODEL, RUN_ID, QualityOutcome, evaluate, split

__all__ = ["FAILED_CHECKS", "MODEL", "RUN_ID", "QualityOutcome", "evaluate", "split"]
