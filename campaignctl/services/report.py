"""`report`: a campaign as one self-contained HTML page and its charts as PNGs, from the store and
the run directory (no Slurm call)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from campaignctl.adapters.paths import public_dir, write_public
from campaignctl.adapters.store import Store
from campaignctl.core.base.clock import epoch
from campaignctl.core.base.errors import InputError, OutputError
from campaignctl.core.base.hostlist import split_nodes
from campaignctl.core.nodes.evidence import CLEAR, SUSPECT
from campaignctl.core.nodes.ledger import recorded_exclusion
from campaignctl.core.screens.report_page import Chart, Page, Table, render_page
from campaignctl.core.screens.status import NOT_SUBMITTED, varying_keys_of
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.tick.budget import UNITS
from campaignctl.core.tuning.ladder import promoted_by_rung, rung_names, rung_of, unstarted_label
from campaignctl.core.usage.cost import DIMENSIONS
from campaignctl.core.usage.efficiency import COLUMNS, cells, efficiency_text
from campaignctl.core.usage.node_telemetry import NODE_HEADERS, node_cells
from campaignctl.services.campaigns import find_campaign
from campaignctl.services.report_charts import build_charts
from campaignctl.services.report_inputs import ReportInputs, gather
from campaignctl.services.results import results as results_service

PAGE = "index.html"
TABLE_ROWS = 500  # rows per table on the page: the most recent decisions, the first tasks


@dataclass(frozen=True, slots=True)
class ReportResult:
    campaign: str
    out_dir: str
    page: str
    files: list[str]  # every file written, the page first
    charts: dict[str, str]  # chart id → why it has nothing to draw ("" when it has)
    metric: str | None  # the metric the metrics chart draws

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def report(name: str, out_dir: Path, metric: str | None = None, now: float | None = None) -> ReportResult:
    store = Store.open()
    record = find_campaign(store, name)
    inputs = gather(store, record, time.time() if now is None else now)
    charts, drawn = build_charts(inputs, metric)
    page = Page(f"Campaign {record.name}", f"campaignctl report, {_local(inputs.now)}",
                summary_rows(inputs), charts, [task_table(inputs), *cluster_table(inputs), *node_table(inputs),
                                                *ledger_table(inputs), decision_table(inputs)],
                results_table(record.name, metric) if inputs.metric_rows else [])  # none reported: no ranking
    files = write_report(out_dir, render_page(page), charts)
    return ReportResult(record.name, str(out_dir), str(out_dir / PAGE), files,
                        {c.id: c.note for c in charts}, drawn)


def write_report(out_dir: Path, page: str, charts: list[Chart]) -> list[str]:
    """The PNGs, then the page (each temp-then-rename, mode 0644): a reader never sees half a file."""
    try:
        public_dir(out_dir)
        for chart in charts:
            write_public(out_dir / chart.file, chart.png)
        write_public(out_dir / PAGE, page.encode())
    except OSError as exc:
        raise OutputError(f"cannot write the report to {out_dir}: {exc.strerror or exc}",
                          "choose a directory you can write to with --out") from None
    return [str(out_dir / PAGE), *(str(out_dir / c.file) for c in charts)]


def _local(t: float) -> str:
    return datetime.fromtimestamp(t).astimezone().isoformat(sep=" ", timespec="seconds")


def latest_states(inputs: ReportInputs) -> dict[int, tuple[str, int]]:
    """Task → (state of its latest attempt as last observed, attempts); without one NOT_SUBMITTED,
    or NOT_PROMOTED for a config its rung did not keep."""
    decided = promoted_by_rung((e.mode, e.typed) for e in inputs.decisions)
    out = {task: (unstarted_label(task, inputs.settings, decided) or NOT_SUBMITTED, 0) for task in inputs.params}
    for span in inputs.spans:  # ordered by task, then attempt: the last one wins
        out[span.task_index] = (span.state, span.attempt_number)
    return out


def summary_rows(inputs: ReportInputs) -> list[tuple[str, str]]:
    r = inputs.record
    states = Counter(state for state, _ in latest_states(inputs).values())
    enforced = Counter(e.action for e in inputs.decisions if e.mode == "enforce")
    rows = [("campaign", f"{r.name} ({r.state}), revision {r.current_revision}, owner {r.owner}"),
            ("created", _local(epoch(r.created_at))),
            ("tasks", f"{len(inputs.params)}: " + ", ".join(f"{k} {v}" for k, v in states.most_common())),
            ("attempts", str(len(inputs.spans))),
            ("decisions", ", ".join(f"{k} {v}" for k, v in sorted(enforced.items())) or "none"),
            ("efficiency", efficiency_text(inputs.campaign_efficiency)),
            ("states as of", "the last reconcile tick (the report asks Slurm nothing)")]
    return rows + spend_rows(inputs)


def spend_rows(inputs: ReportInputs) -> list[tuple[str, str]]:
    limits = inputs.settings.budget.limits()
    s = inputs.spend
    rows = []
    for dim in DIMENSIONS:
        spent, committed, projected = s.spent.get(dim), s.committed.get(dim), s.projected.get(dim)
        if spent or committed or projected or dim in limits:
            text = f"{spent:.3g} spent + {committed:.3g} committed + {projected:.3g} projected"
            limit = f" of {limits[dim]:g} {UNITS[dim]}".rstrip() if dim in limits else ""
            rows.append((dim, text + limit))
    return rows or [("spend", "nothing spent yet")]


def _rung_label(task: int, settings: CampaignSettings) -> str:
    names, rung = rung_names(settings), rung_of(task, settings)
    return (names[rung] or "-") if rung < len(names) else str(rung)


def task_table(inputs: ReportInputs) -> Table:
    """One row per task; with a `nodes` column when an attempt spanned several nodes."""
    states = latest_states(inputs)
    multi = any(len(split_nodes(nodes)) > 1 for nodes in inputs.nodes.values())
    rows = [[str(task), _rung_label(task, inputs.settings), " ".join(f"{k}={v}" for k, v in params.items()),
             states[task][0], *([inputs.nodes.get(task) or "-"] if multi else []), str(states[task][1]),
             *cells(inputs.efficiency.get(task))]
            for task, params in sorted(inputs.params.items())]
    return Table("tasks", "Tasks (cpu, mem, time, gpu, gpu mem: % of what Slurm allocated; "
                 "kWh: energy, by sacct for the node or NVML for the GPUs)",
                 ("task", "rung", "params", "state", *(["nodes"] if multi else []), "attempts", *COLUMNS),
                 rows[:TABLE_ROWS], max(0, len(rows) - TABLE_ROWS))


def cluster_table(inputs: ReportInputs) -> list[Table]:
    """A campaign with `clusters:`: what each cluster's attempts spent, and the work moved off it."""
    if not inputs.cluster_spend:
        return []
    moved = Counter(str(e.inputs.get("cluster", "")) for e in inputs.decisions if e.rule == "move"
                    and e.action == "cancel" and e.status == "applied")
    rows = [[cluster, *(f"{getattr(spend.spent, dim):.3g}" for dim in DIMENSIONS), str(moved.get(cluster, 0))]
            for cluster, spend in inputs.cluster_spend.items()]
    return [Table("clusters", "Spend by cluster (spent only), and the pending elements moved off each "
                  "(docs/clusters.md)", ("cluster", *DIMENSIONS, "moved off"), rows, 0)]


def node_table(inputs: ReportInputs) -> list[Table]:
    """Multi-node attempts, one row per node from its own sampler: a straggler shows."""
    if not inputs.node_lines:
        return []
    rows = [node_cells(line) for line in inputs.node_lines]
    return [Table("nodes", "Nodes of multi-node attempts (each node's own sampler)", NODE_HEADERS,
                  rows[:TABLE_ROWS], max(0, len(rows) - TABLE_ROWS))]


def ledger_table(inputs: ReportInputs) -> list[Table]:
    """The node ledger as this campaign met it: its evidence against nodes, the clean runs that
    cleared them, and each exclusion its decisions applied."""
    rows = []
    for e in inputs.decisions:
        applied = recorded_exclusion([e.inputs])
        if e.action in (SUSPECT, CLEAR):
            rows.append([_local(epoch(e.created_at)), str(e.params.get("node", "")), e.action, e.reason])
        elif applied is not None and (applied.nodes or applied.probation):
            rows.append([_local(epoch(e.created_at)), ", ".join((*applied.nodes, *applied.probation)),
                         f"left out of {e.action}", "; ".join(applied.why.values())])
    if not rows:
        return []
    return [Table("ledger", "Node ledger: evidence against nodes and the nodes left out (docs/nodes.md)",
                  ("time", "node", "what", "why"), rows[-TABLE_ROWS:], max(0, len(rows) - TABLE_ROWS))]


def results_table(name: str, metric: str | None) -> list[Table]:
    """What `campaignctl results` ranks, the winner first: the section a reader looks for first.
    None while no task reported a metric."""
    try:
        ranked = results_service(name, metric)
    except InputError:  # the metric asked for was not reported: the metrics chart says which were
        return []
    if ranked.metric is None or not ranked.configs:
        return []
    keys = varying_keys_of([c.params for c in ranked.configs])
    winner = next((c for c in ranked.configs if c.rank == 1), None)
    said = "no config reported it yet" if winner is None else "winner: config " + str(winner.config) + (
        f" ({' '.join(f'{k}={winner.params.get(k)}' for k in keys)})" if keys else "")
    packed = any(c.shared for c in ranked.configs)  # which configs ran sharing one job (`12_0 ×4`)
    rows = [["-" if c.rank is None else str(c.rank), str(c.config), *(str(c.params.get(k, "")) for k in keys),
             c.state, _figure(c.final), _figure(c.best), *([c.shared or "-"] if packed else [])]
            for c in ranked.configs[:TABLE_ROWS]]
    title = f"Results by {'the best' if ranked.by == 'best' else 'the last'} {ranked.metric} ({ranked.goal}): {said}"
    return [Table("results", title, ("rank", "config", *keys, "state", "final", "best",
                                     *(["shared job"] if packed else [])), rows,
                  max(0, len(ranked.configs) - TABLE_ROWS))]


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def decision_table(inputs: ReportInputs) -> Table:
    shown = inputs.decisions[-TABLE_ROWS:]
    rows = [[_local(epoch(e.created_at)), "campaign" if e.task_index < 0 else str(e.task_index), e.rule,
             e.action, ("shadow " if e.mode == "shadow" else "") + e.status + (f": {e.error}" if e.error else ""),
             e.reason] for e in shown]
    return Table("decisions", "Decisions", ("time", "task", "rule", "action", "outcome", "reason"), rows,
                 len(inputs.decisions) - len(shown))
