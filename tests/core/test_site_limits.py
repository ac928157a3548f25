"""A site's limit on queued jobs: Slurm's refusals as recorded on both lab Slurms
(tests/fixtures/slurm_limits/SOURCES.md), sacctmgr's limits, and the room a tick counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.core.slurm.site_limits import SubmitRoom, may_be_submit_limit, names_submit_limit, submit_limit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm_limits"


@pytest.mark.parametrize(("name", "named"), [
    ("sbatch_submit_limit_24.11.txt", True), ("sbatch_test_only_submit_limit_24.11.txt", True),
    ("sbatch_submit_limit_22.05.txt", True), ("sbatch_test_only_submit_limit_22.05.txt", True),
])
def test_recorded_refusals(name: str, named: bool) -> None:
    text = (FIXTURES / name).read_text()
    assert may_be_submit_limit(text)
    assert names_submit_limit(text) is named  # both Slurms name the limit on a line of its own


def test_the_generic_text_alone_may_be_a_limit_but_names_none() -> None:
    # what a refusal reduced to its last line says (and a QOS limit no reason line names)
    last = (FIXTURES / "sbatch_submit_limit_22.05.txt").read_text().splitlines()[-1]
    assert may_be_submit_limit(last) and not names_submit_limit(last)


def test_other_refusals_are_no_limit() -> None:
    text = "sbatch: error: Batch job submission failed: Requested node configuration is not available"
    assert not may_be_submit_limit(text)


@pytest.mark.parametrize(("assoc", "qos", "expected"), [
    ("200|normal\n", "\n", 200), ("\n", "50\n", 50), ("200\n120\n", "150\n", 120), ("|normal\n", "\n", None),
    ("", "", None),
])
def test_submit_limit_is_the_smallest_per_user_limit(assoc: str, qos: str, expected: int | None) -> None:
    assert submit_limit(assoc.replace("|normal", ""), qos) == expected


def test_room_counts_what_went_out_and_keeps_pieces_in_order() -> None:
    listed: list[int] = []
    room = SubmitRoom(200, lambda: listed.append(1) or 150)
    assert room.why_not(50) is None and listed == [1]  # the queue listed once, when needed
    room.took(50)
    assert room.why_not(1) == "site limit on queued jobs: 200 of 200 queued, 1 more would pass it"
    assert room.why_not(0) is not None  # once one piece waits, those after it wait too (in order)
    assert listed == [1]


def test_without_a_known_limit_nothing_is_listed_until_a_refusal_needs_it() -> None:
    listed: list[int] = []
    room = SubmitRoom(None, lambda: listed.append(1) or 0)
    assert room.why_not(10_000) is None and listed == []
    generic = (FIXTURES / "sbatch_submit_limit_22.05.txt").read_text().splitlines()[-1]
    assert not room.is_limit(generic)  # nothing of ours queued: a job no wait lets through
    assert room.is_limit((FIXTURES / "sbatch_submit_limit_24.11.txt").read_text())  # named: always a limit
    assert SubmitRoom(None, lambda: 3).is_limit(generic)


def test_odd_numbers_from_sacctmgr_are_no_limit_not_a_crash() -> None:
    assert submit_limit("²\n" + "9" * 5000, "٣\n50") == 50
    assert submit_limit("²", "") is None
