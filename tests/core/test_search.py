"""A search's section of the tick: tell each settled trial once, ask into the free slots, behind
the budget gate; nothing asked while paused."""

from __future__ import annotations

from collections.abc import Sequence

from campaignctl.core.decisions.action_records import Tell, record_of
from campaignctl.core.model.params import Scalar
from campaignctl.core.policy.policy import Prices
from campaignctl.core.resources import Resources
from campaignctl.core.spec.search_spec import Dimension, SearchSpec
from campaignctl.core.spec.spec import Budget
from campaignctl.core.tick.budget import assess
from campaignctl.core.tuning.ladder import TaskEnd
from campaignctl.core.tuning.search import COMPLETE, FAIL, PRUNED, RUNNING, Trial, search_decisions, trials_of
from campaignctl.core.usage.cost import Amount, Spend

SEARCH = SearchSpec((Dimension("lr", "uniform", 0.0, 1.0),), {"epochs": 3}, "tpe", "val_loss", "min",
                    trials=5, parallel=2, seed=1)
ONE_GPU = Resources(gpus=1, time_min=60)


class Counting:
    """A sampler that asks lr = 0.1 × (trials it saw + k) and remembers what it saw."""

    def __init__(self) -> None:
        self.seen: list[list[Trial]] = []

    def ask(self, search: SearchSpec, trials: Sequence[Trial], count: int) -> list[dict[str, Scalar]]:
        self.seen.append(list(trials))
        return [{"lr": round(0.1 * (len(trials) + k), 3)} for k in range(count)]

    def generation(self, search: SearchSpec, trials: Sequence[Trial]) -> int | None:
        return None


def spending(gpu_hours: float = 0.0) -> Spend:
    return Spend(Amount(gpu_hours), Amount(), Amount(), 0, 0, Amount())


def curve(*values: float) -> tuple[tuple[int, float], ...]:
    return tuple(enumerate(values))


def plan(trials: Sequence[Trial], ends: dict[int, TaskEnd], curves: dict | None = None, paused: bool = False,
         given_up: Sequence[str] = (), budget: Budget | None = None, spend: Spend | None = None,
         sampler: Counting | None = None):
    assessment = assess(budget, spend or spending()) if budget else None
    return search_decisions(SEARCH, trials, ends, given_up, {"val_loss": curves or {}}, sampler or Counting(), paused,
                            ONE_GPU, Prices(), assessment)


def test_the_first_tick_asks_as_many_trials_as_run_at_once_with_what_the_sampler_saw() -> None:
    out = plan([], {})
    asks = [d for d in out.decisions if d.action == "ask"]
    assert [(d.task_index, d.params["params"]) for d in asks] == [(0, {"lr": 0.0}), (1, {"lr": 0.1})]
    assert asks[0].resources == ONE_GPU and asks[0].inputs["told"] == 0 and "trial 0 of 5" in asks[0].reason


def test_a_settled_trial_is_told_once_its_final_value_and_its_slot_is_asked_again() -> None:
    trials = [Trial(0, {"lr": 0.0}), Trial(1, {"lr": 0.1})]
    ends = {0: TaskEnd(0, "a.0", "COMPLETED"), 1: TaskEnd(1, "a.1", "RUNNING")}
    sampler = Counting()
    out = plan(trials, ends, {0: curve(3.0, 2.0, 1.5)}, sampler=sampler)
    tell, ask = out.decisions
    assert (tell.action, tell.params) == ("tell", {"trial": 0, "state": COMPLETE, "value": 1.5})
    assert (ask.action, ask.task_index) == ("ask", 2)
    # the sampler saw trial 0 told and trial 1 running
    assert [(t.number, t.state, t.value) for t in sampler.seen[0]] == [(0, COMPLETE, 1.5), (1, RUNNING, None)]
    ends[2] = TaskEnd(2, "b.0", "PENDING")  # its attempt, written with the ask
    told_again = plan([Trial(0, {"lr": 0.0}, COMPLETE, 1.5), Trial(1, {"lr": 0.1}), Trial(2, {"lr": 0.2})], ends)
    assert told_again.decisions == []  # told once; both slots taken


def test_given_up_stopped_and_metricless_trials_are_told_failed_or_pruned_never_a_value() -> None:
    trials = [Trial(0, {}), Trial(1, {}), Trial(2, {})]
    ends = {0: TaskEnd(0, "a.0", "FAILED"), 1: TaskEnd(1, "a.1", "CANCELLED", "stop"),
            2: TaskEnd(2, "a.2", "COMPLETED")}
    out = plan(trials, ends, given_up=["a.0"])
    told = {d.task_index: d.typed for d in out.decisions if d.action == "tell"}
    assert told == {0: Tell(0, FAIL), 1: Tell(1, PRUNED), 2: Tell(2, FAIL)}


def test_a_failed_attempt_being_retried_is_not_told() -> None:
    out = plan([Trial(0, {}), Trial(1, {})], {0: TaskEnd(0, "a.0", "NODE_FAIL"), 1: TaskEnd(1, "a.1", "RUNNING")})
    assert [d.action for d in out.decisions] == []  # the cause rules retry it as the same trial


def test_nothing_is_asked_while_paused_but_settled_trials_are_still_told() -> None:
    out = plan([Trial(0, {})], {0: TaskEnd(0, "a.0", "COMPLETED")}, {0: curve(1.0)}, paused=True)
    assert [d.action for d in out.decisions] == ["tell"]


def test_the_search_stops_asking_at_its_trial_count() -> None:
    trials = [Trial(i, {}, COMPLETE, 1.0) for i in range(4)] + [Trial(4, {})]
    assert plan(trials, {4: TaskEnd(4, "a.4", "RUNNING")}).decisions == []


def test_the_budget_gate_asks_only_what_remains_pays_for_and_holds_when_nothing_runs() -> None:
    budget = Budget(gpu_hours=1.5)  # a trial costs up to 1 GPU-h at its time limit
    out = plan([], {}, budget=budget)
    asks = [d for d in out.decisions if d.action == "ask"]
    assert len(asks) == 1 and "the budget pays for 1 of the 2 trials the free slots allow" in asks[0].reason
    spent = spending(1.0)
    held = plan([Trial(0, {}, COMPLETE, 1.0)], {}, budget=budget, spend=spent)
    assert held.pause and [d.action for d in held.decisions] == ["hold"]
    assert "cannot pay for trial 1" in held.decisions[0].reason and "campaignctl resume" in held.decisions[0].reason
    waiting = plan([Trial(0, {})], {0: TaskEnd(0, "a.0", "RUNNING")}, budget=budget, spend=spent)
    assert not waiting.pause and waiting.decisions == []  # what runs is committed: wait for it


def test_trials_are_rebuilt_from_the_logged_asks_and_tells() -> None:
    logged = [("ask", 0, {"trial": 0, "params": {"lr": 0.5}}), ("ask", 1, {"trial": 1, "params": {"lr": 0.2}}),
              ("tell", 0, {"trial": 0, "state": COMPLETE, "value": 0.9}), ("tell", 7, {"trial": 7, "state": FAIL})]
    typed = [(task, record_of(action, raw)) for action, task, raw in logged]
    assert trials_of(typed) == (Trial(0, {"lr": 0.5}, COMPLETE, 0.9), Trial(1, {"lr": 0.2}))


def test_the_report_series_places_each_trial_on_its_ranges_and_keeps_the_best_so_far() -> None:
    from campaignctl.core.tuning.search_series import search_series

    space = SearchSpec((Dimension("lr", "loguniform", 1e-4, 1e-2, log=True), Dimension("opt", "categorical",
                                                                                     choices=("a", "b", "c"))),
                       metric="val_loss", trials=4)
    trials = [Trial(0, {"lr": 1e-3, "opt": "c"}, COMPLETE, 2.0), Trial(1, {"lr": 1e-4, "opt": "a"}, FAIL),
              Trial(2, {"lr": 1e-2, "opt": "b"}, COMPLETE, 1.0), Trial(3, {"lr": 1e-3, "opt": "a"}, COMPLETE, 3.0)]
    series = search_series(space, trials)
    assert [tuple(round(c, 9) for c in p.coords) for p in series.points] == [(0.5, 1.0), (1.0, 0.5), (0.5, 0.0)]
    assert series.best_so_far == ((0, 2.0), (2, 1.0), (3, 1.0)) and series.failed == 1
    assert series.best is not None and series.best.number == 2
