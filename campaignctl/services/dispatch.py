"""The exactly-once submission protocol shared by `submit` (first attempts) and `reconcile`
(retries). Per array (each step is durable before the next; a crash anywhere is finished by
the next run, which finds the held job by the token in its name):
  1 intent row (submission + one attempt per element, each with its token)
  2 payloads + script staged on disk (deterministic from the revision and the token)
  3 `sbatch --hold` — the job name carries the token, so squeue can find it
  4 job id recorded
  5 payloads moved where the job looks for them, then `scontrol release`, then recorded.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NoReturn

from campaignctl.adapters import faults, identity, slurm
from campaignctl.adapters.revision_rows import CAPTURED_ENV
from campaignctl.adapters.store import Store
from campaignctl.adapters.submission import ArraySubmission, element_calls, executor_parameters
from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.base.errors import LeaseLostError, SiteLimitError, SlurmUnavailableError
from campaignctl.core.model.attempt_paths import checkpoint_dir, tasks_dir
from campaignctl.core.model.params import RESUME, Scalar, checkpoint_marker, render
from campaignctl.core.model.records import AttemptRecord, CampaignRecord, RevisionRecord, SubmissionRecord
from campaignctl.core.model.tracker import MLFLOW, mlflow_run_file, run_identity
from campaignctl.core.pack_plan import PackShape, allocation
from campaignctl.core.policy.policy import Policy, policy_from_dict
from campaignctl.core.slurm import job_ref
from campaignctl.core.slurm.plan import ArrayChunk
from campaignctl.core.slurm.site_limits import WAITING, SubmitRoom
from campaignctl.core.spec.spec import CampaignSpec, Resources, validate_spec
from campaignctl.core.task_launch import TaskLaunch


@dataclass(frozen=True, slots=True)
class Dispatched:
    token: str
    chunk: ArrayChunk
    job_id: str | None
    error: str = ""  # Slurm's message when this try was refused
    gave_up: bool = False  # refused policy.submit_tries times: abandoned
    tries: int = 0
    waiting: bool = False  # held back by a site limit on queued jobs: no try counted


def new_token() -> str:
    """A submission's token: 12 hex digits, unique enough within one campaign's job names."""
    return uuid.uuid4().hex[:12]


def job_name(campaign: str, token: str) -> str:
    return f"cc.{token}.{campaign}"


def token_of_job_name(name: str) -> str | None:
    parts = name.split(".", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "cc" else None


def parameters(campaign: str, resources: Resources, token: str, chunk: ArrayChunk, revision: int,
               requeue: bool, after: str = "") -> dict[str, Any]:
    """sbatch's parameters; `resources`: each task's (a packed chunk's elements ask for their pack's);
    `after`: a job element the array waits for (any end: afterany)."""
    return executor_parameters(
        allocation(resources, chunk.pack) if chunk.pack else resources, job_name=job_name(campaign, token),
        chunk=chunk, requeue=requeue,
        comment=f"campaignctl campaign={campaign} revision={revision} token={token}", after=after)


def launches(spec: CampaignSpec, token: str, chunk: ArrayChunk,
             attempt_numbers: Sequence[int] | None = None,
             params: Mapping[int, Mapping[str, Scalar]] | None = None) -> list[TaskLaunch]:
    """`params`: by array index, the task parameters a rule set for that element; its argv and
    env are rendered from the spec's templates with them."""
    numbers = attempt_numbers or [1] * chunk.size
    # a command and env that never name `{resume?…}` read the same either way: rendered once
    # (a 100,000-task submit renders every task's argv)
    either = not any(RESUME in template for template in (*spec.command, *spec.env.values()))
    sides = [[render(spec.tasks[t], spec.command, spec.env, (params or {}).get(i), numbers[i], spec.run_dir, resume)
              for resume in ((None,) if either else (False, True))] for i, t in enumerate(chunk.task_indices)]
    tasks_root = str(tasks_dir(spec.run_dir))
    # what every launch of the spec shares, made once: one object each, which pickle then writes
    # once per payload (the policy's causes were a new tuple per task)
    same: dict[str, Any] = {
        "campaign": spec.name, "workdir": spec.workdir, "telemetry_interval_s": spec.telemetry_interval_s,
        "net_interfaces": spec.telemetry_interfaces,
        "env_file": spec.captured_env, "from_node": spec.env_capture.from_node, "setup": spec.setup,
        "output_metrics": spec.output_metrics, "causes": tuple(spec.policy.causes.items()),
        "shared": spec.share_group is not None}
    if not spec.rungs:  # every task's resources are the campaign's
        same.update(_layout(spec.resources))
    chunk_tasks = [spec.tasks[t] for t in chunk.task_indices]
    return [TaskLaunch(task_index=t, attempt_token=f"{token}.{i}",
                       argv=sides[i][0].argv, env=sides[i][0].env,
                       resume_check=checkpoint_marker(spec.checkpoint, task, spec.run_dir),
                       resume_argv=sides[i][-1].argv, resume_env=sides[i][-1].env,
                       task_dir=f"{tasks_root}/{t}", attempt_number=n,
                       checkpoint_dir=checkpoint_dir(spec.run_dir, task.config), rung=task.rung,
                       **same, **_tracking(spec, task.config), **(_layout(spec.resources_of(t)) if spec.rungs else {}))
            for i, (t, n, task) in enumerate(zip(chunk.task_indices, numbers, chunk_tasks, strict=True))]


def _tracking(spec: CampaignSpec, config: int) -> dict[str, Any]:
    mlflow = {"mlflow_run_file": mlflow_run_file(spec.run_dir, config)} if MLFLOW in spec.trackers else {}
    return {"run_id": run_identity(spec.run_dir, config), **mlflow}


def _layout(resources: Resources) -> dict[str, Any]:
    if not resources.distributed:
        return {}
    return {"launcher": resources.launcher, "procs_per_node": resources.tasks_per_node}


LeaseCheck = Callable[[], bool]  # whether this process still holds the campaign's lease (Leases.holds)


def dispatch(store: Store, spec: CampaignSpec, token: str, chunk: ArrayChunk,
             params: dict[str, Any], job_id: str | None,
             attempt_numbers: Sequence[int] | None = None, still_leased: LeaseCheck | None = None,
             cluster: str = "") -> str:
    """Steps 2-5 of the protocol, from wherever the last run stopped. A new job is first put to
    `sbatch --test-only`: Slurm 22.05 accepts a held job no node can run (`--hold --mem=100G`
    on 4000 MB nodes: rc 0) and, once released, leaves it PENDING (BadConstraints) for ever,
    while the same job without --hold is refused with "Requested node configuration is not
    available"; --test-only says the latter.

    `still_leased` (a tick's lease) is asked before and after sbatch and before release: a tick
    suspended inside sbatch past the lease's TTL finds another holder, which may have submitted
    this token itself; its held job is then cancelled unless the holder adopted it, and it
    releases nothing. `cluster`: the cluster the submission goes to ('' : SLURM_CONF's)."""
    submission = ArraySubmission(Path(spec.run_dir) / "slurm", token, params, spec.share_group)
    if job_id is None:
        each = Resources(**json.loads(store.submission(token).resources_json)) if chunk.pack else None
        submission.stage(element_calls(launches(spec, token, chunk, attempt_numbers, store.attempt_params(token)),
                                       chunk, each))
        refused = slurm.refusal(str(submission.script_path), cluster)
        if refused:
            raise SlurmUnavailableError(f"Slurm refuses the job: {refused}", REFUSED_HINT)
        _require_lease(still_leased, f"lost the lease before sbatch of submission {token}: its holder submits it")
        job_id = submission.submit_held(cluster)
        faults.crash_point("after_sbatch")
        if still_leased is not None and not still_leased():
            _lost_after_sbatch(store, token, job_id)
        store.set_submission_state(token, "submitted", job_id)
    submission.deliver(job_ref.plain(job_id), chunk.elements)
    faults.crash_point("before_release")
    _require_lease(still_leased, f"lost the lease before releasing job {job_id} (submission {token}): its "
                                 "holder adopts and releases it")
    slurm.release(job_id)
    store.set_submission_state(token, "released")
    return job_id


LEASE_LOST_HINT = "nothing to do: the next tick goes on from what the lease's holder did"


def _require_lease(still_leased: LeaseCheck | None, lost: str) -> None:
    if still_leased is not None and not still_leased():
        raise LeaseLostError(lost, LEASE_LOST_HINT)


def _lost_after_sbatch(store: Store, token: str, job_id: str) -> NoReturn:
    """Our held job `job_id` came back after the lease went to another process. The holder
    adopted it (found by name in squeue: its job id is recorded) or is submitting its own: ours
    is then a duplicate, held, never run, and cancelled."""
    recorded = store.submission(token).job_id
    if recorded != job_id:
        slurm.cancel(job_id)
    kept = "adopted by the lease's holder" if recorded == job_id else "cancelled as a duplicate"
    raise LeaseLostError(f"lost the lease inside sbatch (submission {token}): job {job_id} {kept}",
                         LEASE_LOST_HINT)


REFUSED_HINT = ("nothing runs for these tasks; `sinfo -o '%P %G %m %l'` lists what the cluster has "
                "(partitions, GPUs, memory per node, time limits)")


def refused(store: Store, token: str, error: str, policy: Policy, now: datetime | None = None) -> int:
    """Record one refused try of submission `token` and when the next is due; returns the tries."""
    sub = store.submission(token)
    tries = sub.tries + 1
    due = (now or datetime.now(timezone.utc)) + timedelta(seconds=policy.submit_retry_in_s(tries))
    return store.record_refusal(token, error, due.isoformat(timespec="seconds"))


def submit_room(clusters: Sequence[str] = ()) -> tuple[SubmitRoom, list[slurm.QueuedJob]]:
    """The room under the site's limit on queued jobs, and this user's queued jobs (one squeue;
    on every cluster of `clusters`, whose jobs all count against the one limit read)."""
    queued = slurm.queued_on(clusters)[0] if clusters else slurm.own_queued_jobs()
    return SubmitRoom(slurm.submit_limit(), lambda: len(queued)), queued


def wait_for_room(store: Store, token: str, why: str, now: datetime | None = None) -> None:
    """Submission `token` waits for room: due again at once (the next tick), no try counted."""
    store.record_wait(token, WAITING + why, (now or datetime.now(timezone.utc)).isoformat(timespec="seconds"))


def dispatch_within(room: SubmitRoom, store: Store, spec: CampaignSpec, token: str, chunk: ArrayChunk,
                    params: dict[str, Any], job_id: str | None,
                    attempt_numbers: Sequence[int] | None = None, now: datetime | None = None,
                    still_leased: LeaseCheck | None = None, cluster: str = "") -> str | None:
    """`dispatch` when `room` allows it; None when the submission waits for room (noted in the
    store). A submit limit Slurm names, or its generic text while jobs of ours are queued, makes
    this and the tick's later submissions wait; the same text with nothing queued is a refusal
    (a job no wait lets through: larger or longer than a limit allows) and raises as one."""
    if job_id is None and (why := room.why_not(chunk.elements)):
        wait_for_room(store, token, why, now)
        return None
    try:
        job_id = dispatch(store, spec, token, chunk, params, job_id, attempt_numbers, still_leased, cluster)
    except SiteLimitError as exc:
        if not room.is_limit(exc.message):
            raise SlurmUnavailableError(exc.message, REFUSED_HINT) from None
        room.refuse(exc.message)
        wait_for_room(store, token, room.refused, now)
        return None
    room.took(chunk.elements)
    return job_id


def abandon(store: Store, token: str, name: str) -> None:
    """Give a submission up: any held job of ours under its name is cancelled (nothing of it
    ran: it was never released), then the submission is marked abandoned."""
    for job_id in slurm.named_jobs(name, store.submission(token).cluster):
        slurm.cancel(job_id)
    store.set_submission_state(token, "abandoned")


def is_due(sub: SubmissionRecord, now: datetime | None = None) -> bool:
    return sub.next_try_at is None or datetime.fromisoformat(sub.next_try_at) <= (now or datetime.now(timezone.utc))


def recover(store: Store, record: CampaignRecord, policy: Policy, now: datetime | None = None,
            still_leased: LeaseCheck | None = None, due_now: bool = False) -> list[Dispatched]:
    """Finish submissions a crashed or refused run left behind. Each one's token is looked up
    first (squeue, by job name): a job found is adopted and any duplicate cancelled, so sbatch
    never runs twice for one token. A submission Slurm refused waits for its next try (unless
    `due_now`: a person's `submit` tries each now) and, refused `policy.submit_tries` times, is
    abandoned (`gave_up`).

    Only the caller's own submissions: another member of a shared campaign may be between its
    intent row and its sbatch right now, and its held job is in its `squeue --me`, not ours, so
    taking it up here would submit its retry a second time, as our job."""
    me = identity.user_name()
    pending = [sub for sub in store.submissions(record.id, states=("intent", "submitted")) if sub.submitted_by == me]
    specs: dict[int, CampaignSpec] = {}
    attempts = store.attempts(record.id)
    pending = [rebased(store, sub, record.current_revision, chunk_of(attempts, sub)[0], specs)
               if sub.job_id is None and sub.revision < record.current_revision else sub for sub in pending]
    if not due_now:
        pending = [sub for sub in pending if is_due(sub, now)]
    if not pending:
        return []
    results = []
    room, queued = submit_room(sorted({s.cluster for s in pending if s.cluster}))  # one squeue for every token
    for sub in pending:
        chunk, numbers = chunk_of(attempts, sub)
        if sub.revision not in specs:
            specs[sub.revision] = revision_spec(store, record.id, sub.revision)
        spec = specs[sub.revision]
        params = parameters(spec.name, Resources(**json.loads(sub.resources_json)), sub.token, chunk,
                            sub.revision, bool(sub.requeue))
        name = job_name(spec.name, sub.token)
        job_id = slurm.adopt_from(sorted({q.array_job_id for q in queued if q.name == name}, key=job_ref.order),
                                  keep=sub.job_id) or sub.job_id
        if job_id and job_id != sub.job_id:
            store.set_submission_state(sub.token, "submitted", job_id)
        try:
            job_id = dispatch_within(room, store, spec, sub.token, chunk, params, job_id, numbers, now, still_leased,
                                     sub.cluster)
        except SlurmUnavailableError as exc:
            tries = refused(store, sub.token, exc.message, policy, now)
            gave_up = tries >= policy.submit_tries
            if gave_up:
                abandon(store, sub.token, name)
            results.append(Dispatched(sub.token, chunk, None, exc.message, gave_up, tries))
            continue
        if job_id is None:
            results.append(Dispatched(sub.token, chunk, None, room.refused, waiting=True))
            continue
        results.append(Dispatched(sub.token, chunk, job_id))
    return results


def stray_jobs(subs: Sequence[SubmissionRecord], queued: Sequence[slurm.QueuedJob], campaign: str) -> list[str]:
    """Queued jobs of ours under a token of `subs` that are not the job recorded for it: a
    duplicate whose sbatch reached slurmctld after its token was looked up (a reply lost under
    load), or a job of an abandoned submission. None of them was ever released: cancel them.
    `queued` is `squeue --me`: another user's job (a member of a shared campaign) is never in it."""
    by_token = {s.token: s for s in subs}
    found = set()
    for q in queued:
        token = token_of_job_name(q.name)
        sub = by_token.get(token or "")
        if sub is None or q.name != job_name(campaign, sub.token):
            continue
        if sub.state == "abandoned" or (sub.state == "released" and q.array_job_id != sub.job_id):
            found.add(q.array_job_id)
    return sorted(found, key=job_ref.order)


def rebased(store: Store, sub: SubmissionRecord, revision: int, chunk: ArrayChunk,
            specs: dict[int, CampaignSpec]) -> SubmissionRecord:
    """A submission that has not reached Slurm (refused, or waiting for room) goes out under the
    campaign's current revision: a corrected spec (`submit` of revision 2) applies to it, instead
    of its revision-1 script being tried until given up. First attempts take the new revision's
    spec resources (a right_size sizing of the old revision is not redone); a rule's retry keeps
    the resources the rule chose. Its argv and env are the new
    revision's either way."""
    if revision not in specs:
        specs[revision] = revision_spec(store, sub.campaign_id, revision)
    resources_json = sub.resources_json
    if sub.kind == "initial":
        resources_json = json.dumps(asdict(specs[revision].resources_of(chunk.task_indices[0])))
    store.rebase_submission(sub.token, revision, resources_json)
    return replace(sub, revision=revision, resources_json=resources_json, tries=0, next_try_at=None)


def revision_spec(store: Store, campaign_id: int, number: int) -> CampaignSpec:
    """The spec as accepted at revision `number`, with the policy resolved then (not re-read)
    and the environment captured for it."""
    revision = store.revision(campaign_id, number)
    doc = parse_yaml(revision.spec_text, revision.spec_path)
    policy = json.loads(revision.policy_json)
    spec = validate_spec(doc, str(Path(revision.spec_path).parent),
                         policy_from_dict(policy) if policy else None)
    return with_captured_env(spec, revision)


def with_captured_env(spec: CampaignSpec, revision: RevisionRecord) -> CampaignSpec:
    """`spec` with the environment file `submit` captured for `revision`. A policy or promote
    revision copies its settings from the current one and a rollback from its target, so each
    runs with the environment of the spec revision whose content it has."""
    return replace(spec, captured_env=str(json.loads(revision.settings_json).get(CAPTURED_ENV, "")))


def chunk_of(attempts: list[AttemptRecord], sub: SubmissionRecord) -> tuple[ArrayChunk, list[int]]:
    """The chunk a submission row was written from: its tasks in their order (an attempt's
    token ends with its place in the chunk) and their attempt numbers."""
    prefix = sub.token + "."
    rows = sorted((int(a.token[len(prefix):]), a.task_index, a.attempt_number) for a in attempts
                  if a.token.startswith(prefix))
    throttle = int(sub.array_spec.split("%")[1]) if "%" in sub.array_spec else None
    chunk = ArrayChunk(task_indices=tuple(t for _, t, _ in rows), throttle=throttle,
                       pack=PackShape.from_json(sub.pack))
    return chunk, [n for *_, n in rows]
