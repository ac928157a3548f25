"""decide(tasks, policy, now) → decisions. Pure: the same function serves reconcile, --dry-run
and (later) replay. Each rule returns a Decision with a one-sentence reason and the inputs it saw."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta, timezone

from campaignctl.core.base.clock import read_time, utc
from campaignctl.core.base.hostlist import split_nodes
from campaignctl.core.decisions.action_records import GiveUp, Pair, ResizePending, Resubmit
from campaignctl.core.decisions.decision import AttemptView, Decision, Replacement, TaskView
from campaignctl.core.model.params import Scalar
from campaignctl.core.nodes.ledger import NO_EXCLUSION, Exclusion, with_ledger
from campaignctl.core.policy.cause_rules import roomier_gpu_type, step_params
from campaignctl.core.policy.output_causes import GPU_OOM
from campaignctl.core.policy.policy import CAUSE_OF_STATE, Policy, Rule
from campaignctl.core.policy.suspects import blamed, suspect_nodes
from campaignctl.core.resources import with_fields
from campaignctl.core.slurm import job_ref
from campaignctl.core.spec.spec import Resources
from campaignctl.core.tick.siblings import CAMPAIGN, Raise, SiblingFacts, plan_raise

NODE_CAUSES = ("node_fail", "boot_fail")
NO_TIME_LIMIT = datetime.max.replace(tzinfo=timezone.utc)  # `now` of a caller that has none: every grace is over
LOST = "LOST"  # not in sacct nor squeue for longer than the policy's grace period


def decide(tasks: Sequence[TaskView], policy: Policy, now: datetime,
           gpu_types: Sequence[str] = (), siblings: SiblingFacts | None = None,
           ledger: Exclusion = NO_EXCLUSION, base_exclude: frozenset[str] | None = None,
           node_failures: Mapping[str, Mapping[str, int]] | None = None) -> list[Decision]:
    """Decisions for every task whose latest attempt ended (or was lost) and is not yet answered,
    plus in-place resizes of pending siblings of tasks that hit OOM/TIMEOUT. `gpu_types`: the
    spec's acceptable GPU types, where a GPU OOM may move; `ledger`: the nodes the node ledger
    keeps new work from (a retry is one task: a node on probation may take it); `base_exclude`:
    the nodes the spec leaves out (kept_out); `node_failures`: the node failures by cluster and
    node where the caller counted them (None: counted from `tasks`)."""
    excluded = _ByCluster(tasks, policy, node_failures)
    decisions = []
    left = ledger  # a retry is one task: the first may go where the ledger has a node on probation, no later one
    for task in tasks:
        here = job_ref.cluster_of(task.latest.job_id or "")  # where its retry goes: core/tick/act_plan.py
        ledger_here = left if not here else NO_EXCLUSION  # the ledger a tick reads is its own cluster's
        decision = decide_task(task, policy, now, excluded[here] | set(ledger_here.nodes), gpu_types, base_exclude)
        if decision is None:
            continue
        probing = ledger_here.probation if decision.action == "resubmit" else ()
        decisions.append(with_ledger(decision, ledger_here, probing))
        left = left.probed() if probing else left
    resizes = resize_pending_siblings(tasks, decisions, policy, siblings, excluded, ledger, base_exclude, now)
    if siblings is not None and any(d.rule in ("out_of_memory", "timeout") for d in decisions):
        latest = {t.latest.token: t.latest for t in tasks}
        decisions = [_with_reach(d, latest[d.attempt_token], policy, siblings) for d in decisions]
    return decisions + resizes


def _with_reach(d: Decision, latest: AttemptView, policy: Policy, facts: SiblingFacts) -> Decision:
    """A first attempt's OOM/TIMEOUT retry records how far its raise reaches and the nodes it was
    sized by (what `policy replay` reads back: sinfo is not recorded anywhere else)."""
    if d.action != "resubmit" or d.rule not in ("out_of_memory", "timeout") or d.resources is None:
        return d
    if latest.number != 1 or not policy.rule(d.rule).resize_pending:
        return d
    reach = plan_raise(d.rule, latest.params, latest.resources, d.resources, facts.shapes, facts.shares)
    return replace(d, inputs={**d.inputs, "siblings": reach.why,
                              "node_shapes": [[n.cpus, n.mem_mb, n.gpus] for n in facts.shapes]})


def cause_of(attempt: AttemptView, policy: Policy, now: datetime) -> str | None:
    if attempt.state in ("UNKNOWN",) and attempt.missing_since:
        lost_for = utc(now) - read_time(attempt.missing_since)
        return "lost" if lost_for >= timedelta(seconds=policy.unknown_grace_s) else None
    if attempt.state == "FAILED" and attempt.cause and policy.is_cause(attempt.cause):
        return attempt.cause  # sacct says FAILED 1:0; the program's output says why
    return CAUSE_OF_STATE.get(attempt.state)


def decide_task(task: TaskView, policy: Policy, now: datetime, excluded: frozenset[str] = frozenset(),
                gpu_types: Sequence[str] = (), base_exclude: frozenset[str] | None = None) -> Decision | None:
    latest = task.latest
    replacement = task.replacements.get(latest.token)
    if not latest.decided and replacement is not None and replacement.applies_to(latest):
        return _replace(task.index, latest, replacement)
    cause = None if latest.decided else cause_of(latest, policy, now)
    if cause is None:
        return None
    rule = policy.rule(cause)
    # cause_of, not the state table: a lost attempt stays UNKNOWN in the store and must count too;
    # an attempt campaignctl cancelled to move it is no failure of the task
    counts = Counter(cause_of(a, policy, now) or "" for a in task.attempts
                     if not (a.token in task.replacements and task.replacements[a.token].applies_to(a)))
    counts.pop("", None)
    failures = sum(n for c, n in counts.items() if policy.rule(c).counts_as_failure)
    inputs = _inputs(latest, counts, failures)
    give_up = _give_up_reason(cause, rule, policy, latest, counts[cause] or 1, failures)
    adjust, params = dict(task.adjust), None
    if not give_up and cause not in CAUSE_OF_STATE.values():
        give_up, adjust, params = _output_cause_step(cause, rule, policy, latest, gpu_types, adjust)
    if give_up:
        return Decision(task.index, latest.token, cause, "give_up", give_up, inputs, GiveUp())
    wait = _backoff(rule, counts[cause] or 1)
    if latest.ended_at and read_time(latest.ended_at) + wait > utc(now):
        return None  # backoff not over: decide on a later tick
    return _resubmit(task.index, latest, cause, rule, kept_out(task, policy, now, excluded, base_exclude),
                     counts[cause] or 1, inputs, adjust, params)


def kept_out(task: TaskView, policy: Policy, now: datetime, excluded: Iterable[str],
             base_exclude: frozenset[str] | None) -> frozenset[str]:
    """The nodes a retry or a pending element of `task` leaves out: the spec's own, those the
    task's own attempts failed on (where their rule excludes a failed node) and what the campaign
    and the node ledger exclude now. A node the ledger once excluded is not kept: its exclusions
    move from node to node over a long queue (each lasts until probation), and work that kept
    every one came to exclude the whole partition and never started. `base_exclude` None (a
    revision that did not record the spec's): every node the latest attempt excluded is kept."""
    kept = set(split_nodes(task.latest.resources.exclude or "")) if base_exclude is None else set(base_exclude)
    for a in task.attempts:
        cause = cause_of(a, policy, now)
        if cause is not None and policy.rule(cause).exclude_failed_node:
            kept.update(suspect_nodes(a.nodes, a.cause, a.evidence))
    return frozenset(kept | set(excluded))


def _output_cause_step(cause: str, rule: Rule, policy: Policy, latest: AttemptView, gpu_types: Sequence[str],
                       adjust: dict[str, object]) -> tuple[str, dict[str, object], dict[str, list[Scalar]] | None]:
    """(give-up reason, resources adjust, param changes) for a cause named by the output: the
    rule's `params` first; a GPU OOM without them moves to a listed type with more memory."""
    what = f"{_described(latest, cause)} (attempt {latest.number})"
    if rule.params:
        step = step_params(latest.params, rule.params)
        if step.stuck:
            stuck = f"{what}: {step.stuck}, so the {cause} rule's params cannot change it further; the task stops here."
            return stuck, adjust, None
        return "", adjust, step.changes
    if cause != GPU_OOM:
        return "", adjust, None  # a site cause retried as it is
    target = roomier_gpu_type(latest.resources.gpu_type, gpu_types, policy)
    if target is not None:
        return "", {**adjust, "gpu_type": target}, None
    return (f"{what}, and the policy can neither shrink the task nor move it to a GPU with more memory: "
            f"add rules.{GPU_OOM}.params (e.g. {{batch: {{factor: 0.5, min: 1}}, grad_accum: {{factor: 2}}}}), "
            f"or list a type with more memory in resources.gpu_type and every type's memory in "
            f"prices.gpu_memory (e.g. {{v100: 16G, a100: 80G}}). Output: {_first_line(latest.evidence)}"), adjust, None


def _give_up_reason(cause: str, rule: Rule, policy: Policy, latest: AttemptView,
                    seen: int, failures: int) -> str:
    what = f"{_described(latest, cause)} (attempt {latest.number})"
    if rule.action == "give_up":
        by = f" by uid {latest.slurm_state.split(' by ')[1]}" if " by " in latest.slurm_state else ""
        said = f" The output: {_quoted(latest.evidence)}" if latest.evidence and latest.cause == cause else ""
        return f"{what}{by}: the policy's {cause} rule says give up, so the task stops here.{said}"
    if cause == "failed" and latest.exit_code not in rule.retry_exit_codes:
        return (f"exit code {latest.exit_code} is not in retry_exit_codes "
                f"{list(rule.retry_exit_codes)}: treated as a bug in the program, not retried.")
    if seen > rule.max_retries:
        return f"{what}: {cause} seen {seen} times, above the cap of {rule.max_retries} retries."
    if rule.counts_as_failure and failures > policy.max_failures:
        return f"{what}: {failures} failures use up the task's failure budget of {policy.max_failures}."
    if cause == "out_of_memory" and rule.mem_cap_mb and latest.resources.mem_mb >= rule.mem_cap_mb:
        return f"{what} at {latest.resources.mem_mb} MB, already at the cap of {rule.mem_cap_mb} MB."
    if cause == "timeout" and rule.time_cap_min and latest.resources.time_min >= rule.time_cap_min:
        return f"{what} at {latest.resources.time_min} min, already at the cap of {rule.time_cap_min} min."
    return ""


def _described(attempt: AttemptView, cause: str) -> str:
    if cause == "lost":
        return f"lost: in neither sacct nor squeue since {attempt.missing_since}"
    if cause not in CAUSE_OF_STATE.values():
        return f"failed with exit {attempt.exit_code}, {cause.replace('_', ' ')} by its output"
    return attempt.state.lower().replace("_", " ") + blamed(attempt.nodes, attempt.cause, attempt.evidence)


def _first_line(evidence: str) -> str:
    line = evidence.strip().splitlines()[0] if evidence.strip() else "(none recorded)"
    return line if len(line) <= 300 else line[:297] + "..."


def _quoted(evidence: str) -> str:
    text = " | ".join(line.strip() for line in evidence.strip().splitlines() if line.strip())
    return text if len(text) <= 600 else text[:597] + "..."


def _backoff(rule: Rule, seen: int) -> timedelta:
    return timedelta(seconds=rule.backoff_s * rule.backoff_factor ** (seen - 1))


def _resubmit(index: int, latest: AttemptView, cause: str, rule: Rule, excluded: frozenset[str],
              seen: int, inputs: Mapping[str, object], adjust: Mapping[str, object],
              param_changes: Mapping[str, list[Scalar]] | None = None) -> Decision:
    old = latest.resources
    new = with_fields(old, adjust)
    new = replace(new, mem_mb=_grow(old.mem_mb, rule.mem_factor, rule.mem_cap_mb),
                  time_min=_grow(old.time_min, rule.time_factor, rule.time_cap_min))
    suspects = suspect_nodes(latest.nodes, latest.cause, latest.evidence)
    failed_nodes = set(suspects) if rule.exclude_failed_node else set()
    exclude = sorted(failed_nodes | excluded)
    new = replace(new, exclude=",".join(exclude) or None)
    changes = _changes(old, new)
    what = ", ".join(f"{k} {a} → {b}" for k, (a, b) in changes.items()) or "unchanged resources"
    if param_changes:
        what = ", ".join(f"{k} {a} → {b}" for k, (a, b) in param_changes.items()) + (
            f"; {what}" if changes else "")
    reason = (f"{_described(latest, cause)} (attempt {latest.number}); retry {seen} of "
              f"{rule.max_retries} with {what}")
    if cause == "timeout":
        # whether the program resumes is the program's doing: say what campaignctl gives it
        reason += "; the retry resumes if its checkpoint is there (CAMPAIGNCTL_RESUME=1, the same checkpoint directory)"
    params = Resubmit(changes=changes, retry=seen, max_retries=rule.max_retries,
                      task_params=_task_params(latest, param_changes),
                      param_changes={k: (a, b) for k, (a, b) in (param_changes or {}).items()})
    return Decision(index, latest.token, cause, "resubmit", reason + ".", inputs, params, new)


def _changes(old: Resources, new: Resources) -> dict[str, Pair]:
    return {k: (v, getattr(new, k)) for k, v in asdict(old).items() if getattr(new, k) != v}


def _task_params(latest: AttemptView, param_changes: Mapping[str, list[Scalar]] | None) -> dict[str, object] | None:
    """The next attempt's task parameters, when they differ from the spec's: changed now, or
    carried over from an earlier change (a retry for any cause keeps the batch that fit)."""
    if not param_changes and not latest.params_changed:
        return None
    return {**latest.params, **{k: b for k, (_, b) in (param_changes or {}).items()}}


def _replace(index: int, latest: AttemptView, replacement: Replacement) -> Decision:
    old, new = latest.resources, replacement.resources
    changes = _changes(old, new)
    what = ", ".join(f"{k} {a} → {b}" for k, (a, b) in changes.items()) or "unchanged resources"
    reason = (f"cancelled by campaignctl's {replacement.rule} decision (attempt {latest.number}); "
              f"resubmitted with {what}.")
    inputs = {"job_id": latest.job_id, "attempt": latest.number, "slurm_state": latest.slurm_state,
              "state": latest.state, "nodes": latest.nodes, "elapsed_s": latest.elapsed_s,
              "cancel_reason": replacement.reason}
    params = replacement.task_params
    param_changes: dict[str, Pair] = {} if params is None else {
        k: (latest.params.get(k), v) for k, v in params.items() if latest.params.get(k) != v}
    if param_changes:
        reason = reason[:-1] + "; " + ", ".join(f"{k} {a} → {b}" for k, (a, b) in param_changes.items()) + "."
    carried = _task_params(latest, None) if params is None else dict(params)
    return Decision(index, latest.token, replacement.rule, "resubmit", reason, inputs,
                    Resubmit(changes=changes, replacement=True, task_params=carried, param_changes=param_changes,
                             cluster=replacement.cluster),
                    new)


def _grow(value: int, factor: float, cap: int | None) -> int:
    grown = math.ceil(round(value * factor, 6))  # 3000 * 1.1 is 3300.0000000000005 in floats
    return max(value, min(grown, cap)) if cap else grown  # a cap never shrinks what the task had


def _inputs(latest: AttemptView, counts: Mapping[str, int], failures: int) -> dict[str, object]:
    r = latest.resources
    return {"job_id": latest.job_id, "attempt": latest.number, "slurm_state": latest.slurm_state,
            "state": latest.state, "exit_code": latest.exit_code, "nodes": latest.nodes,
            "elapsed_s": latest.elapsed_s, "max_rss": latest.max_rss, "ended_at": latest.ended_at,
            "missing_since": latest.missing_since, "counts": dict(counts), "failures": failures,
            **({"cause": latest.cause, "evidence": latest.evidence} if latest.cause else {}),
            **({"task_params": dict(latest.params)} if latest.params_changed else {}),
            "resources": {"mem_mb": r.mem_mb, "time_min": r.time_min, "cpus_per_task": r.cpus_per_task,
                          "gpus": r.gpus, "gpu_type": r.gpu_type, "exclude": r.exclude}}


def campaign_excluded_nodes(tasks: Iterable[TaskView], policy: Policy, cluster: str = "") -> frozenset[str]:
    """Nodes of `cluster` ('': the one SLURM_CONF names; core/slurm/job_ref.py) where
    `campaign_exclude_after` attempts of this campaign died of a node failure. Node names are a
    cluster's own: Slurm refuses a job whose --exclude names a node it does not have."""
    return exclusion_of(count_node_failures(tasks).get(cluster, {}), policy)


def count_node_failures(tasks: Iterable[TaskView]) -> dict[str, Counter[str]]:
    """By cluster and node, the attempts that died of a node failure there (their suspect nodes)."""
    failures: dict[str, Counter[str]] = {}
    for task in tasks:
        for attempt in task.attempts:
            if CAUSE_OF_STATE.get(attempt.state) in NODE_CAUSES:
                failures.setdefault(job_ref.cluster_of(attempt.job_id or ""), Counter()).update(
                    set(suspect_nodes(attempt.nodes, attempt.cause, attempt.evidence)))
    return failures


def exclusion_of(failures: Mapping[str, int], policy: Policy) -> frozenset[str]:
    """The nodes with `campaign_exclude_after` node failures or more."""
    return frozenset(n for n, k in failures.items() if k >= policy.campaign_exclude_after)


_PlanKey = tuple[Resources, tuple[int, ...], frozenset[str]]  # (request, raises reaching it, nodes kept out)


class _ByCluster(dict[str, frozenset[str]]):
    """campaign_excluded_nodes of each cluster, worked out when first asked for."""

    def __init__(self, tasks: Sequence[TaskView], policy: Policy,
                 counted: Mapping[str, Mapping[str, int]] | None = None) -> None:
        super().__init__()
        self._tasks, self._policy, self._counted = tasks, policy, counted

    def __missing__(self, cluster: str) -> frozenset[str]:
        if self._counted is None:
            self._counted = count_node_failures(self._tasks)
        self[cluster] = exclusion_of(self._counted.get(cluster, {}), self._policy)
        return self[cluster]


def sibling_raises(tasks: Sequence[TaskView], decisions: Sequence[Decision], policy: Policy,
                   facts: SiblingFacts | None) -> list[tuple[Decision, Raise, str | None]]:
    """(trigger, its raise, its array where facts are missing) of each first attempt's OOM/TIMEOUT
    retry whose rule resizes pending work."""
    by_token = {t.latest.token: t for t in tasks}
    raises: list[tuple[Decision, Raise, str | None]] = []
    for d in decisions:
        if d.action != "resubmit" or d.rule not in ("out_of_memory", "timeout") or d.resources is None:
            continue
        latest = by_token[d.attempt_token].latest
        if not policy.rule(d.rule).resize_pending or latest.number != 1:
            continue  # a retry's failure tells of its task's tail, not of its group's
        if facts is None:
            raises.append((d, plan_raise(d.rule, {}, latest.resources, d.resources, (), {}), latest.array_job_id))
        else:
            raises.append((d, plan_raise(d.rule, latest.params, latest.resources, d.resources, facts.shapes,
                                         facts.shares), None))
    return raises


def resize_pending_siblings(tasks: Sequence[TaskView], decisions: Sequence[Decision], policy: Policy,
                            facts: SiblingFacts | None = None,
                            excluded: Mapping[str, frozenset[str]] | None = None,
                            ledger: Exclusion = NO_EXCLUSION, base_exclude: frozenset[str] | None = None,
                            now: datetime | None = None) -> list[Decision]:
    """What this tick's OOM/TIMEOUT retries and the campaign's excluded nodes mean for pending
    tasks, before they start and waste an attempt (core/tick/siblings.py: which raises reach which
    tasks, and why). `facts` None: no node shapes or failure shares were read, so only the free
    raises (time) reach the trigger's own array. A pending element's exclude list becomes what
    kept_out says now: nodes join it, and leave it once nothing excludes them (with `base_exclude`;
    on another cluster than SLURM_CONF's, whose nodes the spec does not name, they only join)."""
    raises = sibling_raises(tasks, decisions, policy, facts)
    failed = excluded if excluded is not None else _ByCluster(tasks, policy)
    pending = [t for t in tasks if t.latest.state == "PENDING" and t.latest.job_id is not None]
    # by cluster ('': SLURM_CONF's, the only one whose ledger a tick reads): a node is its cluster's own.
    # A pending element is one of an array's tasks: a node on probation stays out of it as out of a
    # new array of several (one task at a time may run there, and that one goes as a retry or a
    # one-task array). Letting every pending element back onto it at probation, and out again at
    # its probe, resized the whole queue twice per probation (30 times in a 3,000-task simulation).
    exclude_nodes = {here: (failed[here] if policy.rule("node_fail").exclude_failed_node else frozenset())
                     | (set(ledger.for_array(2)) if not here else frozenset())
                     for here in {job_ref.cluster_of(t.latest.job_id or "") for t in pending}}
    if not any(exclude_nodes.values()) and not any(r.mem_mb or r.time_min for _, r, _ in raises) and (
            base_exclude is None or all(set(split_nodes(e or "")) <= base_exclude
                                        for e in {t.latest.resources.exclude for t in pending})):
        return []  # nothing to add, nothing to give back
    out = []
    # pending tasks share a few requests: each (request, raises reaching it, nodes it keeps out) is planned once
    plans: dict[_PlanKey, _SiblingPlan | None] = {}
    firsts: dict[tuple[str, str | None], frozenset[str]] = {}
    worded: dict[tuple[int, bool], tuple[str, Mapping[str, object]]] = {}  # (plan, on SLURM_CONF's cluster)
    said: dict[tuple[int, str], ResizePending] = {}  # (plan, array)
    # a first attempt is planned by its cluster, request and the raises reaching it alone: the
    # request by its object's identity (every task is alive through the loop), not a hash of every field
    alike: dict[tuple[str, int, tuple[int, ...]], tuple[_PlanKey, _SiblingPlan | None]] = {}
    reached: dict[tuple[object, ...], tuple[int, ...]] = {}  # (array, parameter values) → raises reaching
    names = tuple(sorted({r.group.key[0] for _, r, _ in raises if r.group.key != CAMPAIGN}))
    # raises of the whole campaign, wherever their array (facts read): each reaches every pending task
    everywhere = tuple(range(len(raises))) if not names and all(a is None for _, _, a in raises) else None
    for task in pending:
        latest = task.latest
        job_id = latest.job_id or ""
        here = job_ref.cluster_of(job_id) if job_ref.SEP in job_id else ""
        reaching = everywhere if everywhere is not None else _reaching(raises, latest, names, reached)
        same = (here, id(latest.resources), reaching) if len(task.attempts) == 1 else None
        if same is not None and same in alike:
            key, plan = alike[same]
        else:
            key, plan = _planned(task, here, reaching, raises, policy, now, exclude_nodes[here],
                                 base_exclude if not here else None, firsts, plans)
            if same is not None:
                alike[same] = key, plan
        if plan is None:
            continue
        array = job_id.partition("_")[0]
        # a plan's tasks share what the ledger adds to their reason and inputs (a plan's words, whatever
        # its array), and those of one array share the record
        worded_key = (id(plan), not here)  # plans live in `plans` through the loop: ids stay theirs
        told = said.get((id(plan), array))
        if told is None:
            told = said[(id(plan), array)] = ResizePending(changes=plan.changes, array_job_id=array,
                                                           resources=plan.resources)
        words = worded.get(worded_key)
        if words is None:
            d = with_ledger(Decision(task.index, latest.token, plan.rule, "resize_pending", plan.reason, plan.inputs,
                                     told, plan.resources), ledger if not here else NO_EXCLUSION)
            words = worded[worded_key] = (d.reason, d.inputs)
        out.append(Decision(task.index, latest.token, plan.rule, "resize_pending", words[0],
                            {"job_id": latest.job_id, "state": latest.state, **words[1]},
                            told, plan.resources))
    return out


def _reaching(raises: Sequence[tuple[Decision, Raise, str | None]], latest: AttemptView, names: tuple[str, ...],
              reached: dict[tuple[object, ...], tuple[int, ...]]) -> tuple[int, ...]:
    """The indexes of the raises that reach a pending attempt: those of its array (or of any,
    where facts were read) whose group holds its parameters. Worked out once per array and
    values of `names`, the parameters the raises' groups split by (most groups are the campaign)."""
    params = latest.params
    key = (latest.array_job_id, *(str(params[name]) if name in params else None for name in names))
    if key not in reached:
        reached[key] = tuple(i for i, (_, r, array) in enumerate(raises)
                             if (array is None or array == latest.array_job_id) and r.group.holds(params))
    return reached[key]


def _planned(task: TaskView, here: str, reaching: tuple[int, ...], raises: Sequence[tuple[Decision, Raise, str | None]],
             policy: Policy, now: datetime | None, exclude_nodes: frozenset[str], base: frozenset[str] | None,
             firsts: dict[tuple[str, str | None], frozenset[str]],
             plans: dict[_PlanKey, _SiblingPlan | None]) -> tuple[_PlanKey, _SiblingPlan | None]:
    """A pending task's (plan key, plan), plans shared by key."""
    latest = task.latest
    if len(task.attempts) == 1:  # no failure of its own: what it keeps out is its cluster's (most are)
        first = (here, None if base is not None else latest.resources.exclude)
        if first not in firsts:
            firsts[first] = kept_out(task, policy, now or NO_TIME_LIMIT, exclude_nodes, base)
        keep = firsts[first]
    else:
        keep = kept_out(task, policy, now or NO_TIME_LIMIT, exclude_nodes, base)
    key = (latest.resources, reaching, keep)
    if key not in plans:
        plans[key] = _sibling_plan(latest.resources, [raises[i][:2] for i in reaching], keep, exclude_nodes)
    return key, plans[key]


@dataclass(frozen=True, slots=True)
class _SiblingPlan:
    resources: Resources
    changes: dict[str, Pair]
    rule: str
    reason: str
    inputs: dict[str, object]


def _sibling_plan(old: Resources, reaching: Sequence[tuple[Decision, Raise]], keep: frozenset[str],
                  exclude_nodes: frozenset[str]) -> _SiblingPlan | None:
    mem = max([old.mem_mb, *(r.mem_mb for _, r in reaching if r.mem_mb)])
    time = max([old.time_min, *(r.time_min for _, r in reaching if r.time_min)])
    have = set(split_nodes(old.exclude or ""))
    exclude = (",".join(sorted(keep)) or None) if keep != have else old.exclude
    new = replace(old, mem_mb=mem, time_min=time, exclude=exclude)
    if new == old:
        return None
    changes: dict[str, Pair] = {k: (getattr(old, k), getattr(new, k)) for k in ("mem_mb", "time_min", "exclude")
                                if getattr(new, k) != getattr(old, k)}
    what = ", ".join(f"{k} {a} → {b}" for k, (a, b) in changes.items())
    grew = [(d, r) for d, r in reaching if (r.mem_mb or 0) > old.mem_mb or (r.time_min or 0) > old.time_min]
    if grew:
        trigger, why = grew[-1]  # the latest trigger names it, as one scontrol update carries it
        reason = (f"pending, in the group of task {trigger.task_index}, which hit "
                  f"{trigger.rule.replace('_', ' ')}; {what} before it starts: {why.why}.")
        return _SiblingPlan(new, changes, trigger.rule, reason,
                            {"trigger_task": trigger.task_index, "trigger_attempt": trigger.attempt_token,
                             "group": why.group.describe()})
    let_back = sorted(have - keep)
    reason = f"pending; {what} before it starts: " + "; ".join(
        ([f"nothing excludes {', '.join(let_back)} any longer (the node ledger's exclusion ended)"] if let_back else [])
        + (["the campaign excludes nodes where `campaign_exclude_after` attempts died of a node failure, "
            "and the node ledger its excluded nodes"] if keep - have else [])) + "."
    return _SiblingPlan(new, changes, "node_fail", reason,
                        {"excluded_nodes": sorted(exclude_nodes), **({"let_back": let_back} if let_back else {})})
