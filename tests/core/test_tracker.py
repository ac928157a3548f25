"""`tracker:` and `{run_id}`: one tracker run per task, the same on every attempt and rung of its
config, distinct between campaigns and users (core/model/tracker.py)."""

from __future__ import annotations

import re

from campaignctl.core.model.params import render
from campaignctl.core.model.tracker import run_identity
from tests.core.test_spec import problems_of, spec_of

WANDB_SPEC = """\
name: sweep
command: [python, train.py, --lr, "{lr}", --run, "{run_id}"]
matrix: {lr: [0.1, 0.01]}
tracker: wandb
rungs: [{params: {epochs: 1}, promote: {metric: loss, goal: min, eta: 2}}, {params: {epochs: 3}}]
"""


def test_a_tasks_run_id_is_the_same_on_a_retry_and_a_promoted_rung_and_differs_between_configs() -> None:
    spec = spec_of(WANDB_SPEC)
    first, other, promoted = spec.tasks[0], spec.tasks[1], spec.tasks[2]  # config 0 rung 0, config 1, config 0 rung 1
    run_id = first.env["WANDB_RUN_ID"]
    assert first.argv[-1] == run_id and other.env["WANDB_RUN_ID"] != run_id
    retry = render(first, spec.command, spec.env, None, attempt=3, run_dir=spec.run_dir)
    assert retry.env["WANDB_RUN_ID"] == run_id and retry.argv[-1] == run_id
    assert promoted.env["WANDB_RUN_ID"] == run_id
    assert first.env["WANDB_RESUME"] == "allow" and first.env["WANDB_RUN_GROUP"] == "sweep"


def test_run_ids_differ_between_users_and_campaigns_and_are_what_wandb_accepts() -> None:
    alice, bob = run_identity("/home/alice/runs/sweep", 0), run_identity("/home/bob/runs/sweep", 0)
    assert alice != bob and alice.startswith("sweep-") and alice.endswith("-0")
    long = run_identity("/scratch/" + "x" * 200 + "/a b:c#d", 12345)
    assert len(long) <= 64 and re.fullmatch(r"[A-Za-z0-9_-]+", long) and long.endswith("-12345")


def test_the_specs_own_env_wins_over_the_trackers_defaults() -> None:
    spec = spec_of(WANDB_SPEC + "env: {WANDB_RUN_GROUP: my-group, WANDB_MODE: offline}\n")
    assert spec.tasks[0].env["WANDB_RUN_GROUP"] == "my-group" and spec.tasks[0].env["WANDB_MODE"] == "offline"


def test_mlflow_sets_no_env_in_the_spec_its_run_is_made_by_the_first_attempt() -> None:
    spec = spec_of("name: m\ncommand: [python, t.py]\ntracker: [mlflow]\n")
    assert spec.trackers == ("mlflow",) and spec.tasks[0].env == {}


def test_bad_tracker_values_say_what_is_allowed() -> None:
    assert "'neptune' is not a tracker campaignctl knows; use one of: wandb, mlflow" in problems_of(
        "name: m\ncommand: [python, t.py]\ntracker: neptune\n")
    assert "line 3: tracker[1]: wandb is named twice" in problems_of(
        "name: m\ncommand: [python, t.py]\ntracker: [wandb, wandb]\n")
    assert "must be one of wandb, mlflow or a list of them" in problems_of(
        "name: m\ncommand: [python, t.py]\ntracker: {kind: wandb}\n")


def test_run_id_is_a_name_campaignctl_fills_itself() -> None:
    assert "run_id is a parameter name campaignctl fills itself" in problems_of(
        "name: m\ncommand: [python, t.py]\nmatrix: {run_id: [1, 2]}\n")
