"""Replay: run the whole tick (core/tick/tick.py decide_tick) over a campaign's recorded ticks, each
tick as it saw the campaign. Pure.

What a tick saw is rebuilt from the store's append-only history, never from today's rows:
- an attempt exists at tick t if its submission was there: a retry or promotion submission from
  the tick AFTER the resubmit or promote decisions that created it (their group token), any other
  once created;
- its facts are its latest observation written at or before t (reconcile records the tick's
  observations before deciding), else it is SUBMITTED with no facts yet;
- its resources are its submission's, or those of an applied `resize_pending` of an earlier tick;
- what the REPLAYED policy answered (resubmit, give up, stop) in earlier ticks counts as answered,
  and so do the attempts a recorded `stop` ended (the CANCELLED it caused is history);
- the spend at the tick: its attempts' observed states and elapsed times, grouped as the store
  groups them; telemetry: each attempt's stored summary, its samples cut at the tick's clock;
  metrics: the points reported by the tick's clock (or undated); array throttles: as the
  applied throttle decisions left them; squeue's pending reasons and sinfo's free GPUs are not
  recorded except in the fallback decisions of that tick, so elsewhere no task is moved; so
  are squeue's start estimates and each cluster's prediction, but in the `move` decisions and
  the placement of `start` decisions (core/placement/) that recorded them;
- the replayed side's own alerts, holds (a hold pauses it until a person's recorded release),
  promotions and a search's asks and tells carry into its later ticks; a search's sampler is
  handed in (core/tuning/search.py), rebuilt from the replayed side's own trials at every tick;
- metrics of an attempt the tick saw end are all its points: its last may be dated after the
  tick's clock (the clock is read before sacct is), and the live tick read it.

History after a divergence is what actually happened: a replayed give-up does not remove the
retry the recorded policy made, so later ticks still show it. Replay answers "what would this
policy have decided, tick by tick, given what was observed", not "what would have happened".
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from campaignctl.core.decisions.action_records import (
    SUBMITS,
    ActionRecord,
    Alert,
    Ask,
    Promote,
    ResizePending,
    Retire,
    Start,
    Tell,
    Throttle,
    effect_of,
)
from campaignctl.core.decisions.answers import ANSWERS
from campaignctl.core.decisions.by_hand import MANUAL_RULE
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.decisions.log_facts import FACT_ACTIONS, LogFacts, log_facts, when_pending
from campaignctl.core.decisions.recorded import (
    CampaignHistory,
    RecordedAttempt,
    RecordedDecision,
    RecordedObservation,
    RecordedTick,
)
from campaignctl.core.governance.governance import ProposalKey, proposal_key
from campaignctl.core.model.records import AttemptFacts, HistoryRow
from campaignctl.core.model.sacct_values import rss_mb
from campaignctl.core.model.training_metrics import curves_by_task
from campaignctl.core.nodes.evidence import CLEAR, SUSPECT, Completion, latest
from campaignctl.core.nodes.ledger import Exclusion, recorded_exclusion
from campaignctl.core.packing.profile import group_of
from campaignctl.core.placement.moves import RULE as MOVE
from campaignctl.core.placement.replayed import recorded_moves, recorded_placement
from campaignctl.core.policy.policy import Policy
from campaignctl.core.resources import resources_from
from campaignctl.core.slurm.observe import params_parser, resources_parser, task_views
from campaignctl.core.slurm.plan import DEFAULT_MAX_ARRAY_SIZE
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.spec.spec import Resources
from campaignctl.core.tick.right_size import ENDED, UsageSample, groups
from campaignctl.core.tick.siblings import NodeShape, SiblingFacts, tally_first_ends
from campaignctl.core.tick.starts import ACTION as START
from campaignctl.core.tick.starts import StartFacts, Unstarted
from campaignctl.core.tick.tick import decide_tick, needs
from campaignctl.core.tick.tick_facts import Needs, TickSnapshot, with_facts
from campaignctl.core.tuning.ladder import rung_of, task_ends
from campaignctl.core.tuning.search import Sampler, Trial, trials_of
from campaignctl.core.usage.cost import UsageGroup, phase_of
from campaignctl.core.usage.telemetry import Summary


@dataclass(frozen=True, slots=True)
class ReplayedDecision:
    tick_id: int
    decision: Decision


class Timeline:
    """Indexes over a campaign's history that answer "what did tick t see"."""

    def __init__(self, history: CampaignHistory) -> None:
        self.history = history
        self._obs: dict[int, list[RecordedObservation]] = {}
        for o in sorted(history.observations, key=lambda o: o.tick_id):  # stable: write order within a tick
            self._obs.setdefault(o.attempt_id, []).append(o)
        self._obs_ticks = {a: [o.tick_id for o in obs] for a, obs in self._obs.items()}
        enforced = [d for d in history.decisions if d.mode == "enforce"]
        # the resubmit decision whose group token is a retry submission's token created it
        self._born = {d.group_token: d.tick_id for d in enforced
                      if effect_of(d.action) == SUBMITS and d.group_token}
        self._starts = [d for d in enforced if d.action == START]
        self._resizes: dict[str, list[tuple[int, str]]] = {}
        for d in enforced:
            if d.status == "applied" and isinstance(d.typed, ResizePending) and "resources" in d.params:
                self._resizes.setdefault(d.attempt_token, []).append(
                    (d.tick_id, json.dumps(d.params["resources"], sort_keys=True)))
        self._logged = [d for d in history.decisions if d.action in FACT_ACTIONS]
        self._stops = [(d.tick_id, d.attempt_token) for d in enforced if d.action == "stop" and d.status == "applied"]
        # a person's cancel (a give-up, or a stop above) is history, the same for both sides
        self._given_up = [(d.tick_id, d.attempt_token) for d in enforced
                          if d.action == "give_up" and d.rule == MANUAL_RULE]
        self._releases = [(d.tick_id, d) for d in enforced if d.action == "release" and d.status == "applied"]
        self._fallbacks = [d for d in enforced if d.rule == "gpu_fallback" and d.action == "cancel"]
        self._moves = [d for d in enforced if d.rule == MOVE and d.action == "cancel"]
        self._shapes = {d.tick_id: d.inputs["node_shapes"] for d in enforced if "node_shapes" in d.inputs}
        self._ledgers: dict[int, list[Mapping[str, object]]] = {}  # tick → inputs that recorded the node ledger
        self._let_back: dict[int, set[str]] = {}  # tick → nodes its pending work was given back
        for d in enforced:
            if "node_ledger" in d.inputs:
                self._ledgers.setdefault(d.tick_id, []).append(d.inputs)
            if isinstance(back := d.inputs.get("let_back"), list):
                self._let_back.setdefault(d.tick_id, set()).update(str(n) for n in back)
        self._throttle_changes: dict[str, list[tuple[int, int | None, int | None]]] = {}
        for d in enforced:
            if d.status == "applied" and isinstance(p := d.typed, Throttle):
                before = d.inputs.get("throttle")
                self._throttle_changes.setdefault(p.array_job_id, []).append(
                    (d.tick_id, before if isinstance(before, int) else None, p.throttle))

    def exists(self, attempt: RecordedAttempt, tick: RecordedTick) -> bool:
        born = self._born.get(attempt.submission_token)
        if attempt.submission_kind in ("retry", "promotion", "trial", "initial") and born is not None:
            return tick.id > born
        # an initial array of a release before first arrays were start decisions, or a retry approved later
        return attempt.created_at <= tick.started_at

    def observation(self, attempt: RecordedAttempt, tick_id: int) -> RecordedObservation | None:
        return self._last_obs(attempt.id, tick_id)

    def _last_obs(self, attempt_id: int, tick_id: int) -> RecordedObservation | None:
        ticks = self._obs_ticks.get(attempt_id, [])
        at = bisect.bisect_right(ticks, tick_id)
        return self._obs[attempt_id][at - 1] if at else None

    def resources_json(self, attempt: RecordedAttempt, tick_id: int) -> str:
        """Its submission's resources, or those of the last resize decided before this tick. A
        resize that found the element already started left it alone: `resized` is then False."""
        if attempt.resized:
            earlier = [r for t, r in self._resizes.get(attempt.token, []) if t < tick_id]
            if earlier:
                return earlier[-1]
        return attempt.submission_resources_json

    def resources(self, attempt: RecordedAttempt, tick_id: int) -> Resources:
        return Resources(**json.loads(self.resources_json(attempt, tick_id)))

    def rows(self, tick: RecordedTick) -> list[HistoryRow]:
        rows = [self._row(a, tick.id) for a in self.history.attempts if self.exists(a, tick)]
        return sorted(rows, key=lambda r: (r.task_index, r.attempt_number))

    def _row(self, a: RecordedAttempt, tick_id: int) -> HistoryRow:
        o = self.observation(a, tick_id)
        failed = o is not None and o.facts.state == "FAILED"  # the cause is read when sacct first shows FAILED
        f = o.facts if o else AttemptFacts("SUBMITTED")
        return HistoryRow(a.id, a.task_index, a.attempt_number, a.array_index, a.token, a.job_id, f.state,
                          f.slurm_state, f.exit_code, f.nodes, f.elapsed_s, f.max_rss, f.ended_at, f.missing_since,
                          self.resources_json(a, tick_id), a.submission_token, "released", a.created_at.isoformat(),
                          a.params_json, a.params_changed, a.cause if failed else None, a.evidence if failed else "",
                          a.packed)

    def stopped(self, tick_id: int) -> set[str]:
        """Attempts an applied early-stopping decision of an earlier tick answered."""
        return {token for t, token in self._stops if t < tick_id}

    def released_after(self, tick_id: int | None) -> bool:
        """A person released the campaign (`resume`) after that tick."""
        return tick_id is not None and any(t > tick_id for t, _ in self._releases)

    def snapshot(self, tick: RecordedTick, settings: CampaignSettings, answers: Mapping[str, str], state: str,
                 alerted: set[str], proposed: set[ProposalKey], promoted: set[int],
                 trials: Sequence[Trial] = (), sampler: Sampler | None = None) -> TickSnapshot:
        """What tick `tick` saw, with the replayed side's own answers, state, alerts, proposals,
        promotions and trials."""
        rows = self.rows(tick)
        answers = {**dict.fromkeys(self.stopped(tick.id), "stop"),
                   **{token: "give_up" for t, token in self._given_up if t < tick.id}, **answers}
        views = task_views(rows, set(answers))
        facts = self.log_facts(tick.id)
        latest = {r.task_index: r for r in rows}  # rows are ordered by attempt: the last one wins
        first = settings.first_tasks
        return TickSnapshot(
            campaign_state=state, revision=0, settings=settings, views=tuple(views),
            requests=facts.requests,
            pending_since=when_pending(rows),
            summaries=self._summaries(rows, tick),
            usage=self._usage(rows) if settings.budget.limits() else (),
            alerted=frozenset(alerted),
            released_limits=facts.released_limits,
            array_throttles=self._throttles(tick.id),
            proposal_keys=frozenset(proposed),
            task_ends=task_ends(((i, r.token, r.state, r.job_id or "") for i, r in latest.items()), answers),
            promoted_rungs=frozenset(promoted),
            forced_rungs=facts.forced_rungs,
            tasks_started=len(latest), trials=tuple(trials), sampler=sampler,
            unstarted=first - sum(1 for i in latest if i < first),
            completed=sum(1 for a in self.history.attempts if (o := self._last_obs(a.id, tick.id)) is not None
                          and o.tick_id == tick.id and o.facts.state == "COMPLETED"),
            suspected=facts.suspected, crash_looped=facts.crash_looped)

    def lazy(self, tick: RecordedTick, snapshot: TickSnapshot, wanted: Needs) -> TickSnapshot:
        """The lazy facts as far as they were recorded: squeue's reasons and sinfo's free GPUs
        only where a fallback decision of this tick wrote them down; metric points reported by
        the tick's clock; right_size's samples are the attempts ended by then (sacct's MaxRSS)."""
        moved = [d for d in self._fallbacks if d.tick_id == tick.id]
        reasons = {str(d.inputs.get("job_id")): str(d.inputs.get("pending_reason", "")) for d in moved}
        seen = moved[0].inputs.get("free_gpus") if moved else None
        free = {str(k): v for k, v in seen.items() if isinstance(v, int)} if isinstance(seen, dict) else {}
        clock = tick.clock.timestamp()
        exists = {a.id for a in self.history.attempts if self.exists(a, tick)}
        ended = {a for a in exists if (o := self._last_obs(a, tick.id)) is not None and o.facts.state in ENDED}
        seen = [(p.task_index, p.step, p.name, p.value) for p in self.history.points if p.attempt_id in exists
                and (p.t is None or p.t <= clock or p.attempt_id in ended)]
        curves = {m: curves_by_task(seen, m) for m in wanted.metrics}
        samples = self._samples(tick, snapshot) if wanted.right_size else None
        return with_facts(snapshot, reasons if wanted.queue else None, free if wanted.queue else None, curves,
                          samples, siblings=self._siblings(tick) if wanted.siblings else None,
                          starts=self._start_facts(tick, snapshot.settings) if wanted.starts else None,
                          moves=recorded_moves([d for d in self._moves if d.tick_id == tick.id],
                                                       snapshot.settings.clusters)
                          if wanted.moves else None,
                          exclusion=self._exclusion(tick.id) if wanted.nodes else None,
                          completions=self._completions(tick, snapshot.settings) if wanted.completions else None,
                          last_completed=max((r.ended_at or "" for r in self.rows(tick) if r.state == "COMPLETED"),
                                             default="") if wanted.last_completed else None)

    def _exclusion(self, tick_id: int) -> Exclusion | None:
        """The node ledger's exclusion as the tick read it: what its decisions recorded, else what
        the last tick that recorded one did, less the nodes given back since. A tick that
        decided nothing of the ledger read the same exclusion (another would have resized its
        pending work, in a decision that says so); read as none, its pending elements were given
        back every node a start had left out (seen when a tick came while one waited)."""
        recorded = recorded_exclusion(self._ledgers.get(tick_id, ()))
        if recorded is not None:
            return recorded
        earlier = max((t for t in self._ledgers if t < tick_id), default=None)
        carried = recorded_exclusion(self._ledgers[earlier]) if earlier is not None else None
        if earlier is None or carried is None:
            return None
        back = {n for t, nodes in self._let_back.items() if earlier < t <= tick_id for n in nodes}
        return replace(carried, nodes=tuple(n for n in carried.nodes if n not in back),
                       probation=tuple(n for n in carried.probation if n not in back))

    def _completions(self, tick: RecordedTick, settings: CampaignSettings) -> list[Completion]:
        """The attempts completed by the tick, the latest window of them as the live tick reads
        them (core/nodes/evidence.py), with the last step each reported."""
        done = [r for r in self.rows(tick) if r.state == "COMPLETED"]
        ids = {r.id for r in done}
        last: dict[int, int] = {}
        for p in self.history.points:
            if p.attempt_id in ids:
                last[p.attempt_id] = max(last.get(p.attempt_id, 0), p.step)
        by = settings.profile.by if settings.profile else ()
        parse = params_parser()
        return latest([Completion(r.task_index, r.token, r.nodes or "", r.ended_at or "", r.elapsed_s or 0,
                                  last.get(r.id, 0), group_of(rung_of(r.task_index, settings), parse(r.params_json),
                                                              by)) for r in done])

    def _start_facts(self, tick: RecordedTick, settings: CampaignSettings) -> StartFacts:
        """The unstarted tasks as the tick's start decisions recorded them (the spec's request, the
        group, MaxArraySize). The profile's samples are other campaigns' and not in this history:
        right_size and `pack: auto` replay as if it had none."""
        recorded = [d for d in self._starts if d.tick_id == tick.id]
        tasks = [Unstarted(t, resources_from(d.inputs.get("spec_resources")) or Resources(),
                           str(d.inputs.get("group", ""))) for d in recorded if isinstance(p := d.typed, Start)
                 for t in p.tasks]
        arrays = [v for d in recorded if isinstance(v := d.inputs.get("max_array_size"), int)]
        facts = StartFacts(tuple(tasks), max(arrays, default=DEFAULT_MAX_ARRAY_SIZE), settings.max_parallel,
                           settings.pack)
        return recorded_placement(facts, recorded, settings.clusters)

    def _siblings(self, tick: RecordedTick) -> SiblingFacts:
        """The nodes a retry of this tick was sized by (its decision recorded them; none: unknown,
        so a memory raise counts as costing slots) and how first attempts had ended by then."""
        recorded = self._shapes.get(tick.id)
        shapes = tuple(NodeShape(*n) for n in recorded if isinstance(n, list) and len(n) == 3
                       and all(isinstance(v, int) for v in n)) if isinstance(recorded, list) else ()
        parse = params_parser()
        rows = self.rows(tick)
        return SiblingFacts(shapes, tally_first_ends((parse(r.params_json), r.state)
                                                     for r in rows if r.attempt_number == 1))

    def _samples(self, tick: RecordedTick, snapshot: TickSnapshot) -> list[UsageSample]:
        parse = resources_parser()
        ended = [r for r in self.rows(tick) if r.state in ENDED]
        group = groups(snapshot.settings, task_views(ended, set()))
        return [UsageSample("", group[r.task_index], r.state, rss_mb(r.max_rss or ""), r.elapsed_s,
                            parse(r.resources_json)) for r in ended]

    def _summaries(self, rows: Sequence[HistoryRow], tick: RecordedTick) -> dict[str, Summary]:
        """Each attempt's stored telemetry, its samples cut at the tick's clock."""
        clock = tick.clock.timestamp()
        out = {}
        for r in rows:
            summary = self.history.summaries.get(r.id)
            if summary is not None:
                out[r.token] = replace(summary, recent=tuple(x for x in summary.recent if x.t <= clock))
        return out

    def _usage(self, rows: Sequence[HistoryRow]) -> tuple[UsageGroup, ...]:
        """The spend's groups as the store would have grouped them at the tick (core/usage/cost.py)."""
        groups: dict[tuple[str, str, str], tuple[int, int]] = {}
        tres = {a.id: a.alloc_tres for a in self.history.attempts}
        for r in rows:
            if r.job_id is None:
                continue
            key = (r.state, r.resources_json, tres.get(r.id, "") if phase_of(r.state) != "pending" else "")
            n, elapsed = groups.get(key, (0, 0))
            groups[key] = (n + 1, elapsed + (r.elapsed_s or 0))
        return tuple(UsageGroup(phase_of(state), Resources(**json.loads(res)), alloc, n, elapsed)
                     for (state, res, alloc), (n, elapsed) in groups.items())

    def _throttles(self, tick_id: int) -> dict[str, int | None]:
        """Each array's `%N` at the tick: the last throttle applied before it; before the first
        one, what that one found; with none, the array's as stored."""
        out: dict[str, int | None] = {}
        for a in self.history.attempts:
            if a.job_id and "_" in a.job_id:
                out.setdefault(a.job_id.partition("_")[0], a.array_throttle)
        for array, changes in self._throttle_changes.items():
            before = [to for t, _, to in changes if t < tick_id]
            out[array] = before[-1] if before else changes[0][1]
        return out

    def log_facts(self, tick_id: int) -> LogFacts:
        """The log as earlier ticks left it (as reconcile reads it: the outcome as it stands now,
        which for these is written in the same tick). Alerts are the replayed side's own."""
        return log_facts(d for d in self._logged if d.tick_id < tick_id)


CAUSE_ACTIONS = (*ANSWERS, "resize_pending")  # what the cause rules (`decide`) make
TICK_ACTIONS = (*CAUSE_ACTIONS, "resize_next", "cancel", "stop", "promote", "retire", "hold", "alert", "throttle",
                "ask", "tell", START, SUSPECT, CLEAR)


def replayed_actions(history: CampaignHistory) -> tuple[str, ...]:
    """Every section of the tick replays when the history holds the revision's settings (every
    one reads them: budget, max_parallel, GPU types, rungs); without them, only the cause rules."""
    return TICK_ACTIONS if history.settings is not None else CAUSE_ACTIONS


def replay(history: CampaignHistory, policy: Policy, sampler: Sampler | None = None) -> list[ReplayedDecision]:
    """`policy`'s enforced decisions, tick by tick: core/tick/tick.py's decide_tick over a snapshot of
    what each recorded tick saw. The replayed side's own answers, alerts, holds, promotions and
    trials carry into its later ticks; a person's releases are history, the same for both sides.
    `sampler`: a search's (without one, a search's tick tells but asks nothing)."""
    timeline = Timeline(history)
    settings = history.settings or CampaignSettings()
    actions = replayed_actions(history)
    own = _Own()
    out: list[ReplayedDecision] = []
    for tick in history.ticks:
        snapshot = timeline.snapshot(tick, settings, own.answers, own.state(timeline.released_after(own.held_at)),
                                     own.alerted, own.proposed, own.promoted, own.trials(), sampler)
        snapshot = timeline.lazy(tick, snapshot, needs(snapshot, policy, tick.clock))
        plan = decide_tick(snapshot, policy, tick.clock)
        for d in plan.decisions:
            own.saw(d, policy, tick.id)
            if d.mode == "enforce" and d.action in actions:
                out.append(ReplayedDecision(tick.id, d))
    return out


class _Own:
    """What the replayed side decided so far, as its later ticks see it."""

    def __init__(self) -> None:
        self.answers: dict[str, str] = {}  # attempt token → how it answered it: resubmit | give_up | stop
        self.alerted: set[str] = set()
        self.proposed: set[ProposalKey] = set()
        self.promoted: set[int] = set()
        self.held_at: int | None = None  # the tick of its last hold
        self.searched: list[tuple[int, ActionRecord]] = []  # its asks and tells

    def trials(self) -> tuple[Trial, ...]:
        return trials_of(self.searched)

    def state(self, released: bool) -> str:
        return "paused" if self.held_at is not None and not released else "active"

    def saw(self, d: Decision, policy: Policy, tick_id: int) -> None:
        if d.mode == "shadow":
            self.proposed.add(proposal_key(policy.digest, d))
            return
        if d.action in (*ANSWERS, "stop"):
            self.answers[d.attempt_token] = d.action
        elif isinstance(p := d.typed, Alert):
            self.alerted.add(p.key)
        elif d.action == "hold":
            self.held_at = tick_id
        elif isinstance(p, (Promote, Retire)):
            self.promoted.add(p.from_rung)
        elif isinstance(p, (Ask, Tell)):
            self.searched.append((d.task_index, d.typed))


def actual_decisions(history: CampaignHistory) -> list[RecordedDecision]:
    """What was really decided of the kinds the replay makes (a shadow proposal was not)."""
    actions = replayed_actions(history)
    return [d for d in history.decisions if d.mode == "enforce" and d.action in actions and d.rule != MANUAL_RULE]


def not_replayed(history: CampaignHistory) -> dict[str, int]:
    """Enforced decisions the replay does not make (known-good marks, a person's release, cancel
    or retry, approvals; without settings, every rule but the cause rules), by action."""
    actions = replayed_actions(history)
    counts: dict[str, int] = {}
    for d in history.decisions:
        if d.mode == "enforce" and (d.action not in actions or d.rule == MANUAL_RULE):
            counts[d.action] = counts.get(d.action, 0) + 1
    return counts


def recorded_policies(decisions: Sequence[RecordedDecision]) -> list[tuple[str, str]]:
    """(label, digest) of the policies that made the enforced decisions, first use first."""
    seen: dict[tuple[str, str], None] = {}
    for d in decisions:
        if d.mode == "enforce":
            seen.setdefault((d.policy, d.policy_digest), None)
    return list(seen)
