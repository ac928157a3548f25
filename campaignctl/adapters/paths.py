"""Where campaignctl keeps its private state, created with owner-only permissions."""

from __future__ import annotations

import contextlib
import grp
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from campaignctl.core.base.errors import StateError

# Network filesystems where SQLite's WAL mode is unsafe (WAL needs shared memory between
# processes on one host; see sqlite.org/wal.html "WAL does not work over a network filesystem").
NETWORK_FS = ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "ceph", "fuse.sshfs")


def state_path() -> Path:
    """Where state lives ($XDG_STATE_HOME/campaignctl), without creating it."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "campaignctl"


def state_dir() -> Path:
    path = state_path()
    try:
        # Parents made here are private too (the XDG base directory spec: created 0700):
        # mkdir(parents=True) would make them 0777 less the umask, all of 0777 under `umask 000`.
        for missing in reversed([p for p in (path, *path.parents) if not p.exists()]):
            with contextlib.suppress(FileExistsError):
                missing.mkdir(mode=0o700)
                os.chmod(missing, 0o700)
        _private(path)
    except OSError as exc:
        raise StateError(f"cannot create the state directory {path}: {exc}",
                         "set XDG_STATE_HOME to a writable directory") from None
    return path


def private_file(path: Path) -> Path:
    """Create `path` (mode 0600) if missing and make sure it is private. An existing file is
    never opened: closing any descriptor of a file drops every POSIX lock this process holds on
    it, including SQLite's on the database (sqlite.org/howtocorrupt.html, 2.2), so a second
    `Store.open()` in one process let another process write under the first engine's readers
    ("database disk image is malformed", seen in the budget real-cluster test)."""
    try:
        if not path.exists():
            with contextlib.suppress(FileExistsError):
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        _private(path)
    except OSError as exc:
        raise StateError(f"cannot create {path}: {exc}", "check the directory's permissions") from None
    return path


def _private(path: Path) -> None:
    """No bits for group and others; the owner's left as they are: a directory its owner made
    read-only (0500) stays so, and one that is already private is not touched at all (a read-only
    or immutable file system refuses even a chmod that changes nothing)."""
    mode = path.stat().st_mode
    if mode & 0o077:
        os.chmod(path, mode & 0o700)


def filesystem_type(path: Path) -> str:
    """The mount type holding `path`, from /proc/mounts (longest matching mount point)."""
    best, fstype = "", "unknown"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return fstype
    target = str(path.resolve())
    for line in mounts:
        fields = line.split()
        if len(fields) < 3 or len(fields[1]) <= len(best):
            continue
        if target == fields[1] or target.startswith(fields[1].rstrip("/") + "/"):
            best, fstype = fields[1], fields[2]
    return fstype


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Write temp-then-rename, so a reader never sees half a file."""
    with open_atomic(path, mode) as handle:
        handle.write(text)


@contextlib.contextmanager
def open_atomic(path: Path, mode: int = 0o644) -> Iterator[TextIO]:
    """A text handle whose content replaces `path` only when the block ends without an error
    (temp-then-rename); on an error the temp file is removed and `path` is left as it was."""
    fd, tmp = _temp_beside(path, mode & ~_umask())
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_public(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write temp-then-rename with exactly `mode`, whatever the umask: files other programs read
    (node_exporter's textfile collector runs as its own user; reports are shared). The temp file
    is in the same directory, so the rename is atomic, and its name does not end in `.prom`, so
    the collector never reads it half-written."""
    fd, tmp = _temp_beside(path, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _temp_beside(path: Path, mode: int) -> tuple[int, Path]:
    """A new temp file in `path`'s directory (so the rename is atomic) with `mode`: a random name
    created with O_EXCL (mkstemp), never a predictable `.NAME.tmpPID` opened with O_TRUNC, which
    followed a symlink another user planted there and overwrote its target."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        os.unlink(name)
        raise
    return fd, Path(name)


def _umask() -> int:
    """The process umask, read without changing it (os.umask sets it: a race with the runner's
    threads creating files meanwhile). Linux shows it in /proc/self/status since 4.7."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def private_run_tree(run_dir: Path, group: str | None = None) -> None:
    """The run directory's campaignctl parts, owner-only (0700) whatever the umask: `slurm/` holds
    the scripts and pickled payloads jobs execute (another user able to write there could run code
    as the owner), `tasks/` what the attempts write. The run directory itself is made 0700 only
    when created here: an existing one is the user's to share.

    With `group` (a campaign shared with a Unix group) the same parts are the group's instead:
    members' retries run as themselves and stage into `slurm/` and write into `tasks/`, so each
    part is setgid 2770 and owned by the group (on Linux what is created inside a setgid
    directory takes its group, and a directory its setgid bit), and the run directory gets group
    rwx and setgid added to what it has. Only directories this user owns are changed: a member
    finds them made by the owner already."""
    try:
        if group is None:
            _make_private(run_dir, chmod_existing=False)
            for part in ("slurm", "tasks"):
                private_dir(run_dir / part)
            return
        gid = grp.getgrnam(group).gr_gid
        _make_shared(run_dir, gid, SHARED_DIR, keep_bits=True)
        for part in ("slurm", "tasks"):
            _make_shared(run_dir / part, gid, SHARED_DIR)
    except (OSError, KeyError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise StateError(f"cannot create the run directory {run_dir}: {why}",
                         "set run_dir in the spec to a writable directory"
                         + (f" (and check that Unix group {group} exists)" if group else "")) from None


def private_dir(path: Path, group: str | None = None, mode: int = 0o2770) -> None:
    """`path` and any missing parent created 0700 whatever the umask; `path` made 0700 if it
    existed. With `group`: `mode` (setgid, the group's) instead, if this user owns it."""
    if group is None:
        _make_private(path, chmod_existing=True)
    else:
        _make_shared(path, grp.getgrnam(group).gr_gid, mode)


def share_existing(run_dir: Path, group: str) -> None:
    """A campaign shared after it ran: the directories its attempts made under `slurm/` and
    `tasks/` (with the umask's mode, 0755 as a rule) become the group's (setgid 2770) where this
    user owns them, so members' retries can write next to them. Files keep their modes."""
    gid = grp.getgrnam(group).gr_gid
    for part in ("slurm", "tasks"):
        for top, dirs, _ in os.walk(run_dir / part):
            for name in dirs:
                path = Path(top) / name
                if path.stat().st_uid == os.geteuid():
                    os.chown(path, -1, gid)
                    os.chmod(path, SHARED_DIR)


SHARED_DIR = 0o2770  # a shared campaign's directories: the group may create and read, others nothing
SHARED_READ_DIR = 0o2750  # … where only the owner writes (the captured environment)


def public_dir(path: Path) -> None:
    """`path` and any missing parent created 0755, or narrower under the umask (never wider: under
    umask 000 a plain mkdir made a report directory 0777, writable by everyone). An existing
    directory is left as it is."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
        os.chmod(directory, 0o755 & ~_umask())


def _make_private(path: Path, chmod_existing: bool) -> None:
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
    if chmod_existing and path not in missing:
        os.chmod(path, 0o700)


def _make_shared(path: Path, gid: int, mode: int, keep_bits: bool = False) -> None:
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
        os.chown(directory, -1, gid)
        os.chmod(directory, mode)
    if path in missing or path.stat().st_uid != os.geteuid():
        return
    os.chown(path, -1, gid)
    os.chmod(path, (path.stat().st_mode & 0o7777 | 0o2070) if keep_bits else mode)
