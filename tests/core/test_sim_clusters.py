"""`simulate --clusters 2`: the same seeded campaign on two simulated clusters, the first kept busy
by other users' queue, under the three placement policies (all on the first cluster, placed at
submit, placed and moved). Simulated hours, deterministic by seed."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.core.resources import Resources
from campaignctl.core.sim.cluster import default_cluster
from campaignctl.core.sim.clusters import busy_jobs, estimates, several
from campaignctl.core.sim.scheduler import Queue
from campaignctl.services.simulate import simulate

SPEC = """\
name: two
command: [python, train.py, --seed, "{seed}"]
matrix: {seed: [0]}
resources: {gpus: 1, gpu_type: a100, cpus_per_task: 2, mem: 8G, time: "02:00:00"}
clusters: [busy, idle]
"""


def runs(tmp_path: Path, busy: int, seed: int) -> dict[str, tuple[float, dict[str, int], int]]:
    spec = tmp_path / "two.yaml"
    spec.write_text(SPEC)
    result = simulate(spec, ["campaign"], f"synthetic:tasks=400,busy={busy}", seed, None, clusters=2)
    assert result.cluster == "2 × default (busy, idle)" and result.nodes == 16
    return {r.policy.split(" ")[1]: (r.makespan_h, r.outcomes, r.decisions.get("move → cancel", 0))
            for r in result.runs}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_placing_and_moving_finishes_in_at_most_six_tenths_of_one_clusters_makespan(
        tmp_path: Path, seed: int) -> None:
    seen = runs(tmp_path, 16, seed)  # 16 hours of other users' work queued on the first cluster
    one, moved = seen["one-cluster"], seen["placed+moves"]
    assert one[1] == moved[1]  # the same tasks complete (and the same few are given up) either way
    assert moved[0] <= 0.6 * one[0], seen


def test_moves_take_work_back_to_the_busy_cluster_once_its_queue_drains(tmp_path: Path) -> None:
    seen = runs(tmp_path, 8, 1)  # eight hours: the first cluster frees up while the idle one has a queue
    placed, moved = seen["placed"], seen["placed+moves"]
    assert seen["one-cluster"][2] == placed[2] == 0 and moved[2] > 0  # only place-and-move moves
    assert moved[0] < placed[0], seen


def test_estimates_follow_time_limits_in_priority_order() -> None:
    unit = Resources(gpus=1, gpu_type="a100", cpus_per_task=2, mem_mb=8192, time_min=60)
    cluster = several(default_cluster(unit, ("a100",)), ["a", "b"])
    queue = Queue(cluster)
    assert busy_jobs(cluster, ["a", "b"], unit, 2.5) == 160  # 8 nodes × 8 tasks, for 2.5 hours
    pending, new = estimates(queue, "b", 1000, unit)
    assert pending == {} and new == 1000  # an idle cluster starts a new job now
