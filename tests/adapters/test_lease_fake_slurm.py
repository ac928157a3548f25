"""The campaign lease wired into reconcile and the manual actions, against a fake Slurm: a campaign
another process holds (any user, any host) is left alone by a tick that still exits 0, a manual
action on it exits 75 naming the holder, and a tick that lost the race for an attempt, or its
lease, drops that campaign's decisions instead of failing with exit 1. (Real Slurm and PostgreSQL:
tests/integration/test_lease_real.py.)"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters import lease as lease_module
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.lease import Leases
from campaignctl.adapters.store import Store
from campaignctl.adapters.store_schema import leases, notifications
from campaignctl.core.decisions.action_records import GiveUp
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.policy.policy import Policy
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.adapters.test_reconcile_fake_slurm import campaign, provoke
from tests.conftest import policy_decisions, run_main, write_spec
from tests.fakeslurm import FakeSlurm

HOLDER = "alice@login1 pid 4242 since "


def alice(store: Store) -> Leases:
    held = Leases(store.engine, 60)
    held.user, held.host, held.pid = "alice", "login1", 4242
    return held


def two_campaigns(tmp_path: Path, fake: FakeSlurm) -> Store:
    """`la` (its task 0 just failed with a code the policy retries) and `lb` (nothing to do)."""
    campaign(tmp_path, fake, 2, name="la")
    provoke(fake, {0: ("FAILED", "75:0", "node1")})
    campaign(tmp_path, fake, 1, name="lb")
    return Store.open()


def campaign_id(store: Store, name: str) -> int:
    record = store.campaign(name)
    assert record is not None
    return record.id


def retries(store: Store, name: str) -> list[tuple[int, str]]:
    return [(e.task_index, e.action) for e in DecisionLog(store.engine).entries(campaign_id(store, name))
            if e.action == "resubmit"]


def no_lease_left(store: Store) -> bool:
    with store.engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(leases)).scalar_one() == 0


def test_a_campaign_another_holds_is_left_alone_and_taken_up_once_released(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    store = two_campaigns(tmp_path, fake_slurm)
    other = alice(store)
    assert other.take([campaign_id(store, "la")]) == {}
    fake_slurm.calls.clear()

    code, out, _ = run_main(monkeypatch, capsys, "reconcile", "--all", "--json")
    data = json.loads(out)["data"]
    assert code == 0 and data["status"] == "ok"
    assert [c["name"] for c in data["campaigns"]] == ["lb"]
    [left] = data["left_alone"]
    assert left["name"] == "la" and left["why"].startswith("its lease is held by " + HOLDER)
    assert left["holder"]["user"] == "alice" and left["holder"]["pid"] == 4242
    assert "sbatch" not in fake_slurm.calls and retries(store, "la") == []
    code, out, _ = run_main(monkeypatch, capsys, "reconcile", "--all")
    assert code == 0 and f"la left alone: its lease is held by {HOLDER}" in out

    other.release()
    assert run_main(monkeypatch, capsys, "reconcile", "--all")[0] == 0
    assert retries(store, "la") == [(0, "resubmit")]
    assert no_lease_left(store)  # the tick released what it took


def test_a_named_campaign_another_holds_is_a_locked_tick_that_exits_0(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    store = two_campaigns(tmp_path, fake_slurm)
    alice(store).take([campaign_id(store, "la")])
    code, out, _ = run_main(monkeypatch, capsys, "reconcile", "la")
    assert code == 0
    assert "another process holds the lease of every campaign of this tick; nothing done" in out
    assert f"la left alone: its lease is held by {HOLDER}" in out and "lapses in" in out
    assert reconcile("la").status == "locked" and retries(store, "la") == []


def test_a_manual_action_on_a_campaign_another_holds_exits_75_naming_the_holder(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    store = two_campaigns(tmp_path, fake_slurm)
    other = alice(store)
    other.take([campaign_id(store, "la")])
    code, _, err = run_main(monkeypatch, capsys, "revisions", "la", "--mark-good", "1")
    assert code == 75
    assert f"error: campaign 'la' is being acted on by {HOLDER}" in err
    assert "hint: run the command again once it is done (its lease lapses in" in err
    assert policy_decisions(DecisionLog(store.engine).entries()) == []
    other.release()
    assert run_main(monkeypatch, capsys, "revisions", "la", "--mark-good", "1")[0] == 0
    assert [e.action for e in policy_decisions(DecisionLog(store.engine).entries())] == ["mark_known_good"]
    assert no_lease_left(store)


def test_a_tick_that_loses_the_race_for_an_attempt_drops_that_campaigns_decisions(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Another tick (its lease lapsed and taken, or a version without leases) answers task 0's
    failed attempt between this tick's decision and its write: the index refuses the second answer."""
    store = two_campaigns(tmp_path, fake_slurm)
    write = DecisionLog.write_intents

    def raced(log: DecisionLog, tick_id: int, campaign: int, policy: Policy,
              planned: Sequence[tuple[Decision, str]], *rest: object) -> list[int]:
        for d, _ in planned:
            if d.action == "resubmit":
                other = DecisionLog(log.engine)
                write(other, other.begin_tick("elsewhere"), campaign, policy,
                      [(Decision(d.task_index, d.attempt_token, "failed", "give_up", "the other tick", {}, GiveUp()),
                        "")], [], 1)
        return write(log, tick_id, campaign, policy, planned, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(DecisionLog, "write_intents", raced)
    fake_slurm.calls.clear()
    code, out, _ = run_main(monkeypatch, capsys, "reconcile", "--all", "--json")
    data = json.loads(out)["data"]
    assert code == 0 and [c["name"] for c in data["campaigns"]] == ["lb"]
    [left] = data["left_alone"]
    assert left["name"] == "la" and left["holder"] is None
    assert "another tick answered attempt(s)" in left["why"] and "none of them carried out" in left["why"]
    assert "sbatch" not in fake_slurm.calls  # nothing of la's was carried out
    decided = policy_decisions(DecisionLog(store.engine).entries())
    assert [(e.action, e.reason) for e in decided] == [("give_up", "the other tick")]
    assert run_main(monkeypatch, capsys, "log", "verify")[0] == 0


def test_a_tick_whose_lease_was_taken_from_it_leaves_the_campaign_alone(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A tick suspended past its TTL (or its renewals refused) loses the lease to another."""
    store = two_campaigns(tmp_path, fake_slurm)
    take, clock = Leases.take, lease_module._clock

    def lapsing(self: Leases, ids: object) -> object:
        held = take(self, ids)  # type: ignore[arg-type]
        monkeypatch.setattr(lease_module, "_clock", lambda: clock() + self.ttl_s)  # the tick sleeps a TTL ...
        with store.engine.begin() as conn:  # ... its leases lapse ...
            conn.execute(leases.update().where(leases.c.token == self.token).values(expires_at=0))
        take(alice(store), [campaign_id(store, "la")])  # ... and another takes la's
        return held

    monkeypatch.setattr(Leases, "take", lapsing)
    code, out, _ = run_main(monkeypatch, capsys, "reconcile", "--all", "--json")
    data = json.loads(out)["data"]
    assert code == 0 and [c["name"] for c in data["campaigns"]] == ["lb"]
    assert [(c["name"], c["why"]) for c in data["left_alone"]] == [
        ("la", "its lease lapsed and another process took it; nothing more done on it this tick")]
    assert retries(store, "la") == []


@pytest.mark.parametrize("adopted", [False, True])
def test_a_tick_that_loses_its_lease_inside_sbatch_releases_nothing_and_cancels_only_a_duplicate(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], adopted: bool) -> None:
    """Issue 26: the tick's sbatch returns after its lease went to another tick, which either
    submitted the token itself (ours is a duplicate: cancelled) or adopted ours from squeue (its
    job id recorded: ours is left to it). Either way this tick releases nothing."""
    from campaignctl.adapters.submission import ArraySubmission
    store = two_campaigns(tmp_path, fake_slurm)
    submit_held, lost = ArraySubmission.submit_held, []

    def frozen_past_the_ttl(self: ArraySubmission, cluster: str = "") -> str:
        job_id = submit_held(self, cluster)
        lost.append(job_id)
        with store.engine.begin() as conn:  # meanwhile another tick took the lease …
            conn.execute(leases.update().where(leases.c.campaign_id == campaign_id(store, "la"))
                         .values(token="another", expires_at=sa.literal(10.0**12)))
        store.set_submission_state(self.token, "submitted", job_id if adopted else "99999")  # … and sbatched
        return job_id

    monkeypatch.setattr(ArraySubmission, "submit_held", frozen_past_the_ttl)
    ticking = iter(range(10**9, 10**10, 10**4))  # every look at the clock finds a TTL passed
    monkeypatch.setattr(lease_module, "_clock", lambda: float(next(ticking)))  # so holds() asks the database
    code, out, _ = run_main(monkeypatch, capsys, "reconcile", "--all", "--json")
    data = json.loads(out)["data"]
    assert code == 0, out
    (left,) = data["left_alone"]
    kept = "adopted by the lease's holder" if adopted else "cancelled as a duplicate"
    assert left["name"] == "la" and "lost the lease inside sbatch" in left["why"] and kept in left["why"]
    (ours,) = lost
    assert fake_slurm.jobs[ours].cancelled is not adopted
    assert fake_slurm.jobs[ours].held  # never released by this tick


def test_a_finished_campaigns_queued_notices_are_sent_only_by_the_tick_that_holds_its_lease(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    got, up = tmp_path / "got.jsonl", tmp_path / "up"
    script = tmp_path / "hook.py"  # the receiver is down (exit 1) until `up` exists
    script.write_text("import pathlib, sys\nif not pathlib.Path(sys.argv[2]).exists():\n    sys.exit(1)\n"
                      "open(sys.argv[1], 'a').write(sys.stdin.read() + '\\n')\n")
    submit(write_spec(tmp_path, f"""\
name: nt
command: [python3, train.py, "{{i}}"]
matrix: {{i: [0, 1]}}
notify: {{command: [{sys.executable}, {script}, {got}, {up}], retries: 5}}
"""))
    fake_slurm.set_state(min(fake_slurm.jobs, key=int), 1, "FAILED", "1:0", "node1")  # a bug: given up
    assert run_main(monkeypatch, capsys, "reconcile", "nt")[0] == 0
    store = Store.open()
    assert store.campaign("nt").state == "finished"  # type: ignore[union-attr]
    waiting = pending_events(store)
    assert waiting  # left for a later tick: the receiver was down
    up.touch()
    other = alice(store)
    other.take([campaign_id(store, "nt")])
    assert run_main(monkeypatch, capsys, "reconcile", "--all")[0] == 0
    assert not got.exists()  # its queue is the lease holder's to send
    other.release()
    with store.engine.begin() as conn:  # five minutes later: the failed notice's next try is due
        conn.execute(notifications.update().values(next_try_at=None))
    assert run_main(monkeypatch, capsys, "reconcile", "--all")[0] == 0
    assert [json.loads(line)["event"] for line in got.read_text().splitlines()] == waiting  # once each
    assert pending_events(store) == []


def pending_events(store: Store) -> list[str]:
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(notifications.c.event_json).where(notifications.c.status == "pending")
                            .order_by(notifications.c.id)).scalars()
        return [json.loads(r)["event"] for r in rows]
