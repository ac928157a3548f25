"""What campaignctl writes is the owner's alone, whatever the umask or database URL: the
database (it holds task environments, e.g. an API key), the run directory tree it creates, and
submitit's folder with the scripts and the pickled payloads a job executes (writable by another
user, a pickle is code that runs as the owner). The job reads them as the same user."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm


@pytest.fixture
def umask_000() -> Iterator[None]:
    saved = os.umask(0)
    try:
        yield
    finally:
        os.umask(saved)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_file_and_directory_submit_writes_is_private_under_umask_000(
        umask_000: None, tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "elsewhere" / "team.db"
    db.parent.mkdir()
    monkeypatch.setenv("CAMPAIGNCTL_DB_URL", f"sqlite:///{db}")
    submit(write_spec(tmp_path, "name: priv\ncommand: [echo, '{i}']\nmatrix: {i: [0, 1, 2]}\n"
                                "env: {API_KEY: secret}\n"))
    run_dir = tmp_path / "runs" / "priv"
    files = [p for p in (run_dir / "slurm").rglob("*") if p.is_file()]
    assert any(p.suffix == ".pkl" for p in files) and any(p.suffix == ".sbatch" for p in files)
    assert {str(p.relative_to(tmp_path)): oct(mode(p)) for p in files if mode(p) != 0o600} == {}
    dirs = [run_dir, run_dir / "slurm", run_dir / "tasks", *(p for p in run_dir.rglob("*") if p.is_dir())]
    assert {str(p.relative_to(tmp_path)): oct(mode(p)) for p in dirs if mode(p) != 0o700} == {}
    databases = [p for p in db.parent.iterdir() if p.name.startswith("team.db")]
    assert db in databases and {p.name: oct(mode(p)) for p in databases if mode(p) != 0o600} == {}


@pytest.mark.sqlite_only(reason="the mode of the default SQLite file and its directory")
def test_the_default_database_is_private_under_umask_000(
        umask_000: None, tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path) -> None:
    submit(write_spec(tmp_path, "name: priv\ncommand: [echo]\n"))
    folder = state_home / "campaignctl"
    assert mode(folder) == 0o700
    assert {p.name: oct(mode(p)) for p in folder.iterdir() if mode(p) != 0o600} == {}
