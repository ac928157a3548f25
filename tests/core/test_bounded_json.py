"""core/base/bounded_json: what a job could write to stop a reader is a bad line (ValueError) or a
dropped value, never another exception (the probe's repros of issue 26)."""

from __future__ import annotations

import pytest

from campaignctl.core.base import bounded_json
from campaignctl.core.model.training_metrics import parse_metric_lines
from campaignctl.core.usage.telemetry import Summary, fold


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,  # json: RecursionError
    '{"a": "' + "x" * 70_000 + '"}',
])
def test_a_line_too_deep_or_too_long_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        bounded_json.loads(text)


@pytest.mark.parametrize("number", ["9" * 309, "-" + "9" * 21, "NaN", "Infinity", "-Infinity", "1e400"])
def test_a_number_no_reader_can_use_reads_as_null(number: str) -> None:
    """float() of a 309-digit integer raised OverflowError; NaN compared false everywhere."""
    assert bounded_json.loads(f'{{"rss_mb": {number}, "cpu_pct": 5}}') == {"rss_mb": None, "cpu_pct": 5}


@pytest.mark.parametrize("text, value", [
    ('{"step": 12345678901234567890, "loss": 0.5}', {"step": 12345678901234567890, "loss": 0.5}),
    ('{"s": "[[[[[[[[[[[[[[[[[[[[[[[["}', {"s": "[" * 24}),  # brackets inside a string are no nesting
    ('{"gpus": [{"index": 0, "util_pct": 35}]}', {"gpus": [{"index": 0, "util_pct": 35}]}),
    ('{"a": -1.5e-3}', {"a": -1.5e-3}),
])
def test_what_a_sampler_or_a_trainer_writes_reads_as_before(text: str, value: object) -> None:
    assert bounded_json.loads(text) == value


def test_bad_lines_are_counted_and_the_rest_is_read() -> None:
    good = '{"t": 1.7e9, "cpu_pct": 90.0, "rss_mb": 100.0, "nproc": 1}'
    summary = fold(Summary(), [good, '{"t": 1.7e9, "cpu_pct": 1, "rss_mb": ' + "9" * 400 + "}", "[" * 5000, good])
    assert (summary.samples, summary.bad_lines) == (2, 2)
    parsed = parse_metric_lines(['{"step": 1, "loss": 0.5}', '{"step": 2, "loss": 1e999}', "{" * 999])
    assert [p.value for p in parsed.points] == [0.5] and parsed.bad_lines == 2
