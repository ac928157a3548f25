"""Which config won, on the real cluster: a three-config grid built with the Python API runs as
one array; each config reports val_loss with campaignctl.report(); reconcile brings it to
finished; `campaignctl results --json` ranks the configs by their last and by their best value,
with efficiency figures from sacct and the task's telemetry, and the API reads the same rows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from campaignctl import api
from campaignctl.adapters import proc
from campaignctl.adapters.store import Store
from tests.integration.test_real_cluster import cli, own_jobs_named
from tests.integration.test_reconcile_real import latest, sacct_field, ticking_until_finished, wait_for

pytestmark = pytest.mark.slurm
NAME = "results16-real"
SCALE = {0: 1.0, 1: 0.5, 2: 2.0}
DIP = {0: 10.0, 1: 10.0, 2: 100.0}  # step 3 dips to scale / DIP: config 2's best is the lowest

# loss = scale / step, except at step 3 where it dips to scale / dip; last (step 5) = scale / 5
TOY = f"""\
import sys, time
from campaignctl import report  # the test's own interpreter runs the job: campaignctl is installed
config = int(sys.argv[1])
scale, dip = {SCALE}[config], {DIP}[config]
for step in range(1, 6):
    busy_until = time.time() + 1
    while time.time() < busy_until:  # one core busy: what the CPU figure should show
        pass
    report(step=step, val_loss=scale / dip if step == 3 else scale / step)
"""


def results_json(*args: str) -> list[dict]:
    shown = cli("results", NAME, "--json", *args)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["data"]["rows"]


def test_results_rank_a_real_grid_by_last_and_best_value_with_efficiency(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    (tmp_path / "toy.py").write_text(TOY)
    campaign = api.Campaign(name=NAME, command=[sys.executable, "toy.py", "{config}"],
                            matrix={"config": [0, 1, 2]}, telemetry={"interval": 1},
                            resources={"cpus_per_task": 1, "mem": "200M", "time": "00:05:00"}, workdir=tmp_path)
    assert campaign.submit(reason="results16 real-cluster test").outcome == "created"
    try:
        ticking_until_finished(NAME, timeout_s=240)
    finally:
        for row in latest(NAME).values():
            if row.job_id and row.state in ("PENDING", "RUNNING"):
                proc.run(["scancel", row.job_id.split("_")[0]], check=False)

    rows = {r["config"]: r for r in results_json()}
    print("\n" + cli("results", NAME).stdout)
    job = latest(NAME)[0].job_id or ""
    print(f"sacct {job}: {sacct_field(job, 'JobID,State,Elapsed,Timelimit,AllocTRES')}")
    assert {c: (r["state"], r["metric"]) for c, r in rows.items()} == {c: ("COMPLETED", "val_loss") for c in SCALE}
    assert {c: r["final"] for c, r in rows.items()} == pytest.approx({c: s / 5 for c, s in SCALE.items()})
    assert {c: r["best"] for c, r in rows.items()} == pytest.approx({c: SCALE[c] / DIP[c] for c in SCALE})
    assert [r["config"] for r in results_json()] == [1, 0, 2]  # by the last value: 0.1, 0.2, 0.4
    assert [r["config"] for r in results_json("--by", "best")] == [2, 1, 0]  # best: 0.02, 0.05, 0.1
    for config, row in rows.items():
        elapsed = int(sacct_field(latest(NAME)[config].job_id or "", "ElapsedRaw"))
        assert row["time_eff"] == pytest.approx(elapsed / 300, abs=1e-4) and row["time_eff"] > 0  # 4 digits
        assert row["mem_eff"] is not None and 0 < row["mem_eff"] < 1  # peak RSS of the 200M allocated
        # its one core kept busy, a fraction of the ONE allocated core (this 2-core machine is shared:
        # 0.35 was seen under load); never "% of one core" summed (> 1)
        assert 0.1 < row["cpu_eff"] <= 1.05 and row["gpu_util"] is None  # no GPU asked for
        assert row["param.config"] == config  # the param named like the fixed column
        assert row["gpu_hours"] == 0 and row["attempts"] == 1

    assert api.results(NAME) == results_json()  # the API reads what the CLI prints
    store = Store.open()
    record = store.campaign(NAME)
    assert record is not None and record.run_dir == str(tmp_path / "runs" / NAME)
    assert store.revision(record.id, 1).spec_text == campaign.yaml
    assert api.status(NAME)["campaigns"][0]["efficiency"]["time"] > 0  # type: ignore[index]
    wait_for("its jobs to leave the queue", lambda: not own_jobs_named(NAME), timeout_s=30)
