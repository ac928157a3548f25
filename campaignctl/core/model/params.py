"""Task parameters: a cartesian `matrix` or an explicit `tasks` list, filled into argv and env.

`{name}` in a command argument or env value is replaced by the task's parameter; `{{` and `}}`
are literal braces. Values never pass through a shell, so `$(...)`, backticks and `;` stay text.

Beside the parameters, every attempt fills its own values (ATTEMPT_NAMES): `{attempt}` (1, 2, …),
`{task_index}`, `{checkpoint_dir}` (shared by a task's attempts and its config's rungs), `{run_id}`
(the task's tracker run, likewise shared: core/model/tracker.py), and
`{resume?THEN:ELSE}`: THEN on an attempt that starts where its checkpoint is (the spec's
`checkpoint:` file, or a non-empty `{checkpoint_dir}`: the runner looks when the attempt starts,
adapters/resume_check.py), ELSE on one that starts over (`:ELSE` may be left out: empty). A
trainer's own flags thus switch without glue, e.g. `--init_from={resume?resume:scratch}` for
nanoGPT, `{resume?--resume={checkpoint_dir}/last.pth.tar}` for timm. A command argument that is
only a `{resume?…}` and comes out empty is left out of argv (argparse would read "" as a positional
argument). THEN and ELSE may hold `{param}` and attempt placeholders but no other `{resume?…}`;
THEN no `:` outside them.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from campaignctl.core.base.rawdoc import KeyPath
from campaignctl.core.base.reader import Reader
from campaignctl.core.base.safety import IDENTIFIER, has_control_chars
from campaignctl.core.model.attempt_paths import checkpoint_dir
from campaignctl.core.model.tracker import RUN_ID, run_identity

Scalar = str | int | float | bool
SCALAR_TYPES = (str, int, float, bool)  # for isinstance
MAX_TASKS = 1_000_000
# a placeholder may hold one level of `{name}`s (a `{resume?…}`'s THEN and ELSE)
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{((?:[^{}]|\{[^{}]*\})*)\}|[{}]")
_RESERVED_ENV = ("CAMPAIGNCTL_", "SLURM_", "SUBMITIT_")
ATTEMPT_NAMES = ("attempt", "task_index", "checkpoint_dir", RUN_ID)
RESUME = "resume"
_CONDITION = re.compile(r"resume\?((?:[^:{}]|\{[^{}]*\})*)(?::((?:[^{}]|\{[^{}]*\})*))?")


@dataclass(frozen=True, slots=True)
class TaskSpec:
    index: int
    params: Mapping[str, Scalar]
    argv: tuple[str, ...]
    env: Mapping[str, str]
    rung: int = 0  # a progressive campaign's rung (0 without rungs)
    config: int = 0  # the point of the matrix or tasks list this task runs (its index without rungs)


def placeholders(template: str) -> list[str]:
    """Names used in `template`; a name that is not an identifier is returned as-is for reporting."""
    names = []
    for match in _PLACEHOLDER.finditer(template):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        names.append(match.group(1) if match.group(1) is not None else token)
        condition = _CONDITION.fullmatch(match.group(1) or "")
        if condition:  # the names its THEN and ELSE use
            names += [name for part in condition.groups() if part for name in placeholders(part)]
    return names


def resumes(attempt: int, rung: int) -> bool:
    """Whether an attempt is expected to find a checkpoint: a retry, or a config promoted into a
    later rung. What `submit --dry-run` shows; the runner decides by what is there (and a payload
    pickled before it did so resumes by this rule)."""
    return attempt > 1 or rung > 0


def attempt_values(task: TaskSpec, attempt: int, run_dir: str, resume: bool | None = None) -> dict[str, Scalar]:
    """What ATTEMPT_NAMES and `{resume?…}` stand for in one attempt of `task` (`resume` None: as
    `resumes` expects)."""
    return {"attempt": attempt, "task_index": task.index, "checkpoint_dir": checkpoint_dir(run_dir, task.config),
            RUN_ID: run_identity(run_dir, task.config),
            RESUME: resumes(attempt, task.rung) if resume is None else resume}


def checkpoint_marker(template: str, task: TaskSpec, run_dir: str) -> str:
    """The spec's `checkpoint:` filled for `task`: the file or directory whose presence tells the
    runner an attempt resumes ('' without one: a non-empty `{checkpoint_dir}`). A relative path is
    the runner's, from the workdir."""
    if not template:
        return ""
    return fill(template, {**task.params, "task_index": task.index,
                           "checkpoint_dir": checkpoint_dir(run_dir, task.config)})


def fill(template: str, params: Mapping[str, Scalar]) -> str:
    # most of a command's words are plain text or one whole `{name}`: answered without the regex
    # (a 1,000,000-task expansion fills 2,000,000 words)
    if "{" not in template and "}" not in template:
        return template
    if template[0] == "{" and template[-1] == "}" and template[1:-1].isidentifier():
        return str(params[template[1:-1]])

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        condition = _CONDITION.fullmatch(match.group(1))
        if condition:
            return fill(condition.group(1) if params[RESUME] else condition.group(2) or "", params)
        return str(params[match.group(1)])

    return _PLACEHOLDER.sub(replace, template)


def fill_argv(templates: Sequence[str], values: Mapping[str, Scalar]) -> tuple[str, ...]:
    argv = tuple(fill(t, values) for t in templates)
    if "" not in argv:
        return argv
    return tuple(arg for t, arg in zip(templates, argv, strict=True)
                 if arg or not (t[:1] == "{" and t[-1:] == "}" and _CONDITION.fullmatch(t[1:-1])))


def render(task: TaskSpec, command: Sequence[str], env: Mapping[str, str],
           params: Mapping[str, Scalar] | None, attempt: int = 1, run_dir: str = "",
           resume: bool | None = None) -> TaskSpec:
    """`task` for one attempt: argv and env filled again from the spec's templates with a rule's
    parameter values (`params`, a retry's) and the attempt's own values; `resume`: which side of
    `{resume?…}` (None: as `resumes` expects). Unchanged for a first attempt with its own
    parameters as expected, or without templates (a revision recorded before them)."""
    same = params is None or dict(params) == dict(task.params)
    expected = resume is None or resume == resumes(1, task.rung)
    if not command or (same and attempt == 1 and expected):
        return task
    merged = {**task.params, **(params or {})}
    values = {**merged, **attempt_values(task, attempt, run_dir, resume)}
    return replace(task, params=merged, argv=fill_argv(command, values),
                   env={k: fill(v, values) for k, v in env.items()})


def _scalar_text(r: Reader, path: KeyPath, value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        r.problem(path, f"must be a string or number, got {type(value).__name__}")
        return None
    text = str(value)
    if has_control_chars(text):
        r.problem(path, "must not contain newline, carriage return or NUL")
        return None
    return text


def _templates(r: Reader, key: str, top: dict) -> list[tuple[KeyPath, str]]:
    raw = top.get(key)
    out: list[tuple[KeyPath, str]] = []
    if key == "command":
        if not isinstance(raw, list) or not raw:
            r.problem((key,), "is required: a list of arguments (argv), e.g. [python, train.py, --lr, '{lr}']")
            return out
        items = list(enumerate(raw))
    else:
        if raw is None:
            return out
        if not isinstance(raw, dict):
            r.problem((key,), "must be a mapping of NAME: value")
            return out
        items = list(raw.items())
    for k, v in items:
        path: KeyPath = (key, k)
        if key == "env" and not (isinstance(k, str) and IDENTIFIER.match(k)):
            r.problem(path, "environment variable names use A-Z a-z 0-9 _ and start with a letter or _")
            continue
        if key == "env" and str(k).startswith(_RESERVED_ENV):
            r.problem(path, f"names starting with {', '.join(_RESERVED_ENV)} are reserved")
            continue
        text = _scalar_text(r, path, v)
        if text is not None:
            out.append((path, text))
    return out


def _matrix_points(r: Reader, matrix: object) -> list[dict[str, Scalar]]:
    if not isinstance(matrix, dict) or not matrix:
        r.problem(("matrix",), "must be a mapping of parameter: [values, ...]")
        return []
    before = len(r.problems)
    axes: list[tuple[str, list[Scalar]]] = []
    for name, values in matrix.items():
        path: KeyPath = ("matrix", name)
        if not IDENTIFIER.match(name):
            r.problem(path, "parameter names use A-Z a-z 0-9 _ and start with a letter or _")
        elif not isinstance(values, list) or not values:
            r.problem(path, "must be a non-empty list of values")
        else:
            for i, v in enumerate(values):
                _scalar_text(r, (*path, i), v)
            axes.append((name, values))
    size = math.prod(len(v) for _, v in axes)
    if size > MAX_TASKS:
        shape = " × ".join(str(len(v)) for _, v in axes)
        r.problem(("matrix",), f"expands to {size:,} tasks ({shape}); at most {MAX_TASKS:,} are allowed "
                               "per campaign: split it or shrink the grid")
        return []
    if len(r.problems) > before:
        return []
    names = [n for n, _ in axes]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(v for _, v in axes))]


def _task_list(r: Reader, tasks: object) -> list[dict[str, Scalar]]:
    if not isinstance(tasks, list) or not tasks:
        r.problem(("tasks",), "must be a non-empty list of parameter mappings")
        return []
    if len(tasks) > MAX_TASKS:
        r.problem(("tasks",), f"has {len(tasks):,} entries; at most {MAX_TASKS:,} are allowed")
        return []
    before = len(r.problems)
    for i, point in enumerate(tasks):
        if not isinstance(point, dict):
            r.problem(("tasks", i), "must be a mapping of parameter: value")
            continue
        for name, value in point.items():
            if not IDENTIFIER.match(name):
                r.problem(("tasks", i, name), "parameter names use A-Z a-z 0-9 _ and start with a letter")
            _scalar_text(r, ("tasks", i, name), value)
    return tasks if len(r.problems) == before else []


@dataclass(frozen=True, slots=True)
class Trials:
    """A search's tasks (core/spec/search_spec.py): `count` trials with the `fixed` params; `sampled`
    fills the sampled names in an unasked trial's argv (never run: an ask renders its own)."""

    count: int
    fixed: Mapping[str, Scalar]
    sampled: Mapping[str, Scalar]


def expand_tasks(r: Reader, top: dict, rung_params: Sequence[Mapping[str, Scalar]] = (),
                 run_dir: str = "", trials: Trials | None = None) -> tuple[TaskSpec, ...]:
    """TaskSpecs for every point of the grid, in a stable order (index = position). With rungs,
    every point once per rung with that rung's params added: config c of rung k is task
    k × points + c. Argv and env are those of each task's first attempt. A search's trials have
    the fixed params only."""
    if "matrix" in top and "tasks" in top:
        r.problem(("tasks",), "give either matrix (a grid) or tasks (a list), not both")
        return ()
    command = _templates(r, "command", top)
    env = _templates(r, "env", top)
    if trials is not None:
        points = [{**trials.fixed, **trials.sampled}] * trials.count
    elif "matrix" in top:
        points = _matrix_points(r, top["matrix"])
    elif "tasks" in top:
        points = _task_list(r, top["tasks"])
    else:
        points = [{}]
    _check_rung_params(r, [dict(trials.sampled)] if trials else points, rung_params)
    rungs = list(rung_params) or [{}]
    if len(points) * len(rungs) > MAX_TASKS:
        r.problem(("rungs",), f"{len(points):,} configs × {len(rungs)} rungs is more than {MAX_TASKS:,} tasks")
        return ()
    _check_placeholders(r, command + env, [{**p, **extra} for extra in rungs for p in points])
    if r.problems:
        return ()
    argv_templates = [t for _, t in command]
    by_attempt = any(_CONDITION.fullmatch(name) or name in ATTEMPT_NAMES
                     for _, t in command + env for name in placeholders(t))
    out = []
    for k, extra in enumerate(rungs):
        for c, point in enumerate(points):
            index, params = k * len(points) + c, {**point, **extra}
            values = params if not by_attempt else {  # attempt_values of its first attempt, without a TaskSpec
                **params, "attempt": 1, "task_index": index, "checkpoint_dir": checkpoint_dir(run_dir, c),
                RUN_ID: run_identity(run_dir, c), RESUME: resumes(1, k)}
            own = params if trials is None else {**trials.fixed, **extra}
            out.append(TaskSpec(index, own, fill_argv(argv_templates, values),
                                {str(path[1]): fill(t, values) for path, t in env}, k, c))
    return tuple(out)


def _check_rung_params(r: Reader, points: list[dict[str, Scalar]],
                       rung_params: Sequence[Mapping[str, Scalar]]) -> None:
    """A rung may add params (steps, data_fraction …) but not change what tells configs apart."""
    varied = set().union(*points) if points else set()
    for k, extra in enumerate(rung_params):
        for name in sorted(varied & set(extra)):
            r.problem(("rungs", k, "params", name), f"{name} is a parameter of the configs (matrix or "
                                                   "tasks); a rung may only set other parameters")


def _check_placeholders(r: Reader, templates: list[tuple[KeyPath, str]],
                        points: list[dict[str, Scalar]]) -> None:
    if not points:
        return
    common = set(points[0]).intersection(*points[1:])
    for name in sorted(set().union(*points) & {*ATTEMPT_NAMES, RESUME}):
        r.problem(("matrix",) if isinstance(r.doc.data, dict) and "matrix" in r.doc.data else ("tasks",),
                  f"{name} is a parameter name campaignctl fills itself for every attempt "
                  f"({{{name}}}); name the parameter otherwise")
    for path, text in templates:
        for name in placeholders(text):
            condition = _CONDITION.fullmatch(name)
            if condition and any(_CONDITION.fullmatch(inner) for part in condition.groups() if part
                                 for inner in placeholders(part)):
                r.problem(path, f"{{{name}}}: a {{resume?…}} cannot hold another")
            if condition or name in ATTEMPT_NAMES:
                continue
            if not IDENTIFIER.match(name):
                r.problem(path, f"bad placeholder {name!r}; write {{param}}, {{resume?THEN:ELSE}}, or "
                                f"{{{{ }}}} for a literal brace")
            elif name not in common:
                known = ", ".join(sorted(common)) or "none"
                r.problem(path, f"{{{name}}} is not a parameter of every task; parameters: {known}; "
                                f"every attempt also has {{attempt}}, {{task_index}}, {{checkpoint_dir}}, "
                                f"{{run_id}} and {{resume?THEN:ELSE}}")


CHECKPOINT_NAMES = ("checkpoint_dir", "task_index")


def read_checkpoint(r: Reader, tasks: Sequence[TaskSpec]) -> str:
    """`checkpoint:`: the file (or directory, once non-empty) whose presence makes an attempt
    take `{resume?THEN}`; it may use every task's parameters, `{checkpoint_dir}` and `{task_index}`."""
    template = r.string(("checkpoint",), default="", path_like=True) or ""
    common = set(tasks[0].params).intersection(*(t.params for t in tasks[1:])) if tasks else set()
    for name in placeholders(template):
        if name not in CHECKPOINT_NAMES and name not in common:
            allowed = ", ".join(f"{{{n}}}" for n in (*CHECKPOINT_NAMES, *sorted(common)))
            r.problem(("checkpoint",), f"{{{name}}} cannot be used here; a checkpoint path may use {allowed}")
            return ""
    return template
