"""Slurm time and memory notations, parsed strictly."""

from __future__ import annotations

import math
import re

# sbatch --time accepts: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (man sbatch, --time).
_TIME_RE = re.compile(r"^(?:(?P<days>\d+)-)?(?P<rest>\d+(?::\d+){0,2})$")
_MEM_RE = re.compile(r"^(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)B?$", re.IGNORECASE)
_MEM_FACTOR_MB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}


def parse_time_minutes(text: str) -> int:
    """Minutes (rounded up) of a Slurm time string; ValueError if it is not one."""
    match = _TIME_RE.match(text.strip())
    if not match:
        raise ValueError(text)
    parts = [int(p) for p in match["rest"].split(":")]
    days = match["days"]
    if days is not None:  # D-H, D-H:M, D-H:M:S
        hours, minutes, seconds = [*parts, 0, 0][:3]
        total_s = int(days) * 86400 + hours * 3600 + minutes * 60 + seconds
    elif len(parts) == 1:  # M
        total_s = parts[0] * 60
    elif len(parts) == 2:  # M:S
        total_s = parts[0] * 60 + parts[1]
    else:  # H:M:S
        total_s = parts[0] * 3600 + parts[1] * 60 + parts[2]
    return math.ceil(total_s / 60)


def parse_mem_mb(text: str) -> int:
    """Megabytes (rounded up) of a Slurm memory string such as 4G, 500M, 1.5G, 2048."""
    match = _MEM_RE.match(text.strip())
    if not match:
        raise ValueError(text)
    return math.ceil(float(match["num"]) * _MEM_FACTOR_MB[match["unit"].upper()])


def parse_duration_seconds(text: str) -> int | None:
    """Seconds of an sacct Elapsed/Timelimit field ([D-]HH:MM:SS, MM:SS); None for UNLIMITED/empty."""
    text = text.strip()
    if not text or text in ("UNLIMITED", "Partition_Limit", "INVALID"):
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, seconds = parts[-3:]
    return (int(days) if days else 0) * 86400 + hours * 3600 + minutes * 60 + seconds


_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_interval_seconds(value: object) -> int | None:
    """A duration written by a person: seconds as a number, `90s`, `10m`, `1h`, `2d`, or a Slurm
    clock `00:10:00` / `1-00:00:00`. None if it is none of these."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        if text[:-1].isdigit() and text[-1:] in _UNIT_S:
            return int(text[:-1]) * _UNIT_S[text[-1]]
        return parse_duration_seconds(text) if text else None
    except ValueError:  # not digits after all (`²`), or more than 4,300 of them
        return None
