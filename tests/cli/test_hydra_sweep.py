"""A Hydra sweep as a campaign (services/hydra_sweep.py and the launcher plugin): the spec it makes
from the jobs Hydra's sweeper expanded, the name that makes the same command the same campaign,
and the launcher found by Hydra's own plugin discovery."""

from __future__ import annotations

import pytest
import yaml

from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.base.errors import SpecError
from campaignctl.core.model.params import render
from campaignctl.core.spec.spec import validate_spec
from campaignctl.services.hydra_sweep import SweepJob, app_command, sweep_name, sweep_spec

SWEEP = "/home/u/proj/multirun/2026-11-29/10-00-00"
PYTHON = "/home/u/venv/bin/python"


def grid() -> list[SweepJob]:
    return [SweepJob(n, (f"optimizer.lr={lr}", f"seed={seed}", "+trainer.tag='a b'"), f"{SWEEP}/{n}")
            for n, (lr, seed) in enumerate((lr, s) for lr in ("0.1", "1e-3") for s in (0, 1, 2))]


def spec_text(jobs: list[SweepJob], launcher: dict | None = None) -> str:
    return yaml.safe_dump(sweep_spec("app-1", [PYTHON, "/home/u/proj/app.py"], jobs, SWEEP, "/home/u/proj",
                                     launcher or {"resources": {"mem": "4G"}}))


def test_each_hydra_job_is_a_task_that_reruns_the_app_with_its_overrides_in_its_own_output_directory() -> None:
    spec = validate_spec(parse_yaml(spec_text(grid()), "s.yaml"), "/home/u/proj")
    assert len(spec.tasks) == 6 and spec.resources.mem_mb == 4096
    assert spec.tasks[4].argv == (PYTHON, "/home/u/proj/app.py", "optimizer.lr=1e-3", "seed=1", "+trainer.tag='a b'",
                                  f"hydra.run.dir={SWEEP}/4", "hydra.job.num=4")
    assert dict(spec.tasks[4].params) == {"job": 4, "optimizer_lr": "1e-3", "seed": "1", "trainer_tag": "'a b'"}
    # a retry runs the same job in the same directory: Hydra's .hydra/ and the app's checkpoint are there
    retry = render(spec.tasks[4], spec.command, spec.env, None, attempt=2, run_dir=spec.run_dir)
    assert retry.argv == spec.tasks[4].argv
    assert spec.run_dir == f"{SWEEP}/.campaignctl" and spec.workdir == "/home/u/proj"


def test_hydra_interpolations_and_braces_in_overrides_stay_text() -> None:
    jobs = [SweepJob(n, (f"model.name=${{oc.env:USER}}-{n}", "data={a: 1}"), f"{SWEEP}/{n}") for n in range(2)]
    spec = validate_spec(parse_yaml(spec_text(jobs), "s.yaml"), "/home/u/proj")
    assert spec.tasks[1].argv[2:4] == ("model.name=${oc.env:USER}-1", "data={a: 1}")


def test_a_custom_subdir_is_passed_per_job() -> None:
    jobs = [SweepJob(n, (f"lr={lr}",), f"{SWEEP}/lr={lr}") for n, lr in enumerate(("0.1", "0.2"))]
    spec = validate_spec(parse_yaml(spec_text(jobs), "s.yaml"), "/home/u/proj")
    assert spec.tasks[1].argv[-2:] == (f"hydra.run.dir={SWEEP}/lr=0.2", "hydra.job.num=1")


def test_jobs_that_override_different_keys_are_refused_with_the_reason() -> None:
    jobs = [SweepJob(0, ("lr=0.1",), f"{SWEEP}/0"), SweepJob(1, ("seed=2",), f"{SWEEP}/1")]
    with pytest.raises(SpecError, match="Hydra job 1's overrides"):
        spec_text(jobs)


def test_the_launchers_spec_keys_pass_through_and_a_bad_one_is_named_by_campaignctls_own_check() -> None:
    launcher = {"resources": {"gpus": 1, "time": "02:00:00"}, "policy": "default", "budget": {"gpu_hours": 10},
                "tracker": "wandb", "objective": {"metric": "loss", "goal": "min"}, "array": {"max_parallel": 2}}
    spec = validate_spec(parse_yaml(spec_text(grid(), launcher), "s.yaml"), "/home/u/proj")
    assert spec.resources.gpus == 1 and spec.budget.gpu_hours == 10 and spec.max_parallel == 2
    assert spec.trackers == ("wandb",) and spec.objective is not None
    with pytest.raises(SpecError, match=r"resources\.gpu_count: unknown key"):
        validate_spec(parse_yaml(spec_text(grid(), {"resources": {"gpu_count": 1}}), "s.yaml"), "/home/u/proj")


def test_the_same_sweep_has_the_same_name_and_another_sweep_another() -> None:
    command = [PYTHON, "/home/u/proj/app.py"]
    first = sweep_name("app", command, grid(), {"resources": {"mem": "4G"}})
    assert first == sweep_name("app", command, grid(), {"resources": {"mem": "4G"}}) and first.startswith("app-")
    assert first != sweep_name("app", command, grid()[:5], {"resources": {"mem": "4G"}})
    assert first != sweep_name("app", command, grid(), {"resources": {"mem": "8G"}})
    assert sweep_name("app", command, grid(), {"name": "mine"}) == "mine"


def test_the_app_runs_again_as_it_was_run_with_the_flags_that_chose_its_config(tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "train.py"
    argv = [str(script), "-m", "--config-name", "big", "-cp=conf", "lr=0.1,0.2"]
    assert app_command(PYTHON, argv, None) == [PYTHON, str(script), "--config-name", "big", "-cp=conf"]
    assert app_command(PYTHON, argv, "proj.train") == [PYTHON, "-m", "proj.train", "--config-name", "big", "-cp=conf"]


def test_hydra_finds_the_launcher_by_its_plugin_discovery() -> None:
    from hydra.core.plugins import Plugins
    from hydra.plugins.launcher import Launcher

    assert "CampaignctlLauncher" in [p.__name__ for p in Plugins.instance().discover(Launcher)]
