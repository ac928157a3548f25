"""The decision vocabulary, typed: one frozen record per action (what the decision does: its
params), what carrying it out does (`effect`), and the one codec between a record and the log's
raw JSON (as pipx reads its metadata: the raw shape, its version, and a converter per older
version).

A Decision is built from its action's record; the log writes it as a JSON object (`raw_of`), and
every reader of a decision's params (the actor, replay, resume, rollback, approvals, the simulator)
takes the record `record_of` decodes instead of looking keys up itself. Every row written so far
has the shape of version 1 and no version key; a release that changes a record's fields raises
RECORD_VERSION, writes it under VERSION_KEY, and adds the converter from the previous version to
`_UPGRADES`, so rows already in users' databases still read
(tests/adapters/test_store_from_a_previous_release.py reads a store an earlier release wrote).
Decoding is lenient: a key missing (an older row) or of the wrong type (a hand-edited one) reads as
the field's default, never as an exception inside a tick."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, TypeAlias

from campaignctl.core.resources import Resources, resources_from

# What carrying a decision out does, by its params record (a record without `effect` does nothing
# in Slurm: it is only written): a new array, an `scancel --state` of one element, an `scontrol
# update` of pending elements, of an array's throttle, a hold or release of a campaign's arrays
RECORD, SUBMITS, CANCELS, RESIZES, THROTTLES, HOLDS = "record", "submits", "cancels", "resizes", "throttles", "holds"

RECORD_VERSION = 1
VERSION_KEY = "_v"  # absent: version 1
Pair: TypeAlias = tuple[object, object]  # (before, after), as `changes` logs each field


@dataclass(frozen=True, slots=True)
class Resubmit:
    effect: ClassVar[str] = SUBMITS
    changes: Mapping[str, Pair] = field(default_factory=dict)  # resources changed for the retry
    retry: int = 0  # which retry this is for the rule
    max_retries: int = 0
    task_params: Mapping[str, object] | None = None  # the retry's task parameters, where they differ
    param_changes: Mapping[str, Pair] = field(default_factory=dict)
    replacement: bool = False  # the retry of an attempt cancelled to be replaced (fallback, GPU-idle)
    resources: Resources | None = None  # written when the decision waits for approval
    cluster: str = ""  # where it goes ('' : where the attempt it retries ran); a moved attempt's new cluster


@dataclass(frozen=True, slots=True)
class GiveUp:
    pass


@dataclass(frozen=True, slots=True)
class ResizePending:
    effect: ClassVar[str] = RESIZES
    changes: Mapping[str, Pair] = field(default_factory=dict)
    array_job_id: str = ""
    resources: Resources | None = None  # the element's new resources, where the rule wrote them
    # a row for the pending tasks resized alike (core/decisions/decision_rows.py): (task, attempt token, job id)
    members: tuple[tuple[int, str, object], ...] = ()


@dataclass(frozen=True, slots=True)
class ResizeNext:
    changes: Mapping[str, Pair] = field(default_factory=dict)  # for the task's next attempt
    resources: Resources | None = None  # written when the decision waits for approval


@dataclass(frozen=True, slots=True)
class Cancel:
    effect: ClassVar[str] = CANCELS
    only_if: str = ""  # cancel only in this state (scancel --state); '' in any
    replacement: Resources | None = None  # resubmitted with these once it ended
    replacement_params: Mapping[str, object] | None = None
    changes: Mapping[str, Pair] = field(default_factory=dict)
    param_changes: Mapping[str, Pair] = field(default_factory=dict)
    resources: Resources | None = None  # written when the decision waits for approval
    to_cluster: str = ""  # a move (core/placement/moves.py): the replacement goes to this cluster


@dataclass(frozen=True, slots=True)
class Stop:
    effect: ClassVar[str] = CANCELS
    only_if: str = ""
    seen: str = ""  # a person's cancel: the state the attempt was in when asked


@dataclass(frozen=True, slots=True)
class Hold:
    effect: ClassVar[str] = HOLDS
    arrays: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # array job id → elements
    level: str = ""
    signature: str = ""  # a crash loop's: the failure signature it stopped (core/nodes/crash_loop.py)
    attempts: tuple[str, ...] = ()  # … and the attempts that showed it


@dataclass(frozen=True, slots=True)
class Release:
    effect: ClassVar[str] = HOLDS
    arrays: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    limits: Mapping[str, float] = field(default_factory=dict)  # the budget limits it was over
    target_revision: int | None = None  # a rollback's release


@dataclass(frozen=True, slots=True)
class Alert:
    key: str = ""  # one alert per key, ever (`warn:gpu_hours:0.5`)
    level: str = ""


@dataclass(frozen=True, slots=True)
class Throttle:
    effect: ClassVar[str] = THROTTLES
    array_job_id: str = ""
    throttle: int | None = None  # the array's new `%N`; None: unlimited
    changes: Mapping[str, Pair] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Promote:
    """A config kept by its rung: its task in the next rung is submitted."""

    effect: ClassVar[str] = SUBMITS
    config: int = 0
    from_rung: int = 0
    to_rung: int = 0
    params: Mapping[str, object] = field(default_factory=dict)  # a search's trial: its sampled values


@dataclass(frozen=True, slots=True)
class Retire:
    """A config its rung did not keep: recorded, nothing submitted."""

    config: int = 0
    from_rung: int = 0


@dataclass(frozen=True, slots=True)
class Ask:
    """A search's new trial (core/tuning/search.py): its task's first attempt is submitted with `params`."""

    effect: ClassVar[str] = SUBMITS
    trial: int = 0
    params: Mapping[str, object] = field(default_factory=dict)  # the sampled values
    generation: int | None = None  # CMA-ES: the generation it was asked in (adapters/cmaes_sampler.py)
    after: str = ""  # asked ahead: the job element it is queued behind (sbatch --dependency=afterany:…)
    after_trial: int | None = None  # … and that element's trial


@dataclass(frozen=True, slots=True)
class Tell:
    """What a search's sampler is told of a settled trial: record-only."""

    trial: int = 0
    state: str = ""  # COMPLETE | FAIL | PRUNED
    value: float | None = None  # COMPLETE only


@dataclass(frozen=True, slots=True)
class KnownGood:
    revision: int = 0


@dataclass(frozen=True, slots=True)
class Verdict:
    """A person's `approve` or `reject` of the decision `decision_id`."""

    decision_id: int = 0
    token: str = ""  # the submission token an approved resubmit goes out under


@dataclass(frozen=True, slots=True)
class Retry:
    effect: ClassVar[str] = SUBMITS
    changes: Mapping[str, Pair] = field(default_factory=dict)
    resources: Resources | None = None  # written when the decision waits for approval


@dataclass(frozen=True, slots=True)
class SizeFirst:
    tasks: tuple[int, ...] = ()
    group: str = ""
    mem_mb: int = 0
    time_min: int = 0


@dataclass(frozen=True, slots=True)
class PackTasks:
    """How a submission's first attempts were packed (core/packing/packing.py): record-only."""

    tasks: tuple[int, ...] = ()
    group: str = ""
    per_gpu: int = 1
    per_element: int = 1
    cpus: int = 0
    processes: int | None = None  # None (not logged) for step packs, as before plain processes existed


@dataclass(frozen=True, slots=True)
class Start:
    """A chunk of first attempts (core/tick/starts.py): one new array of `tasks`, `per_element` of
    them to an element (packed when above 1), throttled to `throttle`."""

    effect: ClassVar[str] = SUBMITS
    tasks: tuple[int, ...] = ()
    throttle: int | None = None
    group: str = ""
    per_element: int = 1
    per_gpu: int = 1
    cpus: int = 0
    processes: int | None = None  # run as plain processes, this many at once (core/pack_plan.py); None: steps
    cluster: str = ""  # where placement sent it (`clusters:`; core/placement/placement.py); '' : SLURM_CONF's


@dataclass(frozen=True, slots=True)
class NodeSuspect:
    """Evidence against a node (core/nodes/evidence.py): the tick writes it to the cluster's ledger."""

    node: str = ""
    kind: str = ""
    weight: float = 0.0


@dataclass(frozen=True, slots=True)
class ClearNode:
    """A clean run on a node on probation: the tick wipes its slate in the ledger."""

    node: str = ""


@dataclass(frozen=True, slots=True)
class MakeCurrent:
    revision: int = 0
    target_revision: int = 0


@dataclass(frozen=True, slots=True)
class Unknown:
    """An action this release does not know (a newer release's row): its raw params, unread."""

    raw: Mapping[str, object] = field(default_factory=dict)


ActionRecord: TypeAlias = (Resubmit | GiveUp | ResizePending | ResizeNext | Cancel | Stop | Hold | Release | Alert
                     | Throttle | Promote | Retire | Ask | Tell | KnownGood | Verdict | Retry | SizeFirst | PackTasks
                     | MakeCurrent | Start | NodeSuspect | ClearNode | Unknown)

def resources_of(p: ActionRecord) -> Resources | None:
    """The resources a decision gives, where its params name them (a gated decision's always)."""
    return p.resources if isinstance(p, (Resubmit, ResizePending, ResizeNext, Cancel, Retry)) else None


def with_resources(p: ActionRecord, resources: Resources | None) -> ActionRecord:
    """The record with the decision's resources written in, where its type holds them: a decision
    waiting for approval is carried out later exactly as decided."""
    if resources is None or not isinstance(p, (Resubmit, ResizePending, ResizeNext, Cancel, Retry)):
        return p
    return replace(p, resources=resources)


def changes_of(p: ActionRecord) -> Mapping[str, Pair]:
    """field → (before, after) of what a decision changes, where its params say."""
    return p.changes if isinstance(p, (Resubmit, ResizePending, ResizeNext, Cancel, Throttle, Retry)) else {}


def array_of(p: ActionRecord) -> str:
    """The array job id a decision acts on, where its params name it."""
    return p.array_job_id if isinstance(p, (ResizePending, Throttle)) else ""


RECORDS: dict[str, type[ActionRecord]] = {
    "resubmit": Resubmit, "give_up": GiveUp, "resize_pending": ResizePending, "resize_next": ResizeNext,
    "cancel": Cancel, "stop": Stop, "hold": Hold, "release": Release, "alert": Alert, "throttle": Throttle,
    "promote": Promote, "retire": Retire, "ask": Ask, "tell": Tell, "mark_known_good": KnownGood, "approve": Verdict,
    "reject": Verdict, "retry": Retry, "size_first": SizeFirst, "pack": PackTasks, "make_current": MakeCurrent,
    "start": Start, "suspect_node": NodeSuspect, "clear_node": ClearNode,
}

# version n → n + 1, applied in turn to a row written at an older version: (action, raw) → raw
_UPGRADES: dict[int, Callable[[str, Mapping[str, object]], Mapping[str, object]]] = {}


def effect_of(action: str) -> str:
    """What carrying out a decision of `action` does (RECORD for one only written)."""
    return getattr(RECORDS.get(action), "effect", RECORD)


def record_of(action: str, raw: Mapping[str, object]) -> ActionRecord:
    """The typed params of a decision of `action`, from its logged JSON object."""
    version = raw.get(VERSION_KEY, 1)
    for at in range(version if isinstance(version, int) else 1, RECORD_VERSION):
        raw = _UPGRADES[at](action, raw)
    record = RECORDS.get(action)
    if record is None:
        return Unknown(dict(raw))
    values: dict[str, Any] = {}  # each checked by its field's reader above
    for f in fields(record):
        if f.name in raw:
            value = _OWN_READERS.get((record, f.name), _READERS.get(f.name, _as_is))(raw[f.name])
            if value is not None:
                values[f.name] = value
    return record(**values)


def raw_of(p: ActionRecord) -> dict[str, object]:
    """The JSON object a decision's params are logged as: the record's fields that say something
    (numbers always; None, False, '' and empty collections left out, as a reader takes their
    default), Resources as their fields, tuples as lists."""
    if isinstance(p, Unknown):
        return dict(p.raw)
    return {f.name: _json(v) for f in fields(p) if _says_something(v := getattr(p, f.name))}


def _says_something(value: object) -> bool:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return bool(value)
    if isinstance(value, (Mapping, tuple, list)):
        return len(value) > 0
    return True


def _json(value: object) -> object:
    if isinstance(value, Resources):
        return {f.name: _json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):  # a submission's task indices: a million ints, no call each
        return [v if type(v) in _SCALARS else _json(v) for v in value]
    return value


_SCALARS = frozenset((int, str, float, bool, type(None)))


def _as_is(value: object) -> object:
    return value


def _pairs(value: object) -> dict[str, Pair] | None:
    if not isinstance(value, dict):
        return None
    return {str(k): (v[0], v[1]) for k, v in value.items() if isinstance(v, (list, tuple)) and len(v) == 2}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _bool(value: object) -> bool | None:
    return bool(value)


def _mapping(value: object) -> dict[str, object] | None:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else None


def _arrays(value: object) -> dict[str, tuple[int, ...]] | None:
    if not isinstance(value, dict):
        return None
    return {str(k): tuple(i for i in v if _int(i) is not None)
            for k, v in value.items() if isinstance(v, (list, tuple))}


def _numbers(value: object) -> dict[str, float] | None:
    if not isinstance(value, dict):
        return None
    return {str(k): float(v) for k, v in value.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _members(value: object) -> tuple[tuple[int, str, object], ...] | None:
    if not isinstance(value, (list, tuple)):
        return None
    return tuple((m[0], str(m[1]), m[2]) for m in value
                 if isinstance(m, (list, tuple)) and len(m) == 3 and _int(m[0]) is not None)


def _ints(value: object) -> tuple[int, ...] | None:
    return tuple(i for i in value if _int(i) is not None) if isinstance(value, (list, tuple)) else None


def _strs(value: object) -> tuple[str, ...] | None:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, (list, tuple)) else None


_READERS: dict[str, Callable[[object], object]] = {
    "changes": _pairs, "param_changes": _pairs, "retry": _int, "max_retries": _int, "task_params": _mapping,
    "replacement_params": _mapping, "resources": resources_from, "array_job_id": _str, "only_if": _str,
    "seen": _str, "arrays": _arrays, "level": _str, "limits": _numbers, "target_revision": _int, "key": _str,
    "throttle": _int, "config": _int, "from_rung": _int, "to_rung": _int, "revision": _int,
    "decision_id": _int, "token": _str, "tasks": _ints, "group": _str, "mem_mb": _int, "time_min": _int,
    "per_gpu": _int, "per_element": _int, "cpus": _int, "processes": _int, "trial": _int, "params": _mapping,
    "state": _str,
    "value": _float, "generation": _int, "after": _str, "after_trial": _int,
    "members": _members, "node": _str, "kind": _str, "weight": _float, "signature": _str, "attempts": _strs,
    "cluster": _str, "to_cluster": _str,
}
# `replacement` is a flag on a resubmit (it replaces a cancelled attempt), the resources on a cancel
_OWN_READERS: dict[tuple[type, str], Callable[[object], object]] = {
    (Resubmit, "replacement"): _bool, (Cancel, "replacement"): resources_from,
}
