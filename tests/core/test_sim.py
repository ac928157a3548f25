"""The cluster simulator (core/sim): a tiny cluster checked by hand, backfill, throttles,
preemption, conservation of tasks, and the policy reached only through decide_tick."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import pytest

from campaignctl.adapters.policy_source import load_policy
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.packing.profile import Profile
from campaignctl.core.policy.right_size_section import RightSize
from campaignctl.core.resources import Resources
from campaignctl.core.sim import driver
from campaignctl.core.sim.cluster import Cluster, Node, Partition, default_cluster
from campaignctl.core.sim.driver import attempt_scaled_decider, policy_decider
from campaignctl.core.sim.engine import Engine
from campaignctl.core.sim.scheduler import Array, Job, Queue
from campaignctl.core.sim.setup import Setup
from campaignctl.core.sim.workload import (
    Synthetic,
    Truth,
    WorkloadError,
    draw_truths,
    flaky_nodes,
    lemon_nodes,
    parse_synthetic,
)
from campaignctl.core.spec.settings import CampaignSettings

DEFAULT = load_policy("default", ".")
CALM = Synthetic(oom=0, timeout=0, node_fail=0, preempt=0, exit=0, tempfail=0)  # nothing goes wrong by chance
ONE_NODE = Cluster((Node("node1", 2, 4000),), (Partition("batch", ("node1",), 1), Partition("high", ("node1",), 10)))
BASE = Resources(partition="batch", cpus_per_task=1, mem_mb=1000, time_min=60)


def task(run_min: int, cpus: int = 1, limit_min: int = 60, mem_mb: int = 500) -> Truth:
    return Truth(0, mem_mb, run_min * 60, request=(0, cpus, 1000, limit_min))


def run(truths: tuple[Truth, ...], policy_settings: CampaignSettings | None = None, **setup: object) -> Engine:
    settings = policy_settings or CampaignSettings(tasks=len(truths))
    engine = Engine(Setup(ONE_NODE, BASE, truths, **{"workload": CALM, "seed": 1, **setup}),  # type: ignore[arg-type]
                    policy_decider(DEFAULT, settings))
    engine.run()
    return engine


def starts(engine: Engine) -> list[int | None]:
    return [jobs[0].start for jobs in engine.jobs]


def test_a_hand_checked_tiny_cluster_backfills_a_short_job_around_the_blocked_one() -> None:
    # 1 node × 2 CPUs. Task 0: 1 CPU, 60 min (limit 60) starts at 0. Task 1 wants 2 CPUs: blocked,
    # reserved for t=3600, when task 0's time limit ends. Task 2: 1 CPU, 30 min (limit 30) ends
    # by 1800 ≤ 3600, so EASY backfill starts it at 0, ahead of task 1. Task 1 runs 3600-5400.
    # Makespan 5400 s = 1.5 h; CPU-hours 1×1 + 1×0.5 + 2×0.5 = 2.5.
    engine = run((task(60), task(30, cpus=2, limit_min=30), task(30, limit_min=30)))
    assert starts(engine) == [0, 3600, 0]
    assert engine.tally.makespan_s == 5400
    assert engine.tally.cpu_hours == pytest.approx(2.5)
    assert engine.tally.counts() == Counter({"completed": 3})
    assert engine.tally.wasted_cpu_hours == 0


def test_a_job_whose_time_limit_passes_the_reservation_does_not_backfill() -> None:
    # Task 2 runs 30 min but asks 90: it would still hold the CPU at 3600, when task 1 is due:
    # it waits behind task 1 (3600-5400) and runs 5400-7200.
    engine = run((task(60), task(30, cpus=2, limit_min=30), task(30, limit_min=90)))
    assert starts(engine) == [0, 3600, 5400]
    assert engine.tally.makespan_s == 7200


def test_a_request_lowered_in_place_starts_where_the_old_one_could_not() -> None:
    # One node, 4000 MB. Task 0 (2500 MB) runs; task 1 asks 3000 and waits: a pass stops early,
    # as no node has room (1500) for the least request its array made (2500). right_size lowers
    # task 1 to 1500 in place: the next pass must start it, not stop at the least request as it was.
    array = Array("1", 1, 0, "batch", None)
    jobs = [Job(f"1_{i}", array, i, 1, f"t{i}a1", replace(BASE, mem_mb=mem), 0) for i, mem in enumerate((2500, 3000))]
    for job in jobs:
        array.add(job)
    queue, started, schedule = one_node([array])
    schedule(0)
    assert started == [0]
    schedule(60)
    assert started == [0]
    queue.resize(array, [jobs[1]], replace(BASE, mem_mb=1500))
    schedule(120)
    assert started == [0, 1]


def test_a_requeued_element_of_an_older_array_starts_before_a_younger_array_s() -> None:
    # One node with room for one 2500 MB job. Array 1's only element runs; array 2's waits. The
    # running one is requeued (preempted): older, it must start first, though passes since began
    # past array 1 (nothing of it pended), and array 1 is listed once among the arrays submitted.
    arrays = [Array(str(i), 1, 0, "batch", None) for i in (1, 2)]
    jobs = [Job(f"{a.id}_0", a, i, 1, f"t{i}a1", replace(BASE, mem_mb=2500), 0) for i, a in enumerate(arrays)]
    for array, job in zip(arrays, jobs, strict=True):
        array.add(job)
    queue, started, schedule = one_node(arrays)
    schedule(0)
    schedule(60)
    assert started == [0]
    queue.release(jobs[0])
    queue.requeue(jobs[0])
    schedule(120)
    assert started == [0, 0]
    assert queue.added == arrays


def one_node(arrays: list[Array]) -> tuple[Queue, list[int], Callable[[int], None]]:
    """A queue of ONE_NODE holding `arrays`, the tasks it started in order, and a pass at a time."""
    queue = Queue(ONE_NODE)
    for array in arrays:
        queue.add_array(array)
    started: list[int] = []

    def start(job: Job, node: int) -> None:
        queue.allocate(job, node)
        started.append(job.task)

    return queue, started, lambda now: queue.schedule(now, start, lambda _: None)


def test_an_array_throttle_runs_one_at_a_time() -> None:
    # max_parallel 1 → --array=0-2%1: three 30-minute tasks one after the other on 2 CPUs.
    truths = (task(30), task(30), task(30))
    engine = run(truths, CampaignSettings(tasks=3, max_parallel=1), max_parallel=1)
    assert starts(engine) == [0, 1800, 3600]
    assert engine.tally.makespan_s == 5400
    unthrottled = run(truths)
    assert starts(unthrottled) == [0, 0, 1800]


def test_an_oom_is_retried_with_more_memory_and_a_timeout_with_more_time() -> None:
    # Task 0 needs 1400 MB of its 1000: OUT_OF_MEMORY, retried with 1500 (× 1.5, the default
    # policy); task 1 needs 70 min of its 60: TIMEOUT at 60 min, retried with 90.
    engine = run((Truth(0, 1400, 1800), Truth(0, 500, 70 * 60)))
    assert [j.state for j in engine.jobs[0]] == ["OUT_OF_MEMORY", "COMPLETED"]
    assert [j.res.mem_mb for j in engine.jobs[0]] == [1000, 1500]
    assert [j.state for j in engine.jobs[1]] == ["TIMEOUT", "COMPLETED"]
    assert engine.jobs[1][0].end_at == 3600
    assert engine.jobs[1][1].res.time_min == 90
    assert engine.tally.decisions["out_of_memory → resubmit"] == 1
    assert engine.tally.decisions["timeout → resubmit"] == 1


def test_preemption_by_a_higher_tier_ends_the_attempt_preempted_and_the_node_waits_for_the_preemptor() -> None:
    # Every run is preempted (preempt=1) by a `high` job holding the node 30 min; the job is
    # submitted --no-requeue, so it ends PREEMPTED; the default policy retries preemption 10
    # times without counting it as a failure, then gives up.
    w = Synthetic(oom=0, timeout=0, node_fail=0, preempt=1.0, exit=0, tempfail=0, preemptor_min=30)
    engine = run((task(60, cpus=2),), workload=w)
    attempts = engine.jobs[0]
    assert [j.state for j in attempts] == ["PREEMPTED"] * 11
    assert engine.tally.counts() == Counter({"given_up": 1})
    first, second = attempts[0], attempts[1]
    assert first.end_at is not None and second.start is not None
    assert second.start >= first.end_at + 30 * 60  # the preemptor had the node meanwhile
    assert engine.tally.wasted_cpu_hours == engine.tally.cpu_hours > 0


def test_a_requeueing_policy_keeps_one_job_through_preemptions() -> None:
    # seed 2: the first run is preempted, the second is not (each run draws its own chance)
    w = Synthetic(oom=0, timeout=0, node_fail=0, preempt=0.5, exit=0, tempfail=0)
    engine = run((task(60, cpus=2),), workload=w, requeue=True, seed=2)
    assert len(engine.jobs[0]) == 1  # PreemptMode=REQUEUE: the same job, pending again
    assert engine.jobs[0][0].starts == 2
    assert engine.tally.ends == Counter({"PREEMPTED": 1, "COMPLETED": 1})
    assert engine.tally.counts() == Counter({"completed": 1})


def sim(policy: str, seed: int, tasks: int = 300, workload: Synthetic | None = None,
        max_parallel: int | None = None) -> Engine:
    w = workload or parse_synthetic(f"tasks={tasks},exit=0.05,node_fail=0.05")
    res = Resources(partition="batch", gpus=1, gpu_type="a100", cpus_per_task=2, mem_mb=4000, time_min=120)
    cluster = default_cluster(res, ("a100",))
    truths = draw_truths(w, tasks, res.mem_mb, res.time_min, seed)
    setup = Setup(cluster, res, truths, w, seed, flaky=flaky_nodes(w, len(cluster.nodes), seed),
                  max_parallel=max_parallel)
    decider = attempt_scaled_decider() if policy == "attempt-scaled" else policy_decider(
        DEFAULT, CampaignSettings(tasks=tasks, gpu_types=("a100",), max_parallel=max_parallel))
    engine = Engine(setup, decider)
    engine.run()
    return engine


@pytest.mark.parametrize("policy", ["default", "attempt-scaled"])
def test_every_task_ends_once_and_its_attempts_are_counted(policy: str) -> None:
    engine = sim(policy, seed=5)
    t = engine.tally
    assert set(t.outcome) == set(range(300))
    assert {end for end, _ in t.outcome.values()} <= {"completed", "given_up"}
    resubmits = sum(n for key, n in t.decisions.items() if key.endswith("→ resubmit"))
    assert sum(n for _, n in t.outcome.values()) == 300 + resubmits  # one job per attempt, none lost
    assert sum(t.ends.values()) == t.attempts  # every start ended exactly once
    assert t.counts()["given_up"] == sum(n for key, n in t.decisions.items() if key.endswith("→ give_up"))
    assert t.ends["FAILED"] > 0 and t.ends["NODE_FAIL"] > 0 and t.ends["OUT_OF_MEMORY"] > 0


def test_the_same_seed_gives_the_same_run_and_another_seed_another() -> None:
    a, b, c = sim("default", 7, 200), sim("default", 7, 200), sim("default", 8, 200)
    assert a.tally == b.tally
    assert a.tally.outcome != c.tally.outcome or a.tally.gpu_hours != c.tally.gpu_hours


def test_a_cap_that_never_binds_changes_nothing_and_one_that_binds_holds() -> None:
    """The throttles read the queue's counts, not a view of every waiting task (once, the
    views made a 10,000-task run with max_parallel 19 times slower, and changed its outcome)."""
    free, capped, tight = sim("default", 4, 300), sim("default", 4, 300, max_parallel=10_000), \
        sim("default", 4, 300, max_parallel=8)
    assert capped.tally == free.tally
    assert tight.tally.makespan_s > free.tally.makespan_s and tight.tally.decisions["max_parallel → throttle"] > 0
    assert set(tight.tally.outcome) == set(range(300))


def test_the_default_policy_gives_up_on_a_bug_at_once_and_avoids_flaky_nodes() -> None:
    # exit 1 is not in the default's retry_exit_codes: one attempt per buggy task, where
    # attempt-scaled retries it 3 times; a node failing twice is excluded campaign-wide.
    mine, base = sim("default", 11).tally, sim("attempt-scaled", 11).tally
    # every FAILED answered once: a bug given up, an exit 75 (EX_TEMPFAIL) retried
    assert mine.ends["FAILED"] == mine.decisions["failed → give_up"] + mine.decisions["failed → resubmit"]
    assert mine.decisions["failed → give_up"] > 0
    assert base.ends["FAILED"] >= 3 * mine.decisions["failed → give_up"]
    assert mine.ends["NODE_FAIL"] < base.ends["NODE_FAIL"]


def test_failures_of_different_tasks_on_one_node_in_different_ticks_are_evidence_against_it() -> None:
    """`repeated` counts the tasks that failed on a node within the window, across ticks: a tick
    that decides sees them all, as reconcile's does, not only the one that just failed."""
    bugs = tuple(Truth(0, 500, 3600, bug=True, request=(0, 2, 1000, 120)) for _ in range(3))
    engine = run(bugs)
    assert engine.tally.decisions["failed → give_up"] == 3
    assert engine.tally.decisions["nodes → suspect_node"] >= 1


def test_the_simulator_decides_through_decide_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    real = driver.decide_tick

    def spy(*args: object) -> object:
        seen.append(args)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(driver, "decide_tick", spy)
    run((Truth(0, 1400, 1800),))
    assert seen  # tests/core/test_tick.py: core/sim/driver.py is decide_tick's only caller here


def test_a_raise_reaches_every_pending_element_while_the_policy_is_shown_one_per_array_and_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Task 0 (1 CPU) needs 70 min of its 60: TIMEOUT at 3600 s, retried with 90 (× 1.5). Tasks
    # 1-6 ask 2 CPUs each of the node's 2 and wait behind it, alike, in the same array. Task 1
    # starts as task 0 ends, before the tick; the timeout's raise reaches the five still pending
    # (the default policy resizes pending siblings). The tick that decides it is shown task 0 and
    # one of the five, and all five run with 90 minutes.
    shown = []
    real = driver.decide_tick

    def spy(snapshot: object, *args: object) -> object:
        plan = real(snapshot, *args)  # type: ignore[arg-type]
        if any(d.action == "resize_pending" for d in plan.decisions):
            shown.append(sorted(v.index for v in snapshot.views))  # type: ignore[attr-defined]
        return plan

    monkeypatch.setattr(driver, "decide_tick", spy)
    engine = run((task(70), *(task(30, cpus=2) for _ in range(6))), track=True)
    assert [j.state for j in engine.jobs[0]] == ["TIMEOUT", "COMPLETED"]
    assert [jobs[0].res.time_min for jobs in engine.jobs[1:]] == [60, 90, 90, 90, 90, 90]
    assert all(len(jobs) == 1 and jobs[0].state == "COMPLETED" for jobs in engine.jobs[1:])
    assert shown == [[0, 2]]
    assert engine.tally.decisions["timeout → resize_pending"] == 5  # counted per task, as the log expands it
    assert sorted(t for t, _, a in engine.tally.decided if a == "resize_pending") == [2, 3, 4, 5, 6]


def test_synthetic_keys_are_checked() -> None:
    assert parse_synthetic("tasks=10,oom=0.2").oom == 0.2
    with pytest.raises(WorkloadError, match="unknown synthetic workload key 'ooms'; allowed: tasks, mem_mean"):
        parse_synthetic("ooms=0.1")
    with pytest.raises(WorkloadError, match="oom: 2 is out of range"):
        parse_synthetic("oom=2")


def test_right_size_lowers_the_pending_siblings_once_enough_tasks_ended() -> None:
    # 1 node × 2 CPUs × 4000 MB; 12 tasks of 10 min asking 1000 MB (the spec's) that peak at 300 MB.
    # Memory lets 2 run at once either way (CPUs bind), so the figure that moves is what the
    # pending ones ask: once 6 have ended (min_samples 5; the first tick after 30 min), right_size
    # lowers those still pending (6 less the 2 that started at 30 min) to q0.95 × 1.2 of 300 MB =
    # 360 MB, rounded up to whole 64 MB: 384 MB, once each, and time to q0.95 × 1.3 of 10 min = 13.
    truths = tuple(Truth(0, 300, 600) for _ in range(12))
    policy = replace(DEFAULT, right_size=RightSize(enabled=True, mode="enforce"))
    settings = CampaignSettings(tasks=12, profile=Profile("sim-rs"))
    engine = Engine(Setup(ONE_NODE, BASE, truths, CALM, 1), policy_decider(policy, settings))
    engine.run()
    asked = [jobs[0].res for jobs in engine.jobs]
    assert engine.tally.counts() == Counter({"completed": 12})
    lowered = [r for r in asked if r.mem_mb < BASE.mem_mb]
    assert len(lowered) == 4 and {r.mem_mb for r in lowered} == {384}
    assert all(r.time_min == 13 for r in lowered)
    without = Engine(Setup(ONE_NODE, BASE, truths, CALM, 1), policy_decider(DEFAULT, settings))
    without.run()
    assert all(jobs[0].res.mem_mb == BASE.mem_mb for jobs in without.jobs)


GPU_NODE = Cluster((Node("node1", 2, 4000, 2, "a100"),),
                   (Partition("batch", ("node1",), 1), Partition("high", ("node1",), 10)))
GPU_TASK = Resources(partition="batch", gpus=1, cpus_per_task=1, mem_mb=300, time_min=60)


def test_packs_share_gpus_their_members_end_alone_and_a_pack_s_hours_are_counted_once() -> None:
    # 8 tasks of 1 GPU on one node of 2 GPUs: unpacked, two at a time (4 waves of 10 min);
    # packed 4 to a GPU on 1 CPU each (1200 MB), all 8 at once in two packs. Task 3 needs 400 MB,
    # more than its step's 300M: it ends OUT_OF_MEMORY after 5 min while its neighbours go on,
    # and its retry (alone, 450M) runs once its pack's GPU is free again.
    truths = tuple(Truth(0, 400 if t == 3 else 100, 600) for t in range(8))

    def go(pack: PackShape | None) -> Engine:
        engine = Engine(Setup(GPU_NODE, GPU_TASK, truths, CALM, 1, tick_s=60, pack=pack),
                        policy_decider(DEFAULT, CampaignSettings(tasks=8)))
        engine.run()
        return engine

    alone, packed = go(None), go(PackShape(4, per_gpu=4, cpus=1))
    assert alone.tally.counts() == packed.tally.counts() == Counter({"completed": 8})
    assert [len(jobs) for jobs in packed.jobs] == [1, 1, 1, 2, 1, 1, 1, 1]  # only task 3 ran twice
    first = [jobs[0] for jobs in packed.jobs]
    assert {j.jid for j in first[:4]} == {first[0].jid} and first[4].jid != first[0].jid  # two packs
    assert [j.start for j in first] == [0] * 8 and first[3].state == "OUT_OF_MEMORY"
    retry = packed.jobs[3][1]
    assert retry.host is None and retry.res.mem_mb == 450 and retry.state == "COMPLETED"
    # the pack's allocation held 10 min, task 3's share of it idle after its OOM: allocated, wasted
    assert packed.tally.wasted_by_end["PACK_IDLE"] > 0
    assert packed.tally.gpu_hours < 0.5 * alone.tally.gpu_hours
    assert packed.tally.makespan_s < alone.tally.makespan_s



def test_a_pack_of_plain_processes_runs_two_at_a_time_and_the_next_takes_an_ended_one_s_place() -> None:
    # 6 tasks of 10 min in one pack, 2 at a time, on one GPU node: three rounds, 0, 10, 20 min;
    # task 1 needs 400 MB of its 300M: it ends OUT_OF_MEMORY early, and task 2 starts then
    truths = tuple(Truth(0, 400 if t == 1 else 100, 600) for t in range(6))
    engine = Engine(Setup(GPU_NODE, GPU_TASK, truths, CALM, 1, tick_s=60, pack=PackShape(6, processes=2)),
                    policy_decider(DEFAULT, CampaignSettings(tasks=6)))
    engine.run()
    assert engine.tally.counts() == Counter({"completed": 6})
    first = [jobs[0] for jobs in engine.jobs]
    assert len({j.jid for j in first}) == 1 and first[1].state == "OUT_OF_MEMORY"
    assert first[2].start == first[1].end_at < 600 and (first[3].start, first[5].start) == (600, 1200)
    spans = [(j.start, j.end_at) for j in first]
    assert max(sum(s <= begin < e for s, e in spans) for begin, _ in spans) == 2  # never more than two at once
    assert all(j.share == 0.5 for j in first)  # the element holds two tasks' worth: each is half
    assert engine.jobs[1][1].host is None and engine.jobs[1][1].res.mem_mb == 450  # retried alone

def lemon_run(ledger: bool, lemon: str, seed: int = 3) -> Engine:
    """600 tasks on the default 8 nodes, one of them a lemon, under the default policy with or
    without the node ledger."""
    w = parse_synthetic(f"tasks=600,exit=0,node_fail=0,preempt=0,lemons=1,{lemon}")
    res = Resources(partition="batch", gpus=1, gpu_type="a100", cpus_per_task=2, mem_mb=4000, time_min=120)
    cluster = default_cluster(res, ("a100",))
    setup = Setup(cluster, res, draw_truths(w, 600, res.mem_mb, res.time_min, seed), w, seed,
                  lemons=lemon_nodes(w, len(cluster.nodes), seed))
    policy = DEFAULT if ledger else replace(DEFAULT, nodes=replace(DEFAULT.nodes, enabled=False))
    engine = Engine(setup, policy_decider(policy, CampaignSettings(tasks=600, gpu_types=("a100",))))
    engine.run()
    return engine


def test_the_node_ledger_keeps_work_off_a_lemon_that_fails_what_it_runs() -> None:
    mine, theirs = lemon_run(True, "lemon_fail=0.9"), lemon_run(False, "lemon_fail=0.9")
    assert theirs.tally.decisions["gpu_hardware → resubmit"] > 3 * mine.tally.decisions["gpu_hardware → resubmit"]
    assert mine.tally.lemon_gpu_hours < 0.4 * theirs.tally.lemon_gpu_hours
    assert mine.tally.decisions["nodes → suspect_node"] >= 1
    assert mine.tally.counts() == theirs.tally.counts() == Counter({"completed": 600})


def test_a_slow_lemon_is_found_from_its_completed_attempts() -> None:
    mine, theirs = lemon_run(True, "lemon_fail=0,lemon_slow=3"), lemon_run(False, "lemon_fail=0,lemon_slow=3")
    assert mine.tally.decisions["nodes → suspect_node"] >= 2  # slow twice: excluded
    assert mine.tally.lemon_gpu_hours < theirs.tally.lemon_gpu_hours
