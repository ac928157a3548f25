"""The budget gates promotion on the real cluster: a rung the budget cannot pay for is held (the
campaign pauses, nothing is submitted), and after the budget is raised and the campaign resumed,
the next tick promotes exactly the configs the toy's curves say and the campaign finishes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.services.reconcile import reconcile
from campaignctl.services.resume import resume
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.integration.test_ladder_real import TOY, toy_loss
from tests.integration.test_real_cluster import cli, own_jobs_named
from tests.integration.test_reconcile_real import sacct_field, ticking_until_finished, wait_for

pytestmark = pytest.mark.slurm

CONFIGS = 4
# rung 0: 4 × 1 GPU × 3 min = 0.2 GPU-h at worst; rung 1 keeps 2: 2 × 2 GPUs × 10 min = 0.67 GPU-h
SPEC = f"""\
name: gate
command: [{sys.executable}, {TOY}, --config, "{{seed}}", --steps, "{{steps}}"]
matrix: {{seed: [0, 1, 2, 3]}}
resources: {{gpus: 1, mem: 150M, time: "00:03:00"}}
budget: {{gpu_hours: {{budget}}}}
telemetry: {{interval: 0}}
rungs:
  - {{name: screen, params: {{steps: 4}}, promote: {{metric: loss, goal: min, eta: 2}}}}
  - {{name: full, params: {{steps: 8}}, resources: {{gpus: 2, time: "00:10:00"}}}}
"""


def test_a_promotion_the_budget_cannot_pay_is_held_until_the_budget_is_raised(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    wait_for("the queue to be free of earlier tests' jobs", lambda: not own_jobs_named(".cc."), 120)
    loss_at = toy_loss()
    expected = sorted(sorted(range(CONFIGS), key=lambda c: (loss_at(c, 4), c))[:2])  # type: ignore[operator]
    submit(write_spec(tmp_path, SPEC.replace("{budget}", "0.5"), "gate.yaml"))
    store = Store.open()
    record = store.campaign("gate")
    assert record is not None
    log = DecisionLog(store.engine)

    def held() -> bool:
        reconcile("gate")
        return bool(log.entries(record.id, actions=("hold",)))
    wait_for("rung 0 to settle and its promotion to be held", held, 240)
    [hold] = log.entries(record.id, actions=("hold",))
    assert hold.rule == "promotion" and hold.status == "applied"
    assert "into rung 1 would cost up to 0.6667 GPU-h but only" in hold.reason, hold.reason
    assert Store.open().campaign("gate").state == "paused"  # type: ignore[union-attr]
    assert not log.entries(record.id, actions=("promote", "retire"))
    reconcile("gate")  # paused: nothing is submitted, and the hold is not asked again
    assert not own_jobs_named("gate") and len(log.entries(record.id, actions=("hold",))) == 1
    assert sorted(a.task_index for a in store.attempts(record.id)) == list(range(CONFIGS))

    submit(write_spec(tmp_path, SPEC.replace("{budget}", "1.0"), "gate.yaml"))  # a new revision
    resume("gate", reason="budget raised for the full rung")
    ticking_until_finished("gate", timeout_s=240)

    promoted = log.entries(record.id, actions=("promote",))
    assert sorted(int(e.params["config"]) for e in promoted) == expected  # type: ignore[call-overload]
    assert all(e.status == "applied" for e in promoted)
    attempts = store.attempts(record.id)
    assert sorted(a.task_index for a in attempts) == [*range(CONFIGS), *(CONFIGS + c for c in expected)]
    assert all(a.state == "COMPLETED" for a in attempts)
    full = next(a for a in attempts if a.task_index == CONFIGS + expected[0])
    assert "gres/gpu=2" in sacct_field(str(full.job_id), "AllocTRES")
    shown = status("gate")
    assert shown.spend is not None and 0 < shown.spend.spent["gpu_hours"] < 1.0


def test_a_rung_the_cluster_cannot_run_is_refused_at_submit_with_slurms_reason(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    # the lab's nodes have 2 GPUs each (a100 on node1-2, v100 on node3-4): no node can run a
    # 4-GPU task, and there is no h100 at all. sbatch would take rung 0 and refuse the
    # promotions only hours later, from cron; `sbatch --test-only` at submit says so now.
    spec = (SPEC.replace("{budget}", "5")
            .replace('resources: {gpus: 2, time: "00:10:00"}', 'resources: {gpus: 4, time: "00:10:00"}'))
    assert "gpus: 4" in spec
    path = write_spec(tmp_path, spec, "gate.yaml")
    done = cli("submit", str(path))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "rungs[1] (full): Slurm would refuse its tasks: Requested node configuration is not available" \
        in done.stderr
    assert "nothing was submitted" in done.stderr and "Traceback" not in done.stderr
    assert Store.open().campaign("gate") is None and not own_jobs_named("gate")
    dry = cli("submit", str(path), "--dry-run")  # a dry run shows the refusal as a note
    assert dry.returncode == 0 and "Requested node configuration is not available" in dry.stdout

    fits = write_spec(tmp_path, SPEC.replace("{budget}", "5").replace("gpus: 2,", "gpus: 2, gpu_type: v100,"),
                      "fits.yaml")
    assert "gpu_type: v100" in fits.read_text()
    assert cli("submit", str(fits), "--dry-run").returncode == 0
    assert "would refuse" not in cli("submit", str(fits), "--dry-run").stdout
