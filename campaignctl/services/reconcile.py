"""`reconcile`: one tick of the control loop.

lock (this user's flock, then each campaign's lease in the database: a campaign another process,
of any user on any host, holds is left alone this tick) → finish what a crashed tick left open →
ONE sacct for every live attempt (+ at most one squeue, only when something is missing from sacct
or must be adopted) → pure diff → per campaign, one snapshot of what the tick decides from
(services/tick_snapshot.py) and one pure decide_tick (core/tick/tick.py: every section in a fixed
order) → decisions and submission intents in one transaction → act per group → outcomes → tell the
campaigns' `notify:` channels what the log now says (services/notify.py: queued in the store, sent
within a few seconds, the rest by the next tick) → leases released.

Each campaign is its own error boundary: what one campaign's part of the tick raises (a bug, a
file its job wrote that nothing should have to read) is recorded for it (adapters/tick_failures.py,
shown by `status`) and the tick goes on with the others; the command then exits 75. Slurm or the
database failing for everyone still ends the whole tick (75 as well).
"""

from __future__ import annotations

import functools
import gc
import json
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import TypeVar

from campaignctl.adapters import faults, identity, proc, slurm
from campaignctl.adapters.decision_chain import write_head_if_asked
from campaignctl.adapters.exit_status import read_inline_files
from campaignctl.adapters.lease import Leases
from campaignctl.adapters.lock import exclusive
from campaignctl.adapters.store import Store
from campaignctl.adapters.tick_failures import TickFailures
from campaignctl.core.base.clock import UTC, read_time, stamp, utc
from campaignctl.core.base.errors import (
    AnsweredElsewhereError,
    CampaignctlError,
    DatabaseBusyError,
    LeaseLostError,
    SlurmTransientError,
)
from campaignctl.core.base.redact import mask_assignments, printable
from campaignctl.core.decisions.by_hand import CANCELLED, CANCELLING, ENDED
from campaignctl.core.decisions.decision import Decision, TaskView
from campaignctl.core.model.records import CampaignRecord, HistoryRow, SubmissionRecord
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.packing.pack_fates import packed_observations
from campaignctl.core.slurm import job_ref
from campaignctl.core.slurm.clusters import unheard_as_unknown
from campaignctl.core.slurm.observe import (
    diff_observations,
    key_of,
    needs_observing,
    task_views,
)
from campaignctl.core.slurm.sacct import Observed
from campaignctl.core.spec.spec import CampaignSpec
from campaignctl.core.tick.tick import decide_tick, finished, needs
from campaignctl.core.usage.telemetry import Summary
from campaignctl.services.act import Actor, Outcomes, cancel_strays
from campaignctl.services.approvals import carry_out
from campaignctl.services.campaigns import current_policy, find_campaign
from campaignctl.services.dispatch import new_token, revision_spec
from campaignctl.services.ingest import ingest
from campaignctl.services.notify import notify_after_tick
from campaignctl.services.output import name_outputs
from campaignctl.services.ownership import may_act, require_may_act
from campaignctl.services.reconcile_result import (
    CampaignFailure,
    CampaignTick,
    DecisionSummary,
    LeftAlone,
    ReconcileResult,
)
from campaignctl.services.tick_queue import SqueueOnce
from campaignctl.services.tick_snapshot import fill, gather
from campaignctl.services.ticks import tick_health

T = TypeVar("T")


def reconcile(name: str | None = None, dry_run: bool = False, now: datetime | None = None,
              by_hand: bool = False, spec: CampaignSpec | None = None, store: Store | None = None,
              created: bool = False) -> ReconcileResult:
    """One tick (the module's docstring). `by_hand`: the tick of a person's `submit`, which starts
    anew the first tasks whose submission was abandoned before reaching Slurm, and tries now the
    submissions a refusal's backoff holds back (a person fixed the spec, an association, …);
    `spec`: the spec of campaign `name`'s current revision, as `submit` just recorded it (not
    read back from the store again), `store` the one it recorded it in; `created`: `submit` has
    just created the campaign: once the tick holds its lease, one read tells whether anything has
    happened to it since (another tick, a crash), and if not, the tick reads none of its history,
    which is empty."""
    store = store or Store.open()
    records = _campaigns(store, name)
    if dry_run:
        return _Tick(store, None, now).run(records, dry_run=True)
    if name is not None:
        require_may_act(store, records[0], "reconcile", "`reconcile --dry-run` shows what a tick would decide")
    mine = records if name is not None else [r for r in records if may_act(store, r)]
    left_out, records = len(records) - len(mine), mine
    with exclusive("reconcile") as holder:
        if holder is not None:
            health = tick_health(store)
            return ReconcileResult("locked", None, [], 0,
                                   f"another reconcile (pid {holder}) is running; nothing done",
                                   stall=health.message if health.holder_pid else "")
        leases = Leases(store.engine)
        with leases.keep():
            records, held = _leased(store, leases, records, name)
            if held and not records:
                return ReconcileResult("locked", None, [], 0, "another process holds the lease of every campaign "
                                       "of this tick; nothing done", left_alone=held,
                                       left_out=left_out)
            clock = _tick_clock(now)
            result = _run_tick(store, leases, records, name, clock, by_hand, spec, created)
            write_head_if_asked(store.engine)  # still under the flock: the head is the tick's last row
            # after the decisions are written and carried out; under the leases, so two ticks never
            # send one queued event twice
            dropped = {c.name for c in result.left_alone} | {f.name for f in result.failed}
            notify = notify_after_tick(store, [r for r in records if r.name not in dropped], name is None,
                                       clock, leases)
        return replace(result, left_alone=held + result.left_alone, notify=notify, left_out=left_out)


def _run_tick(store: Store, leases: Leases, records: list[CampaignRecord], name: str | None,
              clock: datetime, by_hand: bool = False, spec: CampaignSpec | None = None,
              created: bool = False) -> ReconcileResult:
    log = store.log
    tick_id = log.begin_tick(name or "--all", stamp(clock))
    calls = proc.call_count()
    try:
        with _collector_paused():
            fresh = frozenset(r.id for r in records if created and store.untouched(r.id))
            result = _Tick(store, tick_id, clock, leases, by_hand, spec, fresh).run(records, dry_run=False)
    except SlurmTransientError as exc:
        log.finish_tick(tick_id, "observed-nothing", proc.call_count() - calls, 0, exc.message)
        raise
    log.finish_tick(tick_id, result.status, result.slurm_calls, sum(len(c.decisions) for c in result.campaigns))
    return result


def _leased(store: Store, leases: Leases, records: list[CampaignRecord],
            name: str | None) -> tuple[list[CampaignRecord], list[LeftAlone]]:
    """The campaigns whose lease this tick took, read again now that no one else acts on them
    (the last holder may have finished, paused or revised one since the list was read), and
    those another holds."""
    held = leases.take(r.id for r in records)
    left = [LeftAlone(r.name, f"its lease is held by {held[r.id].describe()}; {held[r.id].lapses()}",
                      held[r.id].to_dict()) for r in records if r.id in held]
    current = {c.id: c for c in store.campaigns()}
    mine = [current[r.id] for r in records if r.id not in held]
    return [c for c in mine if name is not None or c.state in TICKED], left


TICKED = ("active", "paused", CANCELLING)  # the states `--all` ticks


def _campaigns(store: Store, name: str | None) -> list[CampaignRecord]:
    if name is None:
        return [c for c in store.campaigns() if c.state in TICKED]
    return [find_campaign(store, name)]


class _Tick:
    def __init__(self, store: Store, tick_id: int | None, now: datetime | None, leases: Leases | None = None,
                 by_hand: bool = False, spec: CampaignSpec | None = None, fresh: frozenset[int] = frozenset()) -> None:
        self.store = store
        self.by_hand = by_hand
        self.spec = spec
        self.fresh = fresh  # campaigns nothing has happened to (`created`): no history to read
        self.leases = leases  # None: a dry run, which takes no lease
        self.left_alone: list[LeftAlone] = []
        self.failed: list[CampaignFailure] = []
        self.log = store.log
        self.tick_id = tick_id
        self.now = _tick_clock(now)
        self.squeue = SqueueOnce()
        self.calls_at_start = proc.call_count()
        self.skips_at_start = slurm.skipped_mark()

    def run(self, records: list[CampaignRecord], dry_run: bool) -> ReconcileResult:
        repaired: dict[int, int] = {}
        if not dry_run:
            for r in records:
                if r.id in self.fresh:
                    repaired[r.id] = 0  # no decision, no submission: nothing a crash could have left
                elif (count := self._guarded(r, partial(self._repair, r))) is not None:
                    repaired[r.id] = count
            records = [r for r in records if r.id in repaired]
        histories = {r.id: [] if r.id in self.fresh else self.store.history(r.id, done_tasks=False) for r in records}
        decided = {r.id: set() if r.id in self.fresh else self.log.decided_tokens(r.id) for r in records}
        watched = {r.id: [row for row in histories[r.id] if needs_observing(row, decided[r.id])] for r in records}
        live = [row for r in records for row in watched[r.id]]
        self.squeue.clusters = sorted({c for row in live if row.job_id and (c := job_ref.cluster_of(row.job_id))}
                                      | {c for r in records for c in self._clusters_named(r)})
        if self.squeue.clusters:
            self.squeue.jobs()  # every tick of several clusters: which answered (a silent one's jobs are unknown)
        observed = self._observe(live)
        ticks = []
        for record in records:
            rows = watched[record.id]
            tick = self._guarded(record, partial(self._campaign_tick, record, histories[record.id], rows,
                                                 decided[record.id], observed, repaired.get(record.id, 0), dry_run))
            ticks += [tick] if tick is not None else []
        dropped = {c.name for c in self.left_alone} | {f.name for f in self.failed}
        if not dry_run and (queued := self.squeue.seen()) is not None:
            for record in (r for r in records if r.name not in dropped):
                cancel_strays(self.store, record, queued)
        calls = proc.call_count() - self.calls_at_start
        status = "dry-run" if dry_run else ("ok" if records or self.left_alone else "nothing-to-do")
        skipped = slurm.skipped_since(self.skips_at_start)
        return ReconcileResult(status, self.tick_id, ticks, calls, skipped_lines=len(skipped),
                               skipped=skipped[:slurm.SHOWN_SKIPS], left_alone=self.left_alone,
                               failed=self.failed)

    def _guarded(self, record: CampaignRecord, work: Callable[[], T]) -> T | None:
        """`work` on one campaign if its lease is still this tick's (a tick suspended past the TTL
        may have lost it to another, which then acted); None, the campaign left alone, if not, or
        if another tick answered one of its attempts at the same moment (all this campaign's
        decisions written in that transaction were rolled back, none carried out)."""
        if self.leases is not None and not self.leases.holds(record.id):
            self.left_alone.append(LeftAlone(record.name, "its lease lapsed and another process took it; "
                                                          "nothing more done on it this tick"))
            return None
        try:
            return work()
        except (AnsweredElsewhereError, LeaseLostError) as exc:
            self.left_alone.append(LeftAlone(record.name, exc.message))
        except (SlurmTransientError, DatabaseBusyError):
            raise  # everyone's: the whole tick ends, as it did before any campaign was reached
        except CampaignctlError as exc:
            self._fail(record, exc.message)
        except Exception as exc:  # the campaign's boundary: the others still get their tick
            self._fail(record, f"internal error: {type(exc).__name__}: {exc}")
        return None

    def _lease_check(self, record: CampaignRecord) -> Callable[[], bool] | None:
        leases = self.leases
        return None if leases is None else (lambda: leases.holds(record.id))

    def _fail(self, record: CampaignRecord, error: str) -> None:
        error = printable(mask_assignments(error))  # an exception's text may quote a job's file
        self.failed.append(CampaignFailure(record.name, error))
        if self.tick_id is not None:
            TickFailures(self.store.engine).record(self.tick_id, record.id, error)

    def _campaign_tick(self, record: CampaignRecord, history: list[HistoryRow], rows: list[HistoryRow],
                       decided: set[str], observed: Observed, repaired: int, dry_run: bool) -> CampaignTick:
        if record.id in self.fresh:
            return self._decide_and_act(record, [], [], {}, 0, repaired, dry_run)
        subs = self.store.submissions(record.id)
        shapes = {s.token: (shape, s.size) for s in subs if (shape := PackShape.from_json(s.pack))}
        unheard = self.squeue.unheard()  # sacct (slurmdbd) still says RUNNING of jobs whose slurmctld is gone
        seen = unheard_as_unknown(rows, observed, unheard, slurm.cluster_name()) if unheard else observed
        changes = diff_observations(rows, seen, self._queued_arrays(subs, rows), stamp(self.now),
                                    functools.cache(lambda: self.log.cancelled_pending_tokens(record.id)),
                                    packed_observations(rows, observed, shapes, functools.partial(
                                        read_inline_files, record.run_dir)) if shapes else None)
        read = ingest(None if dry_run else self.store, self.tick_id, record.id, record.run_dir, rows, changes)
        faults.crash_point("before_deciding")  # what it saw is written; nothing decided yet
        views = task_views(history, decided, read.changes, read.causes)
        return self._decide_and_act(record, views, rows, read.summaries, len(read.changes), repaired, dry_run,
                                    sum(c.facts.state == "COMPLETED" for c in read.changes))

    def _clusters_named(self, record: CampaignRecord) -> list[str]:
        """The clusters the campaign's current revision names (`clusters:`; the revision is cached)."""
        settings = json.loads(self.store.revision(record.id, record.current_revision).settings_json or "{}")
        return [str(c["name"]) for c in settings.get("clusters") or () if isinstance(c, dict) and "name" in c]

    def _queued_arrays(self, subs: list[SubmissionRecord], rows: list[HistoryRow]) -> Callable[[], Collection[str]]:
        """What counts as still queued when sacct misses an attempt. A job another user submitted
        (a shared CAMPAIGNCTL_DB_URL, a campaign shared with a group): with `PrivateData=jobs` in
        slurm.conf sacct prints nothing for jobs of other users, and `squeue --me` never lists
        them, so their absence says nothing; they count as queued and are never declared lost
        from here. Only the submitter's own tick can tell a lost job of its own."""
        me = identity.user_name()
        others = {s.job_id for s in subs if s.job_id and s.submitted_by != me}
        if not others or not others.intersection(key_of(r)[0] for r in rows):
            return self.squeue.arrays
        return lambda: {*self.squeue.arrays(), *others}

    def _observe(self, live: list[HistoryRow]) -> Observed:
        wanted = {key_of(r) for r in live}
        job_ids = sorted({job_id for job_id, _ in wanted})
        if not job_ids:
            return Observed()
        # an hour of slack covers clock skew between store and controller
        since = min(read_time(t) for t in {r.created_at for r in live}) - timedelta(hours=1)
        # a packed task's own step is named by its attempt token (core/packing/pack_fates.py)
        return slurm.observe(job_ids, since, wanted=wanted, step_tokens={r.token for r in live if r.packed},
                             owners=identity.uids_of(self.store.submitters({r.submission_token for r in live})))

    def _decide_and_act(self, record: CampaignRecord, views: list[TaskView], rows: list[HistoryRow],
                        summaries: dict[str, Summary], changed: int, repaired: int, dry_run: bool,
                        completed: int = 0) -> CampaignTick:
        if record.state == CANCELLING:  # `cancel`: watch its stopped attempts end, decide nothing
            ended = all(v.latest.state in ENDED for v in views)
            if ended and not dry_run:
                self.store.set_campaign_state(record.id, CANCELLED)
            return CampaignTick(record.name, CANCELLED if ended else CANCELLING, len(rows), changed, [], repaired)
        fresh = record.id in self.fresh
        policy, snapshot = gather(self.store, self.log, record, views, rows, summaries, self.by_hand, fresh, completed)
        given = self.spec if self.spec is not None and self.spec.name == record.name else None
        spec = functools.cache(lambda: given or revision_spec(self.store, record.id, record.current_revision))
        snapshot = fill(self.store, record, snapshot, needs(snapshot, policy, self.now), self.squeue.jobs, spec,
                        self.by_hand, fresh, policy.nodes, self.now, lambda: self.squeue.answered or frozenset())
        plan = decide_tick(snapshot, policy, self.now)
        decisions = name_outputs(plan.decisions, record.run_dir)
        if dry_run:
            return CampaignTick(record.name, record.state, len(rows), changed,
                                [_summary(d, "proposed") for d in decisions], repaired)
        outcomes = Outcomes((), {})
        if decisions:
            assert self.tick_id is not None
            actor = Actor(self.store, self.log, record, policy, self.tick_id, self.squeue.jobs,
                          self._lease_check(record), spec)
            outcomes = actor.act(decisions, _array_job_of(views), new_token,
                                 plan.retry_parallel)
        late = list(plan.expired)
        if plan.expire_gated:
            earlier = {a.decision_id for a in snapshot.awaiting}
            late += [e.id for e in self.log.awaiting(record.id) if e.id not in earlier]
        if late:
            self.log.write_outcomes(late, "expired",
                                    {"expire_after_s": policy.approval.expire_after_s},
                                    "nobody approved or rejected it in time; not carried out")
        if plan.proposals:
            assert self.tick_id is not None and snapshot.candidate is not None
            Actor(self.store, self.log, record, snapshot.candidate, self.tick_id, self.squeue.jobs).act(
                list(plan.proposals), {}, lambda: "", None)
        state = self.store.campaign_state(record.id)
        if finished(plan, set() if fresh else self._unresolved(record, views)):
            state = "finished"
            self.store.set_campaign_state(record.id, state)
        return CampaignTick(record.name, state, len(rows), changed,
                            [_summary(d, *o) for d, o in zip(decisions, outcomes.in_order(("pending", None)),
                                                             strict=True)],
                            repaired)

    def _unresolved(self, record: CampaignRecord, views: list[TaskView]) -> set[str]:
        """Latest attempts answered but not settled: a retry Slurm refused for good, or one
        waiting for `approve` (the campaign is not finished while a person may still send it)."""
        answered = self.log.unresolved_tokens(record.id) | {e.attempt_token for e in self.log.awaiting(record.id)}
        return answered & {v.latest.token for v in views}

    def _repair(self, record: CampaignRecord) -> int:
        """Finish decisions a crashed tick wrote but did not carry out (found by group token)."""
        open_entries = self.log.entries(record.id, open_only=True)
        pending_subs = self.store.submissions(record.id, states=("intent", "submitted"))
        stranded = self.log.unanswered_abandoned(record.id)
        if not open_entries and not pending_subs and not stranded:
            return 0
        policy, _ = current_policy(self.store, record)
        actor = Actor(self.store, self.log, record, policy, self.tick_id or 0, self.squeue.jobs,
                      self._lease_check(record))
        # a decision waiting for approval is not open work; an approved one that a crash left
        # undone is, carried out under the submission token its approval named
        approvals = self.log.approvals(record.id)
        known = {s.token for s in self.store.submissions(record.id)}
        todo = [e for e in open_entries if not e.gate]
        for e in (e for e in open_entries if e.gate and e.id in approvals):
            if e.action == "resubmit" and approvals[e.id] not in known:
                carry_out(actor, e, approvals[e.id])
            else:
                todo.append(replace(e, group_token=approvals[e.id]))
        return actor.repair(todo, due_now=self.by_hand) + actor.settle_abandoned(stranded)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off for the tick: a tick holds ~10 objects per attempt (rows,
    observations, changes; no reference cycles among them), and every allocation counts towards
    the collector's thresholds, so at 100,000 attempts its full passes re-walk millions of live
    objects (~15 % of a 30,000-task tick, scripts/bench_reconcile.py). Reference counting still
    frees everything; the collector resumes after the tick."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _tick_clock(now: datetime | None) -> datetime:
    """The UTC time a tick's rules compare against (a naive `now`, as tests give: local time)."""
    return utc(now or datetime.now(UTC)).replace(microsecond=0)


def _array_job_of(views: list[TaskView]) -> dict[str, str | None]:
    return {a.token: a.array_job_id for v in views for a in v.attempts}


def _summary(d: Decision, status: str, job_id: str | None = None) -> DecisionSummary:
    return DecisionSummary(d.task_index, d.rule, d.action, d.reason, status, job_id)

