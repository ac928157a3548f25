"""The attempt's environment rule, env_capture/setup validation, and metrics.from_output."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.core.base.errors import SpecError
from campaignctl.core.base.rawdoc import RawDoc
from campaignctl.core.model.job_env import (
    EnvCapture,
    capture_environment,
    decode_environment,
    encode_environment,
    is_node_variable,
    program_environment,
)
from campaignctl.core.spec.spec import validate_spec
from campaignctl.core.tuning.output_metrics import compile_patterns, pattern_problem, record_of_line

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# what the probe's submitting shell exported (tests/fixtures/slurm_env/README.md)
SUBMITTER = {"HOME", "PATH", "SLURM_CONF", "OUTDIR", "MARKER", "OMP_NUM_THREADS", "TMPDIR"}
BASH_OWN = {"PWD", "SHLVL", "_"}
NANOGPT_EVAL = r"step (?P<step>\d+): train loss (?P<train_loss>[-\d.]+), val loss (?P<val_loss>[-\d.]+)"
NANOGPT_ITER = r"iter (?P<step>\d+): loss (?P<loss>[-\d.]+), time (?P<iter_ms>[\d.]+)ms, mfu (?P<mfu>[-\d.]+)%"


def recorded_env(name: str) -> dict[str, str]:
    lines = (FIXTURES / "slurm_env" / name).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line)


@pytest.mark.parametrize("name", ["step_nogpu.env", "step_gpu.env"])
def test_node_variables_are_exactly_what_slurm_set_in_the_recorded_step(name: str) -> None:
    env = recorded_env(name)
    node = {k for k in env if is_node_variable(k)}
    # SLURM_CONF was the submitter's, but it is SLURM_*: read live (a cron line sets it too)
    assert node == set(env) - SUBMITTER - BASH_OWN | {"SLURM_CONF"}
    assert not {"MARKER", "OMP_NUM_THREADS", "TMPDIR", "HOME", "PATH"} & node


def test_the_gpu_step_takes_the_devices_slurm_gave_it() -> None:
    env = recorded_env("step_gpu.env")
    program = program_environment({"CUDA_VISIBLE_DEVICES": "7", "PATH": "/site/bin:/usr/bin"}, env, {}, {})
    assert program["CUDA_VISIBLE_DEVICES"] == "0" and program["ZE_AFFINITY_MASK"] == "0"
    assert program["PATH"] == "/site/bin:/usr/bin" and program["HOSTNAME"] == "node2"


def test_attempt_1_from_a_shell_and_a_retry_from_cron_see_the_same_environment() -> None:
    shell = {"HOME": "/home/u", "PATH": "/home/u/venv/bin:/usr/bin", "MARKER": "m1", "WANDB_API_KEY": "s3cret",
             "LD_LIBRARY_PATH": "/opt/cuda/lib64", "SLURM_CONF": "/etc/slurm.conf"}
    captured = capture_environment(shell, EnvCapture(exclude=("WANDB_*",)))
    node = {"SLURM_JOB_ID": "41", "CUDA_VISIBLE_DEVICES": "1", "HOSTNAME": "node3"}
    cron = {"HOME": "/home/u", "PATH": "/usr/bin:/bin", "SHELL": "/bin/sh", "SLURM_CONF": "/etc/slurm.conf"}
    first = program_environment(captured, {**shell, **node}, {"SEED": "1"}, {"CAMPAIGNCTL_ATTEMPT": "1"})
    retry = program_environment(captured, {**cron, **node}, {"SEED": "1"}, {"CAMPAIGNCTL_ATTEMPT": "1"})
    assert first == retry
    assert first["PATH"] == "/home/u/venv/bin:/usr/bin" and first["MARKER"] == "m1"
    assert "WANDB_API_KEY" not in first  # excluded: not even --export=ALL brings it back
    assert "SHELL" not in retry  # cron's own variables stay out


def test_capture_drops_stale_slurm_and_campaignctl_variables_and_narrows() -> None:
    shell = {"PATH": "/p", "SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "3", "CAMPAIGNCTL_RESUME": "1",
             "HOME": "/h", "AWS_KEY": "k", "AWS_REGION": "r"}
    assert capture_environment(shell, EnvCapture()) == {"PATH": "/p", "HOME": "/h", "AWS_KEY": "k", "AWS_REGION": "r"}
    narrowed = capture_environment(shell, EnvCapture(include_only=("PATH", "AWS_*"), exclude=("AWS_KEY",)))
    assert narrowed == {"PATH": "/p", "AWS_REGION": "r"}


def test_from_node_takes_a_site_variable_live_and_otherwise_keeps_the_captured_one() -> None:
    captured, live = {"TMPDIR": "/tmp/login"}, {"TMPDIR": "/scratch/job41"}
    assert program_environment(captured, live, {}, {}, ("TMPDIR",))["TMPDIR"] == "/scratch/job41"
    assert program_environment(captured, {}, {}, {}, ("TMPDIR",))["TMPDIR"] == "/tmp/login"
    assert program_environment(captured, live, {}, {})["TMPDIR"] == "/tmp/login"


def test_the_spec_env_and_campaignctl_variables_win() -> None:
    env = program_environment({"A": "captured", "CAMPAIGNCTL_X": "stale"}, {"SLURM_JOB_ID": "1"},
                              {"A": "spec"}, {"CAMPAIGNCTL_X": "runner"})
    assert env == {"A": "spec", "CAMPAIGNCTL_X": "runner", "SLURM_JOB_ID": "1", "PYTHONUNBUFFERED": "1"}


def test_python_output_is_unbuffered_unless_the_shell_or_spec_says_otherwise() -> None:
    assert program_environment({}, {}, {}, {})["PYTHONUNBUFFERED"] == "1"
    assert program_environment({"PYTHONUNBUFFERED": ""}, {}, {}, {})["PYTHONUNBUFFERED"] == ""
    assert program_environment({}, {}, {"PYTHONUNBUFFERED": "0"}, {})["PYTHONUNBUFFERED"] == "0"


def test_the_capture_format_keeps_bash_functions_newlines_and_odd_bytes() -> None:
    env = {"BASH_FUNC_module%%": "() {  eval $($LMOD_CMD bash \"$@\")\n}", "EMPTY": "", "EQ": "a=b=c",
           "BYTES": b"caf\xe9".decode("utf-8", "surrogateescape")}
    data = encode_environment(env)
    assert decode_environment(data) == env
    assert b"caf\xe9" in data


def spec_problems(extra: str) -> str:
    import yaml
    doc = RawDoc("spec.yaml", yaml.safe_load(f"name: x\ncommand: [python3, t.py]\n{extra}"))
    with pytest.raises(SpecError) as err:
        validate_spec(doc, "/tmp")
    return str(err.value) + " ".join(err.value.problems)


def spec_of(extra: str):  # type: ignore[no-untyped-def]
    import yaml
    return validate_spec(RawDoc("spec.yaml", yaml.safe_load(f"name: x\ncommand: [python3, t.py]\n{extra}")), "/tmp")


def test_setup_env_capture_and_metrics_are_read_from_the_spec() -> None:
    spec = spec_of("setup: ['module load cuda/12.4', 'source ~/venvs/x/bin/activate']\n"
                   "env_capture: {exclude: ['AWS_*'], include_only: [PATH, 'AWS_*'], from_node: [TMPDIR]}\n"
                   f"metrics: {{from_output: ['{NANOGPT_EVAL}', '{NANOGPT_ITER}']}}\n")
    assert spec.setup == ("module load cuda/12.4", "source ~/venvs/x/bin/activate")
    assert spec.env_capture == EnvCapture(include_only=("PATH", "AWS_*"), exclude=("AWS_*",), from_node=("TMPDIR",))
    assert spec.output_metrics == (NANOGPT_EVAL, NANOGPT_ITER)
    assert spec_of("").setup == () and spec_of("").env_capture == EnvCapture()


@pytest.mark.parametrize(("extra", "message"), [
    ('setup: ["module load a\\nmodule load b"]', "one item is one line"),
    ('setup: "module load a"', "must be a list"),
    ("setup: [3]", "non-empty shell line"),
    ('setup: ["a\\u0000b"]', "one item is one line"),
    ("env_capture: {exclude: [A=B]}", "not a variable name"),
    ("env_capture: {keep: [A]}", "unknown key"),
    ("env_capture: {exclude: PATH}", "must be a list"),
    ("metrics: {from_output: 'step (?P<step>\\d+)'}", "needs at least one named metric group"),
    ("metrics: {from_output: 'step (?P<step>\\d+ (?P<x>'}", "not a valid regular expression"),
    ("metrics: {from_output: 'step (?P<step>\\d+) (?P<t>[\\d.]+)'}", "reserved"),
    ("metrics: {from_output: []}", "1 to 8 regexes"),
    ("metrics: {to_output: x}", "unknown key"),
])
def test_bad_values_are_refused_naming_the_key(extra: str, message: str) -> None:
    assert message in spec_problems(extra)


def test_a_pattern_has_a_size_cap() -> None:
    assert "at most 1000" in pattern_problem("step (?P<step>\\d+) (?P<a>x)" + "y" * 1000)


def test_nanogpt_lines_become_metric_points() -> None:
    lines = [line for line in (FIXTURES / "output_metrics" / "nanogpt.txt").read_text().splitlines()
             if not line.startswith("#")]
    patterns = compile_patterns([NANOGPT_EVAL, NANOGPT_ITER])
    records = [r for line in lines if (r := record_of_line(line, patterns, 1.0)) is not None]
    assert records == [
        {"step": 0, "train_loss": 4.2874, "val_loss": 4.2823, "t": 1.0},
        {"step": 0, "loss": 4.2649, "iter_ms": 31874.47, "mfu": -100.0, "t": 1.0},
        {"step": 10, "loss": 3.2195, "iter_ms": 103.54, "mfu": -100.0, "t": 1.0},
        {"step": 20, "loss": 2.7849, "iter_ms": 104.03, "mfu": 3.6, "t": 1.0},
        {"step": 250, "train_loss": 1.9705, "val_loss": 2.0664, "t": 1.0},
        {"step": 250, "loss": 2.0291, "iter_ms": 12088.1, "mfu": 3.24, "t": 1.0},
        {"step": 500, "train_loss": 1.5435, "val_loss": 1.7256, "t": 1.0},
    ]


def test_a_line_without_a_number_gives_no_point() -> None:
    patterns = compile_patterns([r"step (?P<step>\d+): loss (?P<loss>\S+)"])
    assert record_of_line("step 3: loss nan", patterns, 0.0) is None
    assert record_of_line("step 3: loss -", patterns, 0.0) is None
    assert record_of_line("step 3: loss 1e-3", patterns, 0.0) == {"step": 3, "loss": 0.001, "t": 0.0}
