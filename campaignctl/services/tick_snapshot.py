"""What one campaign's tick decides from, read once: the TickSnapshot of core/tick/tick.py, and the
lazy facts it asks for — one squeue and one sinfo only when a task waited long enough for a
GPU-type fallback (the tick's squeue, shared with the diff), a metric's curves only when a rung is
due or a task early stopping could stop runs, the campaign's ended attempts (one query) only when
right_size may lower a pending task."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from campaignctl.adapters import slurm
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.governance_facts import revision_run
from campaignctl.adapters.optuna_sampler import OptunaSampler
from campaignctl.adapters.store import Store
from campaignctl.core.base.clock import read_time
from campaignctl.core.decisions.answers import SETTLING
from campaignctl.core.decisions.decision import TaskView
from campaignctl.core.decisions.log_facts import FACT_ACTIONS, log_facts, when_pending
from campaignctl.core.governance.governance import Awaiting, RevisionRun
from campaignctl.core.model.records import CampaignRecord, HistoryRow
from campaignctl.core.nodes.evidence import COMPLETIONS_WINDOW, Completion
from campaignctl.core.nodes.node_rules import NodeRules
from campaignctl.core.packing.profile import group_of
from campaignctl.core.placement.moves import MoveFacts
from campaignctl.core.policy.policy import Policy, policy_from_dict
from campaignctl.core.spec.settings import campaign_settings
from campaignctl.core.spec.spec import CampaignSpec
from campaignctl.core.tick import fallback
from campaignctl.core.tick.siblings import SiblingFacts, tally_first_ends, trigger_of
from campaignctl.core.tick.tick_facts import Needs, TickSnapshot, with_facts
from campaignctl.core.tuning.ladder import TaskEnd, rung_of, task_ends
from campaignctl.core.tuning.search import Trial, trials_of
from campaignctl.core.usage.telemetry import Summary
from campaignctl.services.campaigns import promotions
from campaignctl.services.dispatch import revision_spec
from campaignctl.services.node_facts import ledger_exclusion
from campaignctl.services.placement_facts import predictions
from campaignctl.services.revisions import known_good_revisions
from campaignctl.services.start_facts import start_facts


def gather(store: Store, log: DecisionLog, record: CampaignRecord, views: Sequence[TaskView],
           rows: Sequence[HistoryRow], summaries: Mapping[str, Summary],
           restart_abandoned: bool = False, fresh: bool = False, completed: int = 0) -> tuple[Policy, TickSnapshot]:
    """The enforced policy and the snapshot of `record` (its state as the tick began), `views`
    and `rows` as the tick observed them, `summaries` the telemetry it read. `restart_abandoned`
    (`submit` of the same spec again): a first task whose submission was abandoned before
    reaching Slurm counts as unstarted. `fresh`: nothing has happened to the campaign (no
    submission, no decision, so no attempt): its log and history are empty, and not read.
    `completed`: how many attempts this tick saw complete."""
    revision = store.revision(record.id, record.current_revision)
    policy = policy_from_dict(json.loads(revision.policy_json))
    settings = campaign_settings(json.loads(revision.settings_json))
    read = not fresh
    budgeted = bool(settings.budget.limits()) and read
    facts = log_facts(log.entries(record.id, actions=FACT_ACTIONS) if read else ())
    marked = known_good_revisions(log, record.id) if read else set()
    # a task `submit --replace-tasks` dropped keeps its history, but no rule acts on it again
    views = [v for v in views if v.index < settings.tasks]
    started = 0 if settings.progressive or fresh else store.tasks_started(record.id, settings.tasks)
    first = settings.first_tasks
    first_started = 0 if fresh or not first else started \
        if first == settings.tasks and not restart_abandoned and not settings.progressive \
        else store.tasks_started(record.id, first, abandoned=not restart_abandoned)
    snapshot = TickSnapshot(
        campaign_state=record.state, revision=record.current_revision, settings=settings, views=tuple(views),
        requests=facts.requests,
        pending_since=when_pending(rows),
        summaries=summaries,
        usage=tuple(store.usage.groups(record.id)) if budgeted else (),
        alerted=facts.alerted,
        released_limits=facts.released_limits,
        array_throttles=store.array_throttles(record.id) if read and (settings.max_parallel or budgeted) else {},
        proposal_keys=frozenset(log.proposal_keys(record.id) if read else ()),
        awaiting=tuple(Awaiting(e.id, read_time(e.created_at)) for e in (log.awaiting(record.id) if read else ())),
        revision_run=None if record.current_revision in marked else revision_run(store.engine, revision) if read
        else RevisionRun(revision.number, read_time(revision.created_at), 0, ()),  # fresh: nothing ran yet
        task_ends=read_task_ends(store, log, record.id) if read and (settings.progressive or settings.search) else {},
        promoted_rungs=frozenset(promotions(log, record.id)) if read and settings.progressive else frozenset(),
        forced_rungs=facts.forced_rungs,
        candidate=policy_from_dict(json.loads(revision.shadow_policy_json)) if revision.shadow_policy_json else None,
        tasks_started=started, unstarted=first - first_started,
        trials=search_trials(log, record.id) if read and settings.search else (),
        sampler=OptunaSampler() if settings.search else None,
        completed=completed, suspected=facts.suspected, crash_looped=facts.crash_looped)
    return policy, snapshot


def search_trials(log: DecisionLog, campaign_id: int) -> tuple[Trial, ...]:
    """A search's trials, from its enforced asks and tells."""
    return trials_of((e.task_index, e.typed) for e in log.entries(campaign_id, actions=("ask", "tell"))
                     if e.mode == "enforce")


def fill(store: Store, record: CampaignRecord, snapshot: TickSnapshot, wanted: Needs,
         queued: Callable[[], list[slurm.QueuedJob]], spec: Callable[[], CampaignSpec] | None = None,
         restart_abandoned: bool = False, fresh: bool = False, nodes: NodeRules | None = None,
         now: datetime | None = None, answered: Callable[[], frozenset[str]] = frozenset) -> TickSnapshot:
    """The snapshot with the lazy facts `wanted` read: `queued` is the tick's one squeue, `spec`
    the revision's spec, read once for the tick (the Actor renders the new arrays from it too);
    `fresh` as for `gather`; `nodes` the policy's node ledger rules, `now` the tick's clock;
    `answered` the clusters whose squeue answered (asked after `queued`)."""
    read_spec = spec or (lambda: revision_spec(store, record.id, record.current_revision))
    if wanted.nodes and nodes is not None and now is not None:
        snapshot = with_facts(snapshot, exclusion=ledger_exclusion(store, nodes, read_spec, now))
    if wanted.last_completed:
        snapshot = with_facts(snapshot, last_completed="" if fresh else store.last_completed(record.id))
    if wanted.completions:
        by = snapshot.settings.profile.by if snapshot.settings.profile else ()
        snapshot = with_facts(snapshot, completions=[
            Completion(task, token, nodes_, ended, elapsed, step,
                       group_of(rung_of(task, snapshot.settings), json.loads(params), by))
            for task, token, nodes_, ended, elapsed, params, step
            in store.metrics.completions(record.id, COMPLETIONS_WINDOW)])
    if wanted.starts:  # the spec's tasks: their resources and groups
        started = set() if fresh else {a.task_index for a in store.attempts(record.id)
                                       if not (restart_abandoned and a.state == "ABANDONED")}
        current = read_spec()
        cap = slurm.array_cap([c.name for c in current.clusters])
        snapshot = with_facts(snapshot, starts=start_facts(store, current, started, cap))
    if wanted.moves:
        current = read_spec()
        listed = queued()
        snapshot = with_facts(snapshot, moves=MoveFacts(
            current.clusters, current.resources, slurm.cluster_name(), answered(),
            {q.job_id: (q.start, q.reason) for q in listed}, predictions(current, current.resources)))
    reasons = {q.job_id: q.reason for q in queued()} if wanted.queue else None
    free = fallback.free_gpus_by_type(slurm.gpu_nodes()) if wanted.queue else None
    metrics = store.metrics
    curves = {m: metrics.curves(record.id, m) for m in sorted(wanted.metrics)}
    if wanted.siblings:
        open_views = [v for v in snapshot.views if not v.latest.decided]
        at = trigger_of((v.latest.number, v.latest.state) for v in open_views)
        partition = open_views[at].latest.resources.partition if at is not None else None
        snapshot = with_facts(snapshot, siblings=SiblingFacts(
            slurm.node_shapes(partition),
            tally_first_ends((a.params, a.state) for a in store.attempts(record.id) if a.attempt_number == 1)))
    profile = snapshot.settings.profile
    if not (wanted.right_size and profile):
        return with_facts(snapshot, reasons, free, curves)
    profiles = store.profiles
    return with_facts(snapshot, reasons, free, curves, profiles.samples(profile.name, record.id),
                      frozenset(profiles.lowered(record.id)))


def read_task_ends(store: Store, log: DecisionLog, campaign_id: int) -> dict[int, TaskEnd]:
    """Every started task's latest attempt, and the enforced decision that ended it for good."""
    answers = {e.attempt_token: e.action for e in log.entries(campaign_id, actions=SETTLING)
               if e.mode == "enforce"}
    latest = {a.task_index: a for a in store.attempts(campaign_id)
              if a.submission_state != "abandoned" or a.token in answers}
    reading = {token for _, token in store.metrics.behind(campaign_id).values()}
    return task_ends(((i, a.token, a.state, a.job_id or "") for i, a in latest.items()), answers, reading)
