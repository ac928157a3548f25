"""A search's sampler: Optuna's ask-and-tell over an in-memory study, rebuilt from the trials the
decision log holds on every tick. No Optuna storage: the log is the one source of truth, and the
same search and trials ask the same values (what `policy replay` relies on).

Rebuilding a study each tick means a sampler never keeps state of its own between ticks, so:
- each ask seeds the sampler from the search's seed and the trial's number: a random sampler
  seeded alike on every tick would ask the same point every tick;
- one study per tick holds the trials so far, once; a tick's asks share it, each with a sampler
  of its own seed (`study.sampler` is replaced between asks), so an ask sees the earlier asks of
  its tick as running trials. Cost per tick: the trials once plus the asks, not trials × asks
  (a study per ask made a tick of 1,000 TPE asks take minutes: issue 40's probe);
- a random sampler reads no history at all: its asks build no trials;
- TPE runs with `constant_liar`, so the trials still running count as poor results and the
  trials of one tick spread out instead of piling on the same point;
- QMC (scrambled Sobol) counts its points in a study attribute, not in its trials: trial k is
  point k of the same sequence, asked by drawing points 0..k from a fresh study;
- CMA-ES is not Optuna's: its state is derived from the log (adapters/cmaes_sampler.py).
Optuna is imported on first use: a campaign without `search:` never needs it."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import Any

from campaignctl.adapters.cmaes_sampler import SEED_STRIDE, CmaEs
from campaignctl.core.base.errors import CampaignctlError
from campaignctl.core.model.params import Scalar
from campaignctl.core.spec.search_spec import Dimension, SearchSpec
from campaignctl.core.tuning.search import COMPLETE, FAIL, PRUNED, RUNNING, Trial


class OptunaSampler:
    """core/tuning/search.Sampler over Optuna."""

    def ask(self, search: SearchSpec, trials: Sequence[Trial], count: int) -> list[dict[str, Scalar]]:
        if search.sampler == "cmaes":
            return CmaEs(search, trials).ask(count)
        optuna = _optuna()
        distributions = {d.name: _distribution(optuna, d) for d in search.space}
        if search.sampler == "qmc":
            study = _study(optuna, search, 0)
            points = [study.ask(distributions).params for _ in range(len(trials) + count)]
            return [_scalars(p, search) for p in points[len(trials):]]
        study = _study(optuna, search, len(trials))
        if search.sampler != "random":  # the random sampler reads no history
            for trial in trials:
                study.add_trial(_frozen(optuna, trial, distributions))
        asked: list[dict[str, Scalar]] = []
        for k in range(count):
            study.sampler = _sampler(optuna, search, len(trials) + k)
            asked.append(_scalars(study.ask(distributions).params, search))
        return asked

    def generation(self, search: SearchSpec, trials: Sequence[Trial]) -> int | None:
        return CmaEs(search, trials).generation if search.sampler == "cmaes" else None


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise CampaignctlError("a `search:` campaign needs Optuna, which is not installed",
                         "pip install 'campaignctl[search]' (optuna, cmaes, scipy)") from None
    optuna.logging.set_verbosity(logging.WARNING)  # not a line per study created in memory
    # QMC and multivariate TPE are marked experimental: a warning on every tick says nothing new
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def _study(optuna: Any, search: SearchSpec, number: int) -> Any:
    direction = "minimize" if search.goal == "min" else "maximize"
    return optuna.create_study(sampler=_sampler(optuna, search, number), direction=direction)


def _sampler(optuna: Any, search: SearchSpec, number: int) -> Any:
    seed = (search.seed * SEED_STRIDE + number) % 2**32
    samplers = optuna.samplers
    return {
        "random": lambda: samplers.RandomSampler(seed=seed),
        "tpe": lambda: samplers.TPESampler(seed=seed, constant_liar=True, multivariate=True),
        "qmc": lambda: samplers.QMCSampler(seed=search.seed, scramble=True),
    }[search.sampler]()


def _distribution(optuna: Any, d: Dimension) -> Any:
    dist = optuna.distributions
    if d.kind == "categorical":
        return dist.CategoricalDistribution(list(d.choices))
    if d.kind == "int":
        return dist.IntDistribution(int(d.low), int(d.high), log=d.log, step=d.step or 1)
    return dist.FloatDistribution(d.low, d.high, log=d.log)


def _frozen(optuna: Any, trial: Trial, distributions: dict[str, Any]) -> Any:
    states = optuna.trial.TrialState
    state = {RUNNING: states.RUNNING, COMPLETE: states.COMPLETE, FAIL: states.FAIL, PRUNED: states.PRUNED}[trial.state]
    params = {k: v for k, v in trial.params.items() if k in distributions}  # core/tuning/search: inside today's space
    return optuna.trial.create_trial(state=state, params=params, distributions={k: distributions[k] for k in params},
                                     value=trial.value if trial.state == COMPLETE else None)


def _scalars(params: dict[str, Any], search: SearchSpec) -> dict[str, Scalar]:
    """Sampled values as the spec's scalars, in the space's order (ints stay ints)."""
    out: dict[str, Scalar] = {}
    for d in search.space:
        value = params[d.name]
        out[d.name] = int(value) if d.kind == "int" else value if d.kind == "categorical" else float(value)
    return out
