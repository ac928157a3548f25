"""`campaignctl top` beside a real campaign on the lab: with every Slurm client behind a counting
shim on PATH, ten seconds of redraws every half second (headless, Textual's pilot, 80×24) runs no
Slurm command at all, while the view follows the campaign as cron's ticks store it."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from campaignctl.cli.top import store_actions
from campaignctl.cli.top_app import TopApp
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.cli.test_top import shown
from tests.conftest import write_spec
from tests.integration.test_reconcile_real import latest, wait_for

pytestmark = pytest.mark.slurm
CLIENTS = ("sacct", "squeue", "sbatch", "scontrol", "scancel", "sinfo", "sacctmgr", "srun", "sdiag")


def counting_shims(folder: Path, log: Path) -> str:
    """A folder of `sacct` … scripts that log their call and run the real one; its PATH."""
    folder.mkdir()
    for client in CLIENTS:
        real = shutil.which(client)
        if real is None:
            continue
        shim = folder / client
        shim.write_text(f'#!/bin/sh\necho "{client} $*" >> "{log}"\nexec "{real}" "$@"\n')
        shim.chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


def test_top_redraws_from_the_store_with_no_slurm_call(
        slurm_conf: str, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    submit(write_spec(tmp_path, """\
name: watched
command: [python3, -c, "import time; time.sleep(40)"]
matrix: {i: [0, 1, 2]}
resources: {cpus_per_task: 1, mem: 100M, time: "00:05:00"}
"""))
    wait_for("the tasks to run", lambda: (reconcile("watched"), all(
        r.state == "RUNNING" for r in latest("watched").values()))[1], 120)
    calls = tmp_path / "slurm-calls.log"
    monkeypatch.setenv("PATH", counting_shims(tmp_path / "shims", calls))
    assert shutil.which("sacct") == str(tmp_path / "shims" / "sacct")

    async def drive() -> str:
        app = TopApp("watched", store_actions(), interval_s=0.5)
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(20):
                await pilot.pause(0.5)
            screen = shown(app)
            await pilot.press("ctrl+c")
        return screen

    screen = asyncio.run(drive())
    assert "3 tasks (RUNNING 3)" in screen and "last decisions" in screen
    assert not calls.exists(), calls.read_text()  # not one Slurm command in ten seconds of redraws
    reconcile("watched")  # the shims do count: a tick through them is seen
    assert calls.exists() and "sacct" in calls.read_text()
