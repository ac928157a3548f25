"""The environment a task's program runs in, and the spec keys that shape it: `env_capture` and
`setup`. Pure: the shell hands in environments as mappings.

The rule, for every attempt of a revision:
  0 defaults (PROGRAM_DEFAULTS), which anything below overrides;
  1 base: the environment `submit` captured for that revision (the user's shell, narrowed by
    `env_capture`), never the live one;
  2 on top: the variables Slurm sets for this job on the node, read live (`SLURM_*`,
    `CUDA_VISIBLE_DEVICES`, … see NODE_PREFIXES/NODE_NAMES), plus the spec's `env_capture.from_node`;
  3 the spec's `env:`; 4 `CAMPAIGNCTL_*`. Then the `setup:` lines run in bash on that
    environment, and what they export is what the program gets.
Everything else the job inherited is dropped: sbatch's default `--export=ALL` hands the job the
environment of whoever ran sbatch, the user's shell for attempt 1 and cron's nearly empty one for a
retry, so without this rule a retry of an OOM failed as an ImportError.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from campaignctl.core.base.rawdoc import KeyPath
from campaignctl.core.base.reader import Reader

ENV_CAPTURE_KEYS = ("exclude", "include_only", "from_node")
# Set by slurmd/slurmstepd/srun for the job and its step. Seen on the lab cluster (Slurm 22.05,
# tests/fixtures/slurm_step_env.txt): a job submitted with CUDA_VISIBLE_DEVICES=7 and
# ROCR_VISIBLE_DEVICES=5 in the submitting shell and no GPU ran with NEITHER set (Slurm unsets
# them), and with --gres=gpu:1 it ran with CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
# GPU_DEVICE_ORDINAL and ZE_AFFINITY_MASK all =0; HOSTNAME was the Slurm node name (node1, not the
# machine's `vm`), ENVIRONMENT=BATCH, SRUN_DEBUG=3. PMI_*/PMIX_* come from srun's MPI plugins.
NODE_PREFIXES = ("SLURM_", "SLURMD_", "SRUN_", "PMI_", "PMIX_")
NODE_NAMES = frozenset({"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
                        "ZE_AFFINITY_MASK", "ENVIRONMENT", "HOSTNAME"})
RUNNER_PREFIX = "CAMPAIGNCTL_"  # set by the runner for each attempt; never taken from elsewhere
# A Python program whose stdout is a file (the attempt's output.log) block-buffers it: a trainer's
# log lines and metric points reached the log only at exit (4 minutes of an empty `output -f`, and
# every point of a task stamped with the same time). Unbuffered unless the user's shell or the
# spec's env sets PYTHONUNBUFFERED otherwise.
PROGRAM_DEFAULTS = {"PYTHONUNBUFFERED": "1"}
MAX_SETUP_LINES = 64
MAX_SETUP_LINE = 4096
MAX_PATTERNS = 256
MAX_PATTERN = 256


@dataclass(frozen=True, slots=True)
class EnvCapture:
    """`env_capture:` — which of the submitting shell's variables every attempt gets.
    Patterns are shell globs (`AWS_*`), matched case-sensitively."""

    include_only: tuple[str, ...] = ()  # empty: everything (as Slurm's --export=ALL would)
    exclude: tuple[str, ...] = ()
    from_node: tuple[str, ...] = ()  # site variables read live in the job (TaskProlog's TMPDIR …)


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def is_node_variable(name: str) -> bool:
    """Slurm sets it for the job on its node: taken live, never from a capture."""
    return name in NODE_NAMES or name.startswith(NODE_PREFIXES)


def capture_environment(environ: Mapping[str, str], rule: EnvCapture) -> dict[str, str]:
    """What `submit` stores for a revision: the submitting environment narrowed by `rule`, without
    the node's variables (a shell inside `salloc` has a stale SLURM_JOB_ID, CUDA_VISIBLE_DEVICES …)
    and without CAMPAIGNCTL_* (a stale CAMPAIGNCTL_RESUME=1 would tell attempt 1 to resume)."""
    kept = {k: v for k, v in environ.items() if not is_node_variable(k) and not k.startswith(RUNNER_PREFIX)}
    if rule.include_only:
        kept = {k: v for k, v in kept.items() if matches_any(k, rule.include_only)}
    return {k: v for k, v in kept.items() if not matches_any(k, rule.exclude)}


def program_environment(captured: Mapping[str, str], live: Mapping[str, str], spec_env: Mapping[str, str],
                        runner: Mapping[str, str], from_node: Iterable[str] = ()) -> dict[str, str]:
    """The environment of the rule in the module docstring (before the setup lines run)."""
    extra = tuple(from_node)
    env = {**PROGRAM_DEFAULTS, **{k: v for k, v in captured.items() if not is_node_variable(k)}}
    env.update({k: v for k, v in live.items() if is_node_variable(k) or matches_any(k, extra)})
    env.update(spec_env)
    env.update(runner)
    return env


def encode_environment(env: Mapping[str, str]) -> bytes:
    """`NAME=value\\0` records, the format of /proc/PID/environ and `env -0`: values may hold
    newlines (exported bash functions such as Lmod's `BASH_FUNC_module%%` do). Text decoded from
    bytes with surrogateescape (os.environ's way) comes back byte for byte."""
    return b"".join(f"{k}={v}".encode("utf-8", "surrogateescape") + b"\0" for k, v in env.items())


def decode_environment(data: bytes) -> dict[str, str]:
    env: dict[str, str] = {}
    for record in data.split(b"\0"):
        name, sep, value = record.partition(b"=")
        if sep and name:
            env[name.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return env


def read_env_capture(r: Reader) -> EnvCapture:
    p: KeyPath = ("env_capture",)
    r.mapping(p, ENV_CAPTURE_KEYS)
    include_only, exclude, from_node = (_patterns(r, (*p, key)) for key in ("include_only", "exclude", "from_node"))
    return EnvCapture(include_only=include_only, exclude=exclude, from_node=from_node)


def _patterns(r: Reader, path: KeyPath) -> tuple[str, ...]:
    value = r.get(path)
    if value is Reader.MISSING or value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_PATTERNS:
        r.problem(path, f"must be a list of at most {MAX_PATTERNS} variable names or globs, "
                        "e.g. [WANDB_API_KEY, 'AWS_*']")
        return ()
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item or len(item) > MAX_PATTERN or "=" in item or _has_control(item):
            r.problem((*path, i), f"{item!r} is not a variable name or glob (no '=', no control characters, "
                                  f"1-{MAX_PATTERN} characters)")
        else:
            out.append(item)
    return tuple(out)


def read_setup(r: Reader) -> tuple[str, ...]:
    """`setup:` — shell lines run in bash before the program on every attempt (the one place a
    spec is shell by design). One item is one line: a newline inside an item is refused, not
    split, so what `submit --dry-run` shows is exactly what runs."""
    path: KeyPath = ("setup",)
    value = r.get(path)
    if value is Reader.MISSING or value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_SETUP_LINES:
        r.problem(path, f"must be a list of at most {MAX_SETUP_LINES} shell lines, e.g. "
                        "['module load cuda/12.4', 'source ~/venvs/x/bin/activate']")
        return ()
    lines = []
    for i, line in enumerate(value):
        if not isinstance(line, str) or not line.strip():
            r.problem((*path, i), f"must be a non-empty shell line (a quoted string), got {line!r}")
        elif _has_control(line):
            r.problem((*path, i), "holds a newline, carriage return or NUL: one item is one line; "
                                  "write each command as its own list item")
        elif len(line) > MAX_SETUP_LINE:
            r.problem((*path, i), f"is {len(line)} characters; at most {MAX_SETUP_LINE}")
        else:
            lines.append(line)
    return tuple(lines)


def _has_control(text: str) -> bool:
    return any(c in text for c in "\n\r\0")


CAPTURE_EVERYTHING = EnvCapture()
