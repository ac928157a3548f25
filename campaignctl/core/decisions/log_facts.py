"""The part of a tick's snapshot that the decision log holds, derived in one place: the live tick
(services/tick_snapshot.py) reads it from the store's log, replay (core/governance/replay.py) from the log
as it stood before each recorded tick. Both give the same entries the same meaning: a standing
request, a budget limit a person released, a rung forced past the budget gate, an alert sent.
`when_pending` is the one fact of the rows a snapshot carries beside them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from campaignctl.core.base.clock import read_time
from campaignctl.core.decisions.action_records import Alert, Hold, NodeSuspect, Release, record_of
from campaignctl.core.decisions.requests import STANDING_ACTIONS, LoggedRequest, Requests, standing_requests
from campaignctl.core.model.records import HistoryRow

FACT_ACTIONS = (*STANDING_ACTIONS, "alert", "release", "hold", "suspect_node")  # the actions `log_facts` reads


class LogEntry(Protocol):
    """A decision as the log holds it: the store's LoggedDecision or replay's RecordedDecision."""

    @property
    def task_index(self) -> int: ...
    @property
    def attempt_token(self) -> str: ...
    @property
    def rule(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def params(self) -> Mapping[str, object]: ...
    @property
    def inputs(self) -> Mapping[str, object]: ...
    @property
    def reason(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def status(self) -> str: ...


@dataclass(frozen=True, slots=True)
class LogFacts:
    requests: Requests  # standing utilisation, fallback and early-stopping requests
    released_limits: tuple[Mapping[str, float], ...]  # the limits each applied `release` was over
    forced_rungs: frozenset[int]  # rungs a `resume --force` let past the budget gate
    alerted: frozenset[str]  # keys of the budget alerts already sent
    suspected: frozenset[tuple[str, str]] = frozenset()  # (attempt token, node) of node evidence logged
    crash_looped: frozenset[str] = frozenset()  # attempts a crash-loop hold counted


def log_facts(entries: Iterable[LogEntry]) -> LogFacts:
    """The facts of `entries`, oldest first (entries of other actions are passed over)."""
    requests, releases, alerted = [], [], set()
    suspected: set[tuple[str, str]] = set()
    looped: set[str] = set()
    for e in entries:
        if e.action in STANDING_ACTIONS:
            requests.append(LoggedRequest(e.task_index, e.attempt_token, e.rule, e.action, e.params, e.reason,
                                          e.status))
        elif e.action == "release" and e.mode == "enforce" and e.status == "applied":
            releases.append(e)
        elif isinstance(p := record_of(e.action, e.params), Alert):
            alerted.add(p.key)
        elif isinstance(p, NodeSuspect) and e.mode == "enforce":
            suspected.add((e.attempt_token, p.node))
        elif isinstance(p, Hold) and p.signature and e.mode == "enforce":
            looped.update(p.attempts)
    limits = [p.limits for e in releases if isinstance(p := record_of(e.action, e.params), Release)]
    return LogFacts(standing_requests(requests), tuple(m for m in limits if m),
                    frozenset(rung for e in releases if (rung := _forced_rung(e)) is not None), frozenset(alerted),
                    frozenset(suspected), frozenset(looped))


def _forced_rung(release: LogEntry) -> int | None:
    gate = release.inputs.get("promotion")
    if not isinstance(gate, dict) or not gate.get("forced"):
        return None
    rung = gate.get("rung")
    return rung if isinstance(rung, int) else None


def when_pending(rows: Iterable[HistoryRow]) -> dict[str, datetime]:
    """Attempt token → when it was submitted, for the attempts still waiting (fallback's clock)."""
    return {r.token: read_time(r.created_at) for r in rows if r.state in ("PENDING", "SUBMITTING")}


class OutcomeEntry(Protocol):
    """A logged decision with its outcome's detail (the store's LoggedDecision)."""

    @property
    def action(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def revision(self) -> int: ...
    @property
    def detail(self) -> Mapping[str, object]: ...


def still_held(entries: Iterable[OutcomeEntry], after_revision: int = -1) -> dict[str, set[int]]:
    """Array job id → the elements that budget holds applied after revision `after_revision` held
    and no release since let go, oldest entry first. A hold's and a release's outcome both name
    their elements under `held` (the ones Slurm took the hold or release for)."""
    held: dict[str, set[int]] = {}
    for e in entries:
        if e.status != "applied" or e.revision <= after_revision or e.action not in ("hold", "release"):
            continue
        named = e.detail.get("held")
        for array, indices in (named.items() if isinstance(named, dict) else ()):
            elements = held.setdefault(str(array), set())
            listed = {i for i in indices if isinstance(i, int)} if isinstance(indices, list) else set()
            if e.action == "hold":
                elements |= listed
            else:
                elements -= listed
    return held
