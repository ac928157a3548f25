"""What a campaign tells its `notify:` channels, derived from the decision log and the
campaign's state — never from what one process remembers — so a crash, a second tick or a
rerun derives the same events with the same keys, and the store sends each key once.

    alert              a budget alert (spent + committed passed `budget.warn_at`)
    hold               the budget guard held pending work (once it was carried out, or failed)
    awaiting_approval  a decision waits for `campaignctl approve`
    give_up            a task was given up (a code bug, caps reached, Slurm refusing its retries)
    finish             every task settled: the campaign is finished (once per campaign)

Only decisions of the enforced policy count (a shadow proposal changes nothing), and only those
logged since the current revision was made: turning notify on does not replay a campaign's past.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from campaignctl.core.budget import CAMPAIGN_TASK
from campaignctl.core.clock import read_time

EVENT_VERSION = 1
_ACTION_EVENTS = {"alert": "alert", "hold": "hold", "give_up": "give_up"}
NOTIFY_ACTIONS = tuple(_ACTION_EVENTS)  # the decision actions that may become events
RETRY_WAIT_S = 0.5  # before the second try of a delivery, doubled before each later one


@dataclass(frozen=True, slots=True)
class LoggedFact:
    """The part of a logged decision an event needs."""

    id: int
    task_index: int
    action: str
    rule: str
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
    task: int | None
    reason: str
    decision_id: int | None
    time: str  # UTC ISO: when the decision was logged (or the campaign seen finished)
    revision: int
    status: str  # the decision's status when the event was derived; `finished` for finish
    hint: str  # the command that shows more
    version: int = EVENT_VERSION

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def env(self) -> dict[str, str]:
        """CAMPAIGNCTL_EVENT_* variables for a command channel ('' for a missing task)."""
        return {f"CAMPAIGNCTL_EVENT_{k.upper()}": "" if v is None else str(v) for k, v in self.to_dict().items()}


def derive_events(campaign: CampaignFacts, facts: Iterable[LoggedFact], on: Sequence[str],
                  known: set[str], now: datetime) -> list[Event]:
    """The events `on` asks for that no delivery has been recorded for yet (`known`: keys)."""
    since = read_time(campaign.revision_at)
    events = [e for f in facts if f.mode == "enforce" and read_time(f.created_at) >= since
              for e in _from_fact(campaign, f)]
    if campaign.state == "finished":
        events.append(_finish(campaign, now))
    return [e for e in events if e.event in on and e.key not in known]


def _from_fact(campaign: CampaignFacts, f: LoggedFact) -> list[Event]:
    if f.status == "awaiting-approval":
        return [_event(campaign, f, "awaiting_approval")]
    event = _ACTION_EVENTS.get(f.action)
    # a hold is told once Slurm answered it (applied or failed), not while it is still open
    if event is None or (event == "hold" and f.status not in ("applied", "failed")):
        return []
    if event == "give_up" and f.status != "applied":
        return []
    return [_event(campaign, f, event)]


def _event(campaign: CampaignFacts, f: LoggedFact, event: str) -> Event:
    task = None if f.task_index == CAMPAIGN_TASK else f.task_index
    hint = (f"campaignctl approve {f.id}" if event == "awaiting_approval"
            else f"campaignctl log show {campaign.name}" + ("" if task is None else f" --task {task}"))
    return Event(f"{campaign.id}/{event}/{f.id}", campaign.name, event, task, f.reason, f.id,
                 f.created_at, f.revision, f.status, hint)


def _finish(campaign: CampaignFacts, now: datetime) -> Event:
    given_up = f", {campaign.given_up} given up" if campaign.given_up else ""
    reason = f"every task settled: {campaign.tasks} task(s){given_up}"
    return Event(f"{campaign.id}/finish", campaign.name, "finish", None, reason, None,
                 now.isoformat(timespec="seconds"), campaign.revision, "finished",
                 f"campaignctl status {campaign.name}")


def sample_event(campaign: str, revision: int, now: datetime) -> Event:
    """What `campaignctl notify test` sends: shaped like a real event, marked as a test."""
    return Event(f"test/{now.isoformat(timespec='seconds')}", campaign, "test", None,
                 "a test event from `campaignctl notify test`: the channel works", None,
                 now.isoformat(timespec="seconds"), revision, "test", f"campaignctl status {campaign}")


def retry_waits(retries: int) -> list[float]:
    """Seconds to wait before each try after the first: 0.5, 1, 2, …"""
    return [RETRY_WAIT_S * 2 ** n for n in range(retries)]
