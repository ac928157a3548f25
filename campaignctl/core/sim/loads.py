"""What the throttles read in a simulated campaign (core/tick/throttle.py), kept as the queue
changes rather than counted from every array each tick. A throttled campaign's retries wait
behind its cap as arrays by the thousand, each at one element at a time; a tick changes a few.
Mutable state, no I/O."""

from __future__ import annotations

from bisect import bisect_left, insort

from campaignctl.core.sim.scheduler import Array, Queue
from campaignctl.core.tick.throttle import ArrayLoad, Loads


class LoadBook:
    """The campaign's arrays with pending elements, by id (the oldest first: ids are numbers in
    one cluster, the only case the simulator counts from its queue), and their running tasks."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        queue.touched = set()  # the queue lists here every array whose elements or throttle change
        self.loads: dict[int, ArrayLoad] = {}
        self.order: list[int] = []  # the ids of `loads`, ascending
        self.held = 0  # the running tasks of the arrays in `loads`
        self.loose: set[int] = set()  # those of `loads` the plan may still change behind a used-up cap
        for array in queue.arrays:
            self._update(array)

    def loads_for(self, running: int, cap: int) -> Loads:
        """`running`: the campaign's running tasks; `cap`: its max_parallel. The oldest arrays until
        their work uses the cap up, and after them only the ones the plan would not pass over: every
        other runs one at a time already (core/tick/throttle.py `plan_throttles`)."""
        self._catch_up()
        spent = running - self.held
        room = cap - spent
        arrays = []
        last = -1
        for n in self.order:
            if room <= 0:
                break
            load = self.loads[n]
            arrays.append(load)
            room -= load.running + load.pending
            last = n
        arrays += [self.loads[n] for n in sorted(n for n in self.loose if n > last)]
        return Loads(tuple(arrays), running, spent)

    def _catch_up(self) -> None:
        touched = self.queue.touched
        assert touched is not None
        for array in touched:
            self._update(array)
        touched.clear()

    def _update(self, array: Array) -> None:
        n = int(array.id)
        old = self.loads.pop(n, None)
        if old is not None:
            self.held -= old.running
            self.loose.discard(n)
        first = next(iter(array.pending.values()), None)
        if first is None or first.task < 0:  # nothing pending, or another user's array
            if old is not None:
                del self.order[bisect_left(self.order, n)]
            return
        load = ArrayLoad(array.id, array.running, len(array.pending), first.task, first.token)
        self.loads[n] = load
        self.held += array.running
        if old is None:
            insort(self.order, n)
        if array.throttle != 1 and array.running + len(array.pending) > 1:
            self.loose.add(n)
