"""A progressive campaign on the real cluster: 16 configs screened in rung 0, the best quarter
promoted into rung 1 (resuming from their checkpoints), the best half of those into rung 2 with
two GPUs each; exactly the configs the toy's loss curves say, within the budget."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.metrics_store import MetricsStore
from campaignctl.adapters.store import Store
from campaignctl.services.report import report
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import REPO, write_spec
from tests.integration.test_real_cluster import own_jobs_named
from tests.integration.test_reconcile_real import sacct_field, ticking_until_finished, wait_for

pytestmark = pytest.mark.slurm

TOY = REPO / "templates" / "progressive_train.py"
STEPS = (4, 12, 36)  # per rung; each step takes 0.25 s
CONFIGS = 16
# Limits of 3 minutes and more, as a real rung would have: they get the USR2 warning signal
# (Resources.warning_signal_delay_s), which the toy ignores.
BUDGET_GPU_H = 1.5  # rung limits: 16×1 GPU×3 min + 4×1×4 min + 2×2×5 min = 1.4 GPU-h at worst

SPEC = f"""\
name: ladder
command: [{sys.executable}, {TOY}, --config, "{{seed}}", --steps, "{{steps}}"]
matrix: {{seed: [{", ".join(map(str, range(CONFIGS)))}]}}
resources: {{gpus: 1, mem: 150M, time: "00:03:00"}}
budget: {{gpu_hours: {BUDGET_GPU_H}}}
telemetry: {{interval: 0}}
rungs:
  - {{name: screen, params: {{steps: {STEPS[0]}}}, promote: {{metric: loss, goal: min, eta: 4}}}}
  - {{name: grow, params: {{steps: {STEPS[1]}}}, resources: {{time: "00:04:00"}},
     promote: {{metric: loss, goal: min, eta: 2}}}}
  - {{name: full, params: {{steps: {STEPS[2]}}}, resources: {{gpus: 2, time: "00:05:00"}}}}
"""


def toy_loss() -> object:
    spec = importlib.util.spec_from_file_location("toy_train", TOY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.loss_at


def expected_survivors() -> tuple[list[int], list[int]]:
    loss_at = toy_loss()
    rung0 = sorted(range(CONFIGS), key=lambda c: (loss_at(c, STEPS[0]), c))[:CONFIGS // 4]  # type: ignore[operator]
    rung1 = sorted(rung0, key=lambda c: (loss_at(c, STEPS[1]), c))[:len(rung0) // 2]  # type: ignore[operator]
    return rung0, rung1


def test_three_rungs_promote_exactly_the_expected_configs_within_budget(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    wait_for("the queue to be free of earlier tests' jobs", lambda: not own_jobs_named(".cc."), 120)
    survivors0, survivors1 = expected_survivors()
    assert survivors0 == [0, 3, 12, 5] and survivors1 == [0, 5]  # the toy's curves cross: 5 overtakes 3 and 12
    submit(write_spec(tmp_path, SPEC, "ladder.yaml"))
    ticking_until_finished("ladder", timeout_s=420)

    store = Store.open()
    record = store.campaign("ladder")
    assert record is not None
    log = DecisionLog(store.engine)
    promoted = [e for e in log.entries(record.id, actions=("promote",))]
    assert all(e.status == "applied" for e in promoted)
    by_rung = {r: sorted(int(e.params["config"]) for e in promoted if e.params["from_rung"] == r)  # type: ignore[call-overload]
               for r in (0, 1)}
    assert by_rung == {0: sorted(survivors0), 1: sorted(survivors1)}
    assert len(log.entries(record.id, actions=("retire",))) == (CONFIGS - 4) + (4 - 2)
    assert not log.entries(record.id, actions=("hold",))  # the budget let every promotion through

    attempts = store.attempts(record.id)
    started = sorted(a.task_index for a in attempts)
    assert started == [*range(16), *(16 + c for c in sorted(survivors0)), *(32 + c for c in sorted(survivors1))]
    assert all(a.state == "COMPLETED" and a.attempt_number == 1 for a in attempts)
    rung2 = next(a for a in attempts if a.task_index == 32 + survivors1[0])
    assert "gres/gpu=2" in sacct_field(str(rung2.job_id), "AllocTRES")  # the last rung's resources

    # every promoted config resumed from its checkpoint: its curve continues, never restarts
    rows = MetricsStore(store.engine).rows(record.id, "loss")
    steps = {t: [r[2] for r in rows if r[0] == t] for t in {r[0] for r in rows}}
    for c in survivors1:
        assert steps[c] == list(range(1, 5)) and steps[16 + c] == list(range(5, 13))
        assert steps[32 + c] == list(range(13, 37))
    final = {t: [r[4] for r in rows if r[0] == t][-1] for t in steps}
    loss_at = toy_loss()
    assert all(final[t] == loss_at(t % 16, max(steps[t])) for t in final)  # type: ignore[operator]

    shown = status("ladder")
    assert shown.spend is not None and not shown.spend.exhausted
    spent = shown.spend.spent["gpu_hours"]
    assert 0 < spent < BUDGET_GPU_H and shown.spend.limits == {"gpu_hours": BUDGET_GPU_H}
    print(json.dumps({"gpu_hours_spent": spent, "survivors": [survivors0, survivors1]}))

    shown_report = report("ladder", tmp_path / "report")  # metric curves per rung, from this run
    assert shown_report.metric == "loss" and shown_report.charts["chart-metrics"] == ""
    page = Path(shown_report.page).read_text()
    assert all(f">{name}<" in page for name in ("screen", "grow", "full"))  # the rung of each task
    assert all(Path(f).stat().st_size > 1000 for f in shown_report.files)
