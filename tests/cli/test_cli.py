"""The CLI as a user meets it: exit codes, error/hint lines, no tracebacks, --json, --help."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from campaignctl.services.submit import submit
from tests.conftest import COMMAND_TIMEOUT_S, REPO, write_spec
from tests.fakeslurm import FakeSlurm


def run_cli(*args: str, state: Path, cwd: Path | None = None,
            env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CAMPAIGNCTL_FAULT", "CAMPAIGNCTL_CHAIN_HEAD")}
    env.pop("SLURM_CONF", None)  # no cluster: clients fail fast ("Could not establish a configuration source")
    env.update({"XDG_STATE_HOME": str(state), "COLUMNS": "200", **(env_extra or {})})
    return subprocess.run([sys.executable, "-m", "campaignctl", *args], capture_output=True, text=True,
                          env=env, cwd=cwd or REPO, timeout=COMMAND_TIMEOUT_S)


def assert_user_error(done: subprocess.CompletedProcess[str], code: int, *fragments: str) -> None:
    assert done.returncode == code, done.stderr
    assert done.stderr.startswith("error: ")
    assert "\nhint: " in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    for fragment in fragments:
        assert fragment in done.stderr


@pytest.mark.parametrize("command", ["submit", "status", "reconcile", "log", "resume",
                                     "log show", "log verify", "log export", "revisions", "rollback",
                                     "approvals", "approve", "reject", "policy set", "policy promote",
                                     "policy replay", "report", "metrics"])
def test_every_command_has_help_with_an_example(command: str, tmp_path: Path) -> None:
    done = run_cli(*command.split(), "--help", state=tmp_path)
    assert done.returncode == 0 and "Example: campaignctl " + command in done.stdout


def test_usage_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    done = run_cli("submit", state=tmp_path)
    assert done.returncode == 2 and "Missing argument" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_missing_spec_file(tmp_path: Path) -> None:
    missing = run_cli("submit", str(tmp_path / "nope.yaml"), state=tmp_path)
    assert_user_error(missing, 3, "nope.yaml", "file not found")
    assert "check the path" in missing.stderr and "fix the keys above" not in missing.stderr  # issue 28


def test_status_of_a_state_no_task_can_be_in_is_a_usage_error_naming_the_states(tmp_path: Path) -> None:
    """Issue 28: `--state FAILD` printed "no task matches" and exit 0."""
    typo = run_cli("status", "lr", "--state", "FAILD", state=tmp_path)
    assert typo.returncode == 2 and "'FAILD' is no task state" in typo.stderr
    assert "FAILED" in typo.stderr and "OUT_OF_MEMORY" in typo.stderr and "Traceback" not in typo.stderr


def test_invalid_spec_names_file_line_key_and_allowed_values(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "name: x\ncommand: [a]\nresources: {time: 1:30:00, cpu_bind: fast}\n")
    done = run_cli("submit", str(spec), state=tmp_path)
    assert_user_error(done, 3, str(spec), "line 3: resources.time: '1:30:00' is read by YAML 1.1",
                      "resources.cpu_bind: 'fast' is not allowed; use one of: none, cores")


def test_unknown_campaign_is_exit_4_with_known_names(tmp_path: Path) -> None:
    assert_user_error(run_cli("status", "ghost", state=tmp_path), 4, "no campaign named 'ghost'")


def test_status_without_campaigns_is_friendly(tmp_path: Path) -> None:
    done = run_cli("status", state=tmp_path)
    assert done.returncode == 0 and "no campaigns yet" in done.stdout


def test_dry_run_json_envelope_shows_plan_and_script_without_slurm(tmp_path: Path) -> None:
    done = run_cli("submit", str(REPO / "templates" / "sweep.yaml"), "--dry-run", "--json", state=tmp_path)
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["schema"] == "campaignctl/v1" and envelope["command"] == "submit"
    data = envelope["data"]
    assert data["outcome"] == "dry-run" and data["tasks"] == 4
    assert data["chunks"][0]["array_spec"] == "0-3%4"
    assert "#SBATCH --gres=gpu:a100:1" in data["script"]
    assert "assumed 1001" in data["notes"][0]
    assert not (tmp_path / "campaignctl").exists()  # a dry run records nothing


def test_state_directory_and_database_are_private(tmp_path: Path) -> None:
    run_cli("status", state=tmp_path)
    assert (tmp_path / "campaignctl").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "campaignctl" / "campaignctl.db").stat().st_mode & 0o777 == 0o600


def test_bad_database_url_is_a_state_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "campaignctl", "status"], capture_output=True, text=True,
                          env={**os.environ, "XDG_STATE_HOME": str(tmp_path), "CAMPAIGNCTL_DB_URL": "nosuch://x"},
                          timeout=COMMAND_TIMEOUT_S)
    assert_user_error(done, 73, "cannot use database URL")


@pytest.mark.parametrize(("args", "code", "fragment"), [
    (("reconcile", "nope"), 4, "no campaign named 'nope'"),
    (("log", "nope"), 4, "no campaign named 'nope'"),
])
def test_reconcile_and_log_refuse_bad_input_with_a_hint(args: tuple[str, ...], code: int, fragment: str,
                                                         tmp_path: Path) -> None:
    assert_user_error(run_cli(*args, state=tmp_path), code, fragment)


def test_reconcile_needs_a_name_or_all_usage_error_exit_2(tmp_path: Path) -> None:
    done = run_cli("reconcile", state=tmp_path)
    assert done.returncode == 2 and "give a campaign name or --all" in done.stderr
    assert "Traceback" not in done.stderr


def test_reconcile_all_with_no_campaigns_is_a_quiet_success_with_json(tmp_path: Path) -> None:
    done = run_cli("reconcile", "--all", "--json", state=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["schema"] == "campaignctl/v1" and data["data"]["status"] == "nothing-to-do"
    assert data["data"]["slurm_calls"] == 0


def test_resume_refuses_an_unknown_campaign_and_one_that_is_not_paused(
        tmp_path: Path, state_home: Path, fake_slurm: FakeSlurm) -> None:
    assert_user_error(run_cli("resume", "nope", state=state_home), 4, "no campaign named 'nope'")
    submit(write_spec(tmp_path, "name: running\ncommand: [python3, x.py]\ntasks: [{}]\n"))
    assert_user_error(run_cli("resume", "running", state=state_home), 5, "is active, not paused")


def test_governance_commands_refuse_bad_input_with_a_hint(
        tmp_path: Path, state_home: Path, fake_slurm: FakeSlurm) -> None:
    submit(write_spec(tmp_path, "name: gov\ncommand: [python3, x.py]\ntasks: [{}]\n"))
    assert_user_error(run_cli("rollback", "gov", state=state_home), 5, "no known-good revision", "--to REV")
    assert_user_error(run_cli("rollback", "gov", "--to", "9", state=state_home), 4, "has no revision 9")
    assert_user_error(run_cli("rollback", "gov", "--to", "1", state=state_home), 5, "already current")
    assert_user_error(run_cli("approve", "99", state=state_home), 4, "no decision #99")
    assert_user_error(run_cli("policy", "promote", "gov", state=state_home), 5, "nothing runs in shadow")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nrules: {out_of_memory: {action: explode}}\n")
    assert_user_error(run_cli("policy", "set", "gov", str(bad), state=state_home), 3,
                      "rules.out_of_memory.action", "resubmit")
    same = run_cli("policy", "set", "gov", "default", state=state_home)
    assert_user_error(same, 5, "already has this content")


def test_policy_set_prints_the_settings_that_changed_and_full_prints_the_diff(
        tmp_path: Path, state_home: Path, fake_slurm: FakeSlurm) -> None:
    """Issue 28: `policy set --shadow` dumped a 260-line JSON diff."""
    submit(write_spec(tmp_path, "name: gov\ncommand: [python3, x.py]\ntasks: [{}]\n"))
    grow = tmp_path / "grow.yaml"
    grow.write_text("name: grow\nrules: {out_of_memory: {mem_factor: 2}}\n")
    shadow = run_cli("policy", "set", "gov", str(grow), "--shadow", state=state_home)
    assert shadow.returncode == 0, shadow.stderr
    lines = shadow.stdout.splitlines()
    assert len(lines) <= 7, shadow.stdout
    assert "candidate in shadow, against the enforced policy: 4 setting(s) differ" in shadow.stdout
    assert "rules.out_of_memory.mem_factor: 1.5 → 2.0" in shadow.stdout and 'name: "default" → "grow"' in shadow.stdout
    assert 'base: (none) → "default@v1"' in shadow.stdout and "version: 1 → 0" in shadow.stdout
    promoted = run_cli("policy", "promote", "gov", "--full", state=state_home)
    assert promoted.returncode == 0 and '+  "name": "grow"' in promoted.stdout  # the whole diff


@pytest.mark.parametrize("width", [80, 120, 200])
def test_revisions_keep_what_tells_them_apart_whole(tmp_path: Path, state_home: Path, fake_slurm: FakeSlurm,
                                                    width: int) -> None:
    """Issue 28: `revisions` at 80 columns read `2026-…`, `initi…`, `defau…`."""
    submit(write_spec(tmp_path, "name: gov\ncommand: [python3, x.py]\ntasks: [{}]\n"))
    other = REPO / "campaignctl" / "policies" / "conservative.yaml"
    reason = "be careful: the last sweep lost two days to a node that kept failing"
    assert run_cli("policy", "set", "gov", str(other), "--reason", reason, state=state_home).returncode == 0
    shown = run_cli("revisions", "gov", state=state_home, env_extra={"COLUMNS": str(width)})
    lines = shown.stdout.splitlines()
    assert shown.returncode == 0 and all(len(line) <= width for line in lines), lines
    rows = [line for line in lines if line.split()[:1] in (["1"], ["2*"])]
    assert rows[0].split()[:2] == ["1", "spec"] and "default@v1" in rows[0]
    assert rows[1].split()[:2] == ["2*", "policy"] and "conservative@v1" in rows[1]
    assert "…" not in shown.stdout and re.search(r"\b20\d\d-\d\d-\d\d \d\d:\d\d\b", rows[0])
    assert "two days" in " ".join(lines)  # the reason, wrapped if it must


def test_policy_set_then_rollback_to_it_by_hand(tmp_path: Path, state_home: Path, fake_slurm: FakeSlurm) -> None:
    submit(write_spec(tmp_path, "name: gov\ncommand: [python3, x.py]\ntasks: [{}]\n"))
    other = REPO / "campaignctl" / "policies" / "conservative.yaml"
    done = run_cli("policy", "set", "gov", str(other), "--reason", "be careful", state=state_home)
    assert done.returncode == 0, done.stderr
    assert "revision 2 is current (policy: be careful)" in done.stdout
    marked = run_cli("revisions", "gov", "--mark-good", "1", "--json", state=state_home)
    assert json.loads(marked.stdout)["data"]["revisions"][0]["known_good"].startswith("marked known-good by")
    plan = run_cli("rollback", "gov", "--dry-run", state=state_home)
    assert "would roll back from revision 2 to the content of revision 1" in plan.stdout
    done = run_cli("rollback", "gov", state=state_home)
    assert "revision 3 is current, with the content of revision 1" in done.stdout, done.stderr
    listing = run_cli("revisions", "gov", "--diff", "2", state=state_home)
    assert "be careful" in listing.stdout and '+  "name": "conservative"' in listing.stdout
    log = run_cli("log", "gov", state=state_home)
    assert "rollback → make_current applied" in log.stdout
