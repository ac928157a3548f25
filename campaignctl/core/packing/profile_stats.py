"""What `campaignctl profile show` prints: a profile's distribution per group (p50/p95/max of
peak RSS, elapsed time, GPU memory peak, CPU use), how often right-sizing was wrong, and per
campaign what was asked against what was used and what right_size would ask now. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TypeVar

from campaignctl.core.policy.right_size_section import RightSize
from campaignctl.core.resources import Resources
from campaignctl.core.tick.right_size import UsageSample, propose, quantile

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Spread:
    p50: float
    p95: float
    max: float
    n: int


@dataclass(frozen=True, slots=True)
class GroupStats:
    group: str
    samples: int  # ended attempts (COMPLETED, OUT_OF_MEMORY, TIMEOUT)
    campaigns: tuple[str, ...]
    rss_mb: Spread | None
    elapsed_s: Spread | None  # COMPLETED attempts only
    gpu_mem_mb: Spread | None
    cpu_pct: Spread | None  # mean CPU % of each attempt (100 = one busy CPU)
    right_sized: int  # attempts whose limits right_size chose
    wrong: int  # of those, ended OUT_OF_MEMORY or TIMEOUT

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class CampaignUse:
    """Requested vs used, per campaign and group: the efficiency right-sizing works on."""

    campaign: str
    group: str
    attempts: int
    asked_mem_mb: int  # the most common request among its attempts
    asked_time_min: int
    asked_cpus: int
    asked_gpus: int
    used_rss_p95_mb: float | None
    used_elapsed_p95_s: float | None
    used_cpus: float | None  # mean CPU use in CPUs (1.0 = one busy CPU)
    used_gpu_mem_p95_mb: float | None
    would_ask_mem_mb: int | None  # what right_size (with `section`) would ask now; None: too few samples
    would_ask_time_min: int | None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def spread(values: Iterable[float | None]) -> Spread | None:
    seen = [v for v in values if v is not None]
    if not seen:
        return None
    return Spread(round(quantile(seen, 0.5), 1), round(quantile(seen, 0.95), 1), round(max(seen), 1), len(seen))


def profile_stats(samples: Sequence[UsageSample]) -> list[GroupStats]:
    out = []
    for group, members in _grouped(samples, lambda s: s.group).items():
        out.append(GroupStats(
            group, len(members), tuple(sorted({s.campaign for s in members})),
            spread(s.rss_mb for s in members),
            spread(float(s.elapsed_s) if s.elapsed_s is not None and s.state == "COMPLETED" else None
                   for s in members),
            spread(s.gpu_mem_mb for s in members), spread(s.cpu_pct for s in members),
            sum(s.right_sized for s in members), sum(s.wrong for s in members)))
    return out


def campaign_use(samples: Sequence[UsageSample], section: RightSize) -> list[CampaignUse]:
    by_group = _grouped(samples, lambda s: s.group)
    out = []
    for (campaign, group), members in _grouped(samples, lambda s: (s.campaign, s.group)).items():
        asked: Resources = Counter(s.requested for s in members).most_common(1)[0][0]
        sizing = propose(by_group[group], section, asked)
        cpu = spread(s.cpu_pct for s in members)
        rss, gpu = spread(s.rss_mb for s in members), spread(s.gpu_mem_mb for s in members)
        elapsed = spread(float(s.elapsed_s) if s.state == "COMPLETED" and s.elapsed_s is not None else None
                         for s in members)
        out.append(CampaignUse(
            campaign, group, len(members), asked.mem_mb, asked.time_min, asked.cpus_per_task, asked.gpus,
            rss.p95 if rss else None, elapsed.p95 if elapsed else None,
            round(sum(s.cpu_pct or 0 for s in members) / cpu.n / 100, 2) if cpu else None,
            gpu.p95 if gpu else None, sizing.mem_mb if sizing else None, sizing.time_min if sizing else None))
    return out


def _grouped(samples: Sequence[UsageSample], key: Callable[[UsageSample], K]) -> dict[K, list[UsageSample]]:
    out: dict[K, list[UsageSample]] = {}
    for s in samples:
        out.setdefault(key(s), []).append(s)
    return out
