"""JSON written by a job (telemetry.jsonl, metrics.jsonl, exit.json), parsed as untrusted input.

The job itself, or any member of a shared campaign's group, can write there. Python's `json`
accepts what breaks a reader later: an integer of 309 digits (`float()` of it raises
OverflowError), `1e400` and `NaN`/`Infinity` (non-finite floats), and nesting deep enough to raise
RecursionError, which is not a ValueError. Here a line too long or too deep is a bad line
(ValueError), as a line that is not JSON at all is: the caller skips it and counts it. A number
that is not finite, or an integer of more digits than any count a job writes, reads as null: the
field is dropped and the rest of the line kept (a trainer's `json.dumps` writes a diverged loss as
`NaN`; the step's other metrics still count).
"""

from __future__ import annotations

import json
import math

MAX_LINE = 64 * 1024  # characters in one line: a sampler line is ~300, a metrics line ~100
MAX_DEPTH = 16  # nesting: the sampler writes 3 levels (record → gpus → one gpu)
MAX_INT_DIGITS = 20  # a step, a byte count or a PID fits in 19 digits


def loads(text: str | bytes, max_len: int = MAX_LINE) -> object:
    """The value of one JSON text, every number in it finite (or null); ValueError for a text
    that is not JSON, too long or too deep."""
    if len(text) > max_len:
        raise ValueError(f"longer than {max_len} characters")
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    return json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)


def _int(digits: str) -> int | None:
    return int(digits) if len(digits.lstrip("-")) <= MAX_INT_DIGITS else None


def _float(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def _constant(_name: str) -> None:
    return None  # NaN, Infinity, -Infinity


def _depth(text: str) -> int:
    """The deepest nesting of brackets outside strings (only run when the bracket count alone
    could exceed the limit, so an ordinary line costs two str.count calls)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest
