"""Replay of every tick section against the fake Slurm: campaigns whose reconcile ticks held work
for the budget, stopped a trailing task, or promoted a rung are replayed with the policy that ran
(core/governance/replay.py over the stored history, through core/tick/tick.py's decide_tick) and reproduce every
recorded enforced decision; a policy without the section shows the decisions only one side made."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from campaignctl.adapters.history_store import HistoryStore
from campaignctl.adapters.store import Store
from campaignctl.core.governance.replay import actual_decisions, not_replayed, replay
from campaignctl.core.governance.replay_compare import Comparison, compare
from campaignctl.core.policy.policy import Policy
from campaignctl.core.policy.policy_sections import EarlyStopping
from campaignctl.services.campaigns import current_policy
from campaignctl.services.reconcile import reconcile
from campaignctl.services.replay import replay_policy
from campaignctl.services.submit import submit
from tests.adapters import test_budget_fake_slurm as budget
from tests.adapters import test_early_stop_fake_slurm as early
from tests.adapters import test_ladder_fake_slurm as ladder
from tests.adapters import test_replay_fake_slurm as cause_replay
from tests.fakeslurm import FakeSlurm


def replayed(name: str, policy: Policy | None = None) -> tuple[Comparison, list[tuple[str, str]]]:
    """The comparison of `policy` (default: the campaign's own) with what was recorded, and the
    recorded enforced decisions as (rule, action)."""
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    history = HistoryStore(store.engine).campaign_history(record)
    policy = policy or current_policy(store, record)[0]
    actual = actual_decisions(history)
    assert not_replayed(history) == {}  # every recorded decision of these campaigns is a tick's
    comparison = compare(actual, replay(history, policy), policy.prices, lambda _d: None, {})
    return comparison, [(d.rule, d.action) for d in actual]


def test_a_budget_hold_and_its_alert_are_reproduced(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    budget.over_budget(tmp_path, fake_slurm)
    reconcile("tight")
    reconcile("tight")  # paused: nothing more, on either side
    comparison, recorded = replayed("tight")
    assert sorted(recorded) == [("budget", "alert"), ("budget", "hold"), ("start", "start")]
    assert comparison.differences == () and comparison.reproduced == 3


def test_an_early_stop_is_reproduced_and_a_policy_without_it_shows_the_stop_as_only_actual(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    early.campaign(tmp_path, fake_slurm)
    reconcile("es")
    early.finish_the_others(fake_slurm)
    reconcile("es")
    comparison, recorded = replayed("es")
    assert recorded == [("start", "start"), ("early_stopping", "stop")]
    assert comparison.differences == () and comparison.reproduced == 2
    store = Store.open()
    record = store.campaign("es")
    assert record is not None
    policy = current_policy(store, record)[0]
    without, _ = replayed("es", replace(policy, early_stopping=EarlyStopping()))
    assert [(d.kind, d.task_index, d.actual.action if d.actual else None) for d in without.differences] == [
        ("only_actual", early.TRAILING, "stop")]
    assert without.made_by_one_side() == ({"early_stopping → stop": 1}, {})


def test_promotions_out_of_two_rungs_are_reproduced(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit(ladder.ladder_spec(tmp_path))
    ladder.finish_rung(tmp_path, fake_slurm, ladder.newest_array(fake_slurm), ladder.LOSS)
    reconcile("lad")
    rung1 = ladder.newest_array(fake_slurm)
    ladder.finish_rung(tmp_path, fake_slurm, rung1, {1: 0.1, 3: 0.05, 4: 0.3})
    reconcile("lad")
    comparison, recorded = replayed("lad")
    assert sorted(recorded) == [("promotion", "promote")] * 4 + [("promotion", "retire")] * 5 + [("start", "start")]
    assert comparison.differences == () and comparison.reproduced == 10


def test_a_promotion_the_budget_gate_held_is_reproduced(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit(ladder.ladder_spec(tmp_path, budget=1.0))
    ladder.finish_rung(tmp_path, fake_slurm, ladder.newest_array(fake_slurm), ladder.LOSS)
    reconcile("lad")
    reconcile("lad")
    comparison, recorded = replayed("lad")
    assert recorded == [("start", "start"), ("promotion", "hold")]
    assert comparison.differences == () and comparison.reproduced == 2


def test_the_report_says_which_decisions_each_side_made_alone(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    cause_replay.run_campaign(tmp_path, fake_slurm)
    result = replay_policy(str(cause_replay.changed_policy(tmp_path)), "rp")
    assert result.only_actual == {"out_of_memory → resubmit": 1}  # the changed policy gives the OOM up
    assert result.only_replay == {"out_of_memory → give_up": 1}  # (longer timeouts: same rule, same action)
