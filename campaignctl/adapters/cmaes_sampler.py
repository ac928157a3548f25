"""CMA-ES for a search, its state derived from the decision log on every ask instead of kept.

Optuna's CmaEsSampler keeps its search distribution as a pickled optimizer in the system
attributes of the trials it asks; a study rebuilt from the log each tick lacks them, so it sampled
from its starting distribution for ever (and unpickling what a shared database holds is code that
any writer to it chooses). Here the distribution is re-derived instead, from two facts the log
holds: each ask records the generation it was asked in (`Ask.generation`), and each tell its value.

- A fresh `cmaes.CMA` with Optuna's starting point (every dimension scaled to [0, 1], mean 0.5,
  sigma 1/6, seeded by the search's seed) is told, generation by generation, the first
  `population_size` completed trials (in trial order) asked in that generation, exactly when
  Optuna's sampler would have told them; it stops at the first generation not yet complete.
- Each ask samples from that distribution with the optimizer's generator reseeded from the search's
  seed and the trial's number (as Optuna reseeds it per trial), so the same log asks the same
  values: what `policy replay` relies on.
- Categorical dimensions, which CMA-ES does not model, are drawn independently per trial (Optuna
  falls back to its random sampler for them too).
- Trials asked before asks recorded their generation tell nothing: the search goes on from the
  starting distribution, as it did then.
The cost is one `tell` per generation so far: microseconds per tick for any search size here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

from campaignctl.core.base.errors import CampaignctlError
from campaignctl.core.model.params import Scalar
from campaignctl.core.spec.search_spec import Dimension, SearchSpec
from campaignctl.core.tuning.search import COMPLETE, Trial

SEED_STRIDE = 1_000_003  # a prime: trial k of seed s samples with seed s × stride + k (every sampler)


class CmaEs:
    """CMA-ES asks for one search, with its state derived from `trials`."""

    def __init__(self, search: SearchSpec, trials: Sequence[Trial]) -> None:
        self.search = search
        self.trials = trials
        self.dims = [d for d in search.space if d.kind != "categorical"]
        self.optimizer = _derived(search, self.dims, trials) if self.dims else None

    @property
    def generation(self) -> int | None:
        """The generation the next asks belong to (None: no dimension CMA-ES models)."""
        return None if self.optimizer is None else int(self.optimizer.generation)

    def ask(self, count: int) -> list[dict[str, Scalar]]:
        np = _numpy()
        asked = []
        for k in range(count):
            seed = (self.search.seed * SEED_STRIDE + len(self.trials) + k) % 2**32
            x = []
            if self.optimizer is not None:
                self.optimizer.reseed_rng(seed)
                x = list(self.optimizer.ask())
            rng = np.random.RandomState(seed)
            values: dict[str, Scalar] = {}
            for d in self.search.space:
                values[d.name] = (d.choices[int(rng.randint(len(d.choices)))] if d.kind == "categorical"
                                  else _from_unit(d, float(x.pop(0))))
            asked.append(values)
        return asked


def _derived(search: SearchSpec, dims: Sequence[Dimension], trials: Sequence[Trial]) -> Any:
    cmaes, np = _cmaes(), _numpy()
    n = len(dims)
    # Optuna's CmaEsSampler starts so: the middle of the box, sigma a sixth of its side, at most
    # 10 × n resamplings of a point outside it, the library's population size (4 + ⌊3 ln n⌋).
    optimizer = cmaes.CMA(mean=np.full(n, 0.5), sigma=1 / 6, bounds=np.array([[0.0, 1.0]] * n),
                          seed=search.seed % (2**31 - 2) + 1, n_max_resampling=10 * n)
    sign = 1.0 if search.goal == "min" else -1.0  # CMA-ES minimises
    done: dict[int, list[tuple[Any, float]]] = {}
    for t in trials:
        if (t.state == COMPLETE and t.generation is not None and t.value is not None and math.isfinite(t.value)
                and all(isinstance(t.params.get(d.name), (int, float)) for d in dims)):
            x = np.array([_to_unit(d, float(cast(float, t.params[d.name]))) for d in dims])
            done.setdefault(t.generation, []).append((x, sign * t.value))
    while len(solutions := done.get(optimizer.generation, [])) >= optimizer.population_size:
        optimizer.tell(solutions[:optimizer.population_size])
    return optimizer


def _edges(d: Dimension) -> tuple[float, float]:
    """The dimension's interval on the scale CMA-ES sees (an int's values each own a whole step)."""
    half = (d.step or 1) / 2 if d.kind == "int" else 0.0
    low, high = d.low - half, d.high + half
    return (math.log(low), math.log(high)) if d.log else (low, high)


def _to_unit(d: Dimension, value: float) -> float:
    low, high = _edges(d)
    return ((math.log(value) if d.log else value) - low) / (high - low)


def _from_unit(d: Dimension, x: float) -> Scalar:
    low, high = _edges(d)
    y = low + min(max(x, 0.0), 1.0) * (high - low)
    value = math.exp(y) if d.log else y
    if d.kind != "int":
        return min(max(value, d.low), d.high)
    step = d.step or 1
    whole = int(d.low) + round((value - d.low) / step) * step
    return min(max(whole, int(d.low)), int(d.low) + (int(d.high) - int(d.low)) // step * step)


def _cmaes() -> Any:
    try:
        import cmaes
    except ImportError:
        raise CampaignctlError("a `sampler: cmaes` search needs the cmaes package, which is not installed",
                               "pip install 'campaignctl[search]' (optuna, cmaes, scipy)") from None
    return cmaes


def _numpy() -> Any:
    import numpy  # installed with optuna and cmaes
    return numpy
