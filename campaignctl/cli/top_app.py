"""`campaignctl top`'s terminal UI (Textual): every campaign, or one campaign's tasks, redrawn from
the store (services/top.py: no Slurm call), with the loop's health and what holds work back on
top, the last decisions and the ledger's nodes below. Keys act through the commands' own code
(services/by_hand.py: the same ownership checks, the same log entries), after a confirmation.

Laid out for 80×24 over SSH: the header lines, the table (it scrolls), six lines of decisions,
the key bar."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, RichLog, Static

from campaignctl.cli.status import loop_view, spend_text
from campaignctl.cli.status_table import COMPACT, STATE_STYLE, Shown
from campaignctl.core.base.clock import brief, read_time
from campaignctl.core.base.errors import CampaignctlError
from campaignctl.core.screens.status import param_digits, varying_keys
from campaignctl.services.top import TopView

OUTPUT_LINES = 200
CUT = {"params": 28, "decision": 24}  # a task's whole params and decision show below the table


def _cut(value: str | Text, width: int | None) -> str | Text:
    text = value.plain if isinstance(value, Text) else value
    return value if width is None or len(text) <= width else text[:width - 1] + "…"


def _one_line(text: Text) -> Text:
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


@dataclass(frozen=True, slots=True)
class Actions:
    """What the keys do: the commands' services (swapped in tests that need no Slurm)."""

    load: Callable[[str | None], TopView]
    output: Callable[[str, int], str]  # the tail of a task's latest output
    cancel: Callable[[str, int], str]  # what was done, one line
    retry: Callable[[str, int], str]


class Confirm(ModalScreen[bool]):
    """`y` or Enter on Yes does it; anything else (`n`, Escape) does nothing."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("y", "answer(True)", "Yes"), Binding("n", "answer(False)", "No"),
                Binding("escape", "answer(False)", "No")]
    DEFAULT_CSS = "Confirm { align: center middle; } Confirm > Static { width: 60; border: thick $warning; " \
                  "padding: 1 2; background: $surface; }"

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        yield Static(f"{self.question}\n\n[b]y[/b] yes   [b]n[/b] no")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class OutputScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,o", "app.pop_screen", "Back")]
    DEFAULT_CSS = "OutputScreen RichLog { border: round $accent; }"

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        log = RichLog(highlight=False, markup=False, wrap=False)
        log.border_title = self.title_text
        yield log
        yield Footer()

    def on_mount(self) -> None:
        log = self.query_one(RichLog)
        for line in self.text.splitlines():
            log.write(Text(line))  # the program's bytes: never markup


class TopApp(App[None]):
    TITLE = "campaignctl top"
    CSS = """
    #head { height: auto; max-height: 7; }
    DataTable { height: 1fr; }
    #below { height: auto; max-height: 9; border-top: solid $primary; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"), Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("enter", "open", "Open", show=False), Binding("o", "output", "Output"),
        Binding("c", "cancel_task", "Cancel"), Binding("r", "retry_task", "Retry"),
        Binding("escape", "leave", "All campaigns"), Binding("g", "refresh", "Refresh"),
    ]

    def __init__(self, campaign: str | None, actions: Actions, interval_s: float = 5.0) -> None:
        super().__init__()
        self.campaign, self.started_with = campaign, campaign
        self.actions, self.interval_s = actions, interval_s
        self.view: TopView | None = None
        self.problem = ""
        # kept, not queried: a key's modal screen is the one a query would search
        self.head, self.below = Static(id="head"), Static(id="below")
        self.table: DataTable[str | Text] = DataTable(cursor_type="row", zebra_stripes=False)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield self.head
            yield self.table
            yield self.below
        yield Footer()

    def on_mount(self) -> None:
        self.action_refresh()
        self.set_interval(self.interval_s, self.action_refresh)

    # what is shown

    def action_refresh(self) -> None:
        try:
            self.view, self.problem = self.actions.load(self.campaign), ""
        except CampaignctlError as exc:
            self.problem = f"{exc.message}" + (f" ({exc.hint})" if exc.hint else "")
        self._draw()

    def _draw(self) -> None:
        head, below, table = self.head, self.below, self.table
        if self.view is None:
            head.update(Text(self.problem or "reading the store…", style="bold red" if self.problem else ""))
            return
        status = self.view.status
        kept = table.cursor_row
        table.clear(columns=True)
        if self.campaign is None:
            head.update(Group(*loop_view(status, Text("every campaign", style="bold")), self._problem()))
            for header in ("campaign", "state", "rev", "tasks", "counts"):
                table.add_column(header)
            for c in status.campaigns:
                counts = Text(" ").join(Text(f"{k} {v}", style=STATE_STYLE.get(k, "")) for k, v in c.counts.items())
                table.add_row(c.name, c.state, str(c.revision), str(c.tasks), counts, key=c.name)
            below.update(Text("Enter: a campaign's tasks", style="dim"))
        else:
            head.update(self._campaign_head())
            shown = Shown(varying_keys(status.tasks), param_digits(r.params for r in status.tasks))
            for column in COMPACT:
                table.add_column(column.header)
            for row in status.tasks:  # the selected task's whole params and decision are below
                table.add_row(*(_cut(column.cell(row, shown), CUT.get(column.header)) for column in COMPACT),
                              key=str(row.index))
        if table.row_count:
            table.move_cursor(row=min(kept, table.row_count - 1))
        if self.campaign is not None:
            below.update(self._below())  # after the cursor is back: it shows the selected task

    def _campaign_head(self) -> RenderableType:
        assert self.view is not None
        status, summary = self.view.status, self.view.status.campaigns[0]
        title = Text.assemble((summary.name, "bold"), f": revision {summary.revision}, {summary.state}")
        parts: list[RenderableType] = [*loop_view(status, title), Text(summary.summary)]
        if status.spend is not None:
            parts.append(spend_text(status.spend))
        if self.view.best:
            parts.append(Text(self.view.best, style="green"))
        return Group(*parts, self._problem())

    def _below(self) -> RenderableType:
        assert self.view is not None
        lines = [*self._selected_detail(), Text("last decisions", style="bold")]
        now = self.view.read_at
        for entry in self.view.decisions:
            task = "campaign" if entry.task_index < 0 else f"task {entry.task_index}"
            age = brief((now - read_time(entry.created_at)).total_seconds())
            lines.append(_one_line(Text.assemble((f"{age:>5} ago", "dim"), f" {entry.action} {task}: ",
                                                 entry.reason.splitlines()[0] if entry.reason else "")))
        if not self.view.decisions:
            lines.append(Text("none yet", style="dim"))
        lines += [Text(f"node {line}", style="yellow") for line in self.view.nodes]
        return Group(*lines)

    def _selected_detail(self) -> list[Text]:
        """The highlighted task, whole: what the table cuts."""
        assert self.view is not None
        index = self._selected_task()
        row = next((r for r in self.view.status.tasks if r.index == index), None)
        if row is None:
            return []
        params = " ".join(f"{k}={v}" for k, v in row.params.items()) or "-"
        return [_one_line(Text.assemble((f"task {row.index}: ", "bold"), params)),
                _one_line(Text(f"  {row.last_decision or 'no decision yet'}", style="dim"))]

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        if self.view is not None and self.campaign is not None:
            self.below.update(self._below())

    def _problem(self) -> Text:
        return Text(self.problem, style="bold red") if self.problem else Text("")

    # keys

    def _selected(self) -> str | None:
        table = self.table
        if not table.row_count:
            return None
        return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def _selected_task(self) -> int | None:
        key = self._selected()
        return int(key) if self.campaign is not None and key is not None else None

    def action_open(self) -> None:
        if self.campaign is None and (name := self._selected()):
            self.campaign = name
            self.action_refresh()

    def on_data_table_row_selected(self, _event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_leave(self) -> None:
        if self.started_with is None and self.campaign is not None:
            self.campaign = None
            self.action_refresh()

    def action_output(self) -> None:
        task = self._selected_task()
        if task is None or self.campaign is None:
            return
        try:
            text = self.actions.output(self.campaign, task)
        except CampaignctlError as exc:
            self.notify(exc.message, severity="error")
            return
        self.push_screen(OutputScreen(f"{self.campaign} task {task}: output (last {OUTPUT_LINES} lines)", text))

    def action_cancel_task(self) -> None:
        self._confirmed("Cancel task {task} of {name}? Its job is scancelled; the log records it.",
                        self.actions.cancel)

    def action_retry_task(self) -> None:
        self._confirmed("Retry task {task} of {name}? A new attempt is submitted now.", self.actions.retry)

    def _confirmed(self, question: str, act: Callable[[str, int], str]) -> None:
        task, name = self._selected_task(), self.campaign
        if task is None or name is None:
            return

        def answered(yes: bool | None) -> None:
            if not yes:
                self.notify("nothing done")
                return
            try:
                self.notify(act(name, task))
            except CampaignctlError as exc:
                self.notify(exc.message + (f" ({exc.hint})" if exc.hint else ""), severity="error")
            self.action_refresh()

        self.push_screen(Confirm(question.format(task=task, name=name)), answered)
