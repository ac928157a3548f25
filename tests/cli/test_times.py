"""Times as people read them: the local zone, named; `--json` keeps ISO 8601 UTC. The campaign's
log is written by real ticks against the fake Slurm; the commands run under TZ=Europe/Paris (CET
in November, one hour ahead of UTC) as a shell there would."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from campaignctl.cli.common import local_time
from tests.cli.test_cli import run_cli
from tests.cli.test_log_chain import logged  # noqa: F401  (fixture: a campaign `rc` with decisions)
from tests.zones import zone  # noqa: F401


def paris(iso_utc: str) -> str:
    return datetime.fromisoformat(iso_utc).astimezone(ZoneInfo("Europe/Paris")).strftime("%Y-%m-%d %H:%M:%S %Z")


def test_local_time_names_the_zone(zone: Callable[[str], None]) -> None:  # noqa: F811
    zone("Europe/Paris")
    assert local_time("2026-11-24T06:12:08+00:00") == "2026-11-24 07:12:08 CET"
    assert local_time("2026-07-24T06:12:08+00:00") == "2026-07-24 08:12:08 CEST"
    zone("Asia/Kolkata")
    assert local_time(datetime.fromisoformat("2026-11-24T06:12:08+00:00")) == "2026-11-24 11:42:08 IST"
    zone("UTC")
    assert local_time("2026-11-24T06:12:08+00:00") == "2026-11-24 06:12:08 UTC"


def test_log_and_revisions_show_local_time_and_json_stays_utc(logged: int, state_home: Path,  # noqa: F811
                                                              zone: Callable[[str], None]) -> None:  # noqa: F811
    zone("Europe/Paris")
    entries = json.loads(run_cli("log", "rc", "--json", state=state_home).stdout)["data"]
    assert entries and all(e["created_at"].endswith("+00:00") for e in entries)
    human = run_cli("log", "rc", state=state_home).stdout
    assert f"#{entries[0]['id']} {paris(entries[0]['created_at'])}  " in human
    assert " CET " in human and " UTC" not in human
    revisions = json.loads(run_cli("revisions", "rc", "--json", state=state_home).stdout)["data"]["revisions"]
    assert revisions[0]["created_at"].endswith("+00:00")
    table = run_cli("revisions", "rc", state=state_home).stdout
    shown = paris(revisions[0]["created_at"])  # `2026-11-27 19:15:27 CET`: to the minute, with its zone
    assert f"{shown[:16]}{shown[19:]}" in table
    assert shown in run_cli("revisions", "rc", "--wide", state=state_home).stdout
