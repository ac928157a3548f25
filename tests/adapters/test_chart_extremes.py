"""Metric values an axis cannot span: a task that reported 1e308 beside one at -1e308 (any finite
float is a valid metric) made `report` exit 1 inside matplotlib ("arange: cannot compute length").
Such points are left out of the chart and counted in its panel title; results keep them."""

from __future__ import annotations

from campaignctl.adapters.charts import metrics_png
from campaignctl.core.screens.report_series import RungCurves

PNG = b"\x89PNG\r\n\x1a\n"


def test_points_beyond_what_an_axis_spans_are_left_out_and_the_chart_is_drawn() -> None:
    curves = {0: [(0, 1e308), (1, -1e308), (2, 0.5)], 1: [(0, 1.0), (1, 2.0)]}
    assert metrics_png([RungCurves(0, "", curves)], "loss").startswith(PNG)
    assert metrics_png([RungCurves(0, "screen", {0: [(0, -1e308)]}), RungCurves(1, "full", {})], "loss").startswith(PNG)
