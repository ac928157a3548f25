"""Shared campaigns against the fake Slurm: repair takes up only the caller's own submissions,
and a shared run directory is the group's (setgid 2770; the captured environment 0640)."""

from __future__ import annotations

import grp
import stat
from collections import Counter
from pathlib import Path

import pytest

from campaignctl.adapters import store_engine as store_module
from campaignctl.adapters.store import Store
from campaignctl.adapters.store_migrations import MIGRATIONS
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.crash import Crash, crash_once_at
from tests.fakeslurm import FakeSlurm
from tests.users import REAL_GROUP, as_user


def shared_campaign(tmp_path: Path, name: str = "team", share: str | None = REAL_GROUP) -> Path:
    spec = write_spec(tmp_path, f"""\
name: {name}
command: [python3, train.py, "{{i}}"]
matrix: {{i: [0, 1, 2]}}
policy: {{use: default, rules: {{failed: {{backoff: 0}}}}}}
""" + (f"share: {{group: {share}}}\n" if share else ""), name=f"{name}.yaml")
    submit(spec)
    return tmp_path / "runs" / name


@pytest.mark.parametrize("point", ["after_decisions", "after_sbatch", "before_release"])
def test_a_member_never_takes_up_another_members_unfinished_submission(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    """alice's tick stops between its retry's intent row and its release (a crash; or simply
    still running while bob's tick starts): bob's tick must not sbatch, adopt or release it —
    her held job is in her `squeue --me`, not his, and taking it up submitted it twice, as his."""
    as_user(monkeypatch, "alice", REAL_GROUP)
    shared_campaign(tmp_path)
    fake_slurm.set_state(min(fake_slurm.jobs, key=int), 0, "FAILED", "75:0", "node1")
    crash_once_at(monkeypatch, point)
    with pytest.raises(Crash):
        reconcile("team")
    jobs = dict(fake_slurm.jobs)
    held = {j: fake_slurm.jobs[j].held for j in jobs}
    as_user(monkeypatch, "bob", REAL_GROUP)
    tick = reconcile("team")
    assert tick.campaigns[0].repaired == 0 and tick.campaigns[0].decisions == []
    assert fake_slurm.jobs.keys() == jobs.keys() and {j: fake_slurm.jobs[j].held for j in jobs} == held
    as_user(monkeypatch, "alice", REAL_GROUP)
    assert reconcile("team").campaigns[0].repaired == 1  # her own tick finishes it
    store = Store.open()
    record = store.campaign("team")
    assert record is not None
    assert Counter(a.task_index for a in store.attempts(record.id)) == {0: 2, 1: 1, 2: 1}
    assert len(fake_slurm.jobs) == 2 and not any(j.held for j in fake_slurm.jobs.values())
    assert {s.submitted_by for s in store.submissions(record.id)} == {"alice"}


def mode(path: Path) -> tuple[int, str]:
    st = path.stat()
    return stat.S_IMODE(st.st_mode), grp.getgrgid(st.st_gid).gr_name


def test_a_shared_run_dir_is_the_groups_and_an_unshared_one_stays_private(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    as_user(monkeypatch, "alice", REAL_GROUP)
    shared = shared_campaign(tmp_path)
    for part in ("", "slurm", "tasks"):
        assert mode(shared / part) == (0o2770, REAL_GROUP), part
    assert mode(shared / ".campaignctl-private") == (0o2750, REAL_GROUP)
    [env] = (shared / ".campaignctl-private").glob("env.team.*")
    assert mode(env) == (0o640, REAL_GROUP)  # the group reads the owner's captured environment; others nothing
    private = shared_campaign(tmp_path, "solo", share=None)
    for part in ("", "slurm", "tasks", ".campaignctl-private"):
        assert stat.S_IMODE((private / part).stat().st_mode) == 0o700, part
    [env] = (private / ".campaignctl-private").glob("env.solo.*")
    assert stat.S_IMODE(env.stat().st_mode) == 0o600


def test_migration_012_says_the_owner_submitted_what_was_submitted_before_it(
        backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    before = [m for m in store_module.MIGRATIONS if m[0] != "012_submitted_by"]
    monkeypatch.setattr(store_module, "MIGRATIONS", before)
    old = Store.open()
    with old.engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO campaigns (id, name, state, current_revision, run_dir, owner, created_at) "
                             "VALUES (7, 'old', 'active', 1, '/r', 'alice', 't')")
        conn.exec_driver_sql("INSERT INTO submissions (campaign_id, revision, token, state, job_id, array_spec, size, "
                             "folder, resources_json, created_at, updated_at) "
                             "VALUES (7, 1, 'tok', 'released', '12', '0-1', 2, '/r/slurm', '{}', 't', 't')")
    old.engine.dispose()
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS)
    assert [s.submitted_by for s in Store.open().submissions(7)] == ["alice"]


def test_sharing_a_campaign_later_gives_the_group_the_directories_its_attempts_made(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    as_user(monkeypatch, "alice", REAL_GROUP)
    run_dir = shared_campaign(tmp_path, share=None)
    attempt = run_dir / "tasks" / "0" / "tok.0"
    attempt.mkdir(parents=True, mode=0o755)  # what a job made under the umask
    (run_dir / "tasks" / "0").chmod(0o755)
    shared_campaign(tmp_path, share=REAL_GROUP)  # alice shares it: a new revision
    for path in (run_dir / "tasks", run_dir / "tasks" / "0", attempt):
        assert mode(path) == (0o2770, REAL_GROUP), path
