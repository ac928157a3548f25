"""Telling people: after a tick's decisions are written and carried out, derive the events its
campaigns' `notify:` asks for from the decision log (core/screens/notify.py), queue each once per channel
in the store, and send what is queued within a few seconds. What is not sent stays queued for the
next tick: a slow or dead endpoint costs a tick at most NOTIFY_BUDGET_S and loses nothing. Each
notice is tried once per tick; one that failed waits for its next try (core/screens/notify.next_try_in_s:
5 min, 10, 20 … across ticks) until its `retries` are spent.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from campaignctl.adapters.decision_log import LoggedDecision
from campaignctl.adapters.lease import Leases
from campaignctl.adapters.notify import Delivery, deliver
from campaignctl.adapters.notify_store import NoticeRow, NotifyStore, PendingNotice
from campaignctl.adapters.store import Store
from campaignctl.core.base.clock import UTC
from campaignctl.core.base.errors import NotFoundError, NotifyError
from campaignctl.core.model.records import CampaignRecord
from campaignctl.core.policy.notify_config import Notify
from campaignctl.core.screens.notify import (
    NOTIFY_ACTIONS,
    CampaignFacts,
    LoggedFact,
    derive_events,
    event_from_dict,
    next_try_in_s,
    sample_event,
)
from campaignctl.services.campaigns import current_policy, find_campaign

NOTIFY_BUDGET_S = 10.0  # what one tick may spend sending, all campaigns together
SHOWN_ERRORS = 3


@dataclass(frozen=True, slots=True)
class NotifyResult:
    queued: int = 0
    sent: int = 0
    failed: int = 0  # given up this tick: a 4xx answer, or the last retry failed
    pending: int = 0  # left for a later tick
    errors: list[str] = field(default_factory=list)  # the first few, masked

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class QueueResult:
    campaign: str
    channels: list[str]  # of the current revision, the webhook masked
    notices: list[NoticeRow]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class TestResult:
    campaign: str
    channels: list[str]  # "webhook https://host/…", "command notify-send"
    event: dict[str, object]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def notify_after_tick(store: Store, records: Sequence[CampaignRecord], scope_all: bool,
                      now: datetime, leases: Leases) -> NotifyResult:
    """Queue the new events of `records` (whose leases the tick holds), then send what is queued
    for them (for every campaign with `scope_all`: a campaign that finished last tick is no longer
    reconciled, its queue is, by the tick that takes its lease: two users' ticks never both send it)."""
    notices = store.notices
    configs: dict[int, Notify] = {}
    queued = 0
    for record in (store.campaign(r.name) or r for r in records):  # the state this tick left (finished?)
        policy, settings = current_policy(store, record)
        configs[record.id] = policy.notify
        queued += _queue(store, notices, record, policy.notify, settings.tasks, now)
    pending = notices.pending(None if scope_all else list(configs), now.isoformat(timespec="seconds"))
    others = {n.campaign_id for n in pending} - set(configs)
    others -= set(leases.take(others))
    pending = [n for n in pending if n.campaign_id in configs or n.campaign_id in others]
    if others:  # another campaign's queue, whose lease this tick took
        configs |= {c.id: notify_of(store, c) for c in store.campaigns() if c.id in others}
    return _send(notices, pending, configs, time.monotonic() + NOTIFY_BUDGET_S, queued, now)


def notify_of(store: Store, record: CampaignRecord) -> Notify:
    return current_policy(store, record)[0].notify


def _queue(store: Store, notices: NotifyStore, record: CampaignRecord, notify: Notify, tasks: int,
           now: datetime) -> int:
    if not notify.enabled:
        return 0
    log = store.log
    entries = {e.id: e for e in [*log.entries(record.id, actions=NOTIFY_ACTIONS), *log.awaiting(record.id)]}
    facts = [_fact(e) for e in sorted(entries.values(), key=lambda e: e.id)]
    events = derive_events(_campaign_facts(store, record, facts, tasks), facts, notify.on,
                           notices.known_keys(record.id), now)
    return notices.enqueue(record.id, events, _channels(notify))


def _fact(e: LoggedDecision) -> LoggedFact:
    return LoggedFact(e.id, e.tick_id, e.task_index, e.action, e.reason, e.mode, e.status, e.created_at, e.revision)


def _campaign_facts(store: Store, record: CampaignRecord, facts: Sequence[LoggedFact], tasks: int) -> CampaignFacts:
    revision = store.revision(record.id, record.current_revision)
    given_up = {f.task_index for f in facts if f.action == "give_up" and f.mode == "enforce" and f.status == "applied"}
    return CampaignFacts(record.id, record.name, record.state, record.current_revision, revision.created_at,
                         tasks, len(given_up))


def _channels(notify: Notify) -> list[str]:
    return (["webhook"] if notify.webhook else []) + (["command"] if notify.command else [])


def _target(notify: Notify, channel: str) -> str | tuple[str, ...]:
    return notify.webhook if channel == "webhook" else notify.command


def _send(notices: NotifyStore, pending: Sequence[PendingNotice], configs: dict[int, Notify],
          deadline: float, queued: int, now: datetime) -> NotifyResult:
    sent = failed = 0
    errors: list[str] = []
    down: set[tuple[int, str]] = set()  # a channel that failed this tick: its other events wait
    for notice in pending:
        notify = configs.get(notice.campaign_id, Notify())
        left = 1 + notify.retries - notice.tries
        if notice.channel not in _channels(notify) or left <= 0:
            why = f"no {notice.channel} channel in the campaign's current revision" if left > 0 else "no tries left"
            notices.record(notice.id, "failed", notice.tries, why)
            failed += 1
            continue
        if (notice.campaign_id, notice.channel) in down:
            continue  # it failed this tick: the next tick tries its other events
        delivery = deliver(notice.channel, _target(notify, notice.channel), event_from_dict(notice.event),
                           notify.timeout_s, 1, deadline)
        if not delivery.tries:
            break  # the budget is spent
        tries = notice.tries + delivery.tries
        status = _status(delivery, tries, notify.retries)
        later = now + timedelta(seconds=next_try_in_s(tries))
        notices.record(notice.id, status, tries, delivery.error,
                       later.isoformat(timespec="seconds") if status == "pending" else None)
        sent, failed = sent + (status == "sent"), failed + (status == "failed")
        if not delivery.ok:
            down.add((notice.campaign_id, notice.channel))
            errors.append(f"{notice.event['campaign']} {notice.event['event']}: {delivery.error}")
    return NotifyResult(queued, sent, failed, len(pending) - sent - failed, errors[:SHOWN_ERRORS])


def _status(delivery: Delivery, tries: int, retries: int) -> str:
    if delivery.ok:
        return "sent"
    return "failed" if delivery.final or tries > retries else "pending"


def notify_queue(name: str) -> QueueResult:
    """What the campaign's channels were told, are about to be told, or could not be told."""
    store = Store.open()
    record = find_campaign(store, name)
    notify = notify_of(store, record)
    return QueueResult(record.name, _described(notify), store.notices.rows(record.id))


def _described(notify: Notify) -> list[str]:
    return [f"{c} {notify.describe_channel(c)}" for c in _channels(notify)]


def send_test(name: str, now: datetime | None = None) -> TestResult:
    """Send a sample event on every channel of the campaign's `notify:`; raise NotifyError on
    the first that fails (nothing is queued or recorded: a test is not an event)."""
    store = Store.open()
    record = find_campaign(store, name)
    notify = notify_of(store, record)
    if not notify.enabled:
        raise NotFoundError(f"campaign {name!r} has no notify channel in its current revision",
                            "add `notify: {webhook: URL}` or `notify: {command: [PROGRAM, ARG]}` to the spec "
                            "(or its policy) and `campaignctl submit` it again")
    event = sample_event(record.name, record.current_revision, now or datetime.now(UTC).replace(microsecond=0))
    for channel in _channels(notify):
        budget = (notify.timeout_s + 2) * (notify.retries + 1)
        delivery = deliver(channel, _target(notify, channel), event, notify.timeout_s, notify.retries + 1,
                           time.monotonic() + budget)
        if not delivery.ok:
            raise NotifyError(f"{channel} failed after {delivery.tries} try(s): {delivery.error}",
                              "check the endpoint (or command) and try again: campaignctl notify test " + name)
    return TestResult(record.name, _described(notify), event.to_dict())
