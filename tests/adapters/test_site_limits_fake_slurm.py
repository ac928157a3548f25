"""A site's limit on queued jobs (MaxSubmitJobs), against a fake Slurm at the subprocess boundary:
a campaign larger than the limit goes out in pieces as room frees, one sbatch per piece, and
nothing is given up for the limit. (The real limit, on both Slurms: tests/integration/test_site_limits_real.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import SlurmUnavailableError
from campaignctl.core.slurm.site_limits import WAITING
from campaignctl.services.reconcile import reconcile
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm


def _campaign(tmp_path: Path, tasks: int) -> None:
    result = submit(write_spec(tmp_path, f"""\
name: lim
command: [python3, train.py, "{{i}}"]
matrix: {{i: [{", ".join(str(i) for i in range(tasks))}]}}
resources: {{mem: 1G, time: "00:10:00"}}
""", "lim.yaml"))
    assert result.outcome == "created"


def _held_submissions(fake: FakeSlurm) -> list[int]:
    return [job.size for _, job in sorted(fake.jobs.items(), key=lambda kv: int(kv[0]))]


def _ending_and_ticking(fake: FakeSlurm, ticks: int) -> None:
    """`ticks` times: every released element ends (COMPLETED), then a tick."""
    for _ in range(ticks):
        for job in list(fake.jobs.values()):
            fake.finish(job.job_id)
        reconcile("lim")


def _settled() -> tuple[dict[str, int], list[str]]:
    reconcile("lim")
    store = Store.open()
    record = store.campaign("lim")
    assert record is not None
    give_ups = [e.reason for e in DecisionLog(store.engine).entries(record.id) if e.action == "give_up"]
    return status("lim").campaigns[0].counts, give_ups


def test_a_campaign_larger_than_the_submit_limit_goes_out_in_pieces_as_room_frees(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    fake_slurm.max_array_size, fake_slurm.max_submit = 3, 4  # indices 0-2: arrays of 3; 4 may be queued
    fake_slurm.states_default_pending = True
    _campaign(tmp_path, 10)
    # one array of 3 fits; the next 3 would make 6 > 4: it and the rest wait, without asking Slurm
    assert _held_submissions(fake_slurm) == [3] and fake_slurm.submitted == 1
    [note] = status("lim").campaigns[0].refused
    assert note.startswith("7 task(s) in 3 submission(s) wait for room: site limit on queued jobs: 3 of 4 queued")
    store = Store.open()
    assert all(s.tries == 0 and s.last_error.startswith(WAITING) for s in store.submissions(1) if s.job_id is None)

    _ending_and_ticking(fake_slurm, 1)  # the first array ends: room for one more piece
    assert _held_submissions(fake_slurm) == [3, 3] and fake_slurm.submitted == 2
    _ending_and_ticking(fake_slurm, 4)
    counts, give_ups = _settled()
    assert counts == {"COMPLETED": 10} and give_ups == []
    assert _held_submissions(fake_slurm) == [3, 3, 3, 1]
    assert fake_slurm.submitted == 4  # one sbatch per piece: the limit was read, never hit


def test_a_limit_nobody_may_read_is_learnt_from_the_refusal_and_never_gives_up(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    fake_slurm.max_array_size, fake_slurm.max_submit, fake_slurm.limit_hidden = 3, 4, True
    fake_slurm.states_default_pending = True
    _campaign(tmp_path, 10)
    # the second piece is refused (the generic text alone, with 3 of ours queued): it and the rest wait
    assert _held_submissions(fake_slurm) == [3] and fake_slurm.submitted == 2
    for _ in range(8):  # more ticks than submit_tries (4): a limit is no failed try
        reconcile("lim")
    assert fake_slurm.submitted == 2 + 8  # each tick: at most one refused sbatch, the rest wait without asking
    assert all(s.tries == 0 for s in Store.open().submissions(1))
    _ending_and_ticking(fake_slurm, 6)
    counts, give_ups = _settled()
    assert counts == {"COMPLETED": 10} and give_ups == []


def test_the_limits_text_with_nothing_of_ours_queued_is_a_refusal(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    # 22.05 says the same for a job larger or longer than a limit allows: no wait cures that one
    fake_slurm.max_submit, fake_slurm.limit_hidden = 0, True
    with pytest.raises(SlurmUnavailableError, match="accounting/QOS policy"):
        _campaign(tmp_path, 2)
    [sub] = Store.open().submissions(1)
    assert sub.tries == 1 and not sub.last_error.startswith(WAITING)


def test_arrays_are_never_larger_than_the_submit_limit(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    fake_slurm.max_submit = 2  # MaxArraySize 1001, but only 2 may be queued: an array of 5 would wait for ever
    fake_slurm.states_default_pending = True
    _campaign(tmp_path, 5)
    _ending_and_ticking(fake_slurm, 4)
    assert _held_submissions(fake_slurm) == [2, 2, 1]
    assert _settled() == ({"COMPLETED": 5}, [])
