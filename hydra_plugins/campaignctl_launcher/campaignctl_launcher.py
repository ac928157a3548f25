"""The launcher on Hydra's plugin interface (hydra.plugins.launcher.Launcher) and its config group
entry `hydra/launcher=campaignctl`. Hydra's sweeper has expanded the sweep (grid, ranges) into
jobs before `launch`; this computes each job's output directory as Hydra's own launchers do
(`load_sweep_config` with `hydra.job.num`; directly for the default `${hydra.job.num}`), hands the
jobs to campaignctl and returns a completed JobReturn per job: the job is submitted, not run, and
Hydra's multirun ends at once."""

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict


@dataclass
class CampaignctlLauncherConf:
    _target_: str = "hydra_plugins.campaignctl_launcher.campaignctl_launcher.CampaignctlLauncher"
    name: str | None = None  # the campaign's name; default <hydra.job.name>-<digest of the sweep>
    python: str | None = None  # the interpreter each job runs the app with; default this one
    run_dir: str | None = None  # campaignctl's attempt files; default <sweep dir>/.campaignctl
    # campaign spec keys, as in a campaign YAML (docs/spec.md)
    resources: dict[str, Any] = field(default_factory=dict)
    policy: Any = None
    budget: dict[str, Any] = field(default_factory=dict)
    array: dict[str, Any] = field(default_factory=dict)
    rungs: list[Any] = field(default_factory=list)
    tracker: Any = None
    checkpoint: str | None = None
    env: dict[str, Any] = field(default_factory=dict)
    setup: list[str] = field(default_factory=list)
    objective: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    telemetry: dict[str, Any] = field(default_factory=dict)
    pack: Any = None
    profile: Any = None
    share: dict[str, Any] = field(default_factory=dict)
    env_capture: dict[str, Any] = field(default_factory=dict)
    description: str | None = None


ConfigStore.instance().store(group="hydra/launcher", name="campaignctl", node=CampaignctlLauncherConf,
                             provider="campaignctl")


class CampaignctlLauncher(Launcher):
    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context = config, hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from campaignctl.services.hydra_sweep import SweepJob, app_command, launch_sweep

        assert self.config is not None and self.hydra_context is not None
        sweep_dir = os.path.abspath(str(self.config.hydra.sweep.dir))  # from the cwd, as Hydra's launchers
        subdir = self.config.hydra.sweep._get_node("subdir")
        by_number = subdir is not None and subdir._value() == "${hydra.job.num}"  # as written, unresolved
        jobs = []
        for i, overrides in enumerate(job_overrides):
            num = initial_job_idx + i
            if by_number:  # Hydra's default subdir: no need to compose the job's config (~0.25 s a job)
                output_dir = os.path.join(sweep_dir, str(num))
            else:
                sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
                with open_dict(sweep_config):
                    sweep_config.hydra.job.id = sweep_config.hydra.job.num = num
                output_dir = os.path.join(sweep_dir, str(sweep_config.hydra.sweep.subdir))
            jobs.append(SweepJob(num, tuple(overrides), output_dir))
        settings = OmegaConf.to_container(OmegaConf.create(self.settings), resolve=True)
        assert isinstance(settings, dict)
        settings.pop("_target_", None)
        main = sys.modules["__main__"].__spec__
        command = app_command(settings.pop("python", None) or sys.executable, sys.argv,
                              main.name if main is not None and main.name != "__main__" else None)
        launched = launch_sweep(str(self.config.hydra.job.name), command, jobs, sweep_dir,
                                str(self.config.hydra.runtime.cwd), settings)
        print("\n".join(launched.lines()), flush=True)
        return [JobReturn(overrides=list(job.overrides), working_dir=job.output_dir, status=JobStatus.COMPLETED,
                          task_name=str(self.config.hydra.job.name), _return_value=launched.campaign)
                for job in jobs]
