"""`status NAME` reads a page's worth of the done tasks and counts the rest: every page, filter
and count must be what reading every row gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.core.screens.status import select_rows
from campaignctl.services.reconcile import reconcile
from campaignctl.services.status import StatusResult, status
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm

TASKS = 40


@pytest.fixture
def mixed(tmp_path: Path, fake_slurm: FakeSlurm) -> str:
    """Done tasks between failed, given-up, retried and running ones, so that a page of the
    done ones lies between tasks read whole."""
    result = submit(write_spec(tmp_path, "name: mixed\ncommand: [python3, t.py, '{i}']\nmatrix: {i: "
                               f"{list(range(TASKS))}}}\n"))
    job = result.chunks[0].job_id or ""
    for i in range(TASKS):
        fake_slurm.set_state(job, i, "COMPLETED")
    for i in (3, 17, 30):
        fake_slurm.set_state(job, i, "FAILED", "1:0")
    for i in (5, 33):
        fake_slurm.set_state(job, i, "OUT_OF_MEMORY", "0:125")  # resubmitted: a second attempt
    for i in (8, 22, 39):
        fake_slurm.set_state(job, i, "RUNNING", elapsed="00:01:00")
    reconcile("mixed")
    return "mixed"


def _shown(result: StatusResult) -> list[tuple[int, str, int]]:
    return [(r.index, r.state, r.attempts) for r in result.tasks]


def test_a_page_and_its_counts_are_those_of_every_row(mixed: str) -> None:
    every = status(mixed)  # every row: each task's attempts read
    summary = every.campaigns[0]
    assert summary.tasks == TASKS and summary.attempts == TASKS + 2
    # the two retried after their OOM completed (a new job's elements complete in the fake)
    assert summary.counts == {"COMPLETED": TASKS - 6, "RUNNING": 3, "FAILED": 3}
    for limit in (1, 4, 7, 20, 100):
        for states, tasks in (((), ()), (("COMPLETED",), ()), (("failed", "RUNNING"), ()), ((), (0, 5, 36)),
                              (("COMPLETED",), (2, 3, 38))):
            paged = status(mixed, states, tasks, limit=limit)
            matching = select_rows(every.tasks, states, tasks)
            assert _shown(paged) == _shown(StatusResult([], matching[:limit])), (limit, states, tasks)
            assert paged.rows_matched == len(matching), (limit, states, tasks)
            assert paged.campaigns[0].counts == summary.counts
            assert (paged.campaigns[0].tasks, paged.campaigns[0].attempts) == (summary.tasks, summary.attempts)


def test_the_campaigns_list_counts_tasks_it_reads_no_row_of(mixed: str) -> None:
    (listed,) = status().campaigns
    whole = status(mixed).campaigns[0]
    assert (listed.tasks, listed.attempts, listed.counts) == (whole.tasks, whole.attempts, whole.counts)


def test_the_table_leaves_the_campaign_efficiency_to_scripts_and_keeps_the_energy_source(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    """The table shows no campaign-wide efficiency (a fold over every attempt); --json and the
    MCP answers do. The spend line's energy source comes from the store's grouped rows."""
    result = submit(write_spec(tmp_path, "name: watts\ncommand: [python3, t.py, '{i}']\nmatrix: {i: [0, 1, 2]}\n"))
    job = result.chunks[0].job_id or ""
    for i in range(3):
        fake_slurm.set_state(job, i, "COMPLETED", energy="36000")  # sacct ConsumedEnergyRaw: the node's
    reconcile("watts")
    table = status("watts", limit=100, campaign_figures=False)
    scripts = status("watts")
    assert table.campaigns[0].efficiency is None
    assert scripts.campaigns[0].efficiency is not None and scripts.campaigns[0].efficiency.energy_source == "node"
    assert table.spend is not None and scripts.spend is not None
    assert table.spend.energy_source == "node" and table.spend == scripts.spend
    assert table.spend.spent["energy_kwh"] == pytest.approx(3 * 36000 / 3.6e6)
