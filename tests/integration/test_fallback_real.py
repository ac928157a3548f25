"""Heterogeneous GPU fallback on the real cluster: with every a100 taken, tasks that prefer a100
but accept v100 are cancelled while still pending and resubmitted on v100, where they run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.integration.test_reconcile_real import latest, sacct_field, ticking_until_finished
from tests.lab_nodes import nodes_with

pytestmark = pytest.mark.slurm


@pytest.fixture
def a100_nodes_full(slurm_conf: str) -> Iterator[None]:
    """Both a100 GPUs of both a100 nodes taken by someone else's long job."""
    jobs = [proc.run(["sbatch", "--parsable", "-J", "fill-a100", "-w", node, "--gres=gpu:a100:2", "-c1",
                      "--mem=100M", "--wrap", "sleep 300"]).stdout.strip() for node in nodes_with("a100")]
    try:
        yield
    finally:
        proc.run(["scancel", *jobs])


def test_tasks_pending_on_a_full_gpu_type_move_to_the_next_type(
        state_home: Path, tmp_path: Path, a100_nodes_full: None) -> None:
    submit(write_spec(tmp_path, """\
name: fallback
command: [python3, -c, "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'))"]
matrix: {seed: [0, 1]}
resources: {gpus: 1, gpu_type: [a100, v100], mem: 100M, time: "00:05:00"}
telemetry: {interval: 0}
policy:
  use: default
  fallback: {after: 3s}
  prices: {gpu_hour: {a100: 3.0, v100: 1.2}}
""", "fallback.yaml"))
    first = {t: r.job_id for t, r in latest("fallback").items()}
    assert len({str(j).partition("_")[0] for j in first.values()}) == 1
    ticking_until_finished("fallback", timeout_s=120)

    store = Store.open()
    record = store.campaign("fallback")
    assert record is not None
    entries = DecisionLog(store.engine).entries(record.id)
    cancels = [e for e in entries if e.action == "cancel"]
    resubmits = [e for e in entries if e.action == "resubmit"]
    assert sorted(e.task_index for e in cancels) == [0, 1] and all(e.rule == "gpu_fallback" for e in cancels)
    assert all(e.status == "applied" and e.inputs["pending_reason"] in ("Resources", "Priority") for e in cancels)
    assert all(e.inputs["free_gpus"]["v100"] >= 1 for e in cancels)  # type: ignore[index]
    assert "gpu_type a100 → v100" in cancels[0].reason
    assert sorted(e.task_index for e in resubmits) == [0, 1] and all(e.rule == "gpu_fallback" for e in resubmits)

    # the a100 array never started: sacct folds it into one record `N_[0-1]`
    first_array = str(first[0]).partition("_")[0]
    assert sacct_field(first_array, "State,NodeList") == "CANCELLED by 0|None assigned"
    for row in latest("fallback").values():
        assert row.attempt_number == 2 and row.state == "COMPLETED"
        assert "gres/gpu:v100=1" in sacct_field(str(row.job_id), "AllocTRES")
        assert sacct_field(str(row.job_id), "NodeList") in nodes_with("v100")
        assert row.exit_code == 0
    failures = [e for e in entries if e.rule in ("cancelled", "failed")]
    assert failures == []  # our own cancel is not a failure of the task
