"""What lake records in a Hudi commit's extra metadata, typed.

Every lake commit carries its progress in the same commit as its data (DESIGN.md §2): Hudi writes
each write option whose key starts with `_` into the commit, and lake's keys start with
`_lake_`. The records here are those entries: `to_meta()` gives the entries (keys without the
`_lake_` prefix, values as text) and `from_meta()` reads them back. The keys and the text of
each value are the ones tables written by earlier versions carry (`_lake_ckpt` as sorted JSON,
`_lake_ods_batch` as a decimal number, ...), so an existing warehouse reads the same and nothing
is rebuilt on upgrade.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict, Field


class HighWater(BaseModel):
    """The greatest binlog position a table has taken (`pos`: file number and position as in
    `pos_seq`), the server that wrote it and its source time; kept in the commit metadata."""

    server: str
    pos: str
    ts_ms: int


class CommitRecord(BaseModel):
    """A record kept in a commit's extra metadata."""

    model_config = ConfigDict(frozen=True)

    def to_meta(self) -> dict[str, str]:  # pragma: no cover - every record overrides it
        raise NotImplementedError


class BatchMark(CommitRecord):
    """The micro-batch of a stream a side table's commit belongs to (tombstones, the dead
    letter): a replay after a crash recognises the batch it has taken."""

    stream: str
    batch: int

    def to_meta(self) -> dict[str, str]:
        return {"ods_stream": self.stream, "ods_batch": str(self.batch)}

    @classmethod
    def from_meta(cls, meta: Mapping[str, str]) -> BatchMark | None:
        if "ods_stream" not in meta:
            return None
        return cls(stream=meta["ods_stream"], batch=int(meta.get("ods_batch", "-1")))


class TombstoneMark(BatchMark):
    """A tombstone table's commit: its micro-batch, and a lower bound of the `_deleted_at` of every
    tombstone it holds after the commit (None: not known, from a version before it was kept). While
    that bound is inside the retention, nothing can have expired and the next batch need not read
    the tombstone table to find out."""

    oldest: datetime | None = None

    def to_meta(self) -> dict[str, str]:
        out = super().to_meta()
        if self.oldest is not None:
            out["tombstones_oldest"] = self.oldest.astimezone(timezone.utc).isoformat()
        return out

    @classmethod
    def from_meta(cls, meta: Mapping[str, str]) -> TombstoneMark | None:
        mark = BatchMark.from_meta(meta)
        if mark is None:
            return None
        oldest = meta.get("tombstones_oldest")
        return cls(stream=mark.stream, batch=mark.batch, oldest=datetime.fromisoformat(oldest) if oldest else None)


class OdsCommit(CommitRecord):
    """What an ODS table's commit records: the micro-batch it took (stream and batch), the key
    the table was created with, that its deletes are tombstones, its binlog high-water mark and
    newest source event time; a bootstrap's rows, dump and hand-off position; a rewrite's reason.
    Every field is optional: a bootstrap commit has no batch, a batch commit no dump."""

    stream: str | None = None
    batch: int | None = None
    key: list[str] | None = None
    tombstones: bool = False  # `ods_tombstones`: no soft-deleted row left (framework/ods/tombstones.py)
    high_water: HighWater | None = None
    event_ts_max: int | None = None  # epoch ms: what `lake freshness` measures from
    bootstrap_rows: int | None = None
    bootstrap_source: str | None = None
    bootstrap_watermark: str | None = None
    rewritten: str | None = None  # the columns a rewrite widened (framework/ods/rewrite.py)
    repaired: str | None = None  # `lake reconcile --repair`: why, and the source position its rows were read at

    def to_meta(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.stream is not None:
            out["ods_stream"] = self.stream
        if self.batch is not None:
            out["ods_batch"] = str(self.batch)
        if self.key:
            out["ods_key"] = ",".join(self.key)
        if self.tombstones:
            out["ods_tombstones"] = "1"
        if self.high_water is not None:
            out["ods_high_water"] = self.high_water.model_dump_json()
        if self.event_ts_max is not None:
            out["ods_event_ts_max"] = str(self.event_ts_max)
        if self.bootstrap_rows is not None:
            out["bootstrap_rows"] = str(self.bootstrap_rows)
        if self.bootstrap_source is not None:
            out["bootstrap_source"] = self.bootstrap_source
        if self.bootstrap_watermark is not None:
            out["bootstrap_watermark"] = self.bootstrap_watermark
        if self.rewritten is not None:
            out["ods_rewritten"] = self.rewritten
        if self.repaired is not None:
            out["ods_repaired"] = self.repaired
        return out

    @classmethod
    def from_meta(cls, meta: Mapping[str, str]) -> OdsCommit:
        def num(k: str) -> int | None:
            return int(meta[k]) if meta.get(k) not in (None, "") else None

        return cls(
            stream=meta.get("ods_stream"), batch=(num("ods_batch") if "ods_stream" in meta or "ods_batch" in meta else None),
            key=meta["ods_key"].split(",") if meta.get("ods_key") else None, tombstones=bool(meta.get("ods_tombstones")),
            high_water=HighWater.model_validate_json(meta["ods_high_water"]) if meta.get("ods_high_water") else None,
            event_ts_max=num("ods_event_ts_max"), bootstrap_rows=num("bootstrap_rows"), bootstrap_source=meta.get("bootstrap_source"),
            bootstrap_watermark=meta.get("bootstrap_watermark"), rewritten=meta.get("ods_rewritten"),
            repaired=meta.get("ods_repaired"),
        )

    def then(self, later: OdsCommit) -> OdsCommit:
        """This commit's record followed by a later one's: what the later one records wins, the
        rest carries over (a table's state read commit by commit, oldest first)."""
        mine = self.model_dump()
        for k, v in later.model_dump().items():
            if v is not None and v is not False:
                mine[k] = v
        return OdsCommit.model_validate(mine)

    def carried(self) -> OdsCommit:
        """What a rewrite carries into the rewritten table's one commit: the state, not the
        counts of the commits it replaces."""
        return self.model_copy(update={"event_ts_max": None, "bootstrap_rows": None, "bootstrap_source": None, "rewritten": None})


class ModelCheckpoint(CommitRecord):
    """A model build's progress, committed with its rows: for each upstream the completion time
    of the last instant read (`ckpt`), the model's data and metadata fingerprints, the strategy
    and mode of the build, the hidden-groups instant its rows go with (framework/transform/hidden.py)
    and the instant at or before which stored holder counts are unknown (holders.py)."""

    checkpoint: dict[str, str] = Field(default_factory=dict)
    fingerprint: str | None = None
    metadata: str | None = None
    strategy: str | None = None
    mode: str | None = None
    hidden: str | None = None
    counts_unknown: str | None = None
    shape: str | None = None  # the query's output columns and the rest, hashed (fingerprint.shape): forward-only changes
    note: str | None = None  # why a command asked for this build, e.g. "repair after verify: 3 keys differed"

    def to_meta(self) -> dict[str, str]:
        out = {"ckpt": json.dumps(dict(self.checkpoint), sort_keys=True)}
        for k in ("fingerprint", "metadata", "strategy", "mode", "hidden", "counts_unknown", "shape", "note"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        return out

    @classmethod
    def from_meta(cls, meta: Mapping[str, str]) -> ModelCheckpoint | None:
        """The record of a model commit; None when the commit has no checkpoint."""
        if "ckpt" not in meta:
            return None
        return cls(checkpoint=json.loads(meta["ckpt"]), fingerprint=meta.get("fingerprint"), metadata=meta.get("metadata"),
                   strategy=meta.get("strategy"), mode=meta.get("mode"), hidden=meta.get("hidden"),
                   counts_unknown=meta.get("counts_unknown"), shape=meta.get("shape"), note=meta.get("note"))


class QuarantineMark(CommitRecord):
    """The model or ODS table whose rejected rows a quarantine commit holds."""

    model: str

    def to_meta(self) -> dict[str, str]:
        return {"model": self.model}
