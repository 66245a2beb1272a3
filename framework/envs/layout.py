"""Environments without copies: `lake build --env NAME` builds models into
`<warehouse>/_env/NAME/` and reads everything else from production as of a pinned instant.

An environment is an :class:`EnvLayout`, a warehouse layout in which the models it owns (every
model ever built into it) and lake's own records (`_lake/`: run records, quality results, hidden
groups, locks) live under `_env/NAME/`, while every other table resolves to production. A
production table an environment reads is pinned: the first build that reads it records its latest
completed instant in `_env/NAME/_lake/env.json`, and every later build in that environment plans
and reads it as of that instant (Hudi time travel, `as.of.instant`). Production's later commits
stay invisible, so a diff against production compares code, not timing. Nothing is copied and
nothing under production's folders is written; environment tables are never registered in a
shared catalog.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

from pydantic import BaseModel, Field

from framework.errors import LakeError
from framework.runtime.location import Location
from framework.runtime.paths import Layout

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


class EnvState(BaseModel):
    """`_env/NAME/_lake/env.json`: what an environment owns and the production instants it reads."""

    name: str
    created_at: datetime
    models: list[str] = Field(default_factory=list)  # models built into the environment
    pins: dict[str, str] = Field(default_factory=dict)  # production table -> completion time read


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise LakeError(f"environment name {name!r} is not a name of letters, digits, '-' and '_'",
                        fix="use e.g. --env dev or --env alice_feature-1")
    return name


def env_root(warehouse: Location, name: str) -> Location:
    return warehouse / "_env" / check_name(name)


class EnvLayout(Layout):
    """A warehouse layout that puts `owned` models and `_lake/` under `_env/NAME/` and reads
    other tables from production as of `pins`."""

    def __init__(self, warehouse: Location, state: EnvState, owned: set[str]) -> None:
        super().__init__(warehouse)
        self.production = Layout(warehouse)
        self.env = env_root(warehouse, state.name)
        self.state = state
        self.owned = set(owned)

    def table(self, qualified: str) -> Location:
        return Layout(self.env).table(qualified) if qualified in self.owned else self.production.table(qualified)

    @property
    def lake(self) -> Location:
        return self.env / "_lake"

    @property
    def quarantine_root(self) -> Location:
        return self.env / "_quarantine"

    def pinned(self, qualified: str) -> str | None:
        return None if qualified in self.owned else self.state.pins.get(qualified)


def state_file(warehouse: Location, name: str) -> Location:
    return env_root(warehouse, name) / "_lake" / "env.json"


def load_state(warehouse: Location, name: str) -> EnvState | None:
    """The environment's state; None when it does not exist."""
    layout = Layout(warehouse)
    path = state_file(warehouse, name)
    return EnvState.model_validate_json(layout.fs.read_text(path)) if layout.fs.exists(path) else None


def save_state(warehouse: Location, state: EnvState) -> None:
    Layout(warehouse).fs.write_text(state_file(warehouse, state.name), state.model_dump_json(indent=2))


def names(warehouse: Location) -> list[str]:
    layout = Layout(warehouse)
    return sorted(p.name for p in layout.fs.children(warehouse / "_env") if layout.fs.exists(p / "_lake" / "env.json"))


@dataclass(frozen=True)
class Production:
    """What an environment build needs to know of a production table it reads."""

    latest: str  # completion time of its latest commit
    earliest_retained: str | None  # the cleaner's earliest retained commit (hudi.earliest_retained)


def cleaned(pin: str, table: Production) -> bool:
    """Whether production's cleaner removed files the table's state as of `pin` needs: Hudi's
    time travel refuses an instant before the earliest retained commit ("Cleaner cleaned up the
    timestamp of interest"), and so does this, with the same comparison."""
    return table.earliest_retained is not None and pin < table.earliest_retained


def open_env(warehouse: Location, name: str, building: list[str], production: dict[str, Production]) -> tuple[EnvLayout, list[str]]:
    """The layout of environment `name` for a build of `building` (created if new), and what
    moved: it owns those models and those built into it before; a production table the build
    reads is pinned at its latest commit unless pinned already. A pin production's cleaner has
    passed can no longer be read: it moves to the table's latest commit, and the note says so."""
    state = load_state(warehouse, name) or EnvState(name=check_name(name), created_at=datetime.now(timezone.utc))
    models = sorted(set(state.models) | set(building))
    owned = set(models)
    pins = {t: p.latest for t, p in production.items() if t not in owned}
    notes = []
    for t, at in state.pins.items():
        if t in owned:
            continue
        if t in production and cleaned(at, production[t]):
            notes.append(f"production's {t} was cleaned past the environment's pin {at} (its earliest retained commit is "
                         f"{production[t].earliest_retained}): re-pinned to its latest commit {production[t].latest}; the "
                         f"environment's models that read it are built from there")
            continue
        pins[t] = at
    state = state.model_copy(update={"models": models, "pins": pins})
    save_state(warehouse, state)
    return EnvLayout(warehouse, state, owned), notes


def existing(warehouse: Location, name: str) -> EnvLayout:
    """The layout of an environment that must exist (for diff, promote, drop)."""
    state = load_state(warehouse, name)
    if state is None:
        known = names(warehouse)
        raise LakeError(f"there is no environment {name!r} in this warehouse",
                        fix=f"environments: {', '.join(known)}" if known else "create one with `lake build --env NAME SELECTOR`")
    return EnvLayout(warehouse, state, set(state.models))


def lock_names(warehouse: Location, name: str) -> list[str]:
    """Names of the locks taken in environment `name` (lock files stay; an S3 lease object
    exists while held)."""
    layout = Layout(warehouse)
    return sorted(p.name.removesuffix(".lock") for p in layout.fs.children(Layout(env_root(warehouse, name)).locks)
                  if p.name.endswith(".lock"))


def delete(warehouse: Location, name: str) -> None:
    """Remove environment `name`: its state first (from then on it does not exist), then its
    tables and records. Its lock files stay: the caller holds them, and a lock file deleted while
    held would let two processes lock two files of one name."""
    fs = Layout(warehouse).fs
    root = env_root(warehouse, name)
    fs.delete(state_file(warehouse, name))
    locks = Layout(root).locks
    for child in fs.children(root):
        if child == locks.parent:
            for c in fs.children(child):
                if c != locks:
                    fs.delete(c)
        else:
            fs.delete(child)
