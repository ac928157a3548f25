"""The environment `submit` captured for a revision, on disk: written on the login node, read by
the job on a compute node.

Where: `<run_dir>/.campaignctl-private/` (mode 0700), one file per capture (mode 0600), written
temp-then-rename. A campaign shared with a Unix group (`share: {group: G}`): members' retries
run as the members and must read it, so the folder is G's, setgid 2750, and the file 0640: the
group reads the owner's captured environment (its secrets too), nobody else does, and only the
owner writes there. Not the state directory: that may be on the login node's local disk (the
database is told apart by filesystem type for exactly that reason), while the job runs on other
nodes; the run directory is the one place campaignctl already requires the job to reach (it writes
its output there). Values may be secrets (WANDB_API_KEY): nothing in campaignctl prints them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path

from campaignctl.adapters import paths
from campaignctl.core.base.errors import StateError
from campaignctl.core.model.job_env import decode_environment, encode_environment

PRIVATE_DIR = ".campaignctl-private"


def private_dir(run_dir: str, group: str | None = None) -> Path:
    """`<run_dir>/.campaignctl-private`, created if missing and made 0700 whatever the umask
    (shared with `group`: 2750, the group's)."""
    path = Path(run_dir) / PRIVATE_DIR
    try:
        paths.private_run_tree(Path(run_dir), group)  # run_dir too, when created here: 0700, not the umask's
        paths.private_dir(path, group, paths.SHARED_READ_DIR)
    except OSError as exc:
        raise StateError(f"cannot create {path}: {exc}", "check run_dir in the spec and its permissions") from None
    return path


def write_captured_env(run_dir: str, campaign: str, env: Mapping[str, str], group: str | None = None) -> str:
    """Store `env` privately (readable by `group` too, if given); returns the file's absolute
    path (the revision keeps it)."""
    folder = private_dir(run_dir, group)
    mode = 0o600 if group is None else 0o640
    path = folder / f"env.{campaign}.{uuid.uuid4().hex[:12]}"
    tmp = folder / f".{path.name}.tmp{os.getpid()}"
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(encode_environment(env))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StateError(f"cannot write the captured environment under {folder}: {exc}",
                         "check run_dir in the spec and its permissions") from None
    return str(path.resolve())


def read_captured_env(path: str) -> dict[str, str]:
    """The captured environment (raises OSError if it cannot be read)."""
    return decode_environment(Path(path).read_bytes())
