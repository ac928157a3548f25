"""Typed, problem-collecting access to a `RawDoc`: every error names line, key and what is allowed."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence

from campaignctl.core.base.errors import SpecError
from campaignctl.core.base.rawdoc import KeyPath, RawDoc
from campaignctl.core.base.safety import has_control_chars, path_problem
from campaignctl.core.base.units import parse_interval_seconds, parse_mem_mb, parse_time_minutes

_MISSING = object()
# Upper bounds that keep every later sum, product and timedelta finite; no job asks for more.
MAX_MEM_MB = 1024 ** 3  # 1024T
MAX_TIME_MIN = 365 * 24 * 60  # a year
MAX_DURATION_S = 365 * 24 * 3600
MAX_FLOAT_INT = 10**300  # an integer YAML reads exactly; above ~1.8e308 float() of it overflows


def _close_key(key: str, allowed: Sequence[str]) -> str | None:
    """The allowed key `key` was probably meant to be: one it abbreviates (`cpus` for
    cpus_per_task), else one a letter or two away (`resorces`); None when none is close."""
    longer = [a for a in allowed if a.startswith(f"{key}_")]
    if len(longer) == 1:
        return longer[0]
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.8)
    return close[0] if close else None


class Reader:
    MISSING = _MISSING  # what `get` returns for an absent key

    def __init__(self, doc: RawDoc) -> None:
        self.doc = doc
        self.problems: list[str] = list(doc.problems)

    def problem(self, path: KeyPath, message: str) -> None:
        self.problems.append(f"{self.doc.where(path)}: {message}")

    def raise_if_problems(self) -> None:
        if self.problems:
            raise SpecError(self.problems, self.doc.source)

    def get(self, path: KeyPath) -> object:
        node: object = self.doc.data
        for part in path:
            if isinstance(node, dict) and isinstance(part, str) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                return _MISSING
        return node

    def mapping(self, path: KeyPath, allowed: Sequence[str], required: bool = False) -> dict | None:
        value = self.get(path)
        if value is _MISSING or value is None:
            if required:
                self.problem(path, "is required")
            return None
        if not isinstance(value, dict):
            self.problem(path, f"must be a mapping of keys, got {type(value).__name__}")
            return None
        for key in value:
            if key not in allowed:
                guess = f" (did you mean {close}?)" if (close := _close_key(str(key), allowed)) else ""
                self.problem((*path, key), f"unknown key{guess}; allowed: {', '.join(allowed)}")
        return value

    def _present(self, path: KeyPath, required: bool) -> object:
        value = self.get(path)
        if value is _MISSING or value is None:
            if required:
                self.problem(path, "is required")
            return _MISSING
        return value

    def string(self, path: KeyPath, default: str | None = None, required: bool = False,
               path_like: bool = False) -> str | None:
        value = self._present(path, required)
        if value is _MISSING:
            return default
        if not isinstance(value, str):
            self.problem(path, f"must be a string (quote it), got {type(value).__name__}")
            return default
        why = path_problem(value) if path_like else (
            "must not contain newline, carriage return or NUL" if has_control_chars(value) else "")
        if why:
            self.problem(path, why)
            return default
        return value

    def pattern(self, path: KeyPath, regex: re.Pattern[str], allowed: str,
                required: bool = False) -> str | None:
        value = self.string(path, required=required)
        if value is not None and not regex.match(value):
            self.problem(path, f"{value!r} is not allowed; use {allowed}")
            return None
        return value

    def choice(self, path: KeyPath, options: Sequence[str]) -> str | None:
        value = self.string(path)
        if value is not None and value not in options:
            self.problem(path, f"{value!r} is not allowed; use one of: {', '.join(options)}")
            return None
        return value

    def integer(self, path: KeyPath, minimum: int, maximum: int,
                default: int | None = None) -> int | None:
        value = self._present(path, False)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            self.problem(path, f"must be a whole number from {minimum} to {maximum}, got {value!r}")
            return default
        return value

    def number(self, path: KeyPath, minimum: float) -> float | None:
        value = self._present(path, False)
        if value is _MISSING:
            return None
        if isinstance(value, float) and not math.isfinite(value):  # NaN compares false: a NaN budget never holds
            self.problem(path, f"must be a finite number above {minimum:g}, got {value!r}")
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= minimum:
            self.problem(path, f"must be a number above {minimum:g}, got {_short(value)}")
            return None
        if isinstance(value, int) and value > MAX_FLOAT_INT:  # float() of it: OverflowError
            self.problem(path, f"must be a finite number above {minimum:g}, got {_short(value)}")
            return None
        return float(value)

    def bounded(self, path: KeyPath, low: float, high: float, what: str) -> float | None:
        """A number from `low` to `high` (inclusive); None if absent or out of range (a problem)."""
        value = self._present(path, False)
        if value is _MISSING:
            return None
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or not low <= value <= high):
            self.problem(path, f"must be {what}, got {value!r}")
            return None
        return float(value)

    def boolean(self, path: KeyPath, default: bool) -> bool:
        value = self._present(path, False)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            self.problem(path, f"must be true or false, got {value!r}")
            return default
        return value

    def memory(self, path: KeyPath, default: str) -> int:
        value = self._present(path, False)
        text = default if value is _MISSING else value
        if isinstance(text, int) and not isinstance(text, bool):
            mb = text
        else:
            try:
                mb = parse_mem_mb(text) if isinstance(text, str) else 0
            except (ValueError, OverflowError):
                mb = 0
        if not 0 < mb <= MAX_MEM_MB:
            self.problem(path, f"{_short(text)} is not a memory size from 1M to 1024T; use e.g. 500M, 4G "
                               "(megabytes if no unit)")
            return parse_mem_mb(default)
        return mb

    def time(self, path: KeyPath, default: str) -> int:
        value = self._present(path, False)
        text = default if value is _MISSING else value
        if isinstance(text, int) and not isinstance(text, bool):
            minutes = text  # a bare number is minutes, as for sbatch --time
        else:
            try:
                minutes = parse_time_minutes(text) if isinstance(text, str) else 0
            except ValueError:
                minutes = 0
        if not 0 < minutes <= MAX_TIME_MIN:
            self.problem(path, f"{_short(text)} is not a time limit of at most 365 days; use \"HH:MM:SS\", "
                               "\"D-HH:MM:SS\" or minutes, quoted")
            return parse_time_minutes(default)
        return minutes

    def duration(self, path: KeyPath, default: int) -> int:
        value = self._present(path, False)
        if value is _MISSING:
            return default
        seconds = parse_interval_seconds(value)
        if seconds is None or seconds > MAX_DURATION_S:
            self.problem(path, f"{_short(value)} is not a duration; use seconds or e.g. \"90s\", \"10m\", "
                               "\"1h\", \"00:10:00\" (at most 365 days)")
            return default
        return seconds


def _short(value: object) -> str:
    """`repr` of a value from the file, cut to a readable length (it may be 5,000 digits)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}… ({len(text)} characters)"
