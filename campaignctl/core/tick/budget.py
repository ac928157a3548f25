"""Budget guardrails: compare a campaign's spend with its budget and decide. Pure.

- warn: spent + committed passes `warn_at` of a limit → one `alert` decision per limit value;
- admission: the remaining budget (limit − spent − committed) pays for k more pending attempts at
  their time limit; if fewer than all pending, at most running + k may run at once (the arrays'
  ArrayTaskThrottle), so no attempt starts that the budget cannot pay to its end;
- limit: k is 0 (or nothing remains) → `hold` every pending element (`scontrol hold`) and pause
  the campaign; `campaignctl resume` releases them once the budget is raised.
Campaign-wide decisions carry task index -1 and the token `campaign`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from campaignctl.core.decisions.action_records import Alert, Hold
from campaignctl.core.decisions.decision import Decision, TaskView
from campaignctl.core.spec.spec import Budget
from campaignctl.core.usage.cost import Spend

CAMPAIGN_TASK = -1
CAMPAIGN_TOKEN = "campaign"
UNITS = {"gpu_hours": "GPU-h", "cpu_hours": "CPU-h", "money": "", "energy_kwh": "kWh"}


@dataclass(frozen=True, slots=True)
class BudgetLine:
    dimension: str
    limit: float
    spent: float
    committed: float
    projected: float

    @property
    def remaining(self) -> float:
        return self.limit - self.spent - self.committed

    @property
    def used_fraction(self) -> float:
        return (self.spent + self.committed) / self.limit if self.limit else 1.0

    def describe(self) -> str:
        unit = UNITS[self.dimension]
        return (f"{self.dimension} {_n(self.spent)} spent + {_n(self.committed)} committed of "
                f"{_n(self.limit)}{' ' + unit if unit else ''} ({self.used_fraction:.0%})")


@dataclass(frozen=True, slots=True)
class Assessment:
    lines: tuple[BudgetLine, ...]
    running: int
    pending: int
    affordable: int | None  # pending attempts the remaining budget pays at their limit; None: unbounded
    exhausted: bool

    def to_dict(self) -> dict[str, object]:
        return {"lines": [{"dimension": x.dimension, "limit": x.limit, "spent": round(x.spent, 6),
                           "committed": round(x.committed, 6), "projected": round(x.projected, 6),
                           "remaining": round(x.remaining, 6)} for x in self.lines],
                "running": self.running, "pending": self.pending, "affordable": self.affordable,
                "exhausted": self.exhausted}


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    decisions: list[Decision] = field(default_factory=list)
    cap: int | None = None  # campaign-wide concurrency the budget admits (None: no budget cap)
    pause: bool = False


def assess(budget: Budget, spend: Spend) -> Assessment:
    lines = tuple(BudgetLine(d, limit, spend.spent.get(d), spend.committed.get(d), spend.projected.get(d))
                  for d, limit in budget.limits().items())
    affordable: int | None = None
    for line in lines:
        one = spend.per_task.get(line.dimension)
        if one > 0:
            k = max(0, math.floor(line.remaining / one + 1e-9))
            affordable = k if affordable is None else min(affordable, k)
    exhausted = any(x.remaining <= 0 for x in lines) or (affordable == 0 and spend.pending > 0)
    return Assessment(lines, spend.running, spend.pending, affordable, exhausted)


def guard(budget: Budget, a: Assessment, views: Sequence[TaskView], paused: bool,
          alerted: Collection[str]) -> BudgetPlan:
    """Decisions for this tick; `alerted` holds the keys of alerts already in the log."""
    decisions = [_alert(line, key, budget.warn_at) for line in a.lines
                 if line.used_fraction >= budget.warn_at
                 and (key := f"warn:{line.dimension}:{line.limit:g}") not in alerted]
    if paused:
        return BudgetPlan(decisions)
    if a.exhausted:
        return BudgetPlan([*decisions, _hold(a, views)], pause=True)
    if a.affordable is not None and a.affordable < a.pending:
        return BudgetPlan(decisions, cap=a.running + a.affordable)
    return BudgetPlan(decisions)


def pending_elements(views: Sequence[TaskView]) -> dict[str, list[int]]:
    """Pending latest attempts by array job id → array indices (what `scontrol hold` takes)."""
    out: dict[str, list[int]] = {}
    for view in views:
        latest = view.latest
        if latest.state == "PENDING" and latest.job_id and "_" in latest.job_id:
            array, _, index = latest.job_id.partition("_")
            out.setdefault(array, []).append(int(index))
    return {k: sorted(v) for k, v in sorted(out.items())}


def _alert(line: BudgetLine, key: str, warn_at: float) -> Decision:
    reason = f"budget warning: {line.describe()}, past the warning level of {warn_at:.0%}."
    return Decision(CAMPAIGN_TASK, CAMPAIGN_TOKEN, "budget", "alert", reason,
                    _line_inputs(line), Alert(key=key, level="warn"))


def _hold(a: Assessment, views: Sequence[TaskView]) -> Decision:
    binding = min(a.lines, key=lambda x: x.remaining / x.limit if x.limit else 0.0)
    arrays = pending_elements(views)
    held = sum(len(v) for v in arrays.values())
    reason = (f"budget reached: {binding.describe()}; the rest cannot pay for another attempt at its "
              f"time limit, so {held} pending element(s) are held and the campaign is paused "
              "(raise the budget, submit the spec again, then `campaignctl resume`).")
    return Decision(CAMPAIGN_TASK, CAMPAIGN_TOKEN, "budget", "hold", reason,
                    {**_line_inputs(binding), "budget": a.to_dict()},
                    Hold(arrays={a: tuple(i) for a, i in arrays.items()}, level="limit"))


def _line_inputs(line: BudgetLine) -> dict[str, object]:
    return {"dimension": line.dimension, "limit": line.limit, "spent": round(line.spent, 6),
            "committed": round(line.committed, 6), "projected": round(line.projected, 6)}


def _n(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"

