"""The Prometheus text format (0.0.4) as tables, read back by a small parser written from the format
description (prometheus.io/docs/instrumenting/exposition_formats): escaping, values, HELP/TYPE."""

from __future__ import annotations

import math
import re

import pytest

from campaignctl.core.screens.prometheus import (
    CampaignSnapshot,
    Family,
    campaign_families,
    escape_help,
    escape_label,
    exposition,
    format_value,
    recent_use,
)
from campaignctl.core.usage.telemetry import Sample

Key = tuple[str, tuple[tuple[str, str], ...]]
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"')


def parse_exposition(text: str) -> tuple[dict[str, tuple[str, str]], dict[Key, float]]:
    """(family → (type, help), (name, sorted labels) → value); fails on anything the format forbids."""
    assert text.endswith("\n")
    families: dict[str, tuple[str, str]] = {}
    helps: dict[str, str] = {}
    samples: dict[Key, float] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in helps, f"HELP twice for {name}"
            helps[name] = re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], help_text)
        elif line.startswith("# TYPE "):
            name, kind = line[7:].split(" ")
            assert name not in families and name in helps and kind in ("gauge", "counter"), line
            families[name] = (kind, helps[name])
        else:
            name, labels, value = _sample(line)
            assert name in families, f"sample before its TYPE: {line}"
            assert (name, labels) not in samples, f"duplicate sample {line}"
            samples[(name, labels)] = value
    return families, samples


def _sample(line: str) -> tuple[str, tuple[tuple[str, str], ...], float]:
    match = _SAMPLE.match(line)
    assert match, f"not a sample line: {line!r}"
    name, body, value = match.groups()
    pairs = list(_LABEL.finditer(body or ""))
    assert ",".join(m[0] for m in pairs) == (body or ""), f"bad labels: {body!r}"
    labels = tuple(sorted((m[1], re.sub(r"\\(.)", lambda x: "\n" if x[1] == "n" else x[1], m[2])) for m in pairs))
    return name, labels, float(value)


@pytest.mark.parametrize(("raw", "escaped"), [
    ("plain", "plain"), ('say "hi"', 'say \\"hi\\"'), ("C:\\dir", "C:\\\\dir"), ("two\nlines", "two\\nlines"),
    ('\\"\n', '\\\\\\"\\n'), ("ünïcode ✓", "ünïcode ✓"),
])
def test_label_values_escape_backslash_quote_and_newline(raw: str, escaped: str) -> None:
    assert escape_label(raw) == escaped


def test_help_escapes_backslash_and_newline_but_not_quotes() -> None:
    assert escape_help('a\\b\n"c"') == 'a\\\\b\\n"c"'


@pytest.mark.parametrize(("value", "text"), [
    (3, "3"), (3.0, "3"), (0.25, "0.25"), (-1.5, "-1.5"), (1e20, "1e+20"), (math.nan, "NaN"),
    (math.inf, "+Inf"), (-math.inf, "-Inf"), (1795446862.0, "1795446862"),
])
def test_values(value: float, text: str) -> None:
    assert format_value(value) == text


def test_families_without_samples_are_left_out_and_the_rest_read_back() -> None:
    labels = (("x", 'q"\n\\'),)
    text = exposition([Family("a_total", "counter", "A.", ((labels, 2.0),)), Family("empty", "gauge", "nothing"),
                       Family("b", "gauge", "B\nline.", (((), 0.5),))])
    families, samples = parse_exposition(text)
    assert families == {"a_total": ("counter", "A."), "b": ("gauge", "B\nline.")}
    assert samples == {("a_total", (("x", 'q"\n\\'),)): 2.0, ("b", ()): 0.5}


HOSTILE = 'we"ird\\name\nx'


def snapshot(**changes: object) -> CampaignSnapshot:
    fields: dict[str, object] = dict(
        name=HOSTILE, state="active", tasks={"RUNNING": 2, "PENDING": 1}, attempts=4,
        spend={"spent": {"gpu_hours": 1.5}, "committed": {"gpu_hours": 0.5}}, limits={"gpu_hours": 10.0},
        exhausted=False,
        decisions={("out_of_memory", "resubmit", "enforce"): 2, ("gpu_idle", "fewer_gpus", "shadow"): 1},
        gpu_util_pct={3: 42.5}, cpu_pct={3: 180.0, 4: 90.0})
    fields.update(changes)
    return CampaignSnapshot(**fields)  # type: ignore[arg-type]


def test_campaign_families_read_back_with_their_labels() -> None:
    families, samples = parse_exposition(exposition(campaign_families([snapshot()], last_tick=1795446862.0)))
    c = ("campaign", HOSTILE)
    assert families["campaignctl_decisions_total"][0] == "counter"
    assert families["campaignctl_tasks"][0] == "gauge"
    assert samples[("campaignctl_tasks", (c, ("state", "RUNNING")))] == 2
    assert samples[("campaignctl_spend_gpu_hours", (c, ("kind", "committed")))] == 0.5
    assert samples[("campaignctl_budget_gpu_hours", (c,))] == 10
    assert samples[("campaignctl_decisions_total", (("action", "fewer_gpus"), c, ("mode", "shadow"),
                                                    ("rule", "gpu_idle")))] == 1
    assert samples[("campaignctl_task_gpu_util_pct", (c, ("task", "3")))] == 42.5
    assert samples[("campaignctl_task_cpu_pct", (c, ("task", "4")))] == 90
    assert samples[("campaignctl_last_reconcile_timestamp_seconds", ())] == 1795446862
    assert "campaignctl_budget_money" not in families  # no such budget, no family


def test_without_campaigns_or_ticks_the_exposition_is_empty_but_valid() -> None:
    assert exposition(campaign_families([], last_tick=None)) == ""


def test_recent_use_means_gpu_only_over_gpu_samples() -> None:
    window = [Sample(1, 100, 0, 40, None), Sample(2, 200, 0, None, None), Sample(3, 300, 0, 60, None)]
    assert recent_use(window) == (50.0, 200.0)
    assert recent_use([Sample(1, 10, 0, None, None)]) == (None, 10.0)
