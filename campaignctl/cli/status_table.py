"""The task table of `status NAME`: COMPACT columns fit 80 terminal columns (one line per task,
long text cut with …), `--wide` shows WIDE, every field. A column is a header and a cell
function: to show a new TaskRow field, append a Column to WIDE (and to COMPACT if it is short)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from rich.table import Table
from rich.text import Text

from campaignctl.cli.common import plain_table
from campaignctl.core.base.clock import brief
from campaignctl.core.base.hostlist import split_nodes
from campaignctl.core.packing.pack_fates import shared_label
from campaignctl.core.screens.status import TaskRow, param_text
from campaignctl.core.usage.efficiency import COLUMNS as EFFICIENCY
from campaignctl.core.usage.efficiency import cells

STATE_STYLE = {"COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow", "FAILED": "red",
               "TIMEOUT": "red", "OUT_OF_MEMORY": "red", "NODE_FAIL": "red", "UNKNOWN": "magenta"}
FLAG_TEXT = {"data_starved": ("data-starved", "yellow"), "gpu_idle": ("GPU idle", "red")}


@dataclass(frozen=True, slots=True)
class Shown:
    """What cells need beyond their row."""

    param_keys: Sequence[str] | None = None  # the parameters to show; None: all
    param_digits: Mapping[str, int] = field(default_factory=dict)  # core/screens/status.param_digits of the table


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    cell: Callable[[TaskRow, Shown], str | Text]
    justify: Literal["left", "right"] = "left"
    flexible: bool = False  # gives way first on a narrow terminal, cut with …


def _state(row: TaskRow, _: Shown) -> Text:
    return Text(row.state, style=STATE_STYLE.get(row.state, "white"))


def _exit(row: TaskRow, _: Shown) -> str:
    return "-" if row.exit_code is None else str(row.exit_code)


def _params(row: TaskRow, shown: Shown) -> str:
    return param_text(row.params, shown.param_keys, shown.param_digits) or "-"


def _decision(row: TaskRow, _: Shown) -> str:
    """The enforced decision, its status first (what a narrow column cuts is the rule's name);
    `applied`, the usual outcome, goes without saying."""
    status = row.decision_status
    what = row.last_decision.removesuffix(f" {status}")
    return (what if status == "applied" else f"{status}: {what}") if what else "-"


def _efficiency(position: int) -> Callable[[TaskRow, Shown], str]:
    """One figure of the latest attempt's efficiency (% of what Slurm allocated), `-` if unknown."""
    return lambda row, _: cells(row.efficiency)[position]


def _recent(row: TaskRow, _: Shown) -> str | Text:
    flag = FLAG_TEXT.get(row.flag)
    if not (row.spark or flag):
        return "-"
    return Text.assemble(row.spark, " " if row.spark and flag else "", flag or "")


TASK = Column("task", lambda r, _: str(r.index), "right")
ATTEMPTS = Column("try", lambda r, _: str(r.attempts), "right")
ELAPSED = Column("elapsed", lambda r, _: brief(r.elapsed_s), "right")
EXIT = Column("exit", _exit, "right")

def _job_id(r: TaskRow, _: object) -> str:
    """The element; `12_0 ×4`: four packed tasks share it (their GPU-hours are counted in shares)."""
    return shared_label(r.job_id, r.shared) or r.job_id or "-"


# the parameters that vary are what tells tasks apart (issue 28: `lr=0.00…`): whole; the decision
# gives way
COMPACT = (TASK, Column("state", _state), ATTEMPTS, ELAPSED, EXIT,
           Column("params", _params), Column("decision", _decision, flexible=True))
WIDE = (TASK, Column("params", _params, flexible=True), Column("state", _state), ATTEMPTS,
        Column("job id", _job_id), Column("node", lambda r, _: r.node or "-", flexible=True),
        ELAPSED, EXIT, *(Column(h, _efficiency(i), "right") for i, h in enumerate(EFFICIENCY)),
        Column("recent use", _recent, flexible=True),
        Column("decision", lambda r, _: r.last_decision or "-", flexible=True),
        Column("shadow proposal", lambda r, _: r.shadow or "-", flexible=True),
        Column("attempt token", lambda r, _: r.token or "-"))
NODES = Column("nodes", lambda r, _: r.node or "-")
CLUSTER = Column("cluster", lambda r, _: r.cluster or "-")


# what a narrow terminal drops, first to last, so that the parameters that vary stay whole
DROPPED_FIRST = ("decision", "exit", "elapsed", "try")


def columns_for(rows: Sequence[TaskRow], wide: bool, shown: Shown | None = None,
                width: int | None = None) -> Sequence[Column]:
    """WIDE, or COMPACT with the node list beside the state when an attempt spans several nodes
    (`node[1-2]`: which nodes a multi-node task holds, or held when it failed). Within `width`,
    COMPACT drops DROPPED_FIRST columns while the whole params would not fit beside them."""
    placed = any(r.cluster for r in rows)  # a campaign with `clusters:`: where each task's latest attempt is
    if wide:
        return (*WIDE[:4], CLUSTER, *WIDE[4:]) if placed else WIDE
    columns: Sequence[Column] = COMPACT if not any(len(split_nodes(r.node)) > 1 for r in rows) else (
        *COMPACT[:2], NODES, *COMPACT[2:])
    if placed:
        columns = (*columns[:2], CLUSTER, *columns[2:])
    if width is None or shown is None:
        return columns
    need = {c.header: max(len(c.header), *(len(str(c.cell(r, shown))) for r in rows)) for c in columns}
    for header in DROPPED_FIRST:
        fixed = sum(w for h, w in need.items() if h != "decision") + len(need) - 1
        if fixed + (min(need.get("decision", 0), 8) if "decision" in need else 0) <= width:
            break
        need.pop(header, None)
    return tuple(c for c in columns if c.header in need)


def task_table(rows: Sequence[TaskRow], columns: Sequence[Column], shown: Shown) -> Table:
    """One line per task. Fixed columns never wrap; flexible ones are cut with … to fit."""
    table = plain_table()
    for column in columns:
        table.add_column(column.header, justify=column.justify, no_wrap=not column.flexible,
                         overflow="ellipsis", min_width=len(column.header))
    for row in rows:
        table.add_row(*(_one_line(column.cell(row, shown)) for column in columns))
    return table


def _one_line(value: str | Text) -> Text:
    text = Text(value) if isinstance(value, str) else value
    text.no_wrap, text.overflow = True, "ellipsis"
    return text
