"""The policy's `right_size` section (core/tick/right_size.py applies it). Pure values and their reader.

    right_size: {mem: {quantile: 0.95, margin: 1.2}, time: {quantile: 0.95, margin: 1.3},
                 min_samples: 5, lower: true, raise: true, mode: shadow}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from campaignctl.core.base.rawdoc import KeyPath
from campaignctl.core.base.reader import Reader

RIGHT_SIZE_KEYS = ("mem", "time", "min_samples", "lower", "raise", "mode")
MARGIN_KEYS = ("quantile", "margin")
MODES = ("enforce", "shadow")


@dataclass(frozen=True, slots=True)
class Margin:
    quantile: float
    margin: float


@dataclass(frozen=True, slots=True)
class RightSize:
    enabled: bool = False  # the policy has a right_size section
    mem: Margin = field(default_factory=lambda: Margin(0.95, 1.2))
    time: Margin = field(default_factory=lambda: Margin(0.95, 1.3))
    min_samples: int = 5
    lower: bool = True  # may ask less than the spec
    raise_: bool = True  # may ask more than the spec (never above the policy's mem_cap/time_cap)
    mode: str = "shadow"


def read_right_size(r: Reader, path: KeyPath, base: RightSize) -> RightSize:
    if r.mapping(path, RIGHT_SIZE_KEYS) is None:
        return base
    samples = r.integer((*path, "min_samples"), 1, 100_000, default=base.min_samples)
    return RightSize(enabled=True, mem=_margin(r, (*path, "mem"), base.mem),
                     time=_margin(r, (*path, "time"), base.time),
                     min_samples=base.min_samples if samples is None else samples,
                     lower=r.boolean((*path, "lower"), base.lower), raise_=r.boolean((*path, "raise"), base.raise_),
                     mode=r.choice((*path, "mode"), MODES) or base.mode)


def _margin(r: Reader, path: KeyPath, base: Margin) -> Margin:
    if r.mapping(path, MARGIN_KEYS) is None:
        return base
    q = r.bounded((*path, "quantile"), 0.5, 1.0, "a quantile from 0.5 to 1 (0.95: the 95th percentile)")
    m = r.bounded((*path, "margin"), 1.0, 10.0, "a multiplier from 1 to 10 (1.2: 20 % above the quantile)")
    return Margin(base.quantile if q is None else q, base.margin if m is None else m)


def right_size_from_dict(data: Mapping[str, object] | None) -> RightSize:
    if not data:
        return RightSize()
    stored: dict[str, Any] = dict(data)  # as right_size_to_dict wrote it with the revision
    return RightSize(**{**stored, "mem": Margin(**stored["mem"]), "time": Margin(**stored["time"])})
