"""The report's charts, drawn: what a reader sees of them."""

from __future__ import annotations


def test_decision_labels_stay_inside_the_figure_at_either_end_of_the_window() -> None:
    """Issue 40: labels of the window's last decisions ran out of the plot's frame (each was written to the
    right of its marker); they are written to the left in its second half."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from campaignctl.adapters.charts import decisions_figure
    from campaignctl.core.screens.timeline import DecisionPoint

    window = (1_700_000_000.0, 1_700_003_600.0)
    points = [DecisionPoint(window[0], 0, "oom", "resubmit", "applied"),
              DecisionPoint(window[0] + 1800, 1, "budget", "hold", "applied"),
              DecisionPoint(window[1], 7, "search_with_a_long_rule_name", "resubmit_with_more_memory", "applied"),
              DecisionPoint(window[1], -1, "oom", "give_up", "failed")]
    fig = decisions_figure(points, window)
    FigureCanvasAgg(fig).draw()
    frame = fig.axes[0].bbox  # the plot's frame, inside which the legend does not lie
    labels = [t for t in fig.axes[0].texts if t.get_text()]
    assert len(labels) == 4
    for text in labels:
        box = text.get_window_extent()
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, (text.get_text(), box, frame)
