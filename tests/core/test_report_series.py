"""The report's series as tables: utilisation buckets, cumulative spend, metric curves per rung."""

from __future__ import annotations

import pytest

from campaignctl.core.screens.report_series import (
    AttemptSamples,
    RunCost,
    curves_by_rung,
    default_metric,
    metric_names,
    spend_curve,
    spend_dimensions,
    utilisation,
)
from campaignctl.core.spec.settings import CampaignSettings, campaign_settings
from campaignctl.core.usage.cost import Amount
from campaignctl.core.usage.telemetry import Sample, samples_of


def sample(t: float, cpu: float, gpu: float | None = None) -> Sample:
    return Sample(t, cpu, 100.0, gpu, None)


def test_utilisation_means_per_bucket_per_task_and_overall() -> None:
    # window 0–100 s in 2 buckets of 50 s; task 1 has 2 cores, task 2 one core and no GPU telemetry
    util = utilisation([AttemptSamples(1, 2, [sample(10, 200, 90), sample(20, 100, 70), sample(60, 160, 50)]),
                        AttemptSamples(2, 1, [sample(30, 40), sample(99, 100)])], (0, 100), buckets=2)
    assert util.samples == 5
    assert util.cpu_by_task == {1: ((25.0, 75.0), (75.0, 80.0)), 2: ((25.0, 40.0), (75.0, 100.0))}
    assert util.gpu_by_task == {1: ((25.0, 80.0), (75.0, 50.0))}  # task 2 sampled no GPU
    assert util.cpu_mean == ((25.0, (100 + 50 + 40) / 3), (75.0, 90.0))  # CPU in % of the attempt's cores
    assert util.gpu_mean == ((25.0, 80.0), (75.0, 50.0))


def test_utilisation_clamps_samples_outside_the_window_into_its_ends() -> None:
    util = utilisation([AttemptSamples(0, 1, [sample(-5, 10), sample(105, 30)])], (0, 100), buckets=4)
    assert util.cpu_mean == ((12.5, 10.0), (87.5, 30.0))


def test_samples_of_a_whole_file_skip_events_bad_lines_and_the_reaped_sample() -> None:
    lines = ['{"event": "start", "t": 1, "nvml": "ok"}', '{"t": 2, "cpu_pct": 50, "rss_mb": 10, "nproc": 1}',
             "not json", '{"t": 3, "cpu_pct": 0, "rss_mb": 0, "nproc": 0}', '{"event": "end", "t": 4}']
    assert samples_of(lines) == (Sample(2.0, 50.0, 10.0, None, None),)


GPU = Amount(gpu_hours=1, cpu_hours=2, money=3)


def test_spend_accumulates_the_rates_of_what_runs_between_starts_and_ends() -> None:
    # one GPU from 0 to 2 h, a second from 1 h to 3 h
    curve = spend_curve([RunCost(0, 7200, GPU), RunCost(3600, 10800, GPU)], now=99999)
    assert [(t, a.gpu_hours) for t, a in curve] == [(0, 0), (3600, 1), (7200, 3), (10800, 4)]
    assert curve[-1][1] == Amount(4, 8, 12)


def test_a_running_attempt_spends_until_now_and_a_zero_length_run_nothing() -> None:
    curve = spend_curve([RunCost(0, None, GPU), RunCost(50, 50, GPU)], now=1800)
    assert [(t, a.gpu_hours) for t, a in curve] == [(0, 0), (1800, 0.5)]
    assert spend_curve([], now=10) == []


def test_a_long_curve_is_thinned_and_keeps_its_last_point() -> None:
    runs = [RunCost(i * 10, i * 10 + 5, GPU) for i in range(1000)]  # 2000 breakpoints
    curve = spend_curve(runs, now=0, max_points=100)
    assert 100 <= len(curve) <= 102
    assert curve[-1] == spend_curve(runs, now=0, max_points=10**6)[-1]
    assert curve[-1][1].gpu_hours == pytest.approx(1000 * 5 / 3600)


@pytest.mark.parametrize(("limits", "spent", "dims"), [
    ({"gpu_hours": 10.0, "money": 50.0}, Amount(), ["gpu_hours", "money"]),  # the budget's dimensions
    ({}, Amount(gpu_hours=0.1, cpu_hours=1), ["gpu_hours"]),
    ({}, Amount(cpu_hours=1), ["cpu_hours"]),  # a CPU-only campaign
])
def test_spend_dimensions(limits: dict[str, float], spent: Amount, dims: list[str]) -> None:
    assert spend_dimensions(limits, spent) == dims


ROWS = [(0, 1, 0, "loss", 2.0, None), (0, 1, 0, "acc", 0.1, None), (0, 1, 10, "loss", 1.5, None),
        (2, 1, 0, "loss", 2.2, None), (3, 1, 0, "loss", 2.1, None),
        (0, 2, 10, "loss", 1.4, None), (0, 2, 20, "loss", 1.2, None)]  # task 0's retry resumes at step 10
RUNGS = campaign_settings({"configs": 2, "rungs": [
    {"name": "screen", "promote": {"metric": "val_loss", "goal": "min", "eta": 2}},
    {"name": "grow", "promote": None}, {"name": "full", "promote": None}]})


def test_curves_one_panel_per_rung_one_curve_per_task() -> None:
    rungs = curves_by_rung(ROWS, "loss", RUNGS)
    assert [(r.rung, r.name, sorted(r.curves)) for r in rungs] == [(0, "screen", [0]), (1, "grow", [2, 3]),
                                                                   (2, "full", [])]
    assert rungs[0].curves[0] == ((0, 2.0), (10, 1.5), (10, 1.4), (20, 1.2))


def test_without_rungs_every_task_is_in_one_unnamed_panel() -> None:
    [only] = curves_by_rung(ROWS, "loss", CampaignSettings())
    assert (only.name, sorted(only.curves)) == ("", [0, 2, 3])


def test_a_task_beyond_the_named_rungs_is_shown_not_dropped() -> None:
    rungs = curves_by_rung([(9, 1, 0, "loss", 1.0, None)], "loss",
                           campaign_settings({"configs": 2, "rungs": [{"name": "a"}, {}]}))
    assert [(r.name, sorted(r.curves)) for r in rungs] == [("a", []), ("rung1", []), ("rung2", []),
                                                           ("rung3", []), ("rung4", [9])]


@pytest.mark.parametrize(("settings", "names", "metric"), [
    (RUNGS, ["loss", "acc"], "val_loss"),  # what the rungs promote by, even before anyone reported it
    (CampaignSettings(), ["loss", "acc"], "loss"),  # the first reported
    (campaign_settings({"rungs": [{"name": "a"}]}), ["acc"], "acc"),
    (CampaignSettings(), [], None),
])
def test_default_metric(settings: CampaignSettings, names: list[str], metric: str | None) -> None:
    assert default_metric(settings, names) == metric


def test_metric_names_in_the_order_first_reported() -> None:
    assert metric_names(ROWS) == ["loss", "acc"]
