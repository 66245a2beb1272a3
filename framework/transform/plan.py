"""Planning a build: what each selected model will do and why, from a frozen :class:`State`.

Pure functions over data (no Spark, no I/O): `make_plan` turns the models, their analyses and
what Hudi knows about their tables into a tuple of :class:`ModelPlan`, in build order. The state
is read once per selection by `framework/transform/state.py`; `lake plan` prints the result and
the evaluator (`framework/transform/evaluate.py`) executes it, re-planning a model whose
upstreams it has just built (their new commits are part of what that model reads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from framework.table.hudi import Instant
from framework.transform import external, seed
from framework.transform import fingerprint as fp
from framework.transform import strict as strictness
from framework.transform.loader import Model
from framework.transform.strategy import Analysis
from models.commit_meta import ModelCheckpoint
from models.restatement import RestateRange

Mode = Literal["full", "incremental", "recompute", "noop", "restate"]


@dataclass(frozen=True)
class UpstreamState:
    """What Hudi knows about a table a model reads."""

    instants: tuple[Instant, ...]  # completed data commits, oldest first (by completion time)
    earliest_retained: str | None = None  # requested time of the oldest commit the cleaner kept
    size_bytes: int = 0  # latest file slices (hudi.table_bytes); 0 when not read
    rebuilt: tuple[str, str] | None = None  # its last rebuild (framework/runtime/rebuilds.py): first commit, reason
    types: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # completion time -> column types (checkpoints, latest)


@dataclass(frozen=True)
class TargetState:
    """What the last commit of a model's own table records."""

    checkpoint: Mapping[str, str] | None = None  # upstream -> completion time consumed
    fingerprint: str | None = None
    hidden: str | None = None  # the hidden-groups table instant it goes with (framework/transform/hidden.py); None: not recorded
    counts: str | None = None  # holder counts written at or before this instant are unknown (holders.py); None: all known
    recorded: ModelCheckpoint | None = None  # the last commit's record, as read: the commit compares with it
    layout: str | None = None  # the layout its last commit records (framework/table/hudi_layout.py)


@dataclass(frozen=True)
class State:
    """Everything planning needs, read at one moment."""

    upstreams: Mapping[str, UpstreamState] = field(default_factory=dict)
    targets: Mapping[str, TargetState] = field(default_factory=dict)
    externals: Mapping[str, str] = field(default_factory=dict)  # external table read -> its version (framework/transform/external.py)
    absent: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # external table with nothing to read -> (why, fix)


@dataclass(frozen=True)
class BuildLimits:
    """The settings that choose between a recompute and a strategy."""

    recompute_below_mib: float  # project-wide `build.recompute_below_mib`


@dataclass(frozen=True)
class ModelPlan:
    """One model's part of a plan."""

    model: Model
    analysis: Analysis
    mode: Mode
    reason: str
    end: Mapping[str, str]  # upstream -> completion time to read as of
    begin: Mapping[str, str] = field(default_factory=dict)  # upstream -> checkpoint completion time
    pending: Mapping[str, int] = field(default_factory=dict)  # upstream -> commits since the checkpoint
    hidden: str | None = None  # TargetState.hidden: the hidden groups an aggregate's table goes with
    counts: str | None = None  # TargetState.counts
    recorded: ModelCheckpoint | None = None  # TargetState.recorded
    layout: str | None = None  # TargetState.layout
    refused: str | None = None  # why an `incremental: strict` model may not build this way (strict.py)
    window: RestateRange | None = None  # mode "restate": the partition values to recompute (strategies/restate.py)
    forward: tuple[str, ...] = ()  # columns a forward-only change adds (`--forward-only`): built from now on
    note: str | None = None  # why a command asked for this build (BuildOptions.note): recorded in the commit


class PlanError(ValueError):
    """A model cannot be planned (an upstream has no data yet); `fix` says what to do."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


def make_plan(models: Sequence[tuple[Model, Analysis]], state: State, incremental: bool, limits: BuildLimits,
              lenient: bool = False, allow_full: bool = False, forward_only: bool = False) -> tuple[ModelPlan, ...]:
    """Plans of `models` (already in build order) against one state. `lenient` (`lake plan`): a
    model whose upstream has no data yet is planned as the full build it waits to run, saying
    what it waits for, instead of raising PlanError. `allow_full`: strict models may fall back."""
    out: list[ModelPlan] = []
    for m, a in models:
        waiting = _waiting(m, a, state, {p.model.name for p in out}) if lenient else None
        out.append(waiting or plan_model(m, a, state, incremental, limits, allow_full, forward_only))
    return tuple(out)


def _waiting(m: Model, a: Analysis, state: State, earlier: set[str]) -> ModelPlan | None:
    """The plan of a model whose upstreams do not all have data yet, or None."""
    empty = [u for u in m.upstreams if u in state.absent
             or (u not in state.externals and (u not in state.upstreams or not state.upstreams[u].instants))]
    if not empty:
        return None
    built = [u for u in empty if u in earlier]
    waits = [u for u in empty if u not in earlier]
    said = ([f"waits for {', '.join(waits)} (no data yet)"] if waits else []) + ([f"after this build creates {', '.join(built)}"] if built else [])
    end = {u: _end(u, state) for u in m.upstreams if u not in empty}
    return ModelPlan(m, a, "full", "full build; " + "; ".join(said), end)


def _end(u: str, state: State) -> str:
    """What a build reads upstream `u` as of: its latest commit, or an external table's version."""
    return state.externals[u] if u in state.externals else state.upstreams[u].instants[-1].completed


def plan_model(m: Model, a: Analysis, state: State, incremental: bool, limits: BuildLimits, allow_full: bool = False,
               forward_only: bool = False) -> ModelPlan:
    """The mode of one model and why: full (asked for, or the checkpoint cannot serve), noop
    (nothing new upstream), recompute (small upstreams, or the `full` strategy) or incremental.
    An `incremental: strict` model (unless `allow_full`) is planned incrementally, and a plan
    that still falls back is `refused` (framework/transform/strict.py). `forward_only`: a model
    whose query only added output columns builds incrementally (`forward`)."""
    target = state.targets.get(m.name, TargetState())
    strict = strictness.is_strict(m) and not allow_full
    p = _plan_model(m, a, state, incremental or strict, limits, strict, forward_only)
    refused = strictness.refusal(m, p.mode, p.reason, first=target.checkpoint is None) if strict else None
    return replace(p, hidden=target.hidden, counts=target.counts, recorded=target.recorded, layout=target.layout, refused=refused)


def _plan_model(m: Model, a: Analysis, state: State, incremental: bool, limits: BuildLimits, strict: bool = False,
                forward_only: bool = False) -> ModelPlan:
    if m.kind == "seed":  # its content hash alone decides (framework/transform/seed.py)
        seed_mode, why = seed.mode(m, state.targets.get(m.name, TargetState()).fingerprint)
        return ModelPlan(m, a, seed_mode, why, {})
    end = _ends(m, state)
    if not incremental:
        return ModelPlan(m, a, "full", "full build requested", end)
    target = state.targets.get(m.name, TargetState())
    ckpt = target.checkpoint
    if ckpt is None:
        return ModelPlan(m, a, "full", "no checkpoint: first build", end)
    forward: tuple[str, ...] = ()
    if not m.same_data(target.fingerprint):
        rebuild, forward = _changed(m, a, target, end, forward_only)
        if rebuild is not None:
            return rebuild
    if a.strategy == "aggregate" and target.hidden is None:
        return ModelPlan(m, a, "full", "its table was written before hidden groups moved out of it (to _lake/hidden/): "
                                       "a full build moves them", end)
    pending: dict[str, int] = {}
    stale: list[str] = []  # why external tables must be read again (they have no change feed to take)
    for u in m.upstreams:
        c = ckpt.get(u)
        if u in state.externals:
            pending[u] = 0
            stale += [said] if (said := external.change(u, c, state.externals[u])) else []
            continue
        if c is None:
            return ModelPlan(m, a, "full", f"no checkpoint for upstream {u}", end)
        up = state.upstreams[u]
        reason = _unusable(u, c, up)
        if reason:
            return ModelPlan(m, a, "full", reason, end)
        pending[u] = sum(1 for i in up.instants if i.completed > c)
    retyped = next((r for u in m.upstreams if pending[u] and (r := _retyped(u, ckpt[u], state.upstreams[u]))), None)
    if retyped:
        return ModelPlan(m, a, "full", retyped, end)
    begin = {**{u: end[u] for u in state.externals if u in end}, **ckpt}
    if stale:
        return ModelPlan(m, a, "recompute", f"{'; '.join(stale)}: an external table has no change feed, so the model is recomputed "
                                            "from a full read and only the rows that differ are written", end, begin, pending)
    if forward:  # the model's own strategy, from its checkpoint (nothing new upstream: an empty commit records it)
        why = (f"forward-only: {', '.join(forward)} built from now on; rows built before hold NULL in "
               f"{'it' if len(forward) == 1 else 'them'} until a change reaches their key")
        return ModelPlan(m, a, "incremental", why, end, begin, pending, forward=forward)
    if not any(pending.values()):
        return ModelPlan(m, a, "noop", "no upstream commits since the checkpoint", end, begin, pending)
    if a.strategy == "full":
        return ModelPlan(m, a, "recompute", f"{a.reason}; only the rows that differ from the table are written", end, begin, pending)
    own = m.config.recompute_below_mib
    limit = limits.recompute_below_mib if own is None else own
    setting = "build.recompute_below_mib" if own is None else f"recompute_below_mib in {m.stem}.yaml"
    if limit > 0 and not strict:  # a strict model always runs its strategy
        size = sum(state.upstreams[u].size_bytes for u in m.upstreams if u in state.upstreams)
        if size <= limit * 2**20:
            reason = (f"upstreams hold {_mib(size)} (≤ {setting}: {limit:g} MiB): recomputing and writing only "
                      f"the rows that differ is cheaper than the {a.strategy} strategy at this size")
            return ModelPlan(m, a, "recompute", reason, end, begin, pending)
    return ModelPlan(m, a, "incremental", a.reason, end, begin, pending)


def _changed(m: Model, a: Analysis, target: TargetState, end: dict[str, str], forward_only: bool) -> tuple[ModelPlan | None, tuple[str, ...]]:
    """A changed model's full build, with why (and, when it only adds columns, the offer of
    `--forward-only`); or, forward-only, None and the columns it adds."""
    added, why_not = forward_change(m, a, target)
    if forward_only and added:
        return None, tuple(added)
    offer = f"; {why_not}" if forward_only and why_not else (
        f"; it only adds {', '.join(added)}: `lake build {m.name} --forward-only` builds them from now on instead" if added else "")
    return ModelPlan(m, a, "full", f"the model changed (fingerprint {target.fingerprint} → {m.fingerprint}){offer}", end), ()


def forward_change(m: Model, a: Analysis, target: TargetState) -> tuple[list[str], str | None]:
    """The columns a changed model only adds (fingerprint.added_columns), and why they cannot be
    built forward-only, or None: an aggregate's new column needs every row of its groups."""
    added = fp.added_columns(target.recorded.shape if target.recorded else None, m.shape) or []
    if not added:
        return [], ("not a forward-only change: it does more than add output columns (or its table's last commit, by an older "
                    "lake, does not record the query's columns)")
    if a.strategy not in ("rowwise", "rescan"):
        return [], f"{', '.join(added)} cannot be built forward-only by the {a.strategy} strategy: every row of a group or model counts"
    return added, None


def _ends(m: Model, state: State) -> dict[str, str]:
    """What the build reads each upstream as of; PlanError when one has no data yet."""
    end: dict[str, str] = {}
    for u in m.upstreams:
        if u in state.absent:
            raise PlanError(*state.absent[u])
        up = state.upstreams.get(u)
        if u not in state.externals and (up is None or not up.instants):
            raise PlanError(f"{m.name} reads {u}, which has no data yet",
                            fix=f"load {u} first: `lake ingest` for an ODS table, `lake build +{m.name}` for a model (it builds ancestors)")
        end[u] = _end(u, state)
    return end


def _unusable(u: str, c: str, up: UpstreamState) -> str | None:
    """Why the checkpoint `c` of upstream `u` cannot start a change read, or None."""
    done = {i.completed for i in up.instants}
    if c not in done:
        if up.rebuilt and c < up.rebuilt[0]:
            return f"{u} was rebuilt after the checkpoint ({c}), so the model is rebuilt from it: {up.rebuilt[1]}"
        if c < up.instants[0].completed:
            return f"checkpoint of {u} ({c}) is older than its timeline ({up.instants[0].completed}): cleaned or archived"
        return f"checkpoint of {u} ({c}) is not on its timeline: {u} was rebuilt"
    # The cleaner keeps the files of the last `hoodie.clean.commits.retained` commits; archival
    # drops instants from the timeline only later (keep.min/max.commits). In between, the
    # checkpoint is on the timeline but the change read would hit cleaned files and fail at
    # every build: rebuild fully instead.
    kept = up.earliest_retained
    if kept and any(i.completed > c and i.requested < kept for i in up.instants):
        return f"checkpoint of {u} ({c}) is older than what the cleaner kept (earliest retained commit {kept}): cleaned"
    return None


def _retyped(u: str, c: str, up: UpstreamState) -> str | None:
    """Why a change read of `u` since the checkpoint `c` would span a column type change (a
    widening the table took in place), or None. The change's images and the old snapshots come
    in both types, and keys of such a column change their text (1.50 → 1.5000): a full build
    writes every row in the new type instead."""
    before, after = up.types.get(c), up.types.get(up.instants[-1].completed)
    if not before or not after:
        return None
    changed = [(col, before[col], after[col]) for col in before if col in after and before[col] != after[col]]
    if not changed:
        return None
    col, old, new = changed[0]
    return f"{u} column {col} changed type from {old} to {new} since the checkpoint ({c}): rebuilt in the new type"


def needs_sizes(m: Model, limits: BuildLimits) -> bool:
    """Whether planning `m` may compare its upstreams' sizes (a file listing per upstream)."""
    own = m.config.recompute_below_mib
    return (limits.recompute_below_mib if own is None else own) > 0


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 / 10 else f"{n / 1024:.0f} KiB"
