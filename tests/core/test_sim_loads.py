"""What a simulated campaign's throttles read (core/sim/loads.py): kept as the queue changes, and
leaving out only the arrays the throttle plan would pass over."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from campaignctl.core.resources import Resources
from campaignctl.core.sim.cluster import Cluster, Node, Partition
from campaignctl.core.sim.loads import LoadBook
from campaignctl.core.sim.scheduler import Array, Job, Queue
from campaignctl.core.tick.throttle import ArrayLoad, Loads, plan_throttles

BIG = Cluster((Node("node1", 4096, 1 << 30),), (Partition("batch", ("node1",), 1),))
ONE_CPU = Resources(partition="batch", cpus_per_task=1, mem_mb=1, time_min=60)


def filled(queue: Queue, elements: int, throttle: int | None, task: int = 0) -> Array:
    """An array of `elements` pending tasks from `task` on, listed in `queue`."""
    array = Array(str(len(queue.added) + 1), 1, 0, "batch", throttle)
    for i in range(elements):
        array.add(Job(f"{array.id}_{i}", array, task + i, 1, f"t{task + i}a1", ONE_CPU, 0))
    queue.add_array(array)
    return array


def start(queue: Queue, array: Array) -> None:
    job = next(iter(array.pending.values()))
    queue.allocate(job, 0)
    array.remove(job)  # as a scheduling pass does: allocated, then off the pending list


def every_array(queue: Queue, running: int) -> Loads:
    """The loads as the live tick counts them (core/tick/throttle.py `loads_of`): every array."""
    arrays = []
    for array in queue.arrays:
        first = next(iter(array.pending.values()), None)
        if first is not None:
            arrays.append(ArrayLoad(array.id, array.running, len(array.pending), first.task, first.token))
    return Loads(tuple(arrays), running)


def test_an_array_s_load_is_read_again_once_it_changes() -> None:
    queue = Queue(BIG)
    book = LoadBook(queue)
    array = filled(queue, 3, 1)
    before = book.loads_for(0, 1)
    assert [(a.running, a.pending, a.first_pending_task) for a in before.arrays] == [(0, 3, 0)]
    start(queue, array)
    after = book.loads_for(1, 1)
    assert [(a.running, a.pending, a.first_pending_task) for a in after.arrays] == [(1, 2, 1)]
    assert after.spent == 0  # its running task belongs to an array with work left to start


def test_arrays_already_one_at_a_time_behind_a_used_up_cap_are_left_out() -> None:
    # Cap 4: the first array (10 elements) uses it up; of the retries behind it, the one at
    # throttle 1 and the one with a single element are passed over, the unthrottled one is not.
    queue = Queue(BIG)
    book = LoadBook(queue)
    first = filled(queue, 10, 4)
    for _ in range(4):
        start(queue, first)
    filled(queue, 3, 1, task=10)
    filled(queue, 1, None, task=13)
    loose = filled(queue, 2, None, task=14)
    loads = book.loads_for(4, 4)
    assert [a.array_job_id for a in loads.arrays] == [first.id, loose.id]
    (decision,) = plan_throttles(loads, {a.id: a.throttle for a in queue.arrays}, 4)
    assert decision.typed.array_job_id == loose.id and decision.typed.throttle == 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 6), st.sampled_from((None, 1, 2, 5))),
                min_size=1, max_size=8),
       st.integers(1, 12), st.integers(0, 3))
def test_the_throttle_plan_over_the_book_is_the_plan_over_every_array(
        shapes: list[tuple[int, int, int | None]], cap: int, drained: int) -> None:
    # Arrays of various sizes, some of their elements started, throttles of every kind, and some
    # arrays that ran everything (their running tasks are spent): the book's partial loads must
    # plan exactly the throttle changes the loads of every array do.
    queue = Queue(BIG)
    book = LoadBook(queue)
    task = running = 0
    for elements, started, throttle in [(2, 2, None)] * drained + shapes:
        array = filled(queue, elements, throttle, task)
        task += elements
        for _ in range(min(started, elements)):
            start(queue, array)
            running += 1
    throttles = {a.id: a.throttle for a in queue.arrays}
    whole = plan_throttles(every_array(queue, running), throttles, cap)
    kept = plan_throttles(book.loads_for(running, cap), throttles, cap)
    assert [(d.task_index, d.attempt_token, d.typed) for d in kept] == \
           [(d.task_index, d.attempt_token, d.typed) for d in whole]
