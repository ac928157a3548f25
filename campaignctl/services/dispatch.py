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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from campaignctl.adapters import faults, paths, slurm
from campaignctl.adapters.runner import TaskLaunch
from campaignctl.adapters.store import CAPTURED_ENV, Store
from campaignctl.adapters.submission import ArraySubmission, executor_parameters
from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.errors import SlurmUnavailableError
from campaignctl.core.params import Scalar, render
from campaignctl.core.plan import ArrayChunk
from campaignctl.core.policy import policy_from_dict
from campaignctl.core.records import AttemptRecord, CampaignRecord, RevisionRecord, SubmissionRecord
from campaignctl.core.spec import CampaignSpec, Resources, validate_spec


@dataclass(frozen=True, slots=True)
class Dispatched:
    token: str
    chunk: ArrayChunk
    job_id: str | None
    error: str = ""


def job_name(campaign: str, token: str) -> str:
    return f"cc.{token}.{campaign}"


def token_of_job_name(name: str) -> str | None:
    parts = name.split(".", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "cc" else None


def parameters(campaign: str, resources: Resources, token: str, chunk: ArrayChunk, revision: int,
               requeue: bool) -> dict[str, Any]:
    return executor_parameters(
        resources, job_name=job_name(campaign, token), chunk=chunk, requeue=requeue,
        comment=f"campaignctl campaign={campaign} revision={revision} token={token}")


def launches(spec: CampaignSpec, token: str, chunk: ArrayChunk,
             attempt_numbers: Sequence[int] | None = None,
             params: Mapping[int, Mapping[str, Scalar]] | None = None) -> list[TaskLaunch]:
    """`params`: by array index, the task parameters a rule set for that element; its argv and
    env are rendered from the spec's templates with them."""
    numbers = attempt_numbers or [1] * chunk.size
    tasks = [render(spec.tasks[t], spec.command, spec.env, (params or {}).get(i))
             for i, t in enumerate(chunk.task_indices)]
    return [TaskLaunch(campaign=spec.name, task_index=t, attempt_token=f"{token}.{i}",
                       argv=tasks[i].argv, env=tasks[i].env, workdir=spec.workdir,
                       task_dir=str(paths.task_dir(spec.run_dir, t)), attempt_number=n,
                       telemetry_interval_s=spec.telemetry_interval_s,
                       # every rung of a config shares its first task's checkpoint directory
                       checkpoint_dir=str(paths.task_dir(spec.run_dir, spec.tasks[t].config) / "checkpoint"),
                       rung=spec.tasks[t].rung, env_file=spec.captured_env,
                       from_node=spec.env_capture.from_node, setup=spec.setup,
                       output_metrics=spec.output_metrics,
                       causes=tuple(spec.policy.causes.items()))
            for i, (t, n) in enumerate(zip(chunk.task_indices, numbers, strict=True))]


def dispatch(store: Store, spec: CampaignSpec, token: str, chunk: ArrayChunk,
             params: dict[str, Any], job_id: str | None,
             attempt_numbers: Sequence[int] | None = None) -> str:
    """Steps 2-5 of the protocol, from wherever the last run stopped."""
    submission = ArraySubmission(Path(spec.run_dir) / "slurm", token, params)
    if job_id is None:
        submission.stage(launches(spec, token, chunk, attempt_numbers, store.attempt_params(token)))
        job_id = submission.submit_held()
        faults.crash_point("after_sbatch")
        store.set_submission_state(token, "submitted", job_id)
    submission.deliver(job_id, chunk.size)
    faults.crash_point("before_release")
    slurm.release(job_id)
    store.set_submission_state(token, "released")
    return job_id


def queued_by_token() -> dict[str | None, str]:
    """This user's queued campaignctl jobs, by the token in their name (one squeue call)."""
    return {token_of_job_name(q.name): q.array_job_id for q in slurm.own_queued_jobs()}


def recover(store: Store, record: CampaignRecord,
            queued: Callable[[], Mapping[str | None, str]] = queued_by_token,
            abandon_on_error: bool = False) -> list[Dispatched]:
    """Finish submissions a crashed run left behind; adopt held jobs found by token. Asks
    `queued` (one squeue call) only when there is something to finish. With `abandon_on_error`
    a submission Slurm refuses for good (not a transient error) is marked abandoned."""
    pending = store.submissions(record.id, states=("intent", "submitted"))
    if not pending:
        return []
    specs: dict[int, CampaignSpec] = {}
    attempts = store.attempts(record.id)
    results = []
    for sub in pending:
        chunk, numbers = chunk_of(attempts, sub)
        if sub.revision not in specs:
            specs[sub.revision] = revision_spec(store, record.id, sub.revision)
        spec = specs[sub.revision]
        params = parameters(spec.name, Resources(**json.loads(sub.resources_json)), sub.token, chunk,
                            sub.revision, bool(sub.requeue))
        job_id = sub.job_id or queued().get(sub.token)
        if job_id and not sub.job_id:
            store.set_submission_state(sub.token, "submitted", job_id)
        try:
            job_id = dispatch(store, spec, sub.token, chunk, params, job_id, numbers)
        except SlurmUnavailableError as exc:
            if not abandon_on_error:
                raise
            store.set_submission_state(sub.token, "abandoned")
            results.append(Dispatched(sub.token, chunk, None, exc.message))
            continue
        results.append(Dispatched(sub.token, chunk, job_id))
    return results


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
    rows = sorted((a.array_index, a.task_index, a.attempt_number) for a in attempts
                  if a.token.startswith(sub.token + "."))
    throttle = int(sub.array_spec.split("%")[1]) if "%" in sub.array_spec else None
    return ArrayChunk(task_indices=tuple(t for _, t, _ in rows), throttle=throttle), [n for *_, n in rows]
