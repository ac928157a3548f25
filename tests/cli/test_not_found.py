"""Asking for something that is not there exits 4 and the hint names what is (a campaign `rc`
of eight tasks with one revision, its decisions written by ticks against the fake Slurm)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_user_error, run_cli
from tests.cli.test_log_chain import logged  # noqa: F401  (fixture: a campaign `rc` with decisions)


@pytest.mark.parametrize(("args", "message", "hint"), [
    (("revisions", "rc", "--diff", "99"), "campaign 'rc' has no revision 99", "revisions: 1"),
    (("log", "rc", "--task", "99"), "campaign 'rc' has no task 99",
     "its tasks: 0-7; --task -1 shows campaign-wide decisions"),
    (("retry", "rc", "--task", "99"), "campaign 'rc' has no task 99", "its tasks are 0-7"),
    (("cancel", "rc", "--task", "5,99"), "campaign 'rc' has no task 99", "its tasks are 0-7"),
    (("approve", "999"), "no decision #999", "awaiting approval: none (`campaignctl approvals`)"),
    (("approvals", "ghost"), "no campaign named 'ghost'", "known campaigns: rc"),
    (("rollback", "rc", "--to", "99", "--dry-run"), "campaign 'rc' has no revision 99", "revisions: 1"),
    (("profile", "show", "ghost"), "no campaign names profile 'ghost'",
     "known profiles: none yet (a spec's `profile:` key names one)"),
])
def test_what_is_not_there_exits_4_naming_what_is(args: tuple[str, ...], message: str, hint: str,
                                                  logged: int, state_home: Path) -> None:  # noqa: F811
    assert_user_error(run_cli(*args, state=state_home), 4, f"error: {message}\nhint: {hint}\n")
    envelope = json.loads(run_cli(*args, "--json", state=state_home).stdout)
    assert envelope["error"] == {"code": 4, "kind": "not_found", "message": message, "hint": hint}


def test_what_is_there_still_answers(logged: int, state_home: Path) -> None:  # noqa: F811
    diff = run_cli("revisions", "rc", "--diff", "1", state=state_home)
    assert diff.returncode == 0 and "current revision of rc: 1" in diff.stdout
    task = run_cli("log", "rc", "--task", "0", state=state_home)
    assert task.returncode == 0 and "task 0 attempt 1" in task.stdout
    quiet = run_cli("log", "rc", "--task", "7", state=state_home)
    assert quiet.returncode == 0 and quiet.stdout == "no decisions yet for rc\n"
