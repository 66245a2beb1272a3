"""Fault injection for crash tests: `LAKE_FAILPOINT=<name>[:<n>]` kills the process (SIGKILL) the
n-th time (default first) execution reaches `failpoint(<name>)`. Unset in normal runs: a no-op."""

from __future__ import annotations

import os
import signal
from collections import Counter

_hits: Counter[str] = Counter()


def failpoint(name: str) -> None:
    spec = os.environ.get("LAKE_FAILPOINT")
    if not spec:
        return
    target, _, nth = spec.partition(":")
    if target != name:
        return
    _hits[name] += 1
    if _hits[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
