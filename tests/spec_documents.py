"""Hypothesis strategies for spec documents, valid and hostile, and a hermetic `submit --dry-run`
that returns the CLI's exit code: shared by tests/cli/test_spec_fuzz.py (a few hundred documents)
and scripts/fuzz_specs.py (tens of thousands, with counts and timing)."""

from __future__ import annotations

import contextlib
import copy
import io
import sys
from pathlib import Path

import yaml
from hypothesis import strategies as st

from campaignctl import cli

SPEC_KEYS = ("name", "command", "matrix", "tasks", "env", "resources", "array", "policy", "budget",
             "telemetry", "rungs", "run_dir", "workdir", "description", "env_capture", "setup", "metrics")
RESOURCE_KEYS = ("partition", "gpus", "gpu_type", "min_gpus", "cpus_per_task", "mem", "time", "cpu_bind",
                 "gpu_bind", "account", "qos", "constraint", "exclude")
POLICY_KEYS = ("use", "rules", "unknown_grace", "prices", "fallback", "utilisation", "approval",
               "known_good_after", "slurm_requeue", "early_stopping", "causes", "max_failures", "mode")
BUDGET_KEYS = ("gpu_hours", "cpu_hours", "money", "warn_at")

# Text a person or an attacker may put in a spec: Slurm notations, YAML 1.1 traps, markup,
# shell and #SBATCH metacharacters, control characters, non-ASCII.
WORDS = ["batch", "a100", "v100", "4G", "500M", "1.5G", "02:00:00", "1-00:00:00", "90s", "10m", "1:30:00",
         "no", "yes", "0755", "2026-01-01", "[/]", "[/data/a]", "node[1-2]", "%x", "%%", "a\\b", "$HOME",
         "`id`", "a;b", "\n", "\r", "\x00", "é", "日本", "{lr}", "{missing}", ".nan", "default",
         "conservative", "cost-saver", "none", "cores", "closest", "single:1", "a100|v100", ""]
SCALARS = st.one_of(
    st.sampled_from(WORDS), st.text(max_size=12), st.integers(-3, 10**6), st.integers(),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none())
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(WORDS) | st.text(max_size=6), inner, max_size=4)),
    max_leaves=12)

# Raw YAML put anywhere in a document's text.
SNIPPETS = ["!custom x", "!!python/name:os.system ''", "!!binary aGk=", "!!set {a: null}", "&a [*a]", "<<: {a: 1}",
            "[" * 100 + "]" * 100, "1" * 4400, "\t", "? [a]\n: b", "%YAML 1.1\n---", "---\n---", "{", "'", "\ufeff",
            ".inf", "-.inf", ".NaN", "0x1F", "0o17", "1e400", "~", "@", "`", "|\n  x", "key: value: other"]


VALID_PARTS = {
    "resources": [{"mem": "1G", "time": "00:10:00"}, {"gpus": 1, "gpu_type": ["a100", "v100"], "partition": "batch"},
                  {"cpus_per_task": 2, "cpu_bind": "cores", "gpu_bind": "closest", "exclude": "node[1-2]"}],
    "policy": ["default", "conservative", {"use": "default", "unknown_grace": "20m"},
               {"rules": {"out_of_memory": {"max_retries": 5, "mem_cap": "32G"}}}],
    "budget": [{"gpu_hours": 10, "warn_at": 0.8}, {"money": 250}],
    "array": [{"max_parallel": 4}],
    "env": [{"OMP_NUM_THREADS": "4"}],
}
SECTIONS = {(): SPEC_KEYS, ("resources",): RESOURCE_KEYS, ("policy",): POLICY_KEYS, ("budget",): BUDGET_KEYS,
            ("matrix",): ("lr", "depth", "[/x]")}


@st.composite
def spec_dicts(draw: st.DrawFn) -> dict:
    """A valid spec with zero to three keys set to arbitrary values (about half stay valid)."""
    doc: dict = {"name": "fz", "command": ["echo", "{lr}"], "matrix": {"lr": [0.1, 0.01]}}
    for key, options in VALID_PARTS.items():
        if draw(st.booleans()):
            doc[key] = copy.deepcopy(draw(st.sampled_from(options)))
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        section = draw(st.sampled_from(list(SECTIONS)))
        parent = doc
        for part in section:
            if not isinstance(parent.get(part), dict):
                parent[part] = {}
            parent = parent[part]
        parent[draw(st.sampled_from(SECTIONS[section]))] = draw(VALUES)
    return doc


@st.composite
def spec_texts(draw: st.DrawFn) -> str:
    """A YAML document: a dump of a generated spec, sometimes with a raw snippet spliced in."""
    text = yaml.safe_dump(draw(spec_dicts()), allow_unicode=draw(st.booleans()), sort_keys=False)
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(SNIPPETS)) + text[at:]
    return text


def dry_run_exit_code(spec: Path) -> tuple[int, str]:
    """`campaignctl submit SPEC --dry-run` in this process, as the installed entry point runs it:
    the exit code and stderr (stdout is dropped). Slurm must be faked by the caller."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["campaignctl", "submit", str(spec), "--dry-run"]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = saved
    return code, err.getvalue()
