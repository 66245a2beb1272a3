"""What `lake verify` finds for one model (framework/transform/verify.py): printed, returned as
JSON and kept in the run record (`RunRecord.verified`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

# equal: the table holds what a full build gives; differs: it does not; skipped: nothing to
# compare (a seed, no commit yet, a model changed since its last build); failed: the full build
# or a read failed (e.g. an upstream's cleaner removed the instant the checkpoint recorded).
VerifyStatus = Literal["equal", "differs", "skipped", "failed"]
# ModelResult.mode of each status in a verify run's record (`lake runs`); a repair's build has its own.
VERIFY_MODE: dict[str, str] = {"equal": "verified", "differs": "differs", "skipped": "not verified", "failed": "unverified"}
VERIFY_MODES = tuple(VERIFY_MODE.values())


class KeySample(BaseModel):
    """One differing key: its key values, and the row the table holds and the row a full build
    gives (None: the key is not there)."""

    key: dict[str, Any]
    table: dict[str, Any] | None = None
    full: dict[str, Any] | None = None


class ModelVerify(BaseModel):
    """One model's table compared with a full build from its upstreams as of the instants its
    last commit recorded."""

    model: str
    status: VerifyStatus
    reason: str = ""
    table_instant: str | None = None  # the completion time of the table's commit compared (its latest)
    checkpoint_instant: str | None = None  # the commit whose checkpoint the full build read as of
    upstream: dict[str, str] = Field(default_factory=dict)  # upstream -> completion time (or external version) read
    key: list[str] = Field(default_factory=list)  # the columns rows are matched on
    sampled: float | None = None  # the fraction of keys compared (None: every key)
    table_rows: int = 0
    full_rows: int = 0
    missing: int = 0  # keys a full build gives that the table lacks
    extra: int = 0  # keys the table holds that a full build does not give
    changed: int = 0  # keys in both whose row differs
    columns: dict[str, int] = Field(default_factory=dict)  # column -> changed keys in which it differs
    schema_changes: list[str] = Field(default_factory=list)  # column differences of name or type, said
    samples: list[KeySample] = Field(default_factory=list)
    seconds: float = 0.0
    repaired: bool = False  # `--repair` rebuilt it in full (its result is in the run's models)

