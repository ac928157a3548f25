"""A search's rungs: asynchronous successive halving. A trial is promoted as soon as it ranks in
the top ⌊n/η⌋ of its rung's results so far, higher rungs and promotions first, into the free slots."""

from __future__ import annotations

from campaignctl.core.policy.policy import Prices
from campaignctl.core.resources import Resources
from campaignctl.core.spec.rungs import Promotion, Rung
from campaignctl.core.spec.search_spec import Dimension, SearchSpec
from campaignctl.core.tuning.asha import promotable
from campaignctl.core.tuning.ladder import TaskEnd
from campaignctl.core.tuning.search import COMPLETE, RUNNING, Trial, search_decisions
from tests.core.test_search import Counting

TRIALS = 6
SEARCH = SearchSpec((Dimension("lr", "uniform", 0.0, 1.0),), {}, "tpe", "loss", "min", trials=TRIALS, parallel=3)
ETA3 = Promotion("loss", "min", eta=3)
RUNGS = (Rung(0, "screen", {"steps": 2}, Resources(gpus=1, time_min=10), ETA3),
         Rung(1, "mid", {"steps": 6}, Resources(gpus=1, time_min=30), ETA3),
         Rung(2, "full", {"steps": 18}, Resources(gpus=2, time_min=90), None))


def ends(states: dict[int, str]) -> dict[int, TaskEnd]:
    return {task: TaskEnd(task, f"tok.{task}", state) for task, state in states.items()}


def curves(values: dict[int, float]) -> dict[str, dict[int, tuple[tuple[int, float], ...]]]:
    return {"loss": {task: ((1, v),) for task, v in values.items()}}


def test_a_trial_in_the_top_third_of_its_rung_so_far_is_promoted_while_others_still_run() -> None:
    seen = ends({0: "COMPLETED", 1: "COMPLETED", 2: "COMPLETED", 3: "RUNNING", 4: "PENDING"})
    got = promotable(RUNGS, TRIALS, seen, curves({0: 0.5, 1: 0.2, 2: 0.9}), at_end=False)
    assert [(p.trial, p.from_rung, p.rank, p.results, p.keep) for p in got] == [(1, 0, 1, 3, 1)]
    # promoted: its rung-1 task (6 + 1) exists; a fourth result, better still, is promoted on its own
    seen.update(ends({7: "PENDING", 3: "COMPLETED"}))
    got = promotable(RUNGS, TRIALS, seen, curves({0: 0.5, 1: 0.2, 2: 0.9, 3: 0.1}), at_end=False)
    assert [p.trial for p in got] == [3]


def test_fewer_results_than_eta_promote_nobody_until_the_search_has_nothing_else_to_run() -> None:
    seen = ends({0: "COMPLETED", 1: "COMPLETED"})
    assert promotable(RUNGS, TRIALS, seen, curves({0: 0.5, 1: 0.2}), at_end=False) == []
    [last] = promotable(RUNGS, TRIALS, seen, curves({0: 0.5, 1: 0.2}), at_end=True)
    assert (last.trial, last.keep) == (1, 1)


def test_promotions_come_before_new_trials_in_the_free_slots_and_carry_the_trials_params() -> None:
    trials = [Trial(i, {"lr": i / 10}, COMPLETE if i < 3 else RUNNING, 0.5) for i in range(4)]
    seen = ends({0: "COMPLETED", 1: "COMPLETED", 2: "COMPLETED", 3: "RUNNING"})
    out = search_decisions(SEARCH, trials, seen, (), curves({0: 0.5, 1: 0.2, 2: 0.9}), Counting(), False,
                           RUNGS[0].resources, Prices(), None, RUNGS)
    promote, ask = out.decisions
    assert (promote.action, promote.task_index, promote.attempt_token) == ("promote", TRIALS + 1, "tok.1")
    assert promote.params == {"config": 1, "from_rung": 0, "to_rung": 1, "params": {"lr": 0.1}}
    assert promote.resources == RUNGS[1].resources and "ranks 1 of the 3 result(s)" in promote.reason
    assert (ask.action, ask.task_index) == ("ask", 4)  # 3 slots: trial 3 runs, one promoted, one asked
    assert not out.complete


def test_the_search_is_complete_when_every_trial_is_asked_nothing_runs_and_nothing_is_left_to_promote() -> None:
    trials = [Trial(i, {"lr": i / 10}, COMPLETE, 0.5) for i in range(TRIALS)]
    done = {i: "COMPLETED" for i in range(TRIALS)} | {TRIALS + 1: "COMPLETED", TRIALS + 4: "COMPLETED",
                                                      2 * TRIALS + 4: "COMPLETED"}
    values = {i: 0.5 for i in range(TRIALS)} | {1: 0.2, 4: 0.1, TRIALS + 1: 0.3, TRIALS + 4: 0.05}
    out = search_decisions(SEARCH, trials, ends(done), (), curves(values), Counting(), False, RUNGS[0].resources,
                           Prices(), None, RUNGS)
    assert out.decisions == [] and out.complete


def test_a_synchronous_search_promotes_a_rung_only_once_every_trial_settled_in_it() -> None:
    values = {0: 0.5, 1: 0.2, 2: 0.9, 3: 0.1, 4: 0.7, 5: 0.6}
    running = ends({i: "COMPLETED" for i in range(5)} | {5: "RUNNING"})
    assert promotable(RUNGS, TRIALS, running, curves(values), at_end=False, sync=True) == []
    settled = ends({i: "COMPLETED" for i in range(TRIALS)})
    got = promotable(RUNGS, TRIALS, settled, curves(values), at_end=True, sync=True)
    assert [(p.trial, p.from_rung, p.keep) for p in got] == [(3, 0, 2), (1, 0, 2)]
    # asynchronous, the same results promote the same two, without waiting for trial 5
    assert [p.trial for p in promotable(RUNGS, TRIALS, running, curves(values), at_end=False)] == [3]
