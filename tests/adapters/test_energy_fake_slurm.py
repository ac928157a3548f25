"""Energy through reconcile against a fake Slurm: the sampler's NVML power lines become the
attempt's energy, an energy budget holds the remaining work, and sacct's ConsumedEnergy (where a
site accounts it) wins over NVML. status, results and the metrics export show it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.cli import app
from campaignctl.services.prometheus import export_metrics
from campaignctl.services.reconcile import reconcile
from campaignctl.services.report import report
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.core.test_prometheus import parse_exposition
from tests.fakeslurm import FakeSlurm

SPEC = """\
name: {name}
command: [python3, train.py]
matrix: {{seed: [0, 1, 2]}}
resources: {{gpus: 2, time: "02:00:00"}}
budget: {{energy_kwh: {kwh}, warn_at: 1.0}}
"""


def write_hour_at(folder: Path, watts: tuple[float, float]) -> None:
    """One hour of the sampler's lines, 10 s apart, two GPUs at fixed power."""
    folder.mkdir(parents=True)
    lines = [{"event": "start", "t": 0.0, "interval_s": 10.0, "nvml": "ok", "gpus": [0, 1]}]
    lines += [{"t": 10.0 * i, "cpu_pct": 100.0, "rss_mb": 50.0, "nproc": 2,
               "gpus": [{"index": g, "util_pct": 95, "mem_used_mb": 1000.0, "mem_total_mb": 40960.0,
                         "power_w": w} for g, w in enumerate(watts)]} for i in range(361)]
    lines.append({"event": "end", "t": 3600.5, "samples": 361})
    (folder / "telemetry.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def started(tmp_path: Path, fake_slurm: FakeSlurm, name: str, kwh: float) -> tuple[str, str]:
    submit(write_spec(tmp_path, SPEC.format(name=name, kwh=kwh)))
    [job] = fake_slurm.live_jobs()
    for i in (1, 2):
        fake_slurm.set_state(job.job_id, i, "PENDING", nodes="None assigned")
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    return job.job_id, store.attempts(record.id)[0].token


def test_gpu_energy_past_the_budget_holds_the_remaining_work(tmp_path: Path, fake_slurm: FakeSlurm,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    job, token = started(tmp_path, fake_slurm, "watts", 0.5)
    # Task 0 ran 1 h on two GPUs at 250 W and 300 W: (250 + 300) × 3600 = 1,980,000 J = 0.55 kWh,
    # past the 0.5 kWh budget. The lab accounts no energy: sacct says 0, so NVML is the source.
    write_hour_at(tmp_path / "runs" / "watts" / "tasks" / "0" / token, (250.0, 300.0))
    fake_slurm.set_state(job, 0, "COMPLETED", elapsed="01:00:00")

    reconcile("watts")
    reconcile("watts")  # the second tick must not hold again
    holds = [a for a in fake_slurm.argvs if a[:2] == ("scontrol", "hold")]
    assert holds == [("scontrol", "hold", f"{job}_[1,2]")]
    store = Store.open()
    record = store.campaign("watts")
    assert record is not None and record.state == "paused"
    [hold] = [e for e in DecisionLog(store.engine).entries(record.id) if e.action == "hold"]
    assert hold.reason.startswith("budget reached: energy_kwh 0.55 spent + 0 committed of 0.5 kWh (110%)")

    shown = status("watts")
    assert shown.spend is not None and shown.spend.spent["energy_kwh"] == pytest.approx(0.55)
    assert shown.spend.energy_source == "gpu"
    row = shown.tasks[0]
    assert row.efficiency is not None and row.efficiency.energy_kwh == pytest.approx(0.55)
    compact = CliRunner().invoke(app, ["status", "watts"], env={"COLUMNS": "80"})
    assert "energy_kwh: 0.55 spent (gpu)" in compact.output and "budget reached" in compact.output
    wide = CliRunner().invoke(app, ["status", "watts", "--wide"], env={"COLUMNS": "220"})
    header = next(line for line in wide.output.splitlines() if line.startswith("task"))
    [task0] = [line for line in wide.output.splitlines() if line.split()[:1] == ["0"]]
    assert "kWh" in header and "0.55 gpu" in task0
    results = CliRunner().invoke(app, ["results", "watts", "--wide"], env={"COLUMNS": "200"})
    assert "0.55 gpu" in results.output, results.output
    _, samples = parse_exposition(export_metrics("watts").text)
    c = ("campaign", "watts")
    assert samples[("campaignctl_spend_energy_kwh", (c, ("kind", "spent")))] == pytest.approx(0.55)
    assert samples[("campaignctl_budget_energy_kwh", (c,))] == 0.5
    assert samples[("campaignctl_budget_exhausted", (c,))] == 1
    report("watts", tmp_path / "out")
    page = (tmp_path / "out" / "index.html").read_text()
    assert "<td>energy_kwh</td><td>0.55 spent + 0 committed + 2.2 projected of 0.5 kWh</td>" in page, page
    assert "kWh 0.55 gpu" in page and "<td>0.55 gpu</td>" in page


def test_sacct_node_energy_is_preferred_and_named(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    job, token = started(tmp_path, fake_slurm, "joules", 5.0)
    write_hour_at(tmp_path / "runs" / "joules" / "tasks" / "0" / token, (250.0, 300.0))
    # A site with an energy plugin: reportseff #66's figure, 101630 J = 0.0282 kWh for the node
    # in 122 s, which replaces the GPUs' 0.55 kWh. Measured rate 0.0282 kWh / (122/3600 h) =
    # 0.833 kW: a pending 2 h attempt costs 1.67 kWh, and 5 − 0.0282 kWh pays for both: no hold.
    fake_slurm.set_state(job, 0, "COMPLETED", elapsed="00:02:02", energy="101630")
    reconcile("joules")
    assert not [a for a in fake_slurm.argvs if a[:2] == ("scontrol", "hold")]
    shown = status("joules")
    assert shown.spend is not None and shown.spend.spent["energy_kwh"] == pytest.approx(101630 / 3.6e6)
    assert shown.spend.energy_source == "node"
    assert shown.tasks[0].attempt_energy_kwh == pytest.approx((101630 / 3.6e6,))  # per attempt, in --json too
    assert shown.tasks[1].attempt_energy_kwh == (None,)  # pending: nothing measured
    assert shown.spend.projected["energy_kwh"] == pytest.approx(2 * 2 * 101630 / 3.6e6 / (122 / 3600))
    row = shown.tasks[0]
    assert row.efficiency is not None and row.efficiency.energy_source == "node"
