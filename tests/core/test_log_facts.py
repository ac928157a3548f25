"""The log-derived part of a tick's snapshot (core/decisions/log_facts.py): what each kind of entry means,
and that the live tick and replay both take it from there, never derive it themselves."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from campaignctl.core.decisions.log_facts import log_facts, still_held, when_pending
from campaignctl.core.model.records import HistoryRow

PACKAGE = Path(__file__).resolve().parent.parent.parent / "campaignctl"


@dataclass(frozen=True)
class Entry:
    action: str
    params: Mapping[str, object] = field(default_factory=dict)
    inputs: Mapping[str, object] = field(default_factory=dict)
    mode: str = "enforce"
    status: str = "applied"
    task_index: int = 0
    attempt_token: str = "tok0.1"
    rule: str = "budget"
    reason: str = ""


def test_a_release_counts_once_applied_and_enforced_and_forced_rungs_come_from_its_gate() -> None:
    facts = log_facts([
        Entry("release", {"limits": {"gpu_hours": 0.5}}),
        Entry("release", {"limits": {"gpu_hours": 9}}, status="failed"),  # Slurm refused it: nothing released
        Entry("release", {"limits": {"cost": 1}}, mode="shadow", status="proposed"),
        Entry("release", {"arrays": {}}, {"promotion": {"rung": 2, "forced": True}}),  # a promotion gate
        Entry("release", {}, {"promotion": {"rung": 3, "forced": False}}),
        Entry("alert", {"key": "warn:gpu_hours:0.5"}),
        Entry("hold", {"arrays": {"100": [1]}}),  # not a fact a tick reads from the log
    ])
    assert facts.released_limits == ({"gpu_hours": 0.5},)
    assert facts.forced_rungs == frozenset({2})
    assert facts.alerted == frozenset({"warn:gpu_hours:0.5"})


def test_standing_requests_are_read_oldest_first_and_a_proposed_stop_is_none() -> None:
    facts = log_facts([
        Entry("resize_next", {"changes": {"cpus_per_task": [8, 4]}}, rule="data_starved"),
        Entry("resize_next", {"changes": {"cpus_per_task": [4, 2]}}, rule="data_starved"),
        Entry("stop", {"only_if": "RUNNING"}, rule="early_stopping", attempt_token="tok1.1", task_index=1,
              mode="shadow", status="proposed"),
    ])
    assert facts.requests.adjust == {0: {"cpus_per_task": 2}}
    assert facts.requests.fired == {("tok0.1", "data_starved")}


def test_when_pending_holds_the_attempts_still_waiting() -> None:
    def row(token: str, state: str) -> HistoryRow:
        return HistoryRow(1, 0, 1, 0, token, None, state, "", None, "", None, "", None, None, "{}", "s",
                          "released", "2026-11-24T02:00:00+00:00")
    assert list(when_pending([row("a", "PENDING"), row("b", "RUNNING"), row("c", "SUBMITTING")])) == ["a", "c"]


def test_the_live_tick_and_replay_take_the_log_s_facts_from_log_facts_alone() -> None:
    """No log-derived fact is computed in two places: every TickSnapshot built from a decision log
    gets its requests, released limits and forced rungs from a LogFacts, its pending clocks from
    when_pending; standing requests are read nowhere else."""
    built = {"services/tick_snapshot.py": 0, "core/governance/replay.py": 0}
    for path in PACKAGE.rglob("*.py"):
        module = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name == "standing_requests":
                assert module == "core/decisions/log_facts.py", module
            # what holds still hold is read from outcomes' `held` in one place (resume and rollback)
            if name == "get" and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "held":
                assert module == "core/decisions/log_facts.py", module
            if name != "TickSnapshot" or module not in built:
                continue
            built[module] += 1
            given = {k.arg: k.value for k in node.keywords}
            for fact in ("requests", "released_limits", "forced_rungs"):
                value = given[fact]
                assert isinstance(value, ast.Attribute) and value.attr == fact, (module, fact)
            pending = given["pending_since"]
            assert isinstance(pending, ast.Call) and getattr(pending.func, "id", "") == "when_pending", module
    assert built == {"services/tick_snapshot.py": 1, "core/governance/replay.py": 1}


@dataclass(frozen=True)
class Outcome:
    action: str
    held: dict[str, list[int]]
    revision: int = 1
    status: str = "applied"

    @property
    def detail(self) -> dict[str, object]:
        return {"held": self.held}


def test_still_held_is_what_applied_holds_took_less_what_releases_let_go() -> None:
    """resume releases what is still held; rollback what holds after its target revision still hold."""
    entries = [Outcome("hold", {"100": [1, 2, 3]}, revision=1), Outcome("release", {"100": [1]}, revision=1),
               Outcome("hold", {"200": [0]}, revision=2), Outcome("hold", {"300": [5]}, revision=2, status="failed")]
    assert still_held(entries) == {"100": {2, 3}, "200": {0}}
    assert still_held(entries, after_revision=1) == {"200": {0}}
