"""The caller's identity as the operating system gives it (name, groups) and group look-ups."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
from collections.abc import Iterable

from campaignctl.core.governance.ownership import Identity


def current_identity() -> Identity:
    """User name and the names of every group of this process: supplementary (os.getgroups)
    and the effective primary one."""
    gids = {*os.getgroups(), os.getegid()}
    return Identity(user_name(), frozenset(name for gid in gids if (name := _group_name(gid))))


def user_name() -> str:
    """The effective user's name from the password database, not $USER/$LOGNAME (which
    getpass.getuser reads first, and which anyone can set)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # a uid with no passwd entry (some containers): its number is its name
        return str(os.geteuid())


def group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:  # a gid with no entry in the group database has no name to share with
        return ""


def uids_of(names: Iterable[str]) -> set[str]:
    """The uids of the users named (as sacct prints them: `CANCELLED by 1001`); unknown names skipped."""
    uids = set()
    for name in names:
        with contextlib.suppress(KeyError):
            uids.add(str(pwd.getpwnam(name).pw_uid))
    return uids
