"""Act as another Unix user in-process: the identity adapter is the one place campaignctl asks."""

from __future__ import annotations

import grp
import os

import pytest

from campaignctl.adapters import identity
from campaignctl.core.governance.ownership import Identity

# a group that exists here (the test's own primary group), so a shared run dir can really be chgrp'ed
REAL_GROUP = grp.getgrgid(os.getegid()).gr_name


def as_user(monkeypatch: pytest.MonkeyPatch, name: str, *groups: str) -> None:
    monkeypatch.setattr(identity, "user_name", lambda: name)
    monkeypatch.setattr(identity, "current_identity", lambda: Identity(name, frozenset({name, *groups})))
