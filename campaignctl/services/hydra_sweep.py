"""A Hydra multirun as one campaign (the launcher plugin, hydra_plugins/campaignctl_launcher, calls
`launch_sweep`): each Hydra job is a task that runs the app again, in run mode, with that job's
overrides and `hydra.run.dir` set to the directory Hydra would have given the job, so every job
writes its own `.hydra/` and log there, on every attempt (a retry finds its checkpoint there).

The campaign's name is the app's job name and a digest of what makes the sweep: the app, its
config flags, every job's overrides and the launcher's settings. Running the same command again is
safe: the campaign exists, nothing is submitted, and the command says how to follow it.

Overrides become task parameters (`lr=0.1` → parameter `lr`, `db.user=x` → `db_user`) so that
`status` and `results` show them; the argv is `KEY={param}` with the override's own text as the
value, so Hydra parses it as it did (quoting, lists, `null`). Literal text (a key, the sweep
directory) has its braces doubled: a Hydra interpolation `${…}` is never a campaignctl placeholder."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from campaignctl.adapters import paths
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import SpecError
from campaignctl.core.model.params import ATTEMPT_NAMES, RESUME
from campaignctl.services.submit import SubmitResult, submit

# the launcher's settings that are campaign spec keys, passed through as they are
SPEC_KEYS = ("resources", "policy", "budget", "array", "rungs", "tracker", "checkpoint", "env", "setup",
             "objective", "metrics", "telemetry", "pack", "profile", "share", "env_capture", "description")
CONFIG_FLAGS = ("--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd")
SPEC_FILE = "campaignctl.yaml"
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class SweepJob:
    num: int  # hydra.job.num
    overrides: tuple[str, ...]  # the job's overrides as Hydra's sweeper made them
    output_dir: str  # hydra.sweep.dir / hydra.sweep.subdir, resolved for this job


@dataclass(frozen=True, slots=True)
class SweepLaunch:
    campaign: str
    submitted: bool  # False: the campaign existed (the same command ran before)
    spec_path: str
    result: SubmitResult | None

    def lines(self) -> list[str]:
        name = self.campaign
        head = (f"campaignctl: campaign {name}: {self.result.tasks} Hydra job(s) submitted "
                f"({self.result.sbatch_calls} sbatch call(s)); they run under cron's reconcile"
                if self.submitted and self.result else
                f"campaignctl: campaign {name} was submitted before (the same sweep); nothing submitted now")
        notes = [f"campaignctl: {note}" for note in (self.result.notes if self.result else [])]
        return [head, *notes, f"  follow it:  campaignctl status {name}   ·   campaignctl top {name}",
                f"  rank it:    campaignctl results {name}", f"  its spec:   {self.spec_path}"]


def app_command(python: str, argv: Sequence[str], main_module: str | None) -> list[str]:
    """How to run the app again: `python -m MODULE` when it was run so, else `python SCRIPT`, with
    the Hydra flags that chose its config (`--config-name` …); the rest of argv was the sweep."""
    program = ["-m", main_module] if main_module else [str(Path(argv[0]).resolve())]
    flags: list[str] = []
    rest = list(argv[1:])
    for i, arg in enumerate(rest):
        key = arg.split("=", 1)[0]
        if key in CONFIG_FLAGS:
            flags += [arg] if "=" in arg else [arg, *rest[i + 1:i + 2]]
    return [python, *program, *flags]


def sweep_name(job_name: str, command: Sequence[str], jobs: Sequence[SweepJob], launcher: Mapping) -> str:
    given = launcher.get("name")
    if given:
        return str(given)
    digest = hashlib.sha256(json.dumps({"command": list(command), "jobs": [list(j.overrides) for j in jobs],
                                        "launcher": launcher}, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return f"{_NAME_CHARS.sub('-', job_name).strip('-.')[:50] or 'hydra'}-{digest}"


def sweep_spec(name: str, command: Sequence[str], jobs: Sequence[SweepJob], sweep_dir: str, workdir: str,
               launcher: Mapping) -> dict[str, object]:
    """The campaign spec of the sweep (a mapping, written as YAML beside the sweep)."""
    keys = [_key(o) for o in jobs[0].overrides]
    for job in jobs[1:]:
        if [_key(o) for o in job.overrides] != keys:
            raise SpecError([f"Hydra job {job.num}'s overrides ({' '.join(job.overrides)}) name other keys than "
                             f"job {jobs[0].num}'s ({' '.join(jobs[0].overrides)})"], "the Hydra sweep",
                            "campaignctl runs a sweep whose jobs override the same keys (a grid, ranges)")
    names = _param_names(keys)
    by_num = all(Path(j.output_dir) == Path(sweep_dir) / str(j.num) for j in jobs)
    tasks = []
    for job in jobs:
        params: dict[str, object] = {"job": job.num}
        for name_, override in zip(names, job.overrides, strict=True):
            if name_:
                params[name_] = override.split("=", 1)[1]
        if not by_num:
            params["hydra_dir"] = job.output_dir
        tasks.append(params)
    argv = [_literal(a) for a in command]
    argv += [_literal(o) if not n else f"{_literal(_key(o))}={{{n}}}" for n, o in zip(names, jobs[0].overrides,
                                                                                      strict=True)]
    argv += [f"hydra.run.dir={_literal(sweep_dir)}/{{job}}" if by_num else "hydra.run.dir={hydra_dir}",
             "hydra.job.num={job}"]
    spec: dict[str, object] = {
        "name": name, "command": argv, "tasks": tasks, "workdir": workdir,
        "run_dir": str(launcher.get("run_dir") or Path(sweep_dir) / ".campaignctl"),
        "description": f"Hydra multirun of {' '.join(command[1:])} ({len(jobs)} jobs) in {sweep_dir}"}
    spec.update({k: launcher[k] for k in SPEC_KEYS if launcher.get(k) not in (None, {}, [])})
    return spec


def launch_sweep(job_name: str, command: Sequence[str], jobs: Sequence[SweepJob], sweep_dir: str, workdir: str,
                 launcher: Mapping) -> SweepLaunch:
    """Submit the sweep once; the same sweep again finds its campaign and submits nothing."""
    name = sweep_name(job_name, command, jobs, launcher)
    store = Store.open()
    existing = store.campaign(name)
    if existing is not None:
        return SweepLaunch(name, False, store.revision(existing.id, existing.current_revision).spec_path, None)
    spec_path = Path(sweep_dir) / SPEC_FILE
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(sweep_spec(name, command, jobs, sweep_dir, workdir, launcher), sort_keys=False, width=100)
    paths.write_atomic(spec_path, "# written by campaignctl's Hydra launcher: the campaign this sweep is\n" + text)
    return SweepLaunch(name, True, str(spec_path), submit(spec_path))


def _key(override: str) -> str:
    return override.split("=", 1)[0] if "=" in override else override


def _literal(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _param_names(keys: Sequence[str]) -> list[str]:
    """A parameter name per override key ('' for an override without a value, e.g. `~db`)."""
    taken = {"job", "hydra_dir", *ATTEMPT_NAMES, RESUME}
    names = []
    for key in keys:
        if key.startswith("~"):
            names.append("")
            continue
        base = _NOT_NAME.sub("_", key.lstrip("+")).strip("_") or "param"
        base = base if base[0].isalpha() else f"p_{base}"
        name, n = base[:60], 2
        while name in taken:
            name, n = f"{base[:56]}_{n}", n + 1
        taken.add(name)
        names.append(name)
    return names
