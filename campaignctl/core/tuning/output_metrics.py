"""`metrics: {from_output: REGEX}` — metric points read from a program's own log lines, so an
unmodified training script can be ranked, promoted and stopped early. Pure.

A pattern is a Python regex searched in each output line, with a named group `step` (an integer)
and one named group per metric (a number). nanoGPT's `train.py` prints
`step 200: train loss 2.3102, val loss 2.3456` (tests/fixtures/output_metrics/nanogpt.txt), read by
    step (?P<step>\\d+): train loss (?P<train_loss>[-\\d.]+), val loss (?P<val_loss>[-\\d.]+)
Several patterns may be given as a list (one per kind of line); the first that matches a line wins.

A pattern without a `step` group takes an automatic step: one more than the attempt's last point
(0 for its first). That reads logs whose own counter restarts — pytorch/examples
word_language_model prints `| epoch 1 |   200/ 2983 batches | … | loss  7.63 |` and starts the
batch count again every epoch, so its curve would loop back — and final lines that carry no step,
such as its `| End of training | test loss  5.92 | test ppl   372.19`
(tests/fixtures/output_metrics/word_language_model.txt).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence

from campaignctl.core.base.rawdoc import KeyPath
from campaignctl.core.base.reader import Reader
from campaignctl.core.model.training_metrics import METRIC_NAME, RESERVED

METRICS_KEYS = ("from_output",)
MAX_PATTERNS = 8
MAX_PATTERN_CHARS = 1000
MAX_LINE_CHARS = 4096  # longer lines are matched on their first 4096 characters


def read_output_patterns(r: Reader) -> tuple[str, ...]:
    path: KeyPath = ("metrics", "from_output")
    r.mapping(("metrics",), METRICS_KEYS)
    value = r.get(path)
    if value is Reader.MISSING or value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if not items or len(items) > MAX_PATTERNS:
        r.problem(path, f"must be a regex or a list of 1 to {MAX_PATTERNS} regexes")
        return ()
    patterns = []
    for i, item in enumerate(items):
        where = (*path, i) if isinstance(value, list) else path
        why = pattern_problem(item)
        if why:
            r.problem(where, why)
        else:
            patterns.append(str(item))
    return tuple(patterns)


def pattern_problem(pattern: object) -> str:
    """Why `pattern` cannot read metrics from output lines, or '' if it can."""
    if not isinstance(pattern, str) or not pattern:
        return f"must be a regular expression (a quoted string), got {pattern!r}"
    if len(pattern) > MAX_PATTERN_CHARS or any(c in pattern for c in "\n\r\0"):
        return f"must be one line of at most {MAX_PATTERN_CHARS} characters"
    try:
        groups = list(re.compile(pattern).groupindex)
    except re.error as exc:
        return f"is not a valid regular expression: {exc}"
    metrics = [g for g in groups if g != "step"]
    if not metrics:
        return ("needs at least one named metric group, and a named group `step` where the line "
                "has one (without it each matched line is one step after the last), e.g. "
                "'step (?P<step>\\d+): train loss (?P<train_loss>[-\\d.]+)'")
    bad = [g for g in metrics if g in RESERVED or not METRIC_NAME.match(g)]
    if bad:
        return f"group name(s) {', '.join(bad)} cannot be metric names (reserved: {', '.join(RESERVED)})"
    return ""


def compile_patterns(patterns: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


def record_of_line(line: str, patterns: Sequence[re.Pattern[str]], t: float,
                   last_step: int = -1) -> dict[str, float | int] | None:
    """The metrics.jsonl record one output line gives (`{"step": 200, "val_loss": 2.3456, "t": …}`),
    or None: no pattern matched, the step is not an integer, or no metric group holds a finite number.
    `last_step`: the step of the attempt's last point (-1 before the first), for a pattern
    without a `step` group."""
    text = line[:MAX_LINE_CHARS]
    for pattern in patterns:
        match = pattern.search(text)
        if match is None:
            continue
        step = _integer(match.group("step")) if "step" in pattern.groupindex else last_step + 1
        values = {name: number for name, raw in match.groupdict().items()
                  if name != "step" and (number := _finite(raw)) is not None}
        if step is None or not values:
            return None
        return {"step": step, **values, "t": t}
    return None


def _integer(raw: str | None) -> int | None:
    try:
        step = int(raw.replace(",", "").replace("_", "")) if raw is not None else None
    except ValueError:
        return None
    return step if step is not None and step >= 0 else None


def _finite(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw.rstrip("%"))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def unmatched_patterns(patterns: Sequence[str], reported: Mapping[int, Collection[str]],
                       ended: Collection[int]) -> list[tuple[str, list[int]]]:
    """Each pattern none of whose metrics any of the `ended` tasks reported (`reported`: metric
    names by task), with those tasks: a regex that never matched the program's real lines (a
    typo, a changed log format) leaves `results` with nothing to rank and no word of why."""
    out = []
    for pattern in patterns:
        names = {g for g in re.compile(pattern).groupindex if g != "step"}
        silent = sorted(t for t in ended if not names & set(reported.get(t, ())))
        if silent and len(silent) == len(ended):
            out.append((pattern, silent))
    return out
