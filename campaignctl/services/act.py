"""Carry out one campaign's decisions of a tick, group by group, and write their outcomes.

Every mutation touches only a job that (a) the store recorded for this campaign and (b) is
queued under the current user (`squeue --me`) with the campaign's token in its name, so a
reused job id or someone else's job is never changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TypeVar

from campaignctl.adapters import faults, identity, slurm
from campaignctl.adapters.decision_log import DecisionLog, LoggedDecision
from campaignctl.adapters.exit_status import request_stop
from campaignctl.adapters.node_marks import attempt_cluster
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import SlurmUnavailableError
from campaignctl.core.decisions.action_records import (
    CANCELS,
    HOLDS,
    SUBMITS,
    THROTTLES,
    Cancel,
    ClearNode,
    GiveUp,
    Hold,
    NodeSuspect,
    Release,
    ResizePending,
    Stop,
    Throttle,
    effect_of,
)
from campaignctl.core.decisions.actions import (
    ActionPlan,
    ResizeGroup,
    ResubmitGroup,
    SubmissionIntent,
    ThrottleGroup,
    intent_of,
    next_attempt,
    plan_actions,
    tasks_of,
)
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.model.records import CampaignRecord
from campaignctl.core.nodes.ledger import probing_of
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.policy.policy import Policy
from campaignctl.core.slurm.plan import DEFAULT_MAX_ARRAY_SIZE
from campaignctl.core.slurm.site_limits import SubmitRoom
from campaignctl.core.spec.spec import CampaignSpec
from campaignctl.services.dispatch import (
    LeaseCheck,
    abandon,
    dispatch_within,
    job_name,
    parameters,
    recover,
    refused,
    revision_spec,
    stray_jobs,
    token_of_job_name,
)

Outcome = tuple[str, "str | None"]  # (applied | failed | retrying | proposed | awaiting-approval, job id)
SUBMIT_REFUSED = "submit_refused"  # the rule of a give-up whose submission Slurm kept refusing
NOT_OURS = "not queued under this user with the campaign's token; left alone"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Outcomes:
    """What `Actor.act` did with the decisions it was given: each one's id in the decision log, in
    the order given (None: the plan found nothing to act on, e.g. a resize of an element whose
    array is not known, so it was not written), and each written decision's outcome by that id."""

    ids: tuple[int | None, ...]
    by_id: Mapping[int, Outcome]

    def in_order(self, unwritten: Outcome) -> list[Outcome]:
        """The outcome of each decision given, in the order given; `unwritten` for one not written."""
        return [unwritten if i is None else self.by_id[i] for i in self.ids]


class Actor:
    def __init__(self, store: Store, log: DecisionLog, record: CampaignRecord, policy: Policy,
                 tick_id: int, queued: Callable[[], list[slurm.QueuedJob]],
                 still_leased: LeaseCheck | None = None, spec: Callable[[], CampaignSpec] | None = None) -> None:
        self.store, self.log, self.record, self.policy = store, log, record, policy
        self.tick_id = tick_id
        self.still_leased = still_leased  # the tick's lease on the campaign, asked around each sbatch (dispatch)
        self.queued = queued
        self._spec: CampaignSpec | None = None
        self._read_spec = spec  # the tick's own reading of the revision's spec, where it read one
        self._room: SubmitRoom | None = None

    @property
    def spec(self) -> CampaignSpec:
        """The current revision's full spec (argv and env of every task): only a resubmission
        needs it, so it is read then, not on every tick."""
        if self._spec is None:
            self._spec = self._read_spec() if self._read_spec else revision_spec(
                self.store, self.record.id, self.record.current_revision)
        return self._spec

    def act(self, decisions: Sequence[Decision], array_job_of: Mapping[str, str | None],
            new_token: Callable[[], str], retry_parallel: int | None) -> Outcomes:
        """Write every decision (intent) first, then act group by group. Shadow decisions and
        those waiting for approval are only written."""
        decisions = [replace(d, ref=i) for i, d in enumerate(decisions)]
        acting = [d for d in decisions if d.mode == "enforce" and not d.gate]
        resubmitting = any(effect_of(d.action) == SUBMITS for d in acting)
        max_array = slurm.array_cap(self._clusters) if resubmitting else DEFAULT_MAX_ARRAY_SIZE
        plan = plan_actions(acting, array_job_of.get, max_array, retry_parallel, new_token)
        planned = plan.planned() + [(d, "") for d in decisions if d.mode != "enforce" or d.gate]
        marking = any(isinstance(d.typed, (NodeSuspect, ClearNode)) or probing_of(d) for d in acting)
        ids = self.log.write_intents(self.tick_id, self.record.id, self.policy, planned,
                                     self._intents(plan), self.record.current_revision,
                                     (attempt_cluster(array_job_of, slurm.cluster_name()), identity.user_name())
                                     if marking else None)
        faults.crash_point("after_decisions")
        # where each decision (by its ref) meets the log row written for it
        row = {d.ref: i for (d, _), i in zip(planned, ids, strict=True)}
        outcomes: dict[int, Outcome] = {row[d.ref]: ("proposed", None) for d in decisions if d.mode == "shadow"}
        outcomes.update({row[d.ref]: ("awaiting-approval", None) for d in decisions
                         if d.gate and d.mode == "enforce"})
        outcomes.update(self._carry_out(plan, lambda d: row[d.ref]))
        return Outcomes(tuple(row.get(d.ref) for d in decisions), outcomes)

    def carry_out_approved(self, decision: Decision, decision_id: int, new_token: Callable[[], str],
                           array_job_of: Mapping[str, str | None]) -> Outcome:
        """An approved decision, written ticks ago: its submission intent (a resubmit) is written
        now, then it is carried out like any other and its outcome written."""
        max_array = slurm.array_cap(self._clusters) if effect_of(decision.action) == SUBMITS else DEFAULT_MAX_ARRAY_SIZE
        plan = plan_actions([decision], array_job_of.get, max_array, None, new_token)
        for intent in self._intents(plan):
            self.store.record_intent(self.record.id, replace(intent, kind="retry"))
        outcomes = self._carry_out(plan, lambda _: decision_id)
        return outcomes.get(decision_id, ("applied", None))

    def _intents(self, plan: ActionPlan) -> list[SubmissionIntent]:
        return [intent_of(g, self.record.current_revision, self._folder, self.policy.slurm_requeue,
                          lambda t: self.spec.tasks[t].params) for g in plan.resubmits]

    def _carry_out(self, plan: ActionPlan, row: Callable[[Decision], int]) -> dict[int, Outcome]:
        """Carry out the plan's groups; the outcome of each decision by its id in the log (`row`)."""
        outcomes: dict[int, Outcome] = {row(d): ("applied", None) for d in plan.recorded}
        for group in plan.resubmits:
            ids = [row(d) for d in group.decisions]
            outcomes.update(dict.fromkeys(ids, self._resubmit(group, ids)))
        for resize in plan.resizes:
            ids = [row(d) for d in resize.decisions]
            outcomes.update(dict.fromkeys(ids, self._resize(resize, ids)))
        for throttle in plan.throttles:
            outcomes[row(throttle.decision)] = self._throttle(throttle, row(throttle.decision))
        for single in plan.cancels:
            outcomes[row(single.decision)] = self._cancel(single.decision, row(single.decision))
        for single in plan.holds:
            outcomes[row(single.decision)] = self._hold_or_release(single.decision, row(single.decision))
        return outcomes

    def _slurm_step(self, ids: Sequence[int], failed_detail: dict[str, object], call: Callable[[], T],
                    applied: Callable[[T], dict[str, object]], job_id: str | None,
                    not_ours: str = "") -> Outcome:
        """The protocol of every Slurm action on queued jobs: one not ours (`not_ours` says why)
        or one Slurm refuses is written `failed` with `failed_detail`; otherwise, past the crash
        point, `applied(result)` records what changed in the store and gives the `applied` outcome's detail."""
        if not_ours:
            self.log.write_outcomes(ids, "failed", failed_detail, not_ours)
            return "failed", None
        try:
            result = call()
        except SlurmUnavailableError as exc:
            self.log.write_outcomes(ids, "failed", failed_detail, exc.message)
            return "failed", None
        faults.crash_point("before_outcome")
        self.log.write_outcomes(ids, "applied", applied(result))
        return "applied", job_id

    @property
    def room(self) -> SubmitRoom:
        """The room under the site's limit on queued jobs, over this tick's resubmissions: this
        user's queued jobs counted once (the tick's squeue listing), the limit read once."""
        if self._room is None:
            self._room = SubmitRoom(slurm.submit_limit(), lambda: len(self.queued()))
        return self._room

    @property
    def _clusters(self) -> list[str]:
        return [c.name for c in self.spec.clusters]

    @property
    def _folder(self) -> str:
        return str(Path(self.spec.run_dir) / "slurm")

    def _resubmit(self, group: ResubmitGroup, ids: list[int]) -> Outcome:
        # a promotion starts its config's task in the next rung: attempt 1
        numbers = [n for d in group.decisions for n in [next_attempt(d)] * len(tasks_of(d))]
        params = parameters(self.record.name, group.resources, group.token, group.chunk,
                            self.record.current_revision, self.policy.slurm_requeue, group.after)
        try:
            job_id = dispatch_within(self.room, self.store, self.spec, group.token, group.chunk, params, None,
                                     numbers, still_leased=self.still_leased, cluster=group.cluster)
        except SlurmUnavailableError as exc:
            return self._refused(group.token, ids, exc.message)
        if job_id is None:  # waits for room under a site limit: a later tick submits it (repair)
            return "retrying", None
        faults.crash_point("before_outcome")
        self.log.write_outcomes(ids, "applied", {"job_id": job_id, "token": group.token,
                                                 "array": group.chunk.array_spec})
        return "applied", job_id

    def _refused(self, token: str, ids: list[int], error: str) -> Outcome:
        """Slurm refused a submission: a later tick tries it again (the decisions stay open) until
        the policy's submit_tries, then its tasks are given up with Slurm's message."""
        tries = refused(self.store, token, error, self.policy)
        if tries < self.policy.submit_tries:
            return "retrying", None
        abandon(self.store, token, job_name(self.record.name, token))
        self._give_up_submission(token, ids, error, tries)
        return "failed", None

    def settle_abandoned(self, stranded: Mapping[str, tuple[str, int]]) -> int:
        """Give up the tasks of submissions abandoned without an answer (`unanswered_abandoned`)."""
        for token, (error, tries) in stranded.items():
            self._give_up_submission(token, [], error or "Slurm refused the submission", tries)
        return len(stranded)

    def _give_up_submission(self, token: str, ids: Sequence[int], error: str, tries: int) -> None:
        """The decisions that asked for an abandoned submission failed; each of its attempts is
        answered by a give-up (its task settles, the campaign can finish)."""
        if ids:
            self.log.write_outcomes(ids, "failed", {"token": token, "tries": tries}, error)
        answered = self.log.decided_tokens(self.record.id)
        attempts = [a for a in self.store.attempts(self.record.id)
                    if a.token.startswith(token + ".") and a.token not in answered]
        give_ups = [(Decision(a.task_index, a.token, SUBMIT_REFUSED, "give_up",
                              f"Slurm refused attempt {a.attempt_number}'s submission {tries} time(s); "
                              f"given up: {error}", {"token": token, "tries": tries, "error": error}, GiveUp()), "")
                    for a in attempts]
        if give_ups:
            self.log.write_intents(self.tick_id, self.record.id, self.policy, give_ups, [],
                                   self.record.current_revision)

    def _resize(self, group: ResizeGroup, ids: list[int]) -> Outcome:
        tokens = [d.attempt_token for d in group.decisions]

        def applied(started: list[str]) -> dict[str, object]:
            started_ids = {line.split(":")[0] for line in started}  # "12_3: Job is no longer pending…"
            resized = [t for t in tokens if f"{group.array_job_id}_{t.rsplit('.', 1)[1]}" not in started_ids]
            self.store.set_attempt_resources(resized, json.dumps(asdict(group.resources)))
            return {"jobs": group.job_expression, "fields": group.scontrol_fields(), "started_meanwhile": started}

        return self._slurm_step(ids, {"array_job_id": group.array_job_id},
                                lambda: slurm.update_pending(group.job_expression, group.scontrol_fields()),
                                applied, group.array_job_id,
                                self._not_ours(group.array_job_id, tokens[0].rsplit(".", 1)[0]))

    def _throttle(self, group: ThrottleGroup, decision_id: int) -> Outcome:
        detail: dict[str, object] = {"array_job_id": group.array_job_id, "throttle": group.throttle}

        def applied(_: None) -> dict[str, object]:
            self.store.set_array_throttle(group.array_job_id, group.throttle)
            return detail

        return self._slurm_step([decision_id], detail,
                                lambda: slurm.set_array_throttle(group.array_job_id, group.throttle), applied,
                                group.array_job_id,
                                self._not_ours(group.array_job_id, group.decision.attempt_token.rsplit(".", 1)[0]))

    def _cancel(self, decision: Decision, decision_id: int) -> Outcome:
        """Cancel one element only if it is still in the state the decision saw (`only_if`); the
        replacement of a moved attempt is resubmitted by a later tick, once sacct shows the element
        CANCELLED; a stopped one is not (the stop answers it)."""
        p = decision.typed
        job_id, state = str(decision.inputs["job_id"]), p.only_if if isinstance(p, (Cancel, Stop)) else ""
        detail: dict[str, object] = {"job_id": job_id, "only_if": state}
        shape = PackShape.from_json(self.store.submission(decision.attempt_token.rsplit(".", 1)[0]).pack)
        if shape is not None and shape.processes:  # a plain process, no step: its runner reads the request
            detail["stop_request_of"] = decision.attempt_token
            asked = request_stop(self.record.run_dir, decision.task_index, decision.attempt_token)
            self.log.write_outcomes([decision_id], "applied", {**detail, "sent": asked})
            return "applied", job_id
        if shape is not None:  # a packed task: its step alone
            detail["step_of"] = decision.attempt_token
            return self._slurm_step([decision_id], detail,
                                    lambda: slurm.cancel_step_named(job_id, decision.attempt_token),
                                    lambda sent: {**detail, "sent": sent}, job_id,
                                    self._not_ours(job_id.partition("_")[0], decision.attempt_token.rsplit(".", 1)[0]))
        return self._slurm_step([decision_id], detail, lambda: slurm.cancel_if(job_id, state),
                                lambda sent: {**detail, "sent": sent}, job_id,
                                self._not_ours(job_id.partition("_")[0], decision.attempt_token.rsplit(".", 1)[0]))

    def _hold_or_release(self, decision: Decision, decision_id: int) -> Outcome:
        """Budget reached: hold every pending element of the campaign's arrays, then pause. Or
        (`release`, from `campaignctl resume`) release the elements held, then make it active."""
        command = slurm.hold if decision.action == "hold" else slurm.release_elements
        p = decision.typed
        arrays = p.arrays if isinstance(p, (Hold, Release)) else {}
        mine = self._campaign_arrays()
        held: dict[str, list[int]] = {}  # filled as Slurm answers: a refusal halfway names what was done

        def each_array() -> list[str]:
            notes: list[str] = []
            for array, indices in arrays.items():
                if array in mine:
                    notes += command(f"{array}_[{','.join(map(str, indices))}]")
                    held[array] = list(indices)
            return notes

        def applied(notes: list[str]) -> dict[str, object]:
            self.store.set_campaign_state(self.record.id, "paused" if decision.action == "hold" else "active")
            return {"held": held, "notes": notes, "not_ours": sorted(set(arrays) - mine)}

        return self._slurm_step([decision_id], {"held": held}, each_array, applied, None)

    def _campaign_arrays(self) -> set[str]:
        """Arrays queued under this user whose job name carries one of the campaign's tokens."""
        tokens = {s.token for s in self.store.submissions(self.record.id)}
        return {q.array_job_id for q in self.queued()
                if (t := token_of_job_name(q.name)) in tokens and q.name == job_name(self.record.name, str(t))}

    def _not_ours(self, array_job_id: str, submission_token: str) -> str:
        """'' when the array is queued under this user with the submission's name; else why it is
        left alone. Slurm lets only a job's owner (or an operator) cancel or change it: a teammate's
        `cancel` of a shared campaign leaves the owner's jobs to end on their own."""
        if any(q.array_job_id == array_job_id and token_of_job_name(q.name) == submission_token
               and q.name == job_name(self.record.name, submission_token) for q in self.queued()):
            return ""
        owner = self.store.submission(submission_token).submitted_by
        if owner and owner != identity.user_name():
            return (f"job {array_job_id} is {owner}'s, and Slurm lets only its owner (or an operator) change it: "
                    f"left alone; it ends on its own, or {owner} runs the same command")
        return NOT_OURS

    def repair(self, open_entries: Sequence[LoggedDecision], due_now: bool = False) -> int:
        """Finish a crashed tick: adopt/finish its submissions by token (and retry those Slurm
        refused, once due, or now: `due_now`), redo its resizes (setting the same values twice is
        harmless), then write the missing outcomes. A submission still waiting for its next try stays open."""
        done = {d.token: d for d in recover(self.store, self.record, self.policy, still_leased=self.still_leased,
                                            due_now=due_now)}
        me = identity.user_name()  # another member's submissions are its own tick's to finish (recover)
        states = {s.token: s for s in self.store.submissions(self.record.id)}
        open_entries = [e for e in open_entries if states.get(e.group_token) is None
                        or states[e.group_token].submitted_by == me or effect_of(e.action) != SUBMITS]
        repaired = 0
        for group_token in {e.group_token for e in open_entries if effect_of(e.action) == SUBMITS}:
            ids = [e.id for e in open_entries if e.group_token == group_token]
            sub = states.get(group_token)
            if sub is not None and sub.state == "released":
                self.log.write_outcomes(ids, "applied", {"job_id": sub.job_id, "token": group_token,
                                                         "repaired": True})
            elif sub is None or sub.state == "abandoned":
                error = sub.last_error if sub is not None and sub.last_error else "submission lost"
                self._give_up_submission(group_token, ids, error, sub.tries if sub else 0)
            else:
                continue  # refused, waiting for its next try
            repaired += len(ids)
        asked = {e.group_token for e in open_entries}
        for d in done.values():
            if d.gave_up and d.token not in asked:  # a first submission (`submit`) nobody decided
                self._give_up_submission(d.token, [], d.error, d.tries)
        for group_token in {e.group_token for e in open_entries if e.action == "resize_pending"}:
            entries = [e for e in open_entries if e.group_token == group_token]
            repaired += len(entries)
            self._resize(_resize_group(entries), [e.id for e in entries])
        for e in (e for e in open_entries if effect_of(e.action) in (THROTTLES, CANCELS, HOLDS)):
            repaired += 1  # each is safe to carry out twice: same throttle, a state-filtered cancel, a hold
            decision = Decision(e.task_index, e.attempt_token, e.rule, e.action, e.reason, e.inputs, e.typed)
            if isinstance(p := e.typed, Throttle):
                if p.throttle is not None:  # always written; a row without it has nothing to carry out
                    self._throttle(ThrottleGroup(e.group_token, p.array_job_id, p.throttle, decision), e.id)
            elif effect_of(e.action) == CANCELS:
                self._cancel(decision, e.id)
            else:
                self._hold_or_release(decision, e.id)
        return repaired


def abandon_unsent(store: Store, record: CampaignRecord) -> list[str]:
    """`cancel` of a whole campaign: this user's submissions that have not reached Slurm (waiting
    for room, or for a refused try's backoff) are given up, any held job of theirs cancelled."""
    me = identity.user_name()
    unsent = [s for s in store.submissions(record.id, states=("intent",)) if s.submitted_by == me]
    for sub in unsent:
        abandon(store, sub.token, job_name(record.name, sub.token))
    return [s.token for s in unsent]


def cancel_strays(store: Store, record: CampaignRecord, queued: Sequence[slurm.QueuedJob]) -> None:
    """Cancel the queued jobs of ours under the campaign's tokens that are not the job recorded for
    them (a duplicate whose sbatch reply was lost, a job of an abandoned submission): never released."""
    for job_id in stray_jobs(store.submissions(record.id), queued, record.name):
        slurm.cancel(job_id)


def _resize_group(entries: Sequence[LoggedDecision]) -> ResizeGroup:
    p = entries[0].typed
    decisions = tuple(Decision(e.task_index, e.attempt_token, e.rule, e.action, e.reason, e.inputs,
                               e.typed, None) for e in entries)
    if not isinstance(p, ResizePending) or p.resources is None:
        raise ValueError(f"decision #{entries[0].id} resizes without its resources: {entries[0].params}")
    return ResizeGroup(entries[0].group_token, p.array_job_id, p.resources, decisions)
