"""Crash points for tests: `CAMPAIGNCTL_FAULT=<point>` kills the process at that point with
SIGKILL-like abruptness (no cleanup, no flush), as a power cut or `kill -9` would."""

from __future__ import annotations

import os


def crash_point(name: str) -> None:
    if os.environ.get("CAMPAIGNCTL_FAULT") == name:
        os._exit(137)
