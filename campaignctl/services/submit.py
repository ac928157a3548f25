"""`submit`: validate a spec, ask Slurm whether it would take its jobs (`--test-only`), record the
campaign or its new revision, then run the campaign's tick: its start section decides the first
arrays (core/tick/starts.py) and the Actor submits them exactly once, like every retry; a crash anywhere
is repaired by the next `submit` of the same spec, or the next tick."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from campaignctl.adapters import identity, paths, slurm
from campaignctl.adapters.env_capture import write_captured_env
from campaignctl.adapters.optuna_sampler import OptunaSampler
from campaignctl.adapters.policy_source import spec_policy
from campaignctl.adapters.store import Store
from campaignctl.adapters.submission import ArraySubmission
from campaignctl.adapters.yaml_source import load_yaml
from campaignctl.core.base.errors import SlurmUnavailableError, SpecError
from campaignctl.core.base.rawdoc import RawDoc
from campaignctl.core.decisions.action_records import Start
from campaignctl.core.decisions.by_hand import CANCELLED
from campaignctl.core.model.job_env import capture_environment
from campaignctl.core.model.records import CampaignRecord
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.packing.packing import ACTION as PACK
from campaignctl.core.screens.status import index_ranges, param_text
from campaignctl.core.slurm.plan import DEFAULT_MAX_ARRAY_SIZE, ArrayChunk
from campaignctl.core.spec.spec import CampaignSpec, validate_spec
from campaignctl.core.spec.task_set import TaskSetChange, task_set_change
from campaignctl.core.tick.right_size import SIZE_FIRST
from campaignctl.core.tick.starts import ACTION, decide_starts
from campaignctl.services.cron import missing_cron_note
from campaignctl.services.dispatch import parameters, revision_spec, with_captured_env
from campaignctl.services.ownership import ownership, require_may_act, require_owner_for_share_change
from campaignctl.services.reconcile import reconcile
from campaignctl.services.reconcile_result import ReconcileResult
from campaignctl.services.start_facts import start_facts
from campaignctl.services.submit_checks import (
    REFUSED_HINT,
    path_problems,
    program_note,
    slurm_refusals,
    tracker_note,
)


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
    other parameters, or drop tasks, is refused unless `replace_tasks` (core/spec/task_set.py)."""
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
        notes += [note for note in (program_note(spec), tracker_note(spec)) if note]
    change = _task_set_change(store, record, spec) if record is not None and not unchanged else TaskSetChange()
    if change.reshapes and not replace_tasks:
        raise SpecError([f"this spec changes which tasks campaign {spec.name!r} has:", *change.lines()],
                        spec_path, RESHAPE_HINT)
    if record is None:
        outcome, record = "created", store.create_campaign(spec, text, spec_path, identity.user_name(), capture(spec))
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
    me = identity.user_name()  # a crashed or refused submit of this user's is finished by the tick
    unfinished = {} if outcome == "created" else {
        s.token: s.tries for s in store.submissions(record.id, states=("intent", "submitted")) if s.submitted_by == me}
    first = len(spec.first_tasks())
    restarts = first - store.tasks_started(record.id, first, abandoned=False) if outcome == "unchanged" else 0
    if (restarts or change.added) and record.state in ("finished", CANCELLED):
        store.set_campaign_state(record.id, "active")  # ticks run these again (a paused one stays paused)
    # the revision just recorded is this spec (a `policy set` revision since an unchanged submit's is not)
    tick = _first_tick(store, spec.name, with_captured_env(spec, store.revision(record.id, record.current_revision))
                       if outcome != "unchanged" else None, outcome == "created")
    recovered = _recovered(store, record.id, unfinished)
    fresh, max_array, said = _started(store, record.id, tick)
    notes += said
    if restarts and fresh:
        notes.append(f"{restarts} task(s) whose submission had been given up before reaching Slurm submitted again")
    chunks = recovered + fresh
    if spec.search and record.state not in ("finished", CANCELLED):
        notes += _first_asks(tick)
    if waiting := sum(c.size for c in chunks if c.action == "waiting"):
        notes.append(f"{waiting} task(s) wait for room under the site's limit on queued jobs; "
                     "`reconcile` (cron) submits them as your queued jobs end")
    return SubmitResult(spec.name, record.current_revision, outcome, _task_count(spec), max_array, chunks, notes=notes)


def _first_tick(store: Store, name: str, spec: CampaignSpec | None, created: bool) -> ReconcileResult:
    """The campaign's tick, now: it starts the tasks that have no attempt (core/tick/starts.py) and
    asks a search's first trials, as cron's ticks would. Another tick holding the lock is waited
    for a little (a tick takes seconds); past that, the next tick does it."""
    result = reconcile(name, by_hand=True, spec=spec, store=store, created=created)
    for pause in LOCK_WAITS_S:
        if result.status != "locked":
            break
        time.sleep(pause)
        result = reconcile(name, by_hand=True, spec=spec, store=store, created=created)
    return result


LOCK_WAITS_S = (0.5, 1, 2, 4, 8)


def _recovered(store: Store, campaign_id: int, unfinished: Mapping[str, int]) -> list[ChunkResult]:
    """What the tick did with this user's submissions a crash or a refusal had left unfinished
    (`unfinished`: token → refused tries before it): released now, or waiting for room. One that
    Slurm refused again raises its message, as a person's `submit` always did."""
    if not unfinished:
        return []
    tasks: dict[str, list[int]] = {}
    for a in store.attempts(campaign_id):
        tasks.setdefault(a.token.rsplit(".", 1)[0], []).append(a.task_index)
    out = []
    for token, tries in unfinished.items():
        sub = store.submission(token)
        if sub.job_id is None and sub.tries > tries:
            raise SlurmUnavailableError(sub.last_error, REFUSED_HINT)
        if sub.state in ("released", "intent"):
            indices = sorted(tasks.get(token, [0]))
            out.append(ChunkResult(token, sub.array_spec, sub.size, indices[0], indices[-1], sub.job_id,
                                   "recovered" if sub.state == "released" else "waiting"))
    return out


def _started(store: Store, campaign_id: int, tick: ReconcileResult) -> tuple[list[ChunkResult], int, list[str]]:
    """The arrays the tick started, the MaxArraySize they were cut by, and what right_size and
    packing chose for them (their decisions' reasons). A start Slurm refused raises its message,
    as the submission's try recorded it (reconcile tries it again, with the policy's backoff)."""
    if tick.status != "ok" or tick.tick_id is None:
        return [], 0, [f"the first tick did not run ({tick.message}); the next `reconcile` submits the tasks"]
    if not_here := [f.error for f in tick.failed] + [c.why for c in tick.left_alone]:
        return [], 0, [f"the first tick did nothing on this campaign ({not_here[0]}); the next `reconcile` "
                       "submits the tasks"]
    entries = [e for e in store.log.entries(campaign_id, actions=(ACTION, SIZE_FIRST, PACK),
                                                            grouped=True) if e.tick_id == tick.tick_id]
    out, max_array = [], 0
    for e in (e for e in entries if e.action == ACTION and isinstance(e.typed, Start)):
        p = e.typed
        assert isinstance(p, Start)
        sub = store.submission(e.group_token)
        if sub.tries and sub.job_id is None:  # refused (a wait for room under a site limit counts no try)
            raise SlurmUnavailableError(sub.last_error, REFUSED_HINT)
        chunk = _chunk(p)
        job_id = sub.job_id if sub.state == "released" else None
        out.append(ChunkResult(e.group_token, chunk.array_spec, chunk.size, chunk.task_indices[0],
                               chunk.task_indices[-1], job_id, "submitted" if job_id else "waiting"))
        max_array = max(max_array, int(str(e.inputs.get("max_array_size", 0))))
    said = list(dict.fromkeys(f"{e.rule}: {e.reason}" for e in entries if e.action != ACTION))
    return out, max_array, said


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


def _first_asks(tick: ReconcileResult) -> list[str]:
    """What a search's first tick asked (the same tick cron runs: the same asks, the same
    exactly-once submission)."""
    if tick.status != "ok":
        return [f"search: the first trials were not asked ({tick.message}); the next `reconcile` asks them"]
    asks = [d for c in tick.campaigns for d in c.decisions if d.action == "ask"]
    jobs = sorted({d.job_id.split("_")[0] for d in asks if d.job_id})
    return [f"search: asked the first {len(asks)} trial(s)" + (f", submitted as job {', '.join(jobs)}" if jobs else "")
            + "; reconcile (cron) tells finished trials and asks new ones"]


def capture(spec: CampaignSpec) -> str:
    """Store this shell's environment (narrowed by `env_capture`) for the new revision; every
    attempt of it runs on it, whoever submits it (core/model/job_env.py)."""
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
        max_array = slurm.array_cap([c.name for c in spec.clusters])
    except SlurmUnavailableError as exc:
        max_array = DEFAULT_MAX_ARRAY_SIZE
        notes.append(f"could not read MaxArraySize ({exc.message}); assumed {max_array}")
    notes += path_problems(spec)
    notes += [note for note in (program_note(spec), tracker_note(spec)) if note]
    try:
        notes += slurm_refusals(spec, None)
    except SlurmUnavailableError as exc:
        notes.append(f"could not ask Slurm whether it would take these jobs ({exc.message})")
    # the start section of the campaign's first tick, over the same facts (core/tick/starts.py)
    decided = decide_starts(start_facts(None, spec, (), max_array), spec.policy) if spec.first_tasks() else []
    notes += list(dict.fromkeys(f"{d.rule}: {d.reason}" for d in decided if d.action != ACTION))
    notes += [f"placement: tasks {p.tasks[0]}-{p.tasks[-1]} go to {p.cluster}: {placed.get('why', '')}"
              for d in decided if isinstance(p := d.typed, Start) and p.cluster
              and isinstance(placed := d.inputs.get("placement"), dict)]
    planned = [(d.resources, _chunk(d.typed)) for d in decided
               if d.action == ACTION and isinstance(d.typed, Start) and d.resources is not None]
    script = ""
    if planned:
        folder = Path(spec.run_dir) / "slurm"
        params = parameters(spec.name, planned[0][0], "DRYRUN", planned[0][1], 0, spec.policy.slurm_requeue)
        script = ArraySubmission(folder, "DRYRUN", params).render()
    results = [ChunkResult("", c.array_spec, c.size, c.task_indices[0], c.task_indices[-1], None, "planned")
               for _, c in planned]
    return SubmitResult(spec.name, 0, "dry-run", _task_count(spec), max_array, results, script, notes,
                        list(spec.setup), {i: list(spec.tasks[i].argv) for i in spec.first_tasks()})


def _chunk(p: Start) -> ArrayChunk:
    """The array a start decision submits."""
    return ArrayChunk(p.tasks, p.throttle, PackShape(p.per_element, p.per_gpu, p.cpus, p.processes or 0)
                      if p.per_element > 1 else None)
