"""The state directory and the parents campaignctl makes for it are private to their user, whatever
the umask (a reliability probe found `umask 000` leaving a made parent 0777)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from campaignctl.adapters.paths import state_dir


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0)
    yield
    os.umask(old)


def test_made_parents_are_private_under_umask_000_and_existing_ones_are_left_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_umask: None) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    monkeypatch.setenv("XDG_STATE_HOME", str(shared / "me" / "state"))
    made = state_dir()
    assert made == shared / "me" / "state" / "campaignctl"
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (shared, shared / "me", shared / "me" / "state", made)}
    assert modes == {"shared": 0o755, "me": 0o700, "state": 0o700, "campaignctl": 0o700}
