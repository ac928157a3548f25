"""`cancel` and `retry` from the command line: an empty --task or --state (a script's unset
variable, `--task "$TASKS"`) is refused with exit 2, never read as "every task" (a reliability
probe found `cancel NAME --task ""` cancelling the whole campaign)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adapters.test_by_hand_fake_slurm import campaign, scancels, state_of
from tests.conftest import run_main
from tests.fakeslurm import FakeSlurm


@pytest.mark.parametrize("args, said", [
    (("cancel", "--task", ""), "--task '' names no task"),
    (("cancel", "--task", " "), "--task ' ' names no task"),
    (("retry", "--task", ""), "--task '' names no task"),
    (("retry", "--state", ""), "--state '' names no state"),
    (("retry", "--state", ","), "--state ',' names no state"),
])
def test_an_empty_selection_is_refused_and_nothing_is_cancelled_or_retried(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], args: tuple[str, ...], said: str) -> None:
    name = campaign(tmp_path)
    sbatches = sum(argv[0] == "sbatch" for argv in fake_slurm.argvs)
    code, _out, err = run_main(monkeypatch, capsys, args[0], name, *args[1:])
    assert code == 2 and said in err, err
    assert scancels(fake_slurm) == [] and sum(argv[0] == "sbatch" for argv in fake_slurm.argvs) == sbatches
    assert state_of(name) != "cancelled"
