"""Optuna through ask-and-tell in memory, rebuilt from the trials on every ask: the same search
and trials ask the same values; another seed asks others; asks of one tick differ; told trials
steer TPE; QMC walks one Sobol sequence."""

from __future__ import annotations

import math

import pytest

from campaignctl.adapters.optuna_sampler import OptunaSampler
from campaignctl.core.spec.search_spec import Dimension, SearchSpec
from campaignctl.core.tuning.search import COMPLETE, FAIL, Trial

SPACE = (Dimension("lr", "loguniform", 1e-5, 1e-1, log=True), Dimension("width", "int", 16, 256),
         Dimension("opt", "categorical", choices=("adam", "sgd")))


def search(sampler: str, seed: int = 1) -> SearchSpec:
    return SearchSpec(SPACE, {}, sampler, "val_loss", "min", trials=40, parallel=4, seed=seed)


def loss(p: dict) -> float:
    return (math.log10(p["lr"]) + 3) ** 2 + ((p["width"] - 96) / 64) ** 2 + (p["opt"] == "sgd")


@pytest.mark.parametrize("kind", ["random", "tpe", "qmc", "cmaes"])
def test_the_same_trials_ask_the_same_values_and_values_lie_in_the_space(kind: str) -> None:
    told = [Trial(i, p, COMPLETE, loss(p)) for i, p in enumerate(OptunaSampler().ask(search(kind), [], 3))]
    first = OptunaSampler().ask(search(kind), told, 3)
    assert first == OptunaSampler().ask(search(kind), told, 3)
    assert len({repr(p) for p in first}) == 3  # a tick's asks differ
    for p in first:
        assert 1e-5 <= p["lr"] <= 1e-1 and isinstance(p["width"], int) and 16 <= p["width"] <= 256
        assert p["opt"] in ("adam", "sgd")
    if kind != "qmc":  # QMC's scramble is its seed; it is the same sequence point by point
        assert first != OptunaSampler().ask(search(kind, seed=2), told, 3)


def test_a_random_sampler_rebuilt_every_tick_does_not_ask_the_same_point_every_tick() -> None:
    s, trials = search("random"), []
    for i in range(4):
        (p,) = OptunaSampler().ask(s, trials, 1)
        trials.append(Trial(i, p, COMPLETE, loss(p)))
    assert len({repr(t.params) for t in trials}) == 4


def test_qmc_asks_point_k_of_its_sequence_whatever_was_told() -> None:
    s = search("qmc")
    eight = OptunaSampler().ask(s, [], 8)
    told = [Trial(i, p, FAIL) for i, p in enumerate(eight[:5])]
    assert OptunaSampler().ask(s, told, 3) == eight[5:]


def test_tpe_told_trials_steer_it_towards_the_optimum() -> None:
    s = search("tpe")
    trials: list[Trial] = []
    while len(trials) < 40:
        for p in OptunaSampler().ask(s, trials, 4):
            trials.append(Trial(len(trials), p, COMPLETE, loss(p)))
    first, last = trials[:10], trials[-10:]
    assert min(t.value for t in last) < min(t.value for t in first)  # type: ignore[type-var]
    assert sum(t.params["opt"] == "adam" for t in last) >= 7


@pytest.mark.parametrize(("kind", "built"), [("tpe", 60), ("random", 0)])
def test_a_ticks_asks_build_the_trials_so_far_once_not_once_per_ask(kind: str, built: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40's probe: a study per ask made asking quadratic in the batch (TPE with parallel 1000:
    a 314-s tick; random with 5,000: none in 600 s). Each ask's sampler is still seeded by its
    trial's number, so the values are those a study per ask gave."""
    import optuna

    made = []
    create = optuna.trial.create_trial
    monkeypatch.setattr(optuna.trial, "create_trial", lambda **kw: made.append(1) or create(**kw))
    s = search(kind)
    trials = [Trial(i, p, COMPLETE, loss(p)) for i, p in enumerate(OptunaSampler().ask(s, [], 60))]
    made.clear()
    assert len(OptunaSampler().ask(s, trials, 40)) == 40
    assert len(made) == built  # a study per ask built 40 × 60 + 780 of them


def test_cmaes_keeps_its_state_in_the_log_and_closes_in_generation_by_generation() -> None:
    """Its distribution is derived from the asks' generations and the tells on every tick (a
    rebuilt Optuna study lost it: every ask sampled the starting distribution)."""
    s = SearchSpec(SPACE[:2], {}, "cmaes", "val_loss", "min", trials=80, parallel=4, seed=3)
    sampler, trials = OptunaSampler(), []
    while len(trials) < 80:
        generation = sampler.generation(s, trials)
        for p in sampler.ask(s, trials, 4):
            trials.append(Trial(len(trials), p, COMPLETE, loss({**p, "opt": "adam"}), generation))
    generations = [t.generation for t in trials]
    assert generations[0] == 0 and generations[-1] is not None and generations[-1] >= 8
    assert generations == sorted(generations)  # type: ignore[type-var]
    first, last = trials[:12], trials[-12:]
    assert max(t.value for t in last) < min(t.value for t in first)  # type: ignore[type-var]
    assert all(abs(math.log10(t.params["lr"]) + 3) < 0.5 for t in last)  # type: ignore[arg-type]
    forgotten = [Trial(t.number, t.params, t.state, t.value) for t in trials]  # no generations: the start
    assert sampler.generation(s, forgotten) == 0
