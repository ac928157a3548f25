"""What a campaign tells its `notify:` channels, derived from the decision log and the
campaign's state — never from what one process remembers — so a crash, a second tick or a
rerun derives the same events with the same keys, and the store sends each key once.

    alert              a budget alert (spent + committed passed `budget.warn_at`)
    hold               the budget guard held pending work (once it was carried out, or failed)
    awaiting_approval  a decision waits for `campaignctl approve`
    give_up            a task was given up (a code bug, caps reached, Slurm refusing its retries)
    finish             every task settled: the campaign is finished (once per campaign)

A tick's give-ups are one event, and so are its decisions awaiting approval (`tasks`,
`decision_ids` list them all). Only decisions of the enforced policy count (a shadow proposal
changes nothing), and only those logged since the current revision was made: turning notify on
does not replay a campaign's past.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from campaignctl.core.base.clock import read_time
from campaignctl.core.tick.budget import CAMPAIGN_TASK

EVENT_VERSION = 1
_ACTION_EVENTS = {"alert": "alert", "hold": "hold", "give_up": "give_up"}
NOTIFY_ACTIONS = tuple(_ACTION_EVENTS)  # the decision actions that may become events
PER_TICK = ("give_up", "awaiting_approval")  # one event for all of a tick's decisions of the kind
RETRY_WAIT_S = 0.5  # before the second try of a delivery, doubled before each later one


@dataclass(frozen=True, slots=True)
class LoggedFact:
    """The part of a logged decision an event needs."""

    id: int
    tick_id: int
    task_index: int
    action: str
    reason: str
    mode: str
    status: str  # pending | awaiting-approval | applied | failed | proposed | rejected | expired
    created_at: str  # UTC ISO
    revision: int


@dataclass(frozen=True, slots=True)
class CampaignFacts:
    id: int
    name: str
    state: str  # active | paused | finished | cancelled
    revision: int
    revision_at: str  # when the current revision was made (UTC ISO)
    tasks: int
    given_up: int


@dataclass(frozen=True, slots=True)
class Event:
    key: str  # unique across the store: what makes a delivery happen once
    campaign: str
    event: str
    task: int | None  # the one task concerned; None for the campaign or several tasks
    tasks: tuple[int, ...]  # every task concerned (a tick's give-ups or approvals come as one event)
    reason: str
    decision_id: int | None  # the one decision; None for a finish or several decisions
    decision_ids: tuple[int, ...]
    time: str  # UTC ISO: when the decision was logged (or the campaign seen finished)
    revision: int
    status: str  # the decision's status when the event was derived; `finished` for finish
    hint: str  # the command that shows more
    version: int = EVENT_VERSION

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "tasks": list(self.tasks), "decision_ids": list(self.decision_ids)}

    def env(self) -> dict[str, str]:
        """CAMPAIGNCTL_EVENT_* variables for a command channel ('' for none, lists comma-joined)."""
        return {f"CAMPAIGNCTL_EVENT_{k.upper()}": _env_value(v) for k, v in self.to_dict().items()}


def event_from_dict(data: dict[str, Any]) -> Event:
    """A queued event's JSON back into an Event."""
    return Event(**{**data, "tasks": tuple(data.get("tasks") or ()),
                    "decision_ids": tuple(data.get("decision_ids") or ())})


def _env_value(value: object) -> str:
    if value is None:
        return ""
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def derive_events(campaign: CampaignFacts, facts: Iterable[LoggedFact], on: Sequence[str],
                  known: set[str], now: datetime) -> list[Event]:
    """The events `on` asks for that no delivery has been recorded for yet (`known`: keys).
    Give-ups and approvals go by tick: a code bug in a 500-task grid is one message, not 500."""
    since = read_time(campaign.revision_at)
    groups: dict[tuple[str, int], list[LoggedFact]] = {}
    for f in facts:
        event = _event_of(f) if f.mode == "enforce" and read_time(f.created_at) >= since else None
        if event is not None:
            groups.setdefault((event, f.tick_id if event in PER_TICK else -f.id), []).append(f)
    events = [_event(campaign, event, group) for (event, _), group in groups.items()]
    if campaign.state == "finished":
        events.append(_finish(campaign, now))
    return [e for e in events if e.event in on and e.key not in known]


def _event_of(f: LoggedFact) -> str | None:
    if f.status == "awaiting-approval":
        return "awaiting_approval"
    event = _ACTION_EVENTS.get(f.action)
    # a hold is told once Slurm answered it (applied or failed), not while it is still open
    if event == "hold" and f.status not in ("applied", "failed"):
        return None
    if event == "give_up" and f.status != "applied":
        return None
    return event


def _event(campaign: CampaignFacts, event: str, group: Sequence[LoggedFact]) -> Event:
    first = group[0]
    tasks = tuple(sorted({f.task_index for f in group if f.task_index != CAMPAIGN_TASK}))
    one = len(group) == 1
    key = f"{campaign.id}/{event}/" + (f"tick{first.tick_id}" if event in PER_TICK else str(first.id))
    reason = first.reason if one else (f"{len(group)} decisions, tasks {_listed(tasks)}; "
                                       f"task {first.task_index}: {first.reason}")
    return Event(key, campaign.name, event, tasks[0] if one and tasks else None, tasks, reason,
                 first.id if one else None, tuple(f.id for f in group), first.created_at, first.revision,
                 first.status, _hint(campaign.name, event, tasks, first.id if one else None))


def _hint(name: str, event: str, tasks: Sequence[int], decision_id: int | None) -> str:
    if event == "awaiting_approval":
        return f"campaignctl approve {decision_id}" if decision_id else f"campaignctl approvals {name}"
    return f"campaignctl log show {name}" + (f" --task {tasks[0]}" if len(tasks) == 1 else "")


def _listed(tasks: Sequence[int], shown: int = 20) -> str:
    more = f" and {len(tasks) - shown} more" if len(tasks) > shown else ""
    return ", ".join(map(str, tasks[:shown])) + more


def _finish(campaign: CampaignFacts, now: datetime) -> Event:
    given_up = f", {campaign.given_up} given up" if campaign.given_up else ""
    reason = f"every task settled: {campaign.tasks} task(s){given_up}"
    return Event(f"{campaign.id}/finish", campaign.name, "finish", None, (), reason, None, (),
                 now.isoformat(timespec="seconds"), campaign.revision, "finished",
                 f"campaignctl status {campaign.name}")


def sample_event(campaign: str, revision: int, now: datetime) -> Event:
    """What `campaignctl notify test` sends: shaped like a real event, marked as a test."""
    return Event(f"test/{now.isoformat(timespec='seconds')}", campaign, "test", None, (),
                 "a test event from `campaignctl notify test`: the channel works", None, (),
                 now.isoformat(timespec="seconds"), revision, "test", f"campaignctl status {campaign}")


def retry_waits(retries: int) -> list[float]:
    """Seconds to wait before each try after the first: 0.5, 1, 2, … (`notify test`: a person waits)."""
    return [RETRY_WAIT_S * 2 ** n for n in range(retries)]


TICK_RETRY_S = 300  # a queued event that failed is tried again at the first tick this long after…
TICK_RETRY_MAX_S = 3600  # …doubling each time, to at most this: with `retries: 3`, over 35 minutes


def next_try_in_s(tries: int) -> int:
    """Seconds from a failed try (the `tries`-th) to the next: 300, 600, 1200, … 3600. Retries
    spread over ticks outlast an endpoint's outage; retries within one tick (seconds apart) did
    not: a 4-second outage lost the event."""
    return min(TICK_RETRY_MAX_S, TICK_RETRY_S * 2 ** max(0, tries - 1))
