"""The specs in templates/trainers/ against what the real trainers printed
(tests/fixtures/trainers/SOURCES.md): every line their patterns should read becomes a metric
point, in order, and their argv switches to resuming on a retry."""

from __future__ import annotations

from pathlib import Path

from campaignctl.adapters.yaml_source import load_yaml
from campaignctl.core.model.params import render
from campaignctl.core.spec.spec import CampaignSpec, validate_spec
from campaignctl.core.tuning.output_metrics import compile_patterns, record_of_line
from tests.conftest import REPO

FIXTURES = Path(__file__).parent.parent / "fixtures" / "trainers"


def template(name: str) -> CampaignSpec:
    return validate_spec(load_yaml(REPO / "templates" / "trainers" / name), "/home/u")


def points(spec: CampaignSpec, fixture: str) -> list[dict[str, float | int]]:
    patterns = compile_patterns(spec.output_metrics)
    out: list[dict[str, float | int]] = []
    for line in (FIXTURES / fixture).read_text().splitlines():
        if line.startswith("#"):
            continue
        record = record_of_line(line, patterns, 0.0, int(out[-1]["step"]) if out else -1)
        if record is not None:
            out.append(record)
    return out


def test_word_language_model_curves_never_loop_back_and_its_last_line_counts() -> None:
    spec = template("word_language_model.yaml")
    got = points(spec, "word_language_model.txt")
    assert [p["step"] for p in got] == list(range(15))  # 12 batch lines, 2 epoch ends, the test line
    assert [p.get("valid_loss") for p in got if "valid_loss" in p] == [6.54, 6.04]
    assert got[-1] == {"step": 14, "test_loss": 6.22, "t": 0.0}
    assert spec.objective is not None and (spec.objective.metric, spec.objective.goal) == ("valid_loss", "min")
    assert spec.tasks[1].argv[7] == "/home/u/runs/wordlm/tasks/1/checkpoint/model.pt"  # --save, per task


def test_nanogpt_resumes_from_its_own_checkpoint_directory_on_a_retry() -> None:
    spec = template("nanogpt.yaml")
    first = spec.tasks[0].argv
    retry = render(spec.tasks[0], spec.command, spec.env, None, attempt=2, run_dir=spec.run_dir).argv
    assert "--init_from=scratch" in first and "--init_from=resume" in retry
    out_dir = "--out_dir=/home/u/nanoGPT/runs/nanogpt/tasks/0/checkpoint"
    assert out_dir in first and out_dir in retry
    got = points(spec, "nanogpt_timeout_resume.txt")
    evals = [(p["step"], p["val_loss"]) for p in got if "val_loss" in p]
    assert evals[0] == (1300, 2.2364) and evals[1] == (1200, 2.2535)  # attempt 2 starts from ckpt.pt's step
    assert evals[-1] == (2000, 2.0974)


def test_timm_resumes_only_when_its_last_checkpoint_is_there_and_its_epochs_go_on() -> None:
    spec = template("timm.yaml")
    assert spec.checkpoint == "{checkpoint_dir}/run/last.pth.tar"
    fresh = render(spec.tasks[0], spec.command, spec.env, None, attempt=2, run_dir=spec.run_dir, resume=False).argv
    resumed = render(spec.tasks[0], spec.command, spec.env, None, attempt=2, run_dir=spec.run_dir, resume=True).argv
    assert "--resume" not in fresh  # an empty `{resume?…}` argument is left out, not passed as ""
    at = resumed.index("--resume")
    assert resumed[at + 1] == "/home/u/pytorch-image-models/runs/timm/tasks/0/checkpoint/run/last.pth.tar"
    assert resumed[:at] == fresh
    got = points(spec, "timm_timeout_resume.txt")
    assert [(p["step"], p["train_loss"]) for p in got] == [(11, 0.371), (12, 0.316), (13, 0.322), (14, 0.419)]
