"""The command line's surface, as a shell meets it: -h, --version, completion, help text without
typer's type markers, the JSON error envelope, exit 141 into a closed pipe, and help that loads
no service (so it starts fast)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.cli.test_cli import run_cli
from tests.cli.test_log_chain import logged  # noqa: F401  (fixture: a campaign `rc` with decisions)
from tests.conftest import COMMAND_TIMEOUT_S, REPO


@pytest.mark.parametrize("command", ["", "status", "log", "log export", "policy replay"])
def test_h_is_help(command: str, tmp_path: Path) -> None:
    short, long = (run_cli(*command.split(), flag, state=tmp_path) for flag in ("-h", "--help"))
    assert short.returncode == 0 and short.stdout == long.stdout
    assert short.stdout.startswith(f"Usage: campaignctl {command}".rstrip())


def test_version_names_the_installed_package(tmp_path: Path) -> None:
    done = run_cli("--version", state=tmp_path)
    assert done.returncode == 0 and done.stdout == f"campaignctl {version('campaignctl')}\n"


# typer finds the user's shell by walking up the process tree (shellingham); a test run from cron,
# setsid or CI may have no shell above it ("Shell None is not supported"). typer's own test switch
# makes both options take the shell by name instead, as they do where shellingham is not installed.
EXPLICIT_SHELL = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1", "SHELL": "/bin/bash"}


def test_show_completion_prints_a_bash_script_for_campaignctl(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "campaignctl", "--show-completion", "bash"], capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_S, env={**os.environ, **EXPLICIT_SHELL})
    assert done.returncode == 0, done.stderr
    assert "complete -o default -F _campaignctl_completion campaignctl" in done.stdout
    assert "_CAMPAIGNCTL_COMPLETE=complete_bash" in done.stdout


def test_install_completion_writes_the_script_and_sources_it_from_bashrc(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "campaignctl", "--install-completion", "bash"], capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_S,
                          env={**os.environ, **EXPLICIT_SHELL, "HOME": str(tmp_path)})
    script = tmp_path / ".bash_completions" / "campaignctl.sh"
    assert done.returncode == 0 and f"bash completion installed in {script}" in done.stdout
    assert "_CAMPAIGNCTL_COMPLETE=complete_bash" in script.read_text()
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text()


def test_completion_completes_subcommands(tmp_path: Path) -> None:
    env = {**os.environ, "_CAMPAIGNCTL_COMPLETE": "complete_bash", "COMP_WORDS": "campaignctl pol",
           "COMP_CWORD": "1"}
    done = subprocess.run([sys.executable, "-m", "campaignctl"], capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S, env=env)
    assert done.returncode == 0 and done.stdout.split() == ["policy"]


def test_help_names_values_in_words_not_python_types(tmp_path: Path) -> None:
    helps = "".join(run_cli(*c.split(), "--help", state=tmp_path).stdout for c in ["", "revisions", "status"])
    for marker in ("<bool>", "<str>", "<int>", "<float", "{campaign}", "<path>"):
        assert marker not in helps
    assert "Usage: campaignctl revisions [OPTIONS] CAMPAIGN\n" in helps
    assert "--diff INTEGER" in helps and "--json  " in helps and "-h, --help" in helps
    commands = run_cli("--help", state=tmp_path).stdout.split("Commands:\n")[1]
    assert "  submit     Submit a campaign spec as Slurm job arrays.\n" in commands and "..." not in commands


def test_help_of_every_command_loads_no_service_or_heavy_library() -> None:
    """One process renders the help of every command (walked from the command tree, so a new
    command is covered too); what it imported is the union of what each needed. Running a command
    loads its service; asking how to run it must not."""
    script = """
import sys
from typer.main import get_command
from campaignctl import cli

def walk(command, words):
    yield words
    for name, sub in getattr(command, "commands", {}).items():
        yield from walk(sub, [*words, name])

for words in walk(get_command(cli.app), []):
    sys.argv = ["campaignctl", *words, "--help"]
    try:
        cli.main()
    except SystemExit as exc:
        assert exc.code == 0, words
heavy = ("sqlalchemy", "submitit", "psycopg", "yaml", "matplotlib", "psutil", "pynvml",
         "campaignctl.services", "campaignctl.adapters")
print(sorted(m for m in sys.modules if m.startswith(heavy)), file=sys.stderr)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("Usage: campaignctl") >= 24  # every command's help was rendered
    assert done.stderr.strip() == "[]"


def test_an_error_under_json_is_an_envelope_on_stdout_with_the_exit_code(tmp_path: Path) -> None:
    done = run_cli("status", "ghost", "--json", state=tmp_path)
    assert done.returncode == 4 and done.stderr == ""
    assert json.loads(done.stdout) == {
        "schema": "campaignctl/v1", "command": "status", "ok": False,
        "error": {"code": 4, "kind": "not_found", "message": "no campaign named 'ghost'",
                  "hint": "known campaigns: none yet"}}


def test_a_usage_error_under_json_is_an_envelope_too(tmp_path: Path) -> None:
    done = run_cli("log", "export", "rc", "--json", state=tmp_path)
    envelope = json.loads(done.stdout)
    assert done.returncode == 2 and envelope["command"] == "log export" and envelope["ok"] is False
    assert envelope["error"]["kind"] == "usage" and "--json needs --output" in envelope["error"]["message"]
    assert envelope["error"]["hint"] == "see `campaignctl log export --help`"


def test_without_json_an_error_stays_error_and_hint_on_stderr(tmp_path: Path) -> None:
    done = run_cli("status", "ghost", state=tmp_path)
    assert done.returncode == 4 and done.stdout == ""
    assert done.stderr == "error: no campaign named 'ghost'\nhint: known campaigns: none yet\n"


def closed_pipe_run(args: list[str], state: Path) -> subprocess.CompletedProcess[str]:
    """Run with stdout on a pipe whose reader is already gone (what `| head -c 10` becomes)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}  # the test's store (its DB URL) kept
    env.update(XDG_STATE_HOME=str(state), COLUMNS="200")
    try:
        return subprocess.run([sys.executable, "-m", "campaignctl", *args], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, env=env, cwd=REPO, timeout=COMMAND_TIMEOUT_S)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["status", "--help"], ["log", "rc"],
                                  ["log", "rc", "--json"], ["log", "export", "rc"], ["revisions", "rc"],
                                  ["metrics"], ["approvals"], ["policy", "replay", "rc", "default"],
                                  ["submit", str(REPO / "templates" / "sweep.yaml"), "--dry-run"]])
def test_writing_into_a_closed_pipe_exits_141_quietly(args: list[str], logged: int,  # noqa: F811
                                                     state_home: Path) -> None:
    done = closed_pipe_run(args, state_home)
    assert (done.returncode, done.stderr) == (141, "")


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["status", "ghost", "--json"]])
def test_status_into_a_closed_pipe_exits_141_quietly(args: list[str], tmp_path: Path) -> None:
    done = closed_pipe_run(args, tmp_path)  # no campaign: status needs no Slurm to answer
    assert (done.returncode, done.stderr) == (141, "")
