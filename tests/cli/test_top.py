"""`campaignctl top`, headless through Textual's test pilot at 80×24, on a campaign submitted and
ticked through the fake Slurm (which counts every call): it opens a campaign from the list, moves
between tasks, shows a task's output, cancels only after "y" (with "n" nothing changes), redraws
without any Slurm call, and quits on Ctrl-C."""

from __future__ import annotations

import asyncio
import html
import re
from pathlib import Path

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.cli.top import store_actions
from campaignctl.cli.top_app import TopApp
from campaignctl.services.output import locate
from tests.conftest import run_main, write_spec
from tests.fakeslurm import FakeSlurm

SPEC = """\
name: toptest
command: [python3, train.py, "{lr}"]
matrix: {lr: [0.1, 0.01, 0.001]}
resources: {mem: 1G, time: "00:10:00"}
policy: {use: default, rules: {failed: {backoff: 0}}}
"""


@pytest.fixture
def campaign(tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> FakeSlurm:
    fake_slurm.states_default_pending = True
    assert run_main(monkeypatch, capsys, "submit", str(write_spec(tmp_path, SPEC)))[0] == 0
    job = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(job, 1, "RUNNING", "0:0", "node2")
    assert run_main(monkeypatch, capsys, "reconcile", "toptest")[0] == 0
    output = Path(locate("toptest", 1).path)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("epoch 1 loss 2.5\n[bold]not markup[/bold]\n")
    fake_slurm.calls.clear()
    return fake_slurm


def entries() -> int:
    store = Store.open()
    record = store.campaign("toptest")
    assert record is not None
    return len(DecisionLog(store.engine).entries(record.id))


def shown(app: TopApp) -> str:
    """The screen's text, line by line (from Textual's SVG screenshot: one <text> per run)."""
    svg = app.export_screenshot()
    lines: dict[str, str] = {}
    for y, run in re.findall(r'<text class="[^"]*" x="[\d.]+" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        lines[y] = lines.get(y, "") + html.unescape(run)
    return "\n".join(lines[y] for y in sorted(lines, key=float)).replace("\xa0", " ")


def test_top_navigates_shows_output_and_cancels_only_when_confirmed_without_slurm_calls_to_redraw(
        campaign: FakeSlurm) -> None:
    async def drive() -> None:
        app = TopApp(None, store_actions(), interval_s=0.2)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert "toptest" in shown(app) and app.campaign is None
            await pilot.press("enter")  # the list's one campaign: its tasks
            await pilot.pause()
            assert app.campaign == "toptest"
            await pilot.press("down")
            await pilot.pause(0.5)  # a couple of redraws from the store
            shot = shown(app)
            assert "RUNNING" in shot and "task 1: lr=0.01" in shot and "last decisions" in shot
            assert sum(campaign.calls.values()) == 0, campaign.calls  # redraws read the store only

            await pilot.press("o")
            await pilot.pause()
            shot = shown(app)
            assert "epoch 1 loss 2.5" in shot and "[bold]not markup[/bold]" in shot
            await pilot.press("escape")

            before = entries()
            await pilot.press("c")
            await pilot.pause()
            assert "Cancel task 1 of toptest?" in shown(app)
            await pilot.press("n")
            await pilot.pause()
            assert entries() == before and campaign.calls["scancel"] == 0  # "n": nothing done

            await pilot.press("c")
            await pilot.pause()
            await pilot.press("y")
            await pilot.pause()
            assert entries() == before + 1 and campaign.calls["scancel"] == 1  # through `cancel`'s own code
            store = Store.open()
            record = store.campaign("toptest")
            assert record is not None
            cancelled = DecisionLog(store.engine).entries(record.id)[-1]
            assert (cancelled.task_index, cancelled.action) == (1, "stop")  # what `cancel` logs
            assert "from campaignctl top" in cancelled.reason

            await pilot.press("ctrl+c")
            await pilot.pause()
        assert app.return_code == 0

    asyncio.run(drive())


def test_a_campaign_that_does_not_exist_is_said_in_the_view(campaign: FakeSlurm) -> None:
    async def drive() -> None:
        app = TopApp("nosuch", store_actions())
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert "no campaign named 'nosuch'" in shown(app)
            await pilot.press("q")

    asyncio.run(drive())
