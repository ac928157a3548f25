"""The campaign lease (adapters/lease.py) and the one-answer-per-attempt index (migration 011), on
SQLite and on the real PostgreSQL server: what issue 15 needed for two users, two login nodes or two
state directories on one database."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters import lease as lease_module
from campaignctl.adapters import store_engine as store_module
from campaignctl.adapters.decision_chain import stored_rows
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.lease import DEFAULT_TTL_S, Leases, ttl_setting
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import AnsweredElsewhereError, UsageError, WriteConflictError
from campaignctl.core.decisions.action_records import record_of
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.governance.chain import verify_chain
from campaignctl.core.policy.policy import Policy
from campaignctl.services.submit import submit
from tests.conftest import policy_decisions, write_spec
from tests.fakeslurm import FakeSlurm

SPEC = "name: {name}\ncommand: [python3, t.py, '{{i}}']\nmatrix: {{i: [0, 1]}}\n"
SINCE = re.compile(r"^alice@login1 pid 4242 since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture
def store(backend: str, tmp_path: Path, fake_slurm: FakeSlurm) -> Store:
    """Two submitted campaigns, `lease-a` and `lease-b`, on `backend`."""
    for name in ("lease-a", "lease-b"):
        submit(write_spec(tmp_path, SPEC.format(name=name), f"{name}.yaml"))
    opened = Store.open()
    assert opened.engine.dialect.name == backend
    return opened


def ids(store: Store) -> list[int]:
    return [c.id for c in store.campaigns()]


def alice(store: Store, ttl_s: int = 60) -> Leases:
    """Another holder: the same database, another user, host and pid (and its own token)."""
    leases = Leases(store.engine, ttl_s)
    leases.user, leases.host, leases.pid = "alice", "login1", 4242
    return leases


def test_a_free_lease_is_taken_and_refused_to_anyone_else_while_held_naming_the_holder(store: Store) -> None:
    a, b = ids(store)
    holder = alice(store)
    assert holder.take([a]) == {}
    refused = Leases(store.engine, 60).take([a, b])
    assert list(refused) == [a]  # b was free: taken
    assert SINCE.match(refused[a].describe()), refused[a].describe()
    assert 55 <= refused[a].expires_in_s <= 60
    assert refused[a].lapses().startswith("its lease lapses in ")
    assert holder.take([b]) != {}  # and the other way round


def test_the_holder_takes_its_own_lease_again_and_keeps_its_start(store: Store) -> None:
    a = ids(store)[0]
    holder = alice(store)
    holder.take([a])
    first = Leases(store.engine, 60).take([a])[a].since
    time.sleep(1.1)
    assert holder.take([a]) == {}
    assert Leases(store.engine, 60).take([a])[a].since == first


def test_a_holder_on_this_host_whose_process_is_gone_gives_its_lease_up_at_once(store: Store) -> None:
    """A tick killed right after sbatch (its flock died with it) must not block the campaign for a
    TTL; a live process of this host, or one on another host, keeps its lease."""
    a, b = ids(store)
    me = Leases(store.engine, 60)
    dead = subprocess.Popen(["true"])
    dead.wait()  # reaped: the pid names no process now
    gone, living = Leases(store.engine, 60), Leases(store.engine, 60)
    gone.pid, living.pid = dead.pid, os.getppid()  # the test runner's parent: alive
    assert gone.take([a]) == {} and living.take([b]) == {}
    assert list(me.take([a, b])) == [b]  # a taken from the dead; b's holder lives
    assert list(gone.take([a])) == [a]  # and it is ours now, not the dead holder's
    elsewhere = alice(store)  # login1 pid 4242: a pid there says nothing here
    elsewhere.host = "login1"
    me.release()
    assert elsewhere.take([a]) == {}
    assert list(me.take([a])) == [a]


def test_a_holder_in_another_pid_namespace_of_this_host_keeps_its_lease(store: Store) -> None:
    """A tick in a container on this host: its pid, dead in our namespace, may be alive in its own
    (the probe took the lease from a live holder there and resubmitted its retry twice)."""
    a = ids(store)[0]
    dead = subprocess.Popen(["true"])
    dead.wait()
    contained = Leases(store.engine, 60)
    contained.pid, contained.pid_ns = dead.pid, "pid:[4026599999]"
    assert contained.take([a]) == {}
    assert list(Leases(store.engine, 60).take([a])) == [a]  # still held: it lapses by the clock only


def test_a_lapsed_lease_is_taken_by_the_next_and_its_old_holder_knows_it_lost_it(store: Store) -> None:
    a = ids(store)[0]
    crashed = alice(store, ttl_s=0)  # a holder that stopped renewing: lapsed at once
    assert crashed.take([a]) == {}
    successor = Leases(store.engine, 60)
    assert successor.take([a]) == {}
    assert not crashed.holds(a) and crashed.renew() == set()
    assert successor.holds(a)
    assert Leases(store.engine, 60).take([a])[a].user != "alice"  # the successor is who refuses now


def test_renewing_pushes_the_expiry_back_even_of_a_lapsed_lease_nobody_took(store: Store) -> None:
    a = ids(store)[0]
    holder = alice(store, ttl_s=0)
    holder.take([a])
    holder.ttl_s = 60
    assert holder.renew() == {a}
    assert list(Leases(store.engine, 60).take([a])) == [a]  # live again: refused to others
    assert holder.holds(a)


def test_release_frees_every_lease_of_the_holder(store: Store) -> None:
    a, b = ids(store)
    holder = alice(store)
    holder.take([a, b])
    holder.release()
    assert Leases(store.engine, 60).take([a, b]) == {}
    assert not holder.holds(a)


def test_keep_renews_in_the_background_and_releases_at_the_end(store: Store) -> None:
    a = ids(store)[0]
    holder = alice(store, ttl_s=1)  # renewed every 1/3 s
    with holder.keep():
        holder.take([a])
        time.sleep(1.6)  # past the TTL: only the renewals keep it
        assert list(Leases(store.engine, 60).take([a])) == [a]
    assert Leases(store.engine, 60).take([a]) == {}


@pytest.mark.parametrize(("value", "seconds"), [("", DEFAULT_TTL_S), ("90s", 90), ("10m", 600), ("45", 45)])
def test_the_ttl_setting_takes_a_duration(value: str, seconds: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMPAIGNCTL_LEASE_TTL", value)
    assert ttl_setting() == seconds


@pytest.mark.parametrize("value", ["5s", "soon", "-1m"])
def test_a_ttl_setting_too_short_or_unreadable_is_a_usage_error(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMPAIGNCTL_LEASE_TTL", value)
    with pytest.raises(UsageError, match="CAMPAIGNCTL_LEASE_TTL") as caught:
        ttl_setting()
    assert caught.value.exit_code == 2


# --- one answer per attempt (migration 011's unique index) ---

def decision(token: str, action: str, mode: str = "enforce", gate: str = "") -> tuple[Decision, str]:
    return Decision(0, token, "failed", action, f"{action} {token}", {"exit_code": 75}, record_of(action, {}),
                    mode=mode, gate=gate), ""


def log_of(store: Store) -> tuple[DecisionLog, int, int]:
    log = DecisionLog(store.engine)
    return log, log.begin_tick("test"), ids(store)[0]


def chain_verifies(store: Store) -> bool:
    with stored_rows(store.engine, "decision") as rows:
        return verify_chain("decision", rows).ok


def test_a_second_answer_to_one_attempt_is_refused_and_rolled_back_whole(store: Store) -> None:
    log, tick, campaign = log_of(store)
    log.write_intents(tick, campaign, Policy(), [decision("s.0", "resubmit")], [], 1)
    before = len(log.entries())
    for second in ("resubmit", "give_up"):
        with pytest.raises(AnsweredElsewhereError, match=r"attempt\(s\) s\.0 at the same moment") as caught:
            log.write_intents(tick, campaign, Policy(), [decision("s.1", "give_up"), decision("s.0", second)], [], 1)
        assert caught.value.exit_code == 75
    assert len(log.entries()) == before  # s.1's give-up went with it: nothing of that tick was written
    assert chain_verifies(store)
    log.write_intents(tick, campaign, Policy(), [decision("s.1", "give_up")], [], 1)  # the chain goes on
    assert chain_verifies(store)


def test_what_legitimately_repeats_for_one_attempt_is_accepted(store: Store) -> None:
    log, tick, campaign = log_of(store)
    repeats = [decision("s.0", "resubmit", mode="shadow"), decision("s.0", "resubmit", mode="shadow"),  # proposals
               decision("s.0", "stop"), decision("s.0", "stop"),  # a stop that failed, then one that worked
               decision("s.1", "resubmit", gate="needs 4 GPUs"), decision("s.1", "approve"),  # gated, approved
               decision("s.0", "resize_pending"), decision("s.0", "resize_pending"), decision("s.0", "give_up")]
    for planned in repeats:
        log.write_intents(tick, campaign, Policy(), [planned], [], 1)
    assert len(policy_decisions(log.entries())) == len(repeats)
    with pytest.raises(AnsweredElsewhereError):  # s.1's gated resubmit is its answer, approved or not
        log.write_intents(tick, campaign, Policy(), [decision("s.1", "give_up")], [], 1)


def test_the_index_refuses_a_second_answer_written_by_any_means(store: Store) -> None:
    log, tick, campaign = log_of(store)
    log.write_intents(tick, campaign, Policy(), [decision("s.0", "give_up")], [], 1)
    with pytest.raises(WriteConflictError) as caught, store.engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO decisions (id, tick_id, campaign_id, task_index, attempt_token, policy, policy_digest, "
            "rule, action, params_json, inputs_json, reason, mode, group_token, created_at) VALUES "
            "(99, :t, :c, 0, 's.0', 'p', 'd', 'failed', 'resubmit', '{}', '{}', 'r', 'enforce', '', 'now')"),
            {"t": tick, "c": campaign})
    assert caught.value.constraint in ("decisions_one_answer", "decisions.attempt_token")


def test_migration_011_keeps_second_answers_written_before_it_and_covers_every_later_row(
        backend: str, state_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = [m for m in store_module.MIGRATIONS if m[0] < "011"]
    with monkeypatch.context() as old:
        old.setattr(store_module, "MIGRATIONS", before)
        store = Store.open()
        with store.engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO campaigns (id, name, state, current_revision, run_dir, owner, "
                                 "created_at) VALUES (1, 'old', 'active', 1, '/r', 'me', '2026-01-01')")
        log, tick = DecisionLog(store.engine), DecisionLog(store.engine).begin_tick("old")
        for token in ("raced.0", "raced.0", "fine.0"):  # the race of issue 15: a failure retried twice
            log.write_intents(tick, 1, Policy(), [decision(token, "resubmit")], [], 1)
        store.engine.dispose()
    store = Store.open()
    log = DecisionLog(store.engine)
    assert [e.attempt_token for e in log.entries()] == ["raced.0", "raced.0", "fine.0"]  # the log keeps them
    for token in ("raced.0", "fine.0"):
        with pytest.raises(AnsweredElsewhereError):
            log.write_intents(tick, 1, Policy(), [decision(token, "give_up")], [], 1)
    log.write_intents(tick, 1, Policy(), [decision("new.0", "give_up")], [], 1)
    with pytest.raises(AnsweredElsewhereError):
        log.write_intents(tick, 1, Policy(), [decision("new.0", "resubmit")], [], 1)
    assert chain_verifies(store)


def test_holds_asks_the_database_only_once_half_a_ttl_has_passed(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tick checks its lease before each campaign: free while the lease cannot have lapsed."""
    a = ids(store)[0]
    holder = alice(store)
    holder.take([a])
    asked: list[str] = []
    sa.event.listen(store.engine, "before_cursor_execute", lambda *args: asked.append(args[2]))
    assert all(holder.holds(a) for _ in range(3)) and asked == []
    later = lease_module._clock() + 31
    monkeypatch.setattr(lease_module, "_clock", lambda: later)
    assert holder.holds(a) and len([sql for sql in asked if sql.startswith("UPDATE leases")]) == 1
    assert holder.holds(a) and len(asked) == 1  # renewed just now
