"""An energy budget on the real cluster: real jobs run the sampler with NVML faked at the pynvml
import (the lab's GPUs are /dev/null clones) drawing 250 W and 300 W on their two GPUs. The lab
accounts no energy (AcctGatherEnergyType=acct_gather_energy/none: sacct ConsumedEnergyRaw 0), so
the GPUs' energy is what counts; once the first task has used more than the budget, reconcile
holds the pending elements in Slurm and pauses the campaign."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_store import TelemetryStore
from campaignctl.services.reconcile import reconcile
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import latest, wait_for

pytestmark = pytest.mark.slurm
FAKE_NVML = Path(__file__).parent / "fake_nvml"
NAME = "energy-hold"


def test_gpu_energy_past_the_budget_holds_the_pending_tasks(
        slurm_conf: str, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(FAKE_NVML))  # sbatch exports the environment to the job
    monkeypatch.setenv("FAKE_NVML_POWER_W", "250,300")
    submit(write_spec(tmp_path, f"""\
name: {NAME}
command: [sleep, "8"]
matrix: {{seed: [0, 1, 2]}}
resources: {{gpus: 2, cpus_per_task: 1, mem: 100M, time: "00:05:00"}}
array: {{max_parallel: 1}}
telemetry: {{interval: 1s}}
budget: {{energy_kwh: 0.0005, warn_at: 1.0}}
""", "energy.yaml"))
    store = Store.open()
    record = store.campaign(NAME)
    assert record is not None
    log = DecisionLog(store.engine)
    try:
        def held() -> bool:
            reconcile(NAME)
            return any(e.action == "hold" for e in log.entries(record.id))
        wait_for("an energy budget hold", held, 180)
        wait_for("task 0 to finish", lambda: reconcile(NAME) is not None and latest(NAME)[0].state == "COMPLETED",
                 120)

        [hold] = [e for e in log.entries(record.id) if e.action == "hold"]
        assert hold.status == "applied" and hold.reason.startswith("budget reached: energy_kwh "), hold.reason
        assert hold.inputs["dimension"] == "energy_kwh"
        assert store.campaign(NAME).state == "paused"  # type: ignore[union-attr]
        rows = latest(NAME)
        for task in (1, 2):
            assert rows[task].state == "PENDING"
            shown = proc.run(["scontrol", "show", "job", str(rows[task].job_id)]).stdout
            # `scontrol hold` by root says JobHeldAdmin, by a user JobHeldUser (slurm-lab NOTES)
            assert "Reason=JobHeld" in shown and "Priority=0" in shown, shown

        # By hand: the fake draws 250 W + 300 W = 550 W from the first reading to the last, so
        # the energy is 550 × (last t − first t) joules. The first reading comes one interval
        # after the start, the last after `sleep 8` exits: ~7 s, ~3,850 J ≈ 0.00107 kWh (seen:
        # 3846.65 J over 6.99 s), twice the 0.0005 kWh budget.
        attempt = rows[0]
        path = tmp_path / "runs" / NAME / "tasks" / "0" / attempt.token / "telemetry.jsonl"
        times = [r["t"] for r in map(json.loads, path.read_text().splitlines()) if r.get("gpus") and "event" not in r]
        summary = TelemetryStore(store.engine).load([attempt.id])[attempt.id][1]
        assert summary.gpu_energy_j == pytest.approx(550.0 * (times[-1] - times[0]), rel=1e-3)
        assert 6.0 * 550 < summary.gpu_energy_j < 15.0 * 550 and summary.energy_gap_s == 0.0

        shown_to_user = status(NAME)
        assert shown_to_user.spend is not None and shown_to_user.spend.energy_source == "gpu"
        assert shown_to_user.spend.spent["energy_kwh"] == pytest.approx(summary.gpu_energy_j / 3.6e6)
        wide = cli("status", NAME, "--wide", env_extra={"COLUMNS": "250"})
        assert f"{summary.gpu_energy_j / 3.6e6:.3g} gpu" in wide.stdout, wide.stdout
        assert "energy_kwh:" in wide.stdout and "budget reached" in wide.stdout
    finally:
        for row in latest(NAME).values():
            if row.job_id and row.state in ("PENDING", "RUNNING"):
                proc.run(["scancel", str(row.job_id)])
