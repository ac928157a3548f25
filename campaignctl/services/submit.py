"""`submit`: spec → campaign, revision, array chunks, held sbatch, release — exactly once.

Protocol per chunk (each step is durable before the next; a crash anywhere is repaired by the
next `submit` of the same spec):
  1 intent row (submission + one attempt per element, each with its token)
  2 payloads + script staged on disk (deterministic from the spec and the token)
  3 `sbatch --hold` — the job name carries the token, so squeue can find it
  4 job id recorded
  5 payloads moved where the job looks for them, then `scontrol release`, then recorded.
"""

from __future__ import annotations

import getpass
import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from campaignctl.adapters import slurm
from campaignctl.adapters.faults import crash_point
from campaignctl.adapters.runner import TaskLaunch
from campaignctl.adapters.store import Store
from campaignctl.adapters.submission import ArraySubmission, executor_parameters
from campaignctl.adapters.yaml_source import load_yaml, parse_yaml
from campaignctl.core.errors import SlurmUnavailableError
from campaignctl.core.plan import ArrayChunk, plan_chunks
from campaignctl.core.records import AttemptRecord, CampaignRecord, SubmissionRecord
from campaignctl.core.spec import CampaignSpec, validate_spec


@dataclass(frozen=True, slots=True)
class ChunkResult:
    token: str
    array_spec: str
    size: int
    first_task: int
    last_task: int
    job_id: str | None
    action: str  # submitted | recovered | planned


@dataclass(frozen=True, slots=True)
class SubmitResult:
    campaign: str
    revision: int
    outcome: str  # created | unchanged | revised | dry-run
    tasks: int
    max_array_size: int
    chunks: list[ChunkResult] = field(default_factory=list)
    script: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def sbatch_calls(self) -> int:
        return sum(1 for c in self.chunks if c.action in ("submitted", "recovered"))

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "sbatch_calls": self.sbatch_calls}


def load_spec(spec_path: Path) -> tuple[CampaignSpec, str]:
    doc = load_yaml(spec_path)
    text = spec_path.read_text(encoding="utf-8")
    return validate_spec(doc, str(spec_path.resolve().parent)), text


def submit(spec_path: Path, dry_run: bool = False) -> SubmitResult:
    spec, text = load_spec(spec_path)
    if dry_run:
        return _dry_run(spec)
    store = Store.open()
    record = store.campaign(spec.name)
    notes: list[str] = []
    if record is None:
        store.create_campaign(spec, text, str(spec_path.resolve()), getpass.getuser())
        outcome, record = "created", store.campaign(spec.name)
        assert record is not None
    elif store.revision(record.id, record.current_revision).spec_hash == spec.spec_hash:
        outcome = "unchanged"
    else:
        number = store.add_revision(record.id, spec, text, str(spec_path.resolve()),
                                    getpass.getuser(), "spec changed at submit")
        notes.append(f"revision {number} recorded; work already submitted keeps its resources "
                     "until reconcile applies the new revision")
        return SubmitResult(spec.name, number, "revised", len(spec.tasks), 0, notes=notes)
    recovered = _recover(store, record, spec)
    fresh = _submit_unsubmitted(store, record, spec)
    return SubmitResult(spec.name, record.current_revision, outcome, len(spec.tasks),
                        fresh[1], recovered + fresh[0], notes=notes)


def _dry_run(spec: CampaignSpec) -> SubmitResult:
    notes = []
    try:
        max_array = slurm.max_array_size()
    except SlurmUnavailableError as exc:
        max_array = slurm.DEFAULT_MAX_ARRAY_SIZE
        notes.append(f"could not read MaxArraySize ({exc.message}); assumed {max_array}")
    chunks = plan_chunks([t.index for t in spec.tasks], max_array, spec.max_parallel)
    script = ""
    if chunks:
        folder = Path(spec.run_dir) / "slurm"
        script = ArraySubmission(folder, "DRYRUN", _parameters(spec, "DRYRUN", chunks[0], 0)).render()
    results = [ChunkResult("", c.array_spec, c.size, c.task_indices[0], c.task_indices[-1], None, "planned")
               for c in chunks]
    return SubmitResult(spec.name, 0, "dry-run", len(spec.tasks), max_array, results, script, notes)


def _parameters(spec: CampaignSpec, token: str, chunk: ArrayChunk, revision: int) -> dict[str, object]:
    return executor_parameters(
        spec.resources, job_name=f"cc.{token}.{spec.name}",
        comment=f"campaignctl campaign={spec.name} revision={revision} token={token}", chunk=chunk)


def _launches(spec: CampaignSpec, token: str, chunk: ArrayChunk) -> list[TaskLaunch]:
    return [TaskLaunch(campaign=spec.name, task_index=t, attempt_token=f"{token}.{i}",
                       argv=spec.tasks[t].argv, env=spec.tasks[t].env, workdir=spec.workdir,
                       task_dir=str(Path(spec.run_dir) / "tasks" / str(t)))
            for i, t in enumerate(chunk.task_indices)]


def _submit_unsubmitted(store: Store, record: CampaignRecord,
                        spec: CampaignSpec) -> tuple[list[ChunkResult], int]:
    submitted = {a.task_index for a in store.attempts(record.id) if a.submission_state != "abandoned"}
    todo = [t.index for t in spec.tasks if t.index not in submitted]
    if not todo:
        return [], 0
    max_array = slurm.max_array_size()
    results = []
    for chunk in plan_chunks(todo, max_array, spec.max_parallel):
        token = uuid.uuid4().hex[:12]
        params = _parameters(spec, token, chunk, record.current_revision)
        store.record_intent(record.id, record.current_revision, token, chunk,
                            str(Path(spec.run_dir) / "slurm"), json.dumps(asdict(spec.resources)))
        crash_point("after_intent")
        job_id = _dispatch(store, spec, token, chunk, params, job_id=None)
        results.append(ChunkResult(token, chunk.array_spec, chunk.size, chunk.task_indices[0],
                                   chunk.task_indices[-1], job_id, "submitted"))
    return results, max_array


def _dispatch(store: Store, spec: CampaignSpec, token: str, chunk: ArrayChunk,
              params: dict[str, object], job_id: str | None) -> str:
    """Steps 2-5 of the protocol, from wherever the last run stopped."""
    submission = ArraySubmission(Path(spec.run_dir) / "slurm", token, params)
    if job_id is None:
        submission.stage(_launches(spec, token, chunk))
        job_id = submission.submit_held()
        crash_point("after_sbatch")
        store.set_submission_state(token, "submitted", job_id)
    submission.deliver(job_id, chunk.size)
    crash_point("before_release")
    slurm.release(job_id)
    store.set_submission_state(token, "released")
    return job_id


def _recover(store: Store, record: CampaignRecord, spec: CampaignSpec) -> list[ChunkResult]:
    """Finish submissions a crashed run left behind; adopt held jobs found by token."""
    pending = store.submissions(record.id, states=("intent", "submitted"))
    if not pending:
        return []
    specs: dict[int, CampaignSpec] = {}
    attempts = store.attempts(record.id)
    queued = {q.name.split(".")[1]: q.array_job_id for q in slurm.own_queued_jobs()
              if q.name.startswith("cc.") and q.name.count(".") >= 2}
    results = []
    for sub in pending:
        chunk = _chunk_of(attempts, sub)
        if sub.revision not in specs:
            specs[sub.revision] = _revision_spec(store, record.id, sub.revision)
        revision_spec = specs[sub.revision]
        params = _parameters(revision_spec, sub.token, chunk, sub.revision)
        job_id = sub.job_id or queued.get(sub.token)
        if job_id and not sub.job_id:
            store.set_submission_state(sub.token, "submitted", job_id)
        job_id = _dispatch(store, revision_spec, sub.token, chunk, params, job_id)
        results.append(ChunkResult(sub.token, chunk.array_spec, chunk.size, chunk.task_indices[0],
                                   chunk.task_indices[-1], job_id, "recovered"))
    return results


def _revision_spec(store: Store, campaign_id: int, number: int) -> CampaignSpec:
    revision = store.revision(campaign_id, number)
    doc = parse_yaml(revision.spec_text, revision.spec_path)
    return validate_spec(doc, str(Path(revision.spec_path).parent))


def _chunk_of(attempts: list[AttemptRecord], sub: SubmissionRecord) -> ArrayChunk:
    rows = sorted((a.array_index, a.task_index) for a in attempts if a.token.startswith(sub.token + "."))
    throttle = int(sub.array_spec.split("%")[1]) if "%" in sub.array_spec else None
    return ArrayChunk(task_indices=tuple(t for _, t in rows), throttle=throttle)
