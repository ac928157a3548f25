"""`submit`: spec → campaign, revision, array chunks — exactly once, through the protocol in
`services/dispatch.py`; a crash anywhere is repaired by the next `submit` of the same spec."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from campaignctl.adapters import faults, identity, paths, slurm
from campaignctl.adapters.env_capture import write_captured_env
from campaignctl.adapters.optuna_sampler import OptunaSampler
from campaignctl.adapters.policy_source import spec_policy
from campaignctl.adapters.store import Store
from campaignctl.adapters.submission import ArraySubmission
from campaignctl.adapters.yaml_source import load_yaml
from campaignctl.core.by_hand import CANCELLED
from campaignctl.core.errors import SlurmUnavailableError, SpecError
from campaignctl.core.job_env import capture_environment
from campaignctl.core.plan import plan_chunks
from campaignctl.core.rawdoc import RawDoc
from campaignctl.core.records import CampaignRecord
from campaignctl.core.site_limits import SubmitRoom
from campaignctl.core.spec import CampaignSpec, validate_spec
from campaignctl.core.status import index_ranges, param_text
from campaignctl.core.task_set import TaskSetChange, task_set_change
from campaignctl.services.cron import missing_cron_note
from campaignctl.services.dispatch import (
    dispatch_within,
    new_token,
    parameters,
    recover,
    refused,
    revision_spec,
    with_captured_env,
)
from campaignctl.services.ownership import ownership, require_may_act, require_owner_for_share_change
from campaignctl.services.packing import pack_groups, record_pack
from campaignctl.services.reconcile import reconcile
from campaignctl.services.right_size import first_sizes, record_first_size
from campaignctl.services.submit_checks import REFUSED_HINT, path_problems, program_note, slurm_refusals


@dataclass(frozen=True, slots=True)
class ChunkResult:
    token: str
    array_spec: str
    size: int
    first_task: int
    last_task: int
    job_id: str | None
    action: str  # submitted | recovered | waiting (for room under a site limit) | planned


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
    setup: list[str] = field(default_factory=list)  # the spec's setup lines (shown by --dry-run)
    argv: dict[int, list[str]] = field(default_factory=dict)  # --dry-run: each first task's filled command

    @property
    def sbatch_calls(self) -> int:
        return sum(1 for c in self.chunks if c.action in ("submitted", "recovered"))

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "sbatch_calls": self.sbatch_calls}


def load_spec(spec_path: Path) -> tuple[CampaignSpec, str]:
    doc = load_yaml(spec_path)
    text = spec_path.read_text(encoding="utf-8")
    return spec_of(doc, str(spec_path.resolve().parent), str(spec_path)), text


def spec_of(doc: RawDoc, spec_dir: str, source: str) -> CampaignSpec:
    """Validate a parsed spec whose relative paths (workdir, a policy file) start at `spec_dir`;
    `source` names it in errors."""
    spec = validate_spec(doc, spec_dir, spec_policy(doc, spec_dir))
    problem = _share_problem(spec.share_group) if spec.share_group else ""
    if problem:
        raise SpecError([problem], source, "name a group `id -Gn` lists, or leave share out")
    return spec


def _share_problem(group: str) -> str:
    """Why the run directory cannot be made `group`'s: chgrp(2) takes only a group the caller
    is in (root aside)."""
    if not identity.group_exists(group):
        return f"share.group: no Unix group named {group!r} on this host"
    who = identity.current_identity()
    if os.geteuid() != 0 and group not in who.groups:
        return f"share.group: {who.user} is not in Unix group {group!r}, so cannot give it the run directory"
    return ""


def submit(spec_path: Path, dry_run: bool = False, reason: str = "", replace_tasks: bool = False) -> SubmitResult:
    spec, text = load_spec(spec_path)
    return submit_spec(spec, text, str(spec_path.resolve()), dry_run, reason, replace_tasks)


RESHAPE_HINT = ("nothing was recorded. To run this spec as a new campaign, give it another `name:`; to record it "
                "under this one anyway, submit it again with --replace-tasks")


def submit_spec(spec: CampaignSpec, text: str, spec_path: str, dry_run: bool = False,
                reason: str = "", replace_tasks: bool = False) -> SubmitResult:
    """Submit a validated spec; `text` is stored as the revision (what rollback and replay
    re-read), `spec_path` names it (its directory is where the spec's relative paths start).
    A revision that adds tasks after the last submits them; one that would give a task's index
    other parameters, or drop tasks, is refused unless `replace_tasks` (core/task_set.py)."""
    if dry_run:
        return _dry_run(spec)
    notes = _rung_notes(spec) + missing_cron_note()
    store = Store.open()
    record = store.campaign(spec.name)
    if record is not None:
        require_may_act(store, record, "submit a spec named", "or give your spec another `name:`")
        require_owner_for_share_change(store, record, spec.share_group)
    unchanged = record is not None and store.revision(record.id, record.current_revision).spec_hash == spec.spec_hash
    if not unchanged:  # a new campaign or revision: nothing is recorded unless its jobs can run
        problems = path_problems(spec)
        if problems:
            raise SpecError(problems, spec_path, "nothing was submitted or recorded")
        refusals = slurm_refusals(spec, store)
        if refusals:
            raise SpecError(refusals, spec_path, REFUSED_HINT)
        notes += [note] if (note := program_note(spec)) else []
    change = _task_set_change(store, record, spec) if record is not None and not unchanged else TaskSetChange()
    if change.reshapes and not replace_tasks:
        raise SpecError([f"this spec changes which tasks campaign {spec.name!r} has:", *change.lines()],
                        spec_path, RESHAPE_HINT)
    if record is None:
        store.create_campaign(spec, text, spec_path, identity.user_name(), capture(spec))
        outcome, record = "created", store.campaign(spec.name)
        assert record is not None
    elif unchanged:
        outcome = "unchanged"
    else:
        if spec.share_group and spec.share_group != ownership(store, record).share_group:
            paths.share_existing(Path(spec.run_dir), spec.share_group)
        number = store.add_revision(record.id, spec, text, spec_path,
                                    identity.user_name(), reason or "spec changed at submit", capture(spec))
        notes.append(f"revision {number} recorded; work already submitted keeps its resources "
                     "until reconcile applies the new revision")
        notes += [f"{line} (--replace-tasks)" for line in change.lines() if not line.endswith("runs now")]
        if not change.added:
            return SubmitResult(spec.name, number, "revised", _task_count(spec), 0, notes=notes)
        outcome, record = "revised", store.campaign(spec.name)
        assert record is not None
        notes.append(f"revision {number} adds task(s) {index_ranges(change.added)}: the first attempts of "
                     "those the campaign starts with are submitted now")
    recovered = [ChunkResult(r.token, r.chunk.array_spec, r.chunk.size, r.chunk.task_indices[0],
                             r.chunk.task_indices[-1], r.job_id, "waiting" if r.waiting else "recovered")
                 for r in recover(store, record)]
    spec = with_captured_env(spec, store.revision(record.id, record.current_revision))
    fresh = _submit_unsubmitted(store, record, spec)
    notes += fresh[2]
    if fresh[0] and outcome == "unchanged":
        notes.append(f"{sum(c.size for c in fresh[0])} task(s) whose submission had been given up before "
                     "reaching Slurm submitted again")
    if (fresh[0] or change.added) and record.state in ("finished", CANCELLED):
        store.set_campaign_state(record.id, "active")  # ticks run these again (a paused one stays paused)
    chunks = recovered + fresh[0]
    if spec.search and record.state not in ("finished", CANCELLED):
        notes += _first_asks(spec.name)
    if waiting := sum(c.size for c in chunks if c.action == "waiting"):
        notes.append(f"{waiting} task(s) wait for room under the site's limit on queued jobs; "
                     "`reconcile` (cron) submits them as your queued jobs end")
    return SubmitResult(spec.name, record.current_revision, outcome, _task_count(spec),
                        fresh[1], chunks, notes=notes)


def _task_set_change(store: Store, record: CampaignRecord, spec: CampaignSpec) -> TaskSetChange:
    try:
        before = revision_spec(store, record.id, record.current_revision)
    except SpecError:  # recorded by a campaignctl whose spec keys this one reads otherwise: no comparison
        return TaskSetChange()
    return task_set_change(before.tasks, spec.tasks)


def _task_count(spec: CampaignSpec) -> int:
    """What `submit` says it starts: the first tasks, or all of a search's trials (its ticks ask them)."""
    return spec.search.trials if spec.search else len(spec.first_tasks())


def _would_ask(spec: CampaignSpec) -> list[str]:
    """What a search's first tick would ask for (the same seed, no trials yet: the same values)."""
    if spec.search is None:
        return []
    asked = OptunaSampler().ask(spec.search, [], spec.search.first_asks)
    return [f"the first tick would ask trial {i}: {param_text(values)}" for i, values in enumerate(asked)]


def _first_asks(name: str) -> list[str]:
    """A search's first trials: one reconcile tick of the campaign asks for them and submits them
    (the same tick cron runs: the same asks, the same exactly-once submission)."""
    result = reconcile(name)
    if result.status != "ok":
        return [f"search: the first trials were not asked ({result.message}); the next `reconcile` asks them"]
    asks = [d for c in result.campaigns for d in c.decisions if d.action == "ask"]
    jobs = sorted({d.job_id.split("_")[0] for d in asks if d.job_id})
    return [f"search: asked the first {len(asks)} trial(s)" + (f", submitted as job {', '.join(jobs)}" if jobs else "")
            + "; reconcile (cron) tells finished trials and asks new ones"]


def capture(spec: CampaignSpec) -> str:
    """Store this shell's environment (narrowed by `env_capture`) for the new revision; every
    attempt of it runs on it, whoever submits it (core/job_env.py)."""
    return write_captured_env(spec.run_dir, spec.name, capture_environment(os.environ, spec.env_capture),
                              spec.share_group)


def _rung_notes(spec: CampaignSpec) -> list[str]:
    if spec.search:
        return [f"{spec.search.describe()}; the first tick asks the first {spec.search.first_asks}"]
    if not spec.rungs:
        return []
    ladder = " → ".join(f"{r.name} ({r.promote.describe()})" if r.promote else r.name for r in spec.rungs)
    return [f"progressive: {spec.configs} configs, rungs {ladder}; the first rung is submitted now, "
            "reconcile promotes the survivors into the next"]


def _dry_run(spec: CampaignSpec) -> SubmitResult:
    notes = _rung_notes(spec) + _would_ask(spec)
    try:
        max_array = slurm.array_cap()
    except SlurmUnavailableError as exc:
        max_array = slurm.DEFAULT_MAX_ARRAY_SIZE
        notes.append(f"could not read MaxArraySize ({exc.message}); assumed {max_array}")
    notes += path_problems(spec)
    notes += [note] if (note := program_note(spec)) else []
    try:
        notes += slurm_refusals(spec, None)
    except SlurmUnavailableError as exc:
        notes.append(f"could not ask Slurm whether it would take these jobs ({exc.message})")
    sizes = first_sizes(None, spec, spec.first_tasks()) if spec.first_tasks() else []
    notes += [n for size in sizes if (n := size.note())]
    groups = [(size, group) for size in sizes for group in pack_groups(None, spec, size.tasks, size.resources)]
    notes += [n for _, group in groups if (n := group.note())]
    planned = [(size, c) for size, group in groups
               for c in plan_chunks(group.tasks, max_array, spec.max_parallel, group.shape)]
    script = ""
    if planned:
        folder = Path(spec.run_dir) / "slurm"
        params = parameters(spec.name, planned[0][0].resources, "DRYRUN", planned[0][1], 0,
                            spec.policy.slurm_requeue)
        script = ArraySubmission(folder, "DRYRUN", params).render()
    results = [ChunkResult("", c.array_spec, c.size, c.task_indices[0], c.task_indices[-1], None, "planned")
               for _, c in planned]
    return SubmitResult(spec.name, 0, "dry-run", _task_count(spec), max_array, results, script, notes,
                        list(spec.setup), {i: list(spec.tasks[i].argv) for i in spec.first_tasks()})


def _submit_unsubmitted(store: Store, record: CampaignRecord,
                        spec: CampaignSpec) -> tuple[list[ChunkResult], int, list[str]]:
    """The chunks submitted now, MaxArraySize, and what packing chose for them (said as --dry-run says it)."""
    submitted = {a.task_index for a in store.attempts(record.id) if a.submission_state != "abandoned"}
    todo = [i for i in spec.first_tasks() if i not in submitted]
    if not todo:
        return [], 0, []
    max_array = slurm.array_cap()
    room = SubmitRoom(slurm.submit_limit(), lambda: len(slurm.own_queued_jobs()))
    results = []
    planned = [(size, group, chunk)
               for size in first_sizes(store, spec, todo)  # the spec's resources, or right_size's per group
               for group in pack_groups(store, spec, size.tasks, size.resources)  # packed, or not
               for chunk in plan_chunks(group.tasks, max_array, spec.max_parallel, group.shape)]
    for size, group, chunk in planned:
        token = new_token()
        store.record_intent(record.id, record.current_revision, token, chunk,
                            str(Path(spec.run_dir) / "slurm"), json.dumps(asdict(size.resources)),
                            requeue=spec.policy.slurm_requeue)
        record_first_size(store, spec, record.id, record.current_revision, token, chunk.task_indices[0], size)
        record_pack(store, spec, record.id, record.current_revision, token, chunk.task_indices, group)
        faults.crash_point("after_intent")
        params = parameters(spec.name, size.resources, token, chunk, record.current_revision,
                            spec.policy.slurm_requeue)
        try:  # a site limit leaves this chunk, and those after it, to reconcile as room frees
            job_id = dispatch_within(room, store, spec, token, chunk, params, None)
        except SlurmUnavailableError as exc:  # reconcile tries it again, with the policy's backoff
            refused(store, token, exc.message, spec.policy)
            raise
        results.append(ChunkResult(token, chunk.array_spec, chunk.size, chunk.task_indices[0],
                                   chunk.task_indices[-1], job_id, "submitted" if job_id else "waiting"))
    said = list(dict.fromkeys(n for _, group, _ in planned if (n := group.note())))
    return results, max_array, said


