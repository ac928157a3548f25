"""The report as a browser shows it: headless Chromium (Debian `chromium`) opens index.html from disk,
runs its one script (allowed by the page's CSP hash) and decodes every chart; the PNGs next to it
are real images. With CI set, a missing Chromium fails these tests; elsewhere it skips them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from campaignctl.services.submit import submit
from tests.cli.test_cli import run_cli
from tests.conftest import COMMAND_TIMEOUT_S, write_spec
from tests.fakeslurm import FakeSlurm
from tests.report_campaign import NAME, drive, png_size

CHARTS = ["chart-gantt", "chart-utilisation", "chart-spend", "chart-metrics", "chart-decisions"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    message = "the report tests need headless Chromium (Debian: apt-get install chromium; scripts/setup does)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def browse(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # root in a container: no sandbox; no GPU process; a private profile so runs never share state
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", *args,
            page.as_uri()]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


class _Elements(HTMLParser):
    """The attributes of <body> and of every <figure>, as the browser left them."""

    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, str | None] = {}
        self.figures: dict[str, dict[str, str | None]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self.body = dict(attrs)
        elif tag == "figure":
            self.figures[str(dict(attrs).get("id"))] = dict(attrs)


def rendered(page: Path, profile: Path) -> _Elements:
    elements = _Elements()
    elements.feed(browse(page, profile, "--dump-dom").stdout)
    return elements


def report_cli(name: str, out: Path, state: Path) -> dict[str, object]:
    done = run_cli("report", name, "--out", str(out), "--json", state=state)
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert (envelope["schema"], envelope["command"], envelope["ok"]) == ("campaignctl/v1", "report", True)
    return dict(envelope["data"])


def test_the_report_renders_in_headless_chromium(tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    chromium()
    drive(tmp_path, fake_slurm, monkeypatch)
    data = report_cli(NAME, tmp_path / "report", state_home)
    assert data["charts"] == {chart: "" for chart in CHARTS}
    page = Path(str(data["page"]))

    dom = rendered(page, tmp_path / "profile")
    # the page's script ran in the browser and counted every chart image as decoded
    assert (dom.body.get("data-charts"), dom.body.get("data-charts-rendered")) == ("5", "5")
    assert list(dom.figures) == CHARTS
    assert all(f.get("data-rendered") == "true" and f.get("class") == "chart" for f in dom.figures.values())

    for width in (1280, 390):  # a desktop and a phone (issue 28); both were looked at when this was written
        shot = tmp_path / f"screenshot-{width}.png"
        browse(page, tmp_path / "profile", "--hide-scrollbars", f"--window-size={width},3600", f"--screenshot={shot}")
        assert png_size(shot.read_bytes()) == (width, 3600) and shot.stat().st_size > 50_000
    html = page.read_text()
    # the results, winner first, right under the summary; a wide table scrolls in its own box
    assert html.index('<section id="results">') < html.index('<figure id="chart-gantt"')
    assert '<div class="scroll"><table>' in html

    files = [Path(f) for f in data["files"]]  # type: ignore[attr-defined]
    assert [f.name for f in files] == ["index.html", "gantt.png", "utilisation.png", "spend.png", "metrics.png",
                                       "decisions.png"]
    for png in files[1:]:
        width, height = png_size(png.read_bytes())
        assert width > 0 and height > 0 and png.stat().st_size > 10_000, png


def test_a_report_with_no_data_renders_its_notes(tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path) -> None:
    chromium()
    submit(write_spec(tmp_path, "name: bare\ncommand: [python3, t.py]\n"))
    data = report_cli("bare", tmp_path / "report", state_home)
    notes = data["charts"]
    assert isinstance(notes, dict) and sum(bool(n) for n in notes.values()) == 3
    dom = rendered(Path(str(data["page"])), tmp_path / "profile")
    # issue 28: a chart with nothing to draw is its note alone, not an empty panel under it (the
    # gantt and the decisions, the first array's start, are drawn)
    assert (dom.body.get("data-charts"), dom.body.get("data-charts-rendered")) == ("5", "2")
    html = Path(str(data["page"])).read_text()
    assert html.count('<p class="no-data">') == 3 and html.count("no decisions logged yet") == 0
    assert html.count("<img ") == 2
