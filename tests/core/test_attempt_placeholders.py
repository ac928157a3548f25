"""`{attempt}`, `{task_index}`, `{checkpoint_dir}` and `{resume?THEN:ELSE}`: what a retry or a
promoted rung runs, with the flags of real trainers (nanoGPT's `--init_from=resume|scratch` and
`--out_dir`, pytorch/examples word_language_model's `--save`)."""

from __future__ import annotations

import pytest

from campaignctl.core.model.params import render
from tests.core.test_spec import problems_of, spec_of

NANOGPT = """\
name: gpt
command: [python, train.py, "--out_dir={checkpoint_dir}", "--init_from={resume?resume:scratch}",
          "--learning_rate={lr}", "{resume?--seed_offset=1}"]
matrix: {lr: [0.001, 0.0006]}
env: {RUN_NAME: "gpt-{task_index}-a{attempt}"}
"""


def test_a_first_attempt_starts_from_scratch_in_its_own_checkpoint_directory() -> None:
    spec = spec_of(NANOGPT)
    assert spec.tasks[1].argv == ("python", "train.py", "--out_dir=/home/u/proj/runs/gpt/tasks/1/checkpoint",
                                  "--init_from=scratch", "--learning_rate=0.0006")
    assert spec.tasks[1].env == {"RUN_NAME": "gpt-1-a1"}


def test_a_retry_resumes_and_keeps_the_checkpoint_directory() -> None:
    spec = spec_of(NANOGPT)
    retry = render(spec.tasks[1], spec.command, spec.env, None, attempt=2, run_dir=spec.run_dir)
    assert retry.argv == ("python", "train.py", "--out_dir=/home/u/proj/runs/gpt/tasks/1/checkpoint",
                          "--init_from=resume", "--learning_rate=0.0006", "--seed_offset=1")
    assert retry.env == {"RUN_NAME": "gpt-1-a2"}
    # a rule's new parameter and the attempt's values together
    bigger = render(spec.tasks[0], spec.command, spec.env, {"lr": 0.01}, attempt=3, run_dir=spec.run_dir)
    assert bigger.argv[3:5] == ("--init_from=resume", "--learning_rate=0.01")


def test_a_promoted_rung_resumes_its_configs_checkpoint() -> None:
    spec = spec_of("""\
name: lm
command: [python, main.py, "--save", "{checkpoint_dir}/model.pt", "--epochs", "{epochs}", "{resume?--resume}"]
matrix: {lr: [20, 5]}
rungs: [{params: {epochs: 1}, promote: {metric: loss, goal: min, eta: 2}}, {params: {epochs: 3}}]
""")
    first, promoted = spec.tasks[1], spec.tasks[3]
    assert first.argv == ("python", "main.py", "--save", "/home/u/proj/runs/lm/tasks/1/checkpoint/model.pt",
                          "--epochs", "1")
    assert promoted.argv == ("python", "main.py", "--save", "/home/u/proj/runs/lm/tasks/1/checkpoint/model.pt",
                             "--epochs", "3", "--resume")


@pytest.mark.parametrize(("line", "fragment"), [
    ('command: [x, "{attempts}"]', "{attempts} is not a parameter of every task; parameters: depth, lr; "
                                   "every attempt also has {attempt}"),
    ('command: [x, "{resumed?a:b}"]', "bad placeholder 'resumed?a:b'"),
    ("matrix: {attempt: [1, 2]}", "attempt is a parameter name campaignctl fills itself"),
    ('command: [x, "{resume?{resume?a}}"]', "a {resume?…} cannot hold another"),
    ('command: [x, "{resume?{nope}}"]', "{nope} is not a parameter of every task"),
    ('checkpoint: "{checkpoint_dir}/{attempt}.pt"', "{attempt} cannot be used here; a checkpoint path may use "
                                                   "{checkpoint_dir}, {task_index}, {depth}, {lr}"),
    ("checkpoint: 5", "checkpoint: must be a string"),
    ("checkpointt: x", "did you mean checkpoint"),
])
def test_attempt_placeholders_are_validated_at_submit(line: str, fragment: str) -> None:
    text = "name: t\ncommand: [x, '{lr}']\nmatrix: {lr: [1], depth: [2]}\n"
    key = line.split(":", 1)[0]
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith(f"{key}:")) + "\n" + line + "\n"
    assert fragment in problems_of(text)


TIMM = """\
name: timm
command: [python, train.py, /data, --output, "{checkpoint_dir}", --experiment, run, --lr, "{lr}",
          "{resume?--resume}", "{resume?{checkpoint_dir}/run/last.pth.tar}"]
checkpoint: "{checkpoint_dir}/run/last.pth.tar"
matrix: {lr: [0.1, 0.05]}
"""


def test_then_and_else_may_hold_placeholders_so_a_resume_path_is_written_directly() -> None:
    spec = spec_of(TIMM)
    first = spec.tasks[1]
    assert first.argv == ("python", "train.py", "/data", "--output", "/home/u/proj/runs/timm/tasks/1/checkpoint",
                          "--experiment", "run", "--lr", "0.05")
    resumed = render(first, spec.command, spec.env, None, attempt=2, run_dir=spec.run_dir, resume=True)
    assert resumed.argv[-2:] == ("--resume", "/home/u/proj/runs/timm/tasks/1/checkpoint/run/last.pth.tar")
    # the runner chooses: a retry that finds nothing runs the first side
    over = render(first, spec.command, spec.env, None, attempt=2, run_dir=spec.run_dir, resume=False)
    assert over.argv == first.argv
    assert spec.checkpoint == "{checkpoint_dir}/run/last.pth.tar"


def test_each_launch_carries_both_sides_and_the_filled_checkpoint_mark() -> None:
    from campaignctl.core.slurm.plan import ArrayChunk
    from campaignctl.services.dispatch import launches
    spec = spec_of(TIMM)
    [launch] = launches(spec, "tok", ArrayChunk((1,), None), [2])
    assert launch.resume_check == "/home/u/proj/runs/timm/tasks/1/checkpoint/run/last.pth.tar"
    assert "--resume" not in launch.argv and launch.resume_argv[-2] == "--resume"
