"""`status`: campaign overview or per-task table from at most one sacct call (for the attempts not settled)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, replace

from campaignctl.adapters import slurm
from campaignctl.adapters.decision_log import LoggedDecision
from campaignctl.adapters.output_log import program_printed
from campaignctl.adapters.store import Store
from campaignctl.adapters.tick_failures import TickFailures
from campaignctl.core.base.errors import NotFoundError
from campaignctl.core.model.attempt_paths import AttemptPaths
from campaignctl.core.model.records import CampaignRecord, HistoryRow
from campaignctl.core.nodes.ledger import recorded_exclusion
from campaignctl.core.policy.policy import Policy
from campaignctl.core.screens.stall import TickHealth
from campaignctl.core.screens.status import (
    NOT_SUBMITTED,
    QUIET_STATES,
    SETTLED,
    TaskRow,
    count_states,
    index_ranges,
    live,
    select_rows,
    sparkline,
    with_clusters,
)
from campaignctl.core.slurm.observe import resources_parser
from campaignctl.core.slurm.sacct import element_key
from campaignctl.core.slurm.sacct_records import JobObservation
from campaignctl.core.slurm.site_limits import WAITING
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.spec.spec import Resources
from campaignctl.core.tick.budget import assess
from campaignctl.core.tick.utilisation import classify, silent_while_working, window_of
from campaignctl.core.tuning.ladder import NOT_PROMOTED, RungProgress, ladder_progress
from campaignctl.core.usage.cost import UsageGroup, campaign_spend, energy_source, phase_of
from campaignctl.core.usage.efficiency import Efficiency, campaign_efficiency, memo, task_efficiency
from campaignctl.core.usage.telemetry import Summary
from campaignctl.services import status_reads
from campaignctl.services.campaigns import current_policy, find_campaigns, promotions, unstarted_labels
from campaignctl.services.cron import CronEntry, cron_entry
from campaignctl.services.metric_warnings import unmatched_pattern_warnings
from campaignctl.services.ticks import tick_health
from campaignctl.services.usage import AttemptUsage, attempt_usage, by_task, on_clusters
from campaignctl.services.usage import by_cluster as usage_by_cluster


@dataclass(frozen=True, slots=True)
class CampaignSummary:
    name: str
    state: str
    revision: int
    tasks: int
    counts: dict[str, int]
    attempts: int = 0
    decisions: dict[str, int] = field(default_factory=dict)  # action → how many (enforced)
    proposed: dict[str, int] = field(default_factory=dict)  # shadow proposals: action → how many
    awaiting_approval: int = 0
    rungs: list[RungProgress] = field(default_factory=list)  # a progressive campaign's ladder
    refused: list[str] = field(default_factory=list)  # submissions Slurm refused, waiting for their next try
    efficiency: Efficiency | None = None  # of what Slurm allocated, over every attempt that ran
    tick_failed: str = ""  # the last tick that covered the campaign failed on it: when and why
    node_ledger: list[str] = field(default_factory=list)  # the nodes its latest submission left out, and why

    @property
    def summary(self) -> str:
        states = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        acted = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(self.decisions.items()))
        shadow = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(self.proposed.items()))
        return (f"{self.tasks} tasks ({states}); {self.attempts} attempts; "
                f"decisions: {acted or 'none'}" + (f"; shadow proposals: {shadow}" if shadow else "")
                + (f"; {self.awaiting_approval} awaiting approval" if self.awaiting_approval else "")
                + (f"; rungs: {' · '.join(r.describe() for r in self.rungs)}" if self.rungs else "")
                + f"; campaign {self.state}")


@dataclass(frozen=True, slots=True)
class SpendView:
    """What the campaign spent, has committed and will spend, against its budget (if any)."""

    spent: dict[str, float]
    committed: dict[str, float]
    projected: dict[str, float]
    limits: dict[str, float]  # the budget's dimensions that are set
    exhausted: bool = False  # the budget cannot pay for another attempt at its time limit
    energy_source: str = ""  # what measured the energy spent: node (sacct), gpu (NVML), node+gpu
    by_cluster: dict[str, dict[str, float]] = field(default_factory=dict)  # `clusters:`: each one's spent


@dataclass(frozen=True, slots=True)
class StatusResult:
    campaigns: list[CampaignSummary]
    tasks: list[TaskRow] = field(default_factory=list)
    sacct_calls: int = 0
    spend: SpendView | None = None
    skipped_lines: int = 0  # lines of sacct output that could not be read and were skipped
    skipped: list[str] = field(default_factory=list)  # the first few, "sacct: why: line"
    ticks: TickHealth | None = None  # is reconcile running as cron expects (core/screens/stall.py)
    stale: str = ""  # Slurm did not answer (its error): the rows are the store's, as the last tick left them
    cron: CronEntry | None = None  # is a crontab line running `campaignctl reconcile`
    silent: list[str] = field(default_factory=list)  # running tasks busy with nothing in their output
    unmatched: list[str] = field(default_factory=list)  # metrics.from_output patterns that matched nothing
    rows_matched: int = 0  # tasks worth a row that matched; `tasks` holds the first `limit` of them

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        for summary, out in zip(self.campaigns, data["campaigns"], strict=True):
            out["summary"] = summary.summary
        return data


@dataclass(frozen=True, slots=True)
class _Said:
    last_decision: str = ""
    shadow: str = ""
    decision_status: str = ""


@dataclass(frozen=True, slots=True)
class _Figures:
    efficiency: Efficiency
    attempt_energy_kwh: tuple[float | None, ...] = ()


_NOT_SAID, _NO_FIGURES = _Said(), _Figures(Efficiency())  # a task with no decision, with no attempt


def _annotated(row: TaskRow, said: _Said, figures: _Figures) -> TaskRow:
    """The row with its decisions and figures: one copy of it (10,000 rows are copied per status)."""
    return replace(row, last_decision=said.last_decision, shadow=said.shadow, decision_status=said.decision_status,
                   efficiency=figures.efficiency, attempt_energy_kwh=figures.attempt_energy_kwh)


def _decisions(entries: list[LoggedDecision], rows: list[TaskRow]) -> dict[int, _Said]:
    """Each row's latest enforced decision, and apart from it the latest shadow proposal: a
    proposal never acted, so it must not stand where the decision that did is shown (the
    fields of the rows that have either)."""
    enforced: dict[int, LoggedDecision] = {}
    shadow: dict[int, LoggedDecision] = {}
    by_token = {r.token: r.index for r in rows if r.token}
    for e in entries:
        if e.task_index >= 0:
            (shadow if e.mode == "shadow" else enforced)[e.task_index] = e
        # a promotion is logged on the next rung's task; the task promoted shows it too, as a
        # retired one shows its `retire`
        source = by_token.get(e.attempt_token) if e.action == "promote" else None
        if source is not None and source != e.task_index:
            (shadow if e.mode == "shadow" else enforced)[source] = e
    return {index: _Said(_said(enforced.get(index)), _said(shadow.get(index)),
                         enforced[index].status if index in enforced else "")
            for index in enforced.keys() | shadow.keys()}


def _said(entry: LoggedDecision | None) -> str:
    return "" if entry is None else f"{entry.action} ({entry.rule}) {entry.status}"


def status(name: str | None = None, states: Collection[str] = (), tasks: Collection[int] = (),
           ask_slurm: bool = True, limit: int | None = None, campaign_figures: bool = True) -> StatusResult:
    """The campaigns (or one campaign's tasks, those in `states` and `tasks` when given) from one
    sacct call; from the store, marked stale, when Slurm does not answer. `ask_slurm` False: as the
    last tick stored them, with no Slurm call (`top`'s refreshes). `limit`: a page, the first that
    many rows worth a line (the QUIET_STATES ones, a line per state, come whole unless `states`
    names them): only those rows get their decisions, figures and telemetry. `campaign_figures`
    False: no campaign-wide efficiency (a fold over every attempt, which no table shows)."""
    store = Store.open()
    records = find_campaigns(store, name)
    # the campaigns list counts; a campaign's table reads the attempts of its page (and of every task not done)
    page = (limit or None) if name is not None else 0
    reads = {r.id: status_reads.read(store, r, page, tasks) for r in records}
    # attempts the last tick stored settled are shown as stored; sacct is asked for the rest
    seen = (status_reads.look(store, [a for r in reads.values() for a in live(r.history)]) if ask_slurm
            else status_reads.STORED)
    log = store.log
    summaries, detail = [], []
    entries: list[LoggedDecision] = []
    for record in records:
        done = reads[record.id].done
        entries = log.entries(record.id, params=False)
        enforced = [e for e in entries if e.mode == "enforce"]
        rows, rungs = _ladder(store, record, status_reads.rows_of(reads[record.id], seen))
        usage = attempt_usage(store, record.id) if campaign_figures else None
        efficiency = _campaign_efficiency(store, record, usage) if usage is not None else None
        summaries.append(CampaignSummary(record.name, record.state, record.current_revision,
                                         len(rows) + done, count_states(rows, {"COMPLETED": done}),
                                         len(reads[record.id].history) + done,
                                         dict(Counter(e.action for e in enforced)),
                                         dict(Counter(e.action for e in entries if e.mode == "shadow")),
                                         sum(e.status == "awaiting-approval" for e in enforced), rungs,
                                         _refused(store, record), efficiency, _tick_failed(store, record),
                                         _ledger_applied(enforced)))
        detail = rows
    skipped = seen.skipped
    base = StatusResult(summaries, [], seen.calls, None, len(skipped), skipped[:slurm.SHOWN_SKIPS],
                        tick_health(store), seen.stale, cron_entry())
    if name is None:
        return base
    _check_tasks(name, detail, tasks)
    record = records[0]
    # the done tasks not read match unless --task names others or --state leaves COMPLETED out
    unread = 0 if tasks or (states and "COMPLETED" not in {s.upper() for s in states}) else reads[record.id].done
    page_rows, matched = _page(select_rows(detail, states, tasks), limit, bool(states))
    said = _decisions(entries, detail)
    figures = _task_figures(store, record, page_rows, usage if usage is not None else
                            attempt_usage(store, record.id, {r.index for r in page_rows}))
    page_rows = [_annotated(r, said.get(r.index, _NOT_SAID), figures.get(r.index, _NO_FIGURES)) for r in page_rows]
    policy, settings = current_policy(store, record)
    shown = _with_usage(store, record, page_rows, policy, reads[record.id].history)
    if settings.clusters:
        shown = with_clusters(shown, slurm.cluster_name())
    return replace(base, tasks=shown, rows_matched=matched + unread,
                   spend=_spend(store, record, policy, settings, seen.observed),
                   silent=_silent(record, shown), unmatched=unmatched_pattern_warnings(store, record))


def _page(rows: list[TaskRow], limit: int | None, by_state: bool) -> tuple[list[TaskRow], int]:
    """The first `limit` rows worth a line and every quiet one (unless asked for by state: then
    they are rows too), and how many rows worth a line there were."""
    worth = rows if by_state else [r for r in rows if r.state not in QUIET_STATES]
    if limit is None or limit <= 0 or len(worth) <= limit:
        return rows, len(worth)
    kept = {r.index for r in worth[:limit]}
    return [r for r in rows if r.index in kept or (r.state in QUIET_STATES and not by_state)], len(worth)


def _ledger_applied(entries: list[LoggedDecision]) -> list[str]:
    """The node ledger's exclusions as the campaign's latest decision that applied one recorded them."""
    latest = next((e for e in reversed(entries) if "node_ledger" in e.inputs), None)
    if latest is None:
        return []
    applied = recorded_exclusion([latest.inputs])
    if applied is None:
        return []
    return [f"node ledger (at {latest.created_at[:16]}): {applied.why.get(n, n)}"
            for n in (*applied.nodes, *applied.probation)]


def _silent(record: CampaignRecord, rows: list[TaskRow]) -> list[str]:
    """One note per running task whose telemetry shows work and whose output is still empty."""
    quiet = [r for r in rows if r.token and silent_while_working(r.state, r.elapsed_s, r.cpu_mean_pct,
                                                                 r.gpu_util_mean_pct)
             and not program_printed(AttemptPaths.of(record.run_dir, r.index, r.token).output())]
    return [f"task {r.index} has run {r.elapsed_s // 60 if r.elapsed_s else 0} min, busy, and printed nothing: "
            "its program buffers its output (C stdio, or Python with PYTHONUNBUFFERED set empty); "
            "metrics from output and `output -f` see nothing until it exits. Print with flush, or run it "
            "unbuffered (`stdbuf -oL` in the command, or PYTHONUNBUFFERED=1)" for r in quiet]


def _check_tasks(name: str, rows: list[TaskRow], tasks: Collection[int]) -> None:
    missing = sorted(set(tasks) - {r.index for r in rows})
    if missing:
        raise NotFoundError(f"campaign {name!r} has no task {', '.join(map(str, missing))}",
                            f"its tasks are {index_ranges(r.index for r in rows) or 'none'}")


def _campaign_efficiency(store: Store, record: CampaignRecord, usage: list[AttemptUsage]) -> Efficiency:
    """The campaign's efficiency as of the last tick."""
    prices = current_policy(store, record)[0].prices
    return campaign_efficiency([u.use for u in usage], prices, memo(prices))


def _task_figures(store: Store, record: CampaignRecord, rows: list[TaskRow],
                  usage: list[AttemptUsage]) -> dict[int, _Figures]:
    """Each of `rows`' efficiency (the fields of its row), its latest attempt as sacct shows it now."""
    prices = current_policy(store, record)[0].prices
    wanted = {r.index for r in rows}
    tasks = {index: uses for index, uses in by_task([u for u in usage if u.times.task_index in wanted]).items()}
    for row in rows:
        uses = tasks.get(row.index)
        if (uses and row.elapsed_s is not None and len(uses) == row.attempts
                and (uses[-1].state, uses[-1].elapsed_s) != (row.state, row.elapsed_s)):
            uses[-1] = replace(uses[-1], state=row.state, elapsed_s=row.elapsed_s)
    of = memo(prices)
    return {index: _Figures(task_efficiency(uses, prices, of), tuple(of(u).energy_kwh for u in uses))
            for index, uses in tasks.items()}


def _tick_failed(store: Store, record: CampaignRecord) -> str:
    failure = TickFailures(store.engine).current(record.id, record.name)
    return "" if failure is None else (f"the last tick (at {failure.failed_at}) failed on this campaign and did "
                                       f"nothing more on it: {failure.error}")


def _refused(store: Store, record: CampaignRecord) -> list[str]:
    """`submission 3f2a… (2 tasks) refused 1 of 4 times, next try 03:12:00Z: Slurm refuses the job: …`,
    and `800 task(s) in 8 submission(s) wait for room: site limit on queued jobs: 200 of 200 queued, …`."""
    open_ = store.submissions(record.id, states=("intent", "submitted"))
    waiting = [s for s in open_ if s.last_error.startswith(WAITING)]
    pending = [s for s in open_ if s.tries and s not in waiting]
    lines = []
    if waiting:
        lines.append(f"{sum(s.size for s in waiting)} task(s) in {len(waiting)} submission(s) wait for room: "
                     f"{waiting[-1].last_error.removeprefix(WAITING)}")
    if not pending:
        return lines
    limit = current_policy(store, record)[0].submit_tries
    return lines + [f"submission {s.token} ({s.size} task(s)) refused {s.tries} of {limit} times, next try "
                    f"{s.next_try_at}: {s.last_error}" for s in pending]


def _ladder(store: Store, record: CampaignRecord, rows: list[TaskRow]) -> tuple[list[TaskRow], list[RungProgress]]:
    """A progressive campaign: rung progress, and tasks its rungs did not keep marked as such; a
    search's trials not asked yet, likewise."""
    _, settings = current_policy(store, record)
    if not settings.progressive and not settings.search:
        return rows, []
    log = store.log
    label = unstarted_labels(log, record.id, settings)
    rows = [replace(r, state=label(r.index) or r.state) if r.state == NOT_SUBMITTED else r for r in rows]
    if not settings.progressive:
        return rows, []
    promoted = promotions(log, record.id)
    started = {r.index: r.state for r in rows if r.state not in (NOT_SUBMITTED, NOT_PROMOTED)}
    return rows, ladder_progress(settings, started, promoted)


def _spend(store: Store, record: CampaignRecord, policy: Policy, settings: CampaignSettings,
           observed: dict[tuple[str, int | None], JobObservation]) -> SpendView:
    """The spend as of what sacct says now (the task table's states), not as of the last tick:
    an attempt the table shows COMPLETED commits nothing more, and its time counts as spent.
    Attempts the last tick stored settled come grouped by the store (a handful of rows however
    many); the others one by one, each moved into the phase sacct says now."""
    groups = store.usage.groups_by_cluster(record.id, SETTLED)
    groups += on_clusters(_live_groups(store.usage.each(record.id, except_states=SETTLED), observed))
    spend = campaign_spend([g for _, g in groups], policy.prices)
    budget = settings.budget
    by_cluster = {c: asdict(campaign_spend(there, policy.prices).spent)
                  for c, there in usage_by_cluster(groups, [c.name for c in settings.clusters]).items()
                  } if settings.clusters else {}
    return SpendView(asdict(spend.spent), asdict(spend.committed), asdict(spend.projected), budget.limits(),
                     bool(budget.limits()) and assess(budget, spend).exhausted,
                     energy_source(g for _, g in groups), by_cluster)


def _live_groups(groups: list[tuple[str, UsageGroup]],
                 observed: dict[tuple[str, int | None], JobObservation]) -> list[tuple[str, UsageGroup]]:
    out = []
    for job_id, group in groups:
        key = element_key(job_id)
        seen = observed.get(key) if key is not None else None
        if seen is not None:
            group = replace(group, phase=phase_of(seen.state.value),
                            elapsed_s=seen.elapsed_s if seen.elapsed_s is not None else group.elapsed_s)
        out.append((job_id, group))
    return out


def _with_usage(store: Store, record: CampaignRecord, rows: list[TaskRow], policy: Policy,
                history: list[HistoryRow]) -> list[TaskRow]:
    """Telemetry of each task's latest sampled attempt: means, a sparkline, and the flag the
    utilisation rules would raise (shown whether or not the policy acts on it)."""
    shown = {r.index for r in rows}
    usage = store.telemetry.by_task(record.id, shown)
    parse = resources_parser()
    resources = {h.task_index: parse(h.resources_json) for h in history if h.task_index in shown}
    return [_usage_row(r, usage.get(r.index), resources.get(r.index), policy) for r in rows]


def _usage_row(row: TaskRow, usage: Summary | None, resources: Resources | None, policy: Policy) -> TaskRow:
    if usage is None or not usage.samples:
        return row
    gpu = [s.gpu_util_pct for s in usage.recent if s.gpu_util_pct is not None]
    cpus = resources.cpus_per_task if resources else 1
    spark = sparkline(gpu) if gpu else sparkline([s.cpu_pct for s in usage.recent], full=100.0 * cpus)
    window = window_of(usage, policy.utilisation.window_s)
    flag = classify(window, resources, policy.utilisation) if window and resources and row.state == "RUNNING" else None
    return replace(row, cpu_mean_pct=usage.cpu_mean, rss_max_mb=usage.rss_max_mb,
                   gpu_util_mean_pct=usage.gpu_util_mean, telemetry_note="" if usage.nvml == "ok" else usage.nvml,
                   spark=spark, flag=flag or "")
