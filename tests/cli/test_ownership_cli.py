"""Ownership through the CLI, as a user sees it: another user's campaign reads fine and every
change is refused with exit 77 and nothing changed; a share group's members may act; only the
owner may change the share. (Real Unix users: tests/integration/test_multiuser_real.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from tests.conftest import run_main, write_spec
from tests.fakeslurm import FakeSlurm
from tests.users import REAL_GROUP, as_user

Run = tuple[pytest.MonkeyPatch, pytest.CaptureFixture[str]]


def spec_text(name: str, share: str | None = None, tasks: int = 3) -> str:
    return (f"name: {name}\ncommand: [python3, train.py, \"{{i}}\"]\n"
            f"matrix: {{i: [{', '.join(map(str, range(tasks)))}]}}\n"
            "resources: {mem: 1G, time: \"00:10:00\"}\n"
            "policy: {use: default, rules: {failed: {backoff: 0}}}\n"
            + (f"share: {{group: {share}}}\n" if share else ""))


def snapshot(name: str) -> tuple[int, int, str]:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    return (len(store.revisions(record.id)), len(DecisionLog(store.engine).entries(record.id)), record.state)


@pytest.fixture
def alices(tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> Path:
    """alice's unshared campaign `own`, one task failed with a retryable code and retried."""
    as_user(monkeypatch, "alice")
    spec = write_spec(tmp_path, spec_text("own"), "own.yaml")
    assert run_main(monkeypatch, capsys, "submit", str(spec))[0] == 0
    fake_slurm.set_state(min(fake_slurm.jobs, key=int), 0, "FAILED", "75:0", "node1")
    assert run_main(monkeypatch, capsys, "reconcile", "own")[0] == 0
    assert run_main(monkeypatch, capsys, "policy", "set", "own", "conservative", "--shadow")[0] == 0  # revision 2
    return spec


@pytest.mark.parametrize("args", [
    ["policy", "set", "own", "conservative"],
    ["policy", "promote", "own"],
    ["rollback", "own", "--to", "1"],
    ["resume", "own"],
    ["approve", "1"],
    ["reject", "1"],
    ["revisions", "own", "--mark-good", "1"],
    ["reconcile", "own"],
])
def test_every_change_by_another_user_is_refused_with_77_and_changes_nothing(
        alices: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    before, jobs = snapshot("own"), len(fake_slurm.jobs)
    as_user(monkeypatch, "carol", "carol", "other")
    code, out, err = run_main(monkeypatch, capsys, *args)
    assert code == 77, out + err
    assert "carol may not" in err and "it belongs to alice" in err and "share: {group: GROUP}" in err
    assert snapshot("own") == before and len(fake_slurm.jobs) == jobs


def test_submit_of_another_users_name_is_refused_and_suggests_another_name(
        alices: Path, tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    before, jobs = snapshot("own"), len(fake_slurm.jobs)
    as_user(monkeypatch, "carol")
    theirs = write_spec(tmp_path, spec_text("own", tasks=5), "carols.yaml")  # an unrelated spec, same name
    code, _, err = run_main(monkeypatch, capsys, "submit", str(theirs))
    assert code == 77
    assert "carol may not submit a spec named campaign 'own': it belongs to alice" in err
    assert "give your spec another `name:`" in err
    assert snapshot("own") == before and len(fake_slurm.jobs) == jobs


def test_another_users_campaigns_fine(alices: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    as_user(monkeypatch, "carol")
    for args in (["status", "own"], ["log", "show", "own"], ["revisions", "own"], ["log", "verify"],
                 ["reconcile", "own", "--dry-run"], ["rollback", "own", "--to", "1", "--dry-run"]):
        code, out, err = run_main(monkeypatch, capsys, *args)
        assert code == 0, (args, out, err)


def test_reconcile_all_acts_only_on_what_the_caller_may_and_says_how_many_it_left(
        alices: Path, tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    as_user(monkeypatch, "carol")
    mine = write_spec(tmp_path, spec_text("carols"), "carols.yaml")
    assert run_main(monkeypatch, capsys, "submit", str(mine))[0] == 0
    store = Store.open()
    own = store.campaign("own")
    assert own is not None
    retry = next(a.array_job_id for a in store.attempts(own.id) if a.attempt_number == 2)
    assert retry is not None
    fake_slurm.set_state(retry, 0, "FAILED", "75:0", "node1")  # alice's retry failed again: carol must not retry it
    before, jobs = snapshot("own"), len(fake_slurm.jobs)
    code, out, _ = run_main(monkeypatch, capsys, "reconcile", "--all", "--json")
    data = json.loads(out)["data"]
    assert code == 0 and data["left_out"] == 1
    assert [c["name"] for c in data["campaigns"]] == ["carols"]
    assert snapshot("own") == before and len(fake_slurm.jobs) == jobs
    code, out, _ = run_main(monkeypatch, capsys, "reconcile", "--all")
    assert code == 0 and "1 campaign(s) of other users left alone" in out
    as_user(monkeypatch, "alice")
    data = json.loads(run_main(monkeypatch, capsys, "reconcile", "--all", "--json")[1])["data"]
    assert [c["name"] for c in data["campaigns"]] == ["own"]  # carol's has finished: nothing left out
    assert [d["action"] for d in data["campaigns"][0]["decisions"]] == ["resubmit"]  # carol left it to alice


def test_members_of_the_share_group_act_others_do_not_and_only_the_owner_changes_the_share(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    as_user(monkeypatch, "alice", REAL_GROUP)
    shared = write_spec(tmp_path, spec_text("team", share=REAL_GROUP), "team.yaml")
    assert run_main(monkeypatch, capsys, "submit", str(shared))[0] == 0
    as_user(monkeypatch, "bob", REAL_GROUP)
    code, out, err = run_main(monkeypatch, capsys, "policy", "set", "team", "conservative", "--json")
    assert code == 0, out + err
    assert [r["author"] for r in json.loads(out)["data"]["revisions"]] == ["alice", "bob"]
    unshared = write_spec(tmp_path, spec_text("team"), "team-private.yaml")
    code, _, err = run_main(monkeypatch, capsys, "submit", str(unshared))
    assert code == 77 and "only its owner alice may" in err
    as_user(monkeypatch, "carol", "other")
    code, _, err = run_main(monkeypatch, capsys, "policy", "set", "team", "default")
    assert code == 77 and f"shared with Unix group {REAL_GROUP!r}, which carol is not in" in err
    as_user(monkeypatch, "alice", REAL_GROUP)
    assert run_main(monkeypatch, capsys, "submit", str(unshared))[0] == 0  # the owner may withdraw it
    as_user(monkeypatch, "bob", REAL_GROUP)
    assert run_main(monkeypatch, capsys, "policy", "set", "team", "default")[0] == 77


def test_an_unknown_share_group_is_refused_at_submit_naming_it(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, spec_text("nogroup", share="no-such-group-cctl"))
    for args in (["submit", str(spec)], ["submit", str(spec), "--dry-run"]):
        code, _, err = run_main(monkeypatch, capsys, *args)
        assert code == 3 and "share.group: no Unix group named 'no-such-group-cctl' on this host" in err
    assert fake_slurm.jobs == {}
