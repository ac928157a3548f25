"""The report's charts as PNG bytes, drawn with matplotlib's object API on the Agg canvas: no
pyplot, no display, no global backend. matplotlib is imported here only, and only when a chart is
drawn, so commands that draw nothing (reconcile under cron) never load it.

Time axes are local wall-clock time. A chart with nothing to draw still renders, saying why.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from campaignctl.core.screens.report_series import Point, RungCurves, Utilisation
from campaignctl.core.screens.timeline import Bar, DecisionPoint, kind_of, lanes
from campaignctl.core.tuning.search_series import SearchSeries

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WIDTH_IN = 11.0
MAX_LEGEND = 12
STATE_COLOR = {"PENDING": "#d9d9d9", "RUNNING": "#1f9bcf", "COMPLETED": "#2ca02c", "FAILED": "#d62728",
               "TIMEOUT": "#ff7f0e", "OUT_OF_MEMORY": "#9467bd", "NODE_FAIL": "#8c564b", "BOOT_FAIL": "#8c564b",
               "PREEMPTED": "#e377c2", "CANCELLED": "#7f7f7f", "DEADLINE": "#ff7f0e", "UNKNOWN": "#ff00ff"}
KIND_STYLE = {"applied": ("o", "#2ca02c", "applied"), "failed": ("X", "#d62728", "failed / rejected / expired"),
              "waiting": ("^", "#ff7f0e", "pending / awaiting approval"), "shadow": ("D", "#c000c0", "shadow proposal")}


# a value a metric may hold (any finite float) that an axis cannot span: 1e308 and -1e308 on one
# axis overflow matplotlib's tick arithmetic ("arange: cannot compute length"), and the report failed
DRAWABLE = 1e150

def _figure(height_in: float, rows: int = 1, cols: int = 1, sharex: bool = False) -> tuple[Figure, Any]:
    import matplotlib
    from matplotlib.figure import Figure

    matplotlib.rcParams["text.parse_math"] = False  # names from specs and policies are text, never $TeX$

    fig = Figure(figsize=(WIDTH_IN, height_in), dpi=100, layout="constrained")
    axes = fig.subplots(rows, cols, sharex=sharex, squeeze=False)
    return fig, axes


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    out = io.BytesIO()
    fig.savefig(out, format="png", metadata={"Software": None})
    return out.getvalue()


def _days(t: float) -> float:
    """Epoch seconds → matplotlib's date number (days since its epoch, 1970-01-01 UTC)."""
    return t / 86400.0


def _time_axis(ax: Axes, window: tuple[float, float]) -> None:
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    tz = datetime.now().astimezone().tzinfo
    locator = AutoDateLocator(tz=tz)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=tz))
    ax.set_xlabel(f"local time ({tz})")
    pad = (window[1] - window[0]) * 0.02  # room for the markers at either end
    ax.set_xlim(_days(window[0] - pad), _days(window[1] + pad))


def _say(ax: Axes, text: str) -> None:
    # Wrapped here, not with wrap=True: matplotlib 3.10 measures wrapped lines as mathtext whatever
    # text.parse_math says, so a metric named `$\frac{x$` raised ValueError from the parser.
    ax.text(0.5, 0.5, textwrap.fill(text, 90), transform=ax.transAxes, ha="center", va="center", fontsize=12,
            color="#a15c00")


def note_png(title: str, note: str, height_in: float = 2.5) -> bytes:
    """A chart with nothing to draw: its title and why."""
    fig, axes = _figure(height_in)
    ax = axes[0][0]
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    _say(ax, note)
    return _png(fig)


def gantt_png(bars: Sequence[Bar], tasks: Sequence[int], window: tuple[float, float]) -> bytes:
    """One row per task (task 0 on top), one bar per stretch, coloured by state."""
    row = {task: i for i, task in enumerate(tasks)}
    fig, axes = _figure(min(60.0, max(3.0, 0.22 * len(tasks) + 1.8)))
    ax = axes[0][0]
    by_state: dict[str, list[Bar]] = {}
    for bar in bars:
        if bar.task_index in row:
            by_state.setdefault(bar.state, []).append(bar)
    for state, group in by_state.items():
        ax.barh([row[b.task_index] for b in group], [max(_days(b.end) - _days(b.start), 1e-9) for b in group],
                left=[_days(b.start) for b in group], height=0.8, color=STATE_COLOR.get(state, "#bcbd22"),
                edgecolor="white", linewidth=0.5)
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color=STATE_COLOR.get(s, "#bcbd22"), label=s) for s in sorted(by_state)],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_yticks(range(len(tasks)), [f"task {t}" for t in tasks], fontsize=8 if len(tasks) < 60 else 5)
    ax.set_ylim(len(tasks) - 0.5, -0.5)
    ax.set_title("Tasks over time (grey: waiting in the queue; then the run, coloured by how it ended)")
    _time_axis(ax, window)
    return _png(fig)


def _lines(ax: Axes, by_task: Mapping[int, Sequence[Point]], mean: Sequence[Point], label: str) -> None:
    if len(by_task) <= 30:
        for task, points in by_task.items():
            ax.plot([_days(t) for t, _ in points], [v for _, v in points], linewidth=0.7, alpha=0.5,
                    label=f"task {task}" if len(by_task) <= MAX_LEGEND else None)
    ax.plot([_days(t) for t, _ in mean], [v for _, v in mean], color="black", linewidth=2.0, label=label)
    top = max([100.0, *(v for _, v in mean), *(v for pts in by_task.values() for _, v in pts)])
    ax.set_ylim(0, top * 1.05)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)


def utilisation_png(util: Utilisation, window: tuple[float, float], gpus: bool = True) -> bytes:
    """GPU utilisation over CPU use; a campaign that asked for no GPU gets the CPU panel alone
    (an empty GPU panel took half the chart)."""
    fig, axes = _figure(6.0 if gpus else 3.4, rows=2 if gpus else 1, sharex=True)
    cpu_ax = axes[-1][0]
    if gpus:
        gpu_ax = axes[0][0]
        if util.gpu_mean:
            _lines(gpu_ax, util.gpu_by_task, util.gpu_mean, "mean of all tasks")
        else:
            _say(gpu_ax, "no GPU samples: NVML unavailable on the nodes")
        gpu_ax.set_ylabel("GPU utilisation %")
    _lines(cpu_ax, util.cpu_by_task, util.cpu_mean, "mean of all tasks")
    cpu_ax.set_ylabel("CPU % of allocated cores")
    axes[0][0].set_title(f"{'GPU and CPU' if gpus else 'CPU'} utilisation over time ({util.samples} samples)")
    _time_axis(cpu_ax, window)
    return _png(fig)


def spend_png(curves: Mapping[str, Sequence[Point]], limits: Mapping[str, float], warn_at: float,
              now_total: Mapping[str, tuple[float, float]], window: tuple[float, float]) -> bytes:
    """Cumulative spend per dimension, its budget and warning level, and spent + committed now."""
    fig, axes = _figure(3.2 * len(curves), rows=len(curves), sharex=True)
    for (dim, points), ax_row in zip(curves.items(), axes, strict=True):
        ax = ax_row[0]
        ax.plot([_days(t) for t, _ in points], [v for _, v in points], color="#1f77b4", linewidth=2,
                label="spent (cumulative)")
        if dim in limits:
            ax.axhline(limits[dim], color="#d62728", linestyle="--", label=f"budget {limits[dim]:g}")
            ax.axhline(limits[dim] * warn_at, color="#ff7f0e", linestyle=":", label=f"warning at {warn_at:.0%}")
        if dim in now_total:
            spent, committed = now_total[dim]
            ax.plot([_days(window[1])], [spent + committed], marker="o", fillstyle="none", color="#9467bd",
                    linestyle="none", markersize=9, label=f"now: spent {spent:.3g} + committed {committed:.3g}")
        ax.set_ylabel(dim.replace("_", "-"))
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper left", fontsize=8)
    axes[0][0].set_title("Spend vs budget")
    _time_axis(axes[-1][0], window)
    return _png(fig)


def metrics_png(rungs: Sequence[RungCurves], metric: str, labels: Mapping[int, str] | None = None) -> bytes:
    """One panel per rung, one line per task: `metric` against the step; each line's legend its
    task's `labels` entry (the parameters that vary), else `task N`."""
    cols = min(3, len(rungs))
    rows = math.ceil(len(rungs) / cols)
    fig, axes = _figure(3.6 * rows, rows=rows, cols=cols)
    for i, ax in enumerate(axes.flat):
        if i >= len(rungs):
            ax.set_visible(False)
            continue
        rung = rungs[i]
        beyond = 0
        for task, whole in rung.curves.items():
            curve = [(s, v) for s, v in whole if abs(v) <= DRAWABLE]
            beyond += len(whole) - len(curve)
            ax.plot([s for s, _ in curve], [v for _, v in curve], marker="." if len(curve) < 30 else None,
                    linewidth=1, label=(labels or {}).get(task, f"task {task}"))
        if not rung.curves:
            _say(ax, f"no {metric} reported in this rung yet")
        elif len(rung.curves) <= MAX_LEGEND:
            ax.legend(fontsize=7)
        left_out = f"; {beyond} point(s) beyond ±{DRAWABLE:.0e} not drawn" if beyond else ""
        ax.set_title(f"{rung.name or 'all tasks'}: {len(rung.curves)} task(s){left_out}", fontsize=10)
        ax.set_xlabel("step")
        ax.set_ylabel(metric)
    fig.suptitle(f"{metric} per rung" if len(rungs) > 1 or rungs[0].name else f"{metric} per task")
    return _png(fig)


def _labels(points: Sequence[DecisionPoint], window: tuple[float, float]) -> dict[tuple[float, int], str]:
    """`action (task N)` per decision; decisions of one rule that would overlap (within 1 % of
    the axis) share one label."""
    rules, near = lanes(points), max(window[1] - window[0], 1.0) / 100
    groups: dict[tuple[int, int], list[DecisionPoint]] = {}
    for p in points:
        groups.setdefault((rules.index(p.rule), round((p.t - window[0]) / near)), []).append(p)
    out = {}
    for (lane, _), group in groups.items():
        texts = list(dict.fromkeys(f"{p.action} ({'campaign' if p.task_index < 0 else f'task {p.task_index}'})"
                                   for p in group))
        out[(group[0].t, lane)] = ", ".join(texts[:3]) + (f" +{len(texts) - 3}" if len(texts) > 3 else "")
    return out


def decisions_png(points: Sequence[DecisionPoint], window: tuple[float, float]) -> bytes:
    return _png(decisions_figure(points, window))


def decisions_figure(points: Sequence[DecisionPoint], window: tuple[float, float]) -> Figure:
    """One row per rule; a marker per decision by outcome; the action written next to it: to its
    right in the window's first half, to its left in the second, so no label runs past the frame."""
    rules = lanes(points)
    fig, axes = _figure(min(20.0, max(2.8, 0.45 * len(rules) + 1.8)))
    ax = axes[0][0]
    for kind, (marker, color, label) in KIND_STYLE.items():
        mine = [p for p in points if kind_of(p) == kind]
        if mine:
            ax.scatter([_days(p.t) for p in mine], [rules.index(p.rule) for p in mine], marker=marker,
                       color=color, s=50, label=label, zorder=3)
    if len(points) <= 40:
        middle = (window[0] + window[1]) / 2
        for (t, lane), text in _labels(points, window).items():
            left = t > middle
            ax.annotate(text, (_days(t), lane), xytext=(-4 if left else 4, 6), textcoords="offset points",
                        fontsize=7, rotation=-20 if left else 20, ha="right" if left else "left",
                        rotation_mode="anchor")
    ax.set_yticks(range(len(rules)), rules)
    ax.set_ylim(len(rules) - 0.5, -0.8)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_title("Decisions on a timeline (one row per rule)")
    _time_axis(ax, window)
    return fig


def search_png(series: SearchSeries) -> bytes:
    """Left: each told trial's value by trial number, and the best so far. Right: parallel
    coordinates, one line per trial across its parameters' ranges, coloured by its value (the
    best drawn thick)."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    fig, axes = _figure(4.0, cols=2)
    left, right = axes[0]
    numbers = [p.number for p in series.points]
    values = [p.value for p in series.points]
    left.scatter(numbers, values, s=14, color="#1f77b4", label=f"{series.metric} of a trial")
    left.step([n for n, _ in series.best_so_far], [v for _, v in series.best_so_far], where="post",
              color="#d62728", label="best so far")
    left.set_xlabel("trial (in the order asked)")
    left.set_ylabel(series.metric)
    left.legend(fontsize=7)
    left.set_title(f"{series.metric}, {series.goal}: best so far", fontsize=10)
    norm = Normalize(min(values), max(values)) if values else Normalize(0, 1)
    cmap = colormaps["viridis_r" if series.goal == "min" else "viridis"]
    xs = range(len(series.dimensions))
    best = series.best
    for p in series.points:
        right.plot(xs, p.coords, color=cmap(norm(p.value)), linewidth=2.5 if p is best else 0.8,
                   alpha=1.0 if p is best else 0.7)
    right.set_xticks(list(xs), series.dimensions)
    right.set_ylim(-0.05, 1.05)
    right.set_ylabel("place in its range (0 low, 1 high)")
    right.set_title("each trial's parameters, coloured by its value", fontsize=10)
    fig.colorbar(_mappable(norm, cmap), ax=right, label=series.metric)
    return _png(fig)


def _mappable(norm: Any, cmap: Any) -> Any:
    from matplotlib.cm import ScalarMappable

    return ScalarMappable(norm=norm, cmap=cmap)
