"""The report's five charts (six for a search) from the gathered inputs: what each shows, drawn by adapters/charts.py,
or a chart that says why there is nothing to draw."""

from __future__ import annotations

from collections.abc import Mapping

from campaignctl.adapters import charts
from campaignctl.core.model.params import Scalar
from campaignctl.core.screens.report_page import Chart
from campaignctl.core.screens.report_series import (
    curves_by_rung,
    default_metric,
    metric_names,
    spend_curve,
    spend_dimensions,
    utilisation,
)
from campaignctl.core.screens.status import param_digits, param_text, varying_keys_of
from campaignctl.core.screens.timeline import gantt_bars, time_window
from campaignctl.core.tick.budget import UNITS
from campaignctl.core.tuning.search import trials_of
from campaignctl.core.tuning.search_series import search_series
from campaignctl.services.report_inputs import ReportInputs

GANTT_ROWS = 300  # tasks drawn; beyond that a Gantt chart is a texture, not a picture


def build_charts(inputs: ReportInputs, metric: str | None = None) -> tuple[list[Chart], str | None]:
    """The charts in page order, and the metric drawn (the one asked for, else the default)."""
    window = time_window(inputs.spans, [p.t for p in inputs.points], inputs.now)
    name = metric or default_metric(inputs.settings, metric_names(inputs.metric_rows))
    shown = [gantt_chart(inputs, window), utilisation_chart(inputs, window), spend_chart(inputs, window),
             metrics_chart(inputs, name), decisions_chart(inputs, window)]
    return shown + ([search_chart(inputs)] if inputs.settings.search else []), name


def _empty(chart_id: str, title: str, caption: str, file: str, note: str) -> Chart:
    return Chart(chart_id, title, caption, file, charts.note_png(title, note), note)


def gantt_chart(inputs: ReportInputs, window: tuple[float, float]) -> Chart:
    title = "Tasks over time"
    bars = gantt_bars(inputs.spans, inputs.now)
    tasks = sorted({b.task_index for b in bars})  # a row per task that reached Slurm, none for the rest
    caption = ("One row per task that reached Slurm: grey while an attempt waits in the queue, then its run, "
               "blue while it runs and coloured by how it ended; a retry follows on the same row."
               + (f" The first {GANTT_ROWS} of {len(tasks)} tasks." if len(tasks) > GANTT_ROWS else ""))
    if not bars:
        return _empty("chart-gantt", title, caption, "gantt.png", "no attempt has reached Slurm yet")
    return Chart("chart-gantt", title, caption, "gantt.png", charts.gantt_png(bars, tasks[:GANTT_ROWS], window))


def utilisation_chart(inputs: ReportInputs, window: tuple[float, float]) -> Chart:
    title = "GPU and CPU utilisation over time"
    src = inputs.sampled_from
    caption = ("Telemetry samples in time buckets: each task's mean (thin lines, up to 30 tasks) and the mean "
               "over every task (black). CPU is % of the cores Slurm gave the attempt. Samples of "
               f"{src['files']} attempt(s) from their telemetry.jsonl, of {src['summaries']} from the last "
               "samples reconcile kept in the store.")
    util = utilisation(inputs.samples, window)
    if not util.samples:
        return _empty("chart-utilisation", title, caption, "utilisation.png",
                      "no telemetry samples: none in the attempts' telemetry.jsonl files or in the store "
                      "(telemetry off, or no attempt has run yet)")
    gpus = bool(util.gpu_mean) or bool(inputs.campaign_efficiency.gpu_hours)  # asked for GPUs, held them
    return Chart("chart-utilisation", title, caption, "utilisation.png", charts.utilisation_png(util, window, gpus))


def spend_chart(inputs: ReportInputs, window: tuple[float, float]) -> Chart:
    title = "Spend vs budget"
    budget = inputs.settings.budget
    limits = budget.limits()
    dims = spend_dimensions(limits, inputs.spend.spent)
    caption = ("Cumulative spend: each run costs what Slurm allocated to it per hour from its start to its "
               "end, or to now while it runs (a running attempt's start is known to a tick's resolution). "
               "Dashed: the budget; dotted: its warning level; circle: spent + committed now, as "
               "campaignctl status counts them."
               + ("" if limits else " No budget set (spec key budget)."))
    curve = spend_curve(inputs.runs, inputs.now)
    if not curve and not limits:
        return _empty("chart-spend", title, caption, "spend.png", "no attempt has run yet: nothing spent, no budget")
    curves = {d: [(window[0], 0.0), *((t, a.get(d)) for t, a in curve)] for d in dims}
    now_total = {d: (inputs.spend.spent.get(d), inputs.spend.committed.get(d)) for d in dims}
    units = {d: f"{d} ({UNITS[d]})" if UNITS[d] else d for d in dims}
    png = charts.spend_png({units[d]: v for d, v in curves.items()}, {units[d]: limits[d] for d in dims if d in limits},
                           budget.warn_at, {units[d]: v for d, v in now_total.items()}, window)
    return Chart("chart-spend", title, caption, "spend.png", png, "" if curve else "no attempt has run: nothing spent")


def metrics_chart(inputs: ReportInputs, name: str | None) -> Chart:
    laddered = bool(inputs.settings.rungs)
    title = "Training metrics per rung" if laddered else "Training metrics"
    names = metric_names(inputs.metric_rows)
    others = [n for n in names if n != name]
    panels = "one panel per rung, " if laddered else ""
    caption = (f"{name or 'A metric'} against the training step: {panels}one line per task (a "
               "retry continues its task's line)." + (f" Also reported: {', '.join(others)} "
                                                      "(choose with --metric)." if others else ""))
    if name is None:
        return _empty("chart-metrics", title, caption, "metrics.png",
                      "no training metrics reported yet (tasks call campaignctl.report(step=…, name=value))")
    rungs = curves_by_rung(inputs.metric_rows, name, inputs.settings)
    if not any(r.curves for r in rungs):
        return _empty("chart-metrics", title, caption, "metrics.png", f"no task reported {name!r}"
                      + (f"; reported: {', '.join(names)}" if names else ""))
    return Chart("chart-metrics", title, caption, "metrics.png",
                 charts.metrics_png(rungs, name, task_labels(inputs.params)))


def search_chart(inputs: ReportInputs) -> Chart:
    title = "Search: best so far, and where the trials were"
    search = inputs.settings.search
    assert search is not None
    series = search_series(search, trials_of((e.task_index, e.typed) for e in inputs.decisions
                                             if e.mode == "enforce" and e.action in ("ask", "tell")))
    caption = (f"Left: the final {search.metric} of each trial told so far, by the order the {search.sampler} "
               "sampler was asked for it, and the best so far. Right: each trial's parameters on their "
               "ranges (a log range on its log scale), coloured by its value; the best is drawn thick."
               + (f" {series.failed} trial(s) told failed or pruned are not drawn." if series.failed else ""))
    if not series.points:
        return _empty("chart-search", title, caption, "search.png", "no trial has completed yet")
    return Chart("chart-search", title, caption, "search.png", charts.search_png(series))


def task_labels(params: Mapping[int, Mapping[str, Scalar]]) -> dict[int, str]:
    """Each task's legend: the parameters that tell it apart (`lr=0.01`), not `task 16`."""
    keys, digits = varying_keys_of(params.values()), param_digits(params.values())
    return {task: param_text(p, keys, digits) or f"task {task}" for task, p in params.items()}


def decisions_chart(inputs: ReportInputs, window: tuple[float, float]) -> Chart:
    title = "Decisions on a timeline"
    caption = ("Every decision in the log when it was made, one row per rule, marked by its outcome "
               "(shadow proposals apart); the table below has each reason.")
    points = inputs.points
    if not points:
        return _empty("chart-decisions", title, caption, "decisions.png", "no decisions logged yet")
    return Chart("chart-decisions", title, caption, "decisions.png", charts.decisions_png(points, window))
