"""`submit --dry-run` shows the setup lines exactly as they will run; a bad one is a spec error."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_cli import assert_user_error, run_cli
from tests.conftest import write_spec

SPEC = """\
name: withsetup
command: [python3, train.py]
setup:
  - module load cuda/12.4
  - source ~/venvs/x/bin/activate && echo "[bold]$PATH[/]"
"""


def test_dry_run_lists_the_setup_lines_verbatim(tmp_path: Path) -> None:
    done = run_cli("submit", str(write_spec(tmp_path, SPEC)), "--dry-run", state=tmp_path / "state")
    assert done.returncode == 0, done.stderr
    assert ("setup lines (bash, run in the job before the program on every attempt):\n"
            "  1  module load cuda/12.4\n"
            '  2  source ~/venvs/x/bin/activate && echo "[bold]$PATH[/]"\n') in done.stdout


def test_a_setup_item_holding_two_lines_is_refused_with_its_line(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SPEC.replace("  - module load cuda/12.4", '  - "module load a\\nmodule load b"'))
    done = run_cli("submit", str(spec), "--dry-run", state=tmp_path / "state")
    assert_user_error(done, 3, "line 4: setup[0]: holds a newline", "one item is one line")
