"""Crash injection at the named points of the act protocol (adapters/faults.crash_point): the
first time `point` is reached the process "dies" (an exception), later passes go through, as a
rerun after a real crash would."""

from __future__ import annotations

import pytest

from campaignctl.adapters import faults


class Crash(BaseException):
    """A BaseException, as SIGKILL is: no `except Exception` (reconcile's per-campaign error
    boundary among them) runs when a process is killed."""


def crash_once_at(monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    armed = [True]

    def crash_at(name: str) -> None:
        if name == point and armed[0]:
            armed[0] = False
            raise Crash(name)

    monkeypatch.setattr(faults, "crash_point", crash_at)
