"""Run a test's code under another `TZ`, as a cron line or a shell on another machine would."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import pytest


@pytest.fixture
def zone() -> Iterator[Callable[[str], None]]:
    """`zone("Asia/Tokyo")` switches this process's local time zone (os.environ TZ + tzset);
    the zone before the test comes back after it."""
    before = os.environ.get("TZ")

    def switch(name: str) -> None:
        os.environ["TZ"] = name
        time.tzset()

    yield switch
    if before is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = before
    time.tzset()
