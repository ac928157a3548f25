"""decide_tick(): every section of a tick over one snapshot, in one order, with one clock; the
lazy facts it needs; one call site each for reconcile and replay (candidate proposals are made
inside it, by the same sections)."""

from __future__ import annotations

import ast
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from campaignctl.core.decisions.decision import AttemptView, Decision, TaskView
from campaignctl.core.governance.governance import Awaiting, RevisionRun
from campaignctl.core.nodes.node_rules import NodeRules
from campaignctl.core.policy.policy import Policy
from campaignctl.core.policy.policy_sections import EarlyStopping, Fallback
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.spec.spec import Budget, Resources
from campaignctl.core.tick.tick import MissingFact, decide_tick, finished, needs
from campaignctl.core.tick.tick_facts import Needs, TickSnapshot, with_facts
from campaignctl.core.usage.cost import UsageGroup
from tests.core.test_decide import POLICY

PACKAGE = Path(__file__).resolve().parents[2] / "campaignctl"
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
GPU = Resources(gpus=1, gpu_type="a100", time_min=60)
STOPPING = replace(POLICY, early_stopping=EarlyStopping(metric="loss", grace_steps=2, min_peers=2))


def attempt(task: int, state: str, *, array: str = "12", number: int = 1, resources: Resources = GPU,
            **facts: object) -> AttemptView:
    return AttemptView(f"t{array}.{task}", number, state, f"{array}_{task}", resources, slurm_state=state,
                       nodes="" if state == "PENDING" else "node1", **facts)  # type: ignore[arg-type]


def view(task: int, state: str, **facts: object) -> TaskView:
    return TaskView(task, (attempt(task, state, **facts),))


def snapshot(*views: TaskView, **fields: object) -> TickSnapshot:
    settings = fields.pop("settings", CampaignSettings(tasks=len(views)))
    return TickSnapshot("active", 1, settings, tuple(views), tasks_started=len(views),  # type: ignore[arg-type]
                        **fields)  # type: ignore[arg-type]


def what(decisions: tuple[Decision, ...] | list[Decision]) -> list[tuple[int, str, str, str]]:
    return [(d.task_index, d.attempt_token, d.rule, d.action) for d in decisions]


# --- one call site each -------------------------------------------------------------------------

def calls() -> dict[str, set[str]]:
    """Function name → the modules of the package that call it (as a bare name or an attribute)."""
    out: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                out.setdefault(called, set()).add(str(path.relative_to(PACKAGE)))
    return out


def test_reconcile_replay_and_the_simulator_each_call_decide_tick_once_and_only_the_tick_composes_the_rules() -> None:
    callers = calls()
    assert callers["decide_tick"] == {"services/reconcile.py", "core/governance/replay.py", "core/sim/driver.py"}
    for tree in (PACKAGE / "services" / "reconcile.py", PACKAGE / "core" / "governance" / "replay.py",
                 PACKAGE / "core" / "sim" / "driver.py"):
        found = [n for n in ast.walk(ast.parse(tree.read_text()))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "decide_tick"]
        assert len(found) == 1, tree
    # every rule of the tick, the per-cause `decide` among them, is composed in core/tick/tick.py alone
    # (a candidate's proposals too: as_candidate)
    for rule in ("decide", "guard", "decide_utilisation", "plan_fallbacks", "decide_early_stops",
                 "promotion_decisions", "promotion_block", "plan_throttles", "apply_modes", "as_candidate",
                 "known_good_verdict", "expired"):
        assert callers[rule] == {"core/tick/tick.py"}, rule


# --- candidate and enforce ----------------------------------------------------------------------

def busy_snapshot(policy: Policy) -> TickSnapshot:
    """An OOM to retry with a pending sibling to resize, a trailing runner to stop, an array past
    max_parallel to throttle, a budget past its warning level."""
    views = [view(0, "OUT_OF_MEMORY"), view(1, "PENDING"), view(2, "PENDING"),
             view(3, "RUNNING"), view(4, "RUNNING"), view(5, "RUNNING")]
    curves = {3: ((1, 1.0), (3, 0.9)), 4: ((1, 1.0), (3, 0.5)), 5: ((1, 1.0), (3, 0.4))}
    usage = (UsageGroup("running", GPU, "", 3, 3 * 1800),)
    settings = CampaignSettings(tasks=6, max_parallel=3, budget=Budget(gpu_hours=10.0, warn_at=0.3))
    return with_facts(snapshot(*views, settings=settings, usage=usage, candidate=policy), curves={"loss": curves})


def test_a_candidate_equal_to_the_enforced_policy_proposes_exactly_what_enforce_decides() -> None:
    plan = decide_tick(busy_snapshot(STOPPING), STOPPING, NOW)
    assert {d.rule for d in plan.decisions} == {"out_of_memory", "early_stopping", "max_parallel", "budget"}
    assert what(plan.proposals) == what(plan.decisions)
    assert [d.params for d in plan.proposals] == [d.params for d in plan.decisions]
    assert {d.mode for d in plan.proposals} == {"shadow"} and {d.mode for d in plan.decisions} == {"enforce"}


def test_a_candidate_proposal_is_made_once_per_attempt() -> None:
    first = decide_tick(busy_snapshot(STOPPING), STOPPING, NOW)
    logged = frozenset((STOPPING.digest, d.attempt_token, d.rule, d.action) for d in first.proposals)
    again = decide_tick(replace(busy_snapshot(STOPPING), proposal_keys=logged), STOPPING, NOW)
    assert again.proposals == ()


# --- sections and their order ------------------------------------------------------------------

def test_a_budget_hold_keeps_only_give_ups_and_moves_throttles_and_promotes_nothing() -> None:
    views = [view(0, "FAILED", exit_code=3), view(1, "OUT_OF_MEMORY"), view(2, "PENDING"), view(3, "RUNNING")]
    spent = (UsageGroup("ended", GPU, "", 1, 3600 * 10), UsageGroup("running", GPU, "", 1, 600))
    settings = CampaignSettings(tasks=4, max_parallel=1, budget=Budget(gpu_hours=10.0))
    plan = decide_tick(snapshot(*views, settings=settings, usage=spent), POLICY, NOW)
    assert [(d.rule, d.action) for d in plan.decisions] == [("failed", "give_up"), ("budget", "alert"),
                                                            ("budget", "hold")]
    assert plan.paused and plan.assessment is not None and plan.assessment.exhausted
    assert plan.decisions[2].params["arrays"] == {"12": [2]}


def test_the_budgets_cap_tightens_max_parallel_and_a_retry_array_starts_within_it() -> None:
    views = [view(0, "RUNNING"), *(view(i, "PENDING") for i in range(1, 5))]
    usage = (UsageGroup("running", GPU, "", 1, 0), UsageGroup("pending", GPU, "", 4, 0))
    settings = CampaignSettings(tasks=5, max_parallel=4, budget=Budget(gpu_hours=3.0))
    plan = decide_tick(snapshot(*views, settings=settings, usage=usage), POLICY, NOW)
    assert plan.max_parallel == 3 and plan.retry_parallel == 2  # 1 running + the 2 GPU-h left
    [throttle] = plan.decisions
    assert throttle.params["throttle"] == 3 and "budget admits 3 at once" in throttle.reason


def test_known_good_and_expiry_read_the_ticks_clock() -> None:
    run = RevisionRun(1, NOW - timedelta(hours=2), 5, ())
    waiting = (Awaiting(7, NOW - timedelta(hours=25)), Awaiting(8, NOW - timedelta(hours=1)))
    plan = decide_tick(snapshot(view(0, "RUNNING"), revision_run=run, awaiting=waiting), POLICY, NOW)
    assert [(d.rule, d.action, d.params) for d in plan.decisions] == [
        ("revision", "mark_known_good", {"revision": 1})]
    assert plan.expired == (7,)  # the default expire_after is 24 h
    earlier = decide_tick(snapshot(view(0, "RUNNING"), revision_run=run, awaiting=waiting), POLICY,
                          NOW - timedelta(hours=1, minutes=30))
    assert earlier.decisions == () and earlier.expired == ()


def test_a_plain_campaign_finishes_once_every_task_settled_unless_one_is_unresolved() -> None:
    done = snapshot(view(0, "COMPLETED"), view(1, "FAILED", exit_code=3))
    plan = decide_tick(done, POLICY, NOW)
    assert what(plan.decisions) == [(1, "t12.1", "failed", "give_up")]
    assert finished(plan, set()) and not finished(plan, {"t12.1"})
    assert not finished(decide_tick(replace(done, tasks_started=1), POLICY, NOW), set())  # task 2 never started


# --- lazy facts --------------------------------------------------------------------------------

def test_lazy_facts_are_asked_for_only_when_a_section_would_read_them() -> None:
    waiting = view(0, "PENDING")
    # the node ledger is read whenever something may be submitted or a pending element resized
    assert needs(snapshot(waiting), POLICY, NOW) == Needs(nodes=True)
    assert needs(snapshot(view(0, "RUNNING")), POLICY, NOW) == Needs()
    no_ledger = replace(POLICY, nodes=NodeRules(enabled=False))
    typed = CampaignSettings(tasks=1, gpu_types=("a100", "v100"))
    since = {"t12.0": NOW - timedelta(minutes=20)}
    moving = replace(no_ledger, fallback=Fallback(after_s=600))
    assert needs(snapshot(waiting, settings=typed, pending_since=since), no_ledger, NOW) == Needs()
    assert needs(snapshot(waiting, settings=typed, pending_since=since), moving, NOW) == Needs(queue=True)
    fresh = {"t12.0": NOW - timedelta(minutes=5)}
    assert needs(snapshot(waiting, settings=typed, pending_since=fresh), moving, NOW) == Needs()
    paused = replace(snapshot(waiting, settings=typed, pending_since=since), campaign_state="paused")
    assert needs(paused, moving, NOW) == Needs()  # a paused campaign moves nothing
    assert needs(snapshot(view(0, "RUNNING")), STOPPING, NOW) == Needs(metrics=frozenset({"loss"}))
    assert needs(snapshot(view(0, "PENDING")), replace(STOPPING, nodes=no_ledger.nodes), NOW) == Needs()
    with pytest.raises(MissingFact):
        decide_tick(snapshot(view(0, "RUNNING")), STOPPING, NOW)
    with pytest.raises(MissingFact):
        decide_tick(snapshot(waiting, settings=typed, pending_since=since), moving, NOW)
    full = with_facts(snapshot(waiting, settings=typed, pending_since=since),
                      pending_reasons={"12_0": "Resources"}, free_gpus={"v100": 1})
    [move] = decide_tick(full, moving, NOW).decisions
    assert (move.rule, move.action, move.params["changes"]) == ("gpu_fallback", "cancel",
                                                                {"gpu_type": ["a100", "v100"]})
