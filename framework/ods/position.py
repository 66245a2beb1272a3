"""CDC positions as text: parse the positions users give (`--position`) and compare them with
the ordering sequence of events (`pos_seq` in decode.position_seq).

pos_seq layout (fixed width, digits): binlog file number (10) · pos (20) · row (8) · LSN (20) ·
source ts_ms (15). PostgreSQL events have no binlog: their pos slot holds the LSN that orders
their transaction by commit (decode.commit_lsn), the LSN slot the change's own LSN, so events
order by commit, then within a transaction by LSN (a key change's delete and create share one:
arrival decides). A watermark says which slice to compare: `mysql:` (file+pos), `lsn:` (the
change's LSN) or `ts:`.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from framework.errors import LakeError

FILE_W, POS_W, ROW_W, LSN_W, TS_W = 10, 20, 8, 20, 15
_SLICES = {"mysql": (1, FILE_W + POS_W), "lsn": (FILE_W + POS_W + ROW_W + 1, LSN_W), "ts": (FILE_W + POS_W + ROW_W + LSN_W + 1, TS_W)}


def parse_position(text: str) -> str:
    """`mysql-bin.000003:1234` | `lsn:24023128` | ISO-8601 time → a watermark string."""
    t = text.strip()
    m = re.fullmatch(r"(?:.*\.)?(\d+):(\d+)", t)
    if m and not t.lower().startswith("lsn:"):
        return "mysql:" + m.group(1).zfill(FILE_W) + m.group(2).zfill(POS_W)
    m = re.fullmatch(r"lsn:(\d+)", t, flags=re.IGNORECASE)
    if m:
        return "lsn:" + m.group(1).zfill(LSN_W)
    try:
        when = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise LakeError(
            f"--position {text!r} is not a position",
            fix="give the binlog position of the dump (mysql-bin.000003:1234), a Postgres LSN (lsn:24023128) or an ISO time (2024-05-01T00:00:00Z)",
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return "ts:" + str(int(when.timestamp() * 1000)).zfill(TS_W)


def slice_of(watermark: str) -> tuple[int, int, str]:
    """(1-based start, length, value) of the pos_seq slice a watermark compares."""
    kind, value = watermark.split(":", 1)
    start, length = _SLICES[kind]
    return start, length, value


def seq_at(watermark: str | None) -> str:
    """A pos_seq value sitting exactly at a watermark (for the dump's own rows)."""
    total = FILE_W + POS_W + ROW_W + LSN_W + TS_W
    if not watermark:
        return "0" * total
    start, length, value = slice_of(watermark)
    return ("0" * (start - 1) + value).ljust(total, "0")
