"""How `policy replay` reads in a terminal: a header, the differences, the cost line."""

from __future__ import annotations

from rich.table import Table

from campaignctl.cli.common import console, styled
from campaignctl.core.governance.replay_compare import Side
from campaignctl.core.usage.cost import Amount
from campaignctl.services.replay import ReplayResult

KIND_LABEL = {"changed": "changed", "only_actual": "only actual", "only_replay": "only replay",
              "delayed": "same, delayed"}


def render_replay(result: ReplayResult) -> None:
    recorded = ", ".join(result.recorded_policies) or "none (no decisions recorded)"
    console.print(styled((result.campaign, "bold"), ": replayed ", (result.policy, "bold"),
                         f" ({result.policy_digest}, {result.policy_file}) over {result.ticks} recorded tick(s)"),
                  soft_wrap=True)
    console.print(f"recorded decisions by: {recorded}; current policy {result.current_policy}",
                  soft_wrap=True)
    console.print(f"{result.actual_decisions} recorded decision(s) of the replayed kinds, "
                  f"{result.replayed_decisions} made by the replay, {result.reproduced} reproduced", soft_wrap=True)
    for caveat in result.caveats:
        console.print(f"  note: {caveat}", soft_wrap=True)
    if result.not_replayed:
        other = ", ".join(f"{n} {action}" for action, n in sorted(result.not_replayed.items()))
        console.print(f"  not replayed: {other}", soft_wrap=True)
    if result.identical:
        console.print(f"no differences: {result.reproduced} decision(s) reproduced")
    else:
        table = Table("tick", "task", "attempt", "difference", "actual", "replay", "note")
        for d in result.differences:
            ticks = sorted({s.tick_id for s in (d.actual, d.replay) if s is not None})
            table.add_row("/".join(map(str, ticks)), str(d.task_index), f"{d.attempt or '-'} ({d.attempt_token})",
                          KIND_LABEL.get(d.kind, d.kind), _side(d.actual), _side(d.replay), d.note)
        console.print(table)
        for who, counts in (("the recorded policy", result.only_actual), ("the replayed policy", result.only_replay)):
            if counts:
                made = ", ".join(f"{rule_action} ×{n}" for rule_action, n in sorted(counts.items()))
                console.print(f"decided only by {who}: {made}", soft_wrap=True)
    console.print(f"projected cost of retries: actual {_amount(result.actual_cost)}; replay "
                  f"{_amount(result.replay_cost)}; delta {_amount(result.cost_delta, signed=True)}",
                  soft_wrap=True)


def _side(side: Side | None) -> str:
    if side is None:
        return "-"
    what = ", ".join(f"{k} {a} → {b}" for k, (a, b) in side.changes.items())
    return f"{side.rule} → {side.action}" + (f" ({what})" if what else "")


def _amount(a: Amount, signed: bool = False) -> str:
    fmt = "{:+.2f}" if signed else "{:.2f}"
    return (f"{fmt.format(a.gpu_hours)} GPU-h, {fmt.format(a.cpu_hours)} CPU-h, "
            f"{fmt.format(a.money)} money")
