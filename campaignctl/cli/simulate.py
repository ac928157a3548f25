"""`campaignctl simulate`: try policies on a simulated cluster before they touch a campaign."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from campaignctl.cli.common import JsonOption, console, err_console, print_json

if TYPE_CHECKING:
    from campaignctl.services.simulate import SimulateResult


def simulate(
    spec: Annotated[Path, typer.Argument(help="Campaign spec (YAML).", show_default=False)],
    policy: Annotated[list[str] | None, typer.Option(
        "--policy", "-p", help="campaign (the spec's own), attempt-scaled[:N], or a policy file or built-in "
                               "name; repeat to compare. Default: campaign and attempt-scaled.")] = None,
    workload: Annotated[str | None, typer.Option(
        "--workload", "-w", help="synthetic:KEY=V,... (docs/simulate.md lists the keys) or a trace CSV.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the drawn workload and chance events.")] = 1,
    cluster: Annotated[Path | None, typer.Option(
        "--cluster", help="Cluster YAML (nodes, partitions). Default: 8 nodes shaped by the spec.")] = None,
    clusters: Annotated[int, typer.Option(
        "--clusters", min=1, max=16, help="Simulate this many copies of the cluster (named as the spec's "
        "clusters:), the first busy for the workload's busy=HOURS, each policy run all on the first, placed at "
        "submit, and placed and moved (docs/clusters.md).")] = 1,
    json_out: JsonOption = False,
) -> None:
    """Run the campaign's tasks on a simulated Slurm cluster (backfill, throttles, holds,
    preemption; drawn OOMs, timeouts, node failures, exit codes) under each policy, which ticks
    every 5 simulated minutes through the same decide_tick as reconcile. Prints tasks completed,
    makespan, GPU/CPU-hours allocated and wasted on failed attempts, spend and decisions by rule.

    Example: campaignctl simulate templates/sweep.yaml -w synthetic:tasks=5000
    Several clusters: campaignctl simulate templates/sweep.yaml --clusters 2 -w synthetic:tasks=400,busy=6
    """
    from campaignctl.services.simulate import simulate as simulate_service

    shown: dict[str, int] = {}

    def progress(name: str, done: int, total: int) -> None:  # a line per tenth of the tasks settled
        tenth = done * 10 // max(total, 1)
        if tenth > shown.get(name, 0):
            shown[name] = tenth
            err_console.print(f"{name}: {done} of {total} tasks settled")

    result = simulate_service(spec, policy or [], workload, seed, cluster, progress=None if json_out else progress,
                              clusters=clusters)
    if json_out:
        print_json("simulate", result.to_dict())
        return
    render(result)


def _of(search: dict[str, object] | None, key: str) -> object:
    value = (search or {}).get(key)
    return "-" if value is None else f"{value:.4f}" if isinstance(value, float) else value


def render(result: SimulateResult) -> None:
    console.print(f"{result.campaign}: {result.runs[0].tasks} tasks, workload {result.workload}, seed {result.seed}, "
                  f"cluster {result.cluster} ({result.nodes} nodes), a tick every {result.tick_s // 60} min")
    table = Table("", *(r.policy for r in result.runs))
    budget = ", ".join(f"{k} {v:g}" for k, v in result.budget.items() if v is not None) or "none"
    rows: list[tuple[str, list[object]]] = [
        ("completed", [r.outcomes.get("completed", 0) for r in result.runs]),
        ("given up", [r.outcomes.get("given_up", 0) for r in result.runs]),
        ("left unfinished", [r.tasks - sum(r.outcomes.get(k, 0) for k in ("completed", "given_up", "stopped"))
                             for r in result.runs]),
        ("attempts", [r.attempts for r in result.runs]),
        ("makespan (h)", [r.makespan_h for r in result.runs]),
        ("GPU-hours allocated", [r.gpu_hours for r in result.runs]),
        ("CPU-hours allocated", [r.cpu_hours for r in result.runs]),
        ("GPU-hours wasted", [r.wasted_gpu_hours for r in result.runs]),
        ("CPU-hours wasted", [r.wasted_cpu_hours for r in result.runs]),
        ("wasted ÷ attempt-scaled", [r.wasted_vs_baseline if r.wasted_vs_baseline is not None else "-"
                                    for r in result.runs]),
        (f"spend (budget: {budget})", [r.spend for r in result.runs]),
    ]
    if any(r.search for r in result.runs):  # the synthetic objective's optimum is 1 (core/sim/trials.py)
        rows += [("search: best (optimum 1)", [_of(r.search, "best") for r in result.runs]),
                 ("search: trials to within 5 %", [_of(r.search, "within_5pct_after") for r in result.runs])]
    rows.append(("decision log rows (per task)", [f"{r.log_rows} ({r.log_rows / max(1, r.tasks):.2f})"
                                                   for r in result.runs]))
    if any(r.lemon_gpu_hours for r in result.runs):
        rows.append(("GPU-hours wasted on lemon nodes", [r.lemon_gpu_hours for r in result.runs]))
    unit = "GPU" if any(r.gpu_hours for r in result.runs) else "CPU"
    for end in sorted({k for r in result.runs for k in r.wasted_by_end}):
        rows.append((f"  wasted on {end} ({unit}-h)", [r.wasted_by_end.get(end, 0.0) for r in result.runs]))
    for key in sorted({k for r in result.runs for k in r.decisions}):
        rows.append((key, [r.decisions.get(key, 0) for r in result.runs]))
    for key in sorted({k for r in result.runs for k in r.proposals}):
        rows.append((f"{key} (proposed only)", [r.proposals.get(key, 0) for r in result.runs]))
    for label, values in rows:
        table.add_row(label, *(str(v) for v in values))
    console.print(table)
