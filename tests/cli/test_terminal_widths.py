"""The real CLI in a pseudo-terminal of 80, 120 and 200 columns (no COLUMNS: the terminal's own
size, as a user's tmux pane gives it), and through a pipe: every table's names and the
parameters that vary come out whole, and no line is wider than the terminal (a decision or a
reason may give way there, cut with …); through a pipe nothing is cut."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import COMMAND_TIMEOUT_S, REPO, write_spec
from tests.fakeslurm import FakeSlurm

LONG = "resnet50-imagenet-seed-sweep"
CUT = re.compile(r"\w…")  # a word cut short (`progressi…`); `step=…` in a hint is the text itself
COMMANDS = (("status",), ("status", LONG), ("results", LONG), ("revisions", LONG), ("approvals",),
            ("profile", "list"), ("log", LONG))


@pytest.fixture
def campaign(tmp_path: Path, fake_slurm: FakeSlurm) -> Path:
    """A campaign with a long name, three varying params, a give-up and a resubmit in its log."""
    submit(write_spec(tmp_path, f"""\
name: {LONG}
profile: resnet50
command: [python3, train.py, "{{lr}}", "{{batch}}", "{{seed}}"]
tasks:
  - {{lr: 0.000316, batch: 256, seed: 11}}
  - {{lr: 0.000125, batch: 128, seed: 12}}
  - {{lr: 0.001, batch: 64, seed: 13}}
"""))
    (job,) = fake_slurm.jobs
    fake_slurm.set_state(job, 0, "OUT_OF_MEMORY", "0:125", "node1")
    fake_slurm.set_state(job, 1, "FAILED", "1:0", "node2")
    reconcile(LONG)
    return tmp_path


def _env(state: Path, tmp_path: Path) -> dict[str, str]:
    bare = tmp_path / "no-slurm"  # no sacct: status shows the stored state (the layout is the point)
    bare.mkdir(exist_ok=True)
    return {"PATH": str(bare), "HOME": str(tmp_path), "XDG_STATE_HOME": str(state), "TERM": "xterm",
            **{k: v for k, v in os.environ.items() if k == "CAMPAIGNCTL_DB_URL"}}


def in_terminal(args: tuple[str, ...], width: int, env: dict[str, str]) -> str:
    """The command's output in a pseudo-terminal `width` columns wide, its escapes removed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    child = subprocess.Popen([sys.executable, "-m", "campaignctl", *args], cwd=REPO, env=env,
                             stdin=follower, stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], COMMAND_TIMEOUT_S)
        if not ready:
            child.kill()
            pytest.fail(f"{args} printed nothing for {COMMAND_TIMEOUT_S} s")
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    child.wait(timeout=COMMAND_TIMEOUT_S)
    os.close(leader)
    text = b"".join(chunks).decode("utf-8", errors="replace").replace("\r\n", "\n")
    assert child.returncode == 0, text
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


@pytest.mark.parametrize("width", [80, 120, 200])
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_every_table_fits_its_terminal_with_names_and_params_whole(campaign: Path, state_home: Path,
                                                                   args: tuple[str, ...], width: int) -> None:
    out = in_terminal(args, width, _env(state_home, campaign))
    if args[0] != "log":  # log prints each decision as whole lines the terminal wraps (paths stay one line)
        too_wide = [line for line in out.splitlines() if len(line) > width]
        assert not too_wide, too_wide
    if LONG in args or args == ("status",):
        assert LONG in out  # the name one types next, whole
    if args in (("status", LONG), ("results", LONG)):
        for lr in ("0.000316", "0.000125", "0.001"):
            assert lr in out, out  # the parameter that varies, whole


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_through_a_pipe_every_row_is_whole(campaign: Path, state_home: Path, args: tuple[str, ...]) -> None:
    done = subprocess.run([sys.executable, "-m", "campaignctl", *args], cwd=REPO, env=_env(state_home, campaign),
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert not CUT.search(done.stdout), done.stdout
