"""A site's limit on queued jobs, enforced for real (the lab runs AccountingStorageEnforce=
associations,limits,qos and a small MaxArraySize, scripts/slurmlab): a campaign larger than the
user's MaxSubmitJobs goes out in pieces as its queued elements end, and nothing is given up for the
limit — with the limit read from sacctmgr, and with it learnt from sbatch's refusal (both Slurms
print `AssocMaxSubmitJobLimit`, then "Job violates accounting/QOS policy")."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from campaignctl.adapters import proc, slurm
from campaignctl.adapters.store import Store
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.slurm.site_limits import WAITING
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import logged, write_spec
from tests.integration.test_reconcile_real import ticking_until_finished

pytestmark = pytest.mark.slurm

TASKS = 102  # MaxArraySize (101 on the lab) and one more: two pieces, the second over the limit


@contextlib.contextmanager
def _limited(jobs: int) -> Iterator[int]:
    # on this test's cluster only: the lab's other cluster may be running another test as this user
    where = ["where", f"name={proc.run(['id', '-un']).stdout.strip()}", f"cluster={slurm.cluster_name()}"]
    proc.run(["sacctmgr", "-i", "modify", "user", *where, "set", f"MaxSubmitJobs={jobs}"])
    slurm.forget_site()
    try:
        yield jobs
    finally:
        proc.run(["sacctmgr", "-i", "modify", "user", *where, "set", "MaxSubmitJobs=-1"])
        slurm.forget_site()


@pytest.fixture
def limit(slurm_conf: str) -> Iterator[int]:
    """This user's association may hold at most 101 queued jobs for the test (every array element
    counts): an array as large as MaxArraySize (101 on the lab) fits, the campaign's 102 do not
    (150 tasks and a limit of 120 said the same with half again the jobs, a minute of CI a Slurm)."""
    with _limited(101) as jobs:
        yield jobs


@pytest.fixture
def small_limit(slurm_conf: str) -> Iterator[int]:
    """20 queued jobs: a packed campaign of 60 tasks two to a job (30 elements) does not fit."""
    with _limited(20) as jobs:
        yield jobs


def _campaign(tmp_path: Path, name: str, more: str = "", tasks: int = TASKS) -> None:
    submit(write_spec(tmp_path, f"""\
name: {name}
command: [python3, -c, "pass"]
matrix: {{i: [{", ".join(map(str, range(tasks)))}]}}
resources: {{mem: 100M, time: "00:05:00"}}
telemetry: {{interval: 0}}
{more}""", f"{name}.yaml"))


def _finishes_with_nothing_given_up(name: str, limit: int, tasks: int = TASKS) -> list[str]:
    """Tick until the campaign finishes; every task COMPLETED, no give-up, no try counted. Returns
    what `status` said of the waiting pieces along the way."""
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    notes = [n for n in status(name).campaigns[0].refused if "wait for room" in n]
    sizes = [s.size for s in store.submissions(record.id)]
    elements = [-(-s.size // (PackShape.from_json(s.pack).per_element if s.pack else 1))  # type: ignore[union-attr]
                for s in store.submissions(record.id)]
    assert sum(sizes) == tasks and max(elements) <= min(limit, slurm.max_array_size())
    ticking_until_finished(name, timeout_s=600)
    assert status(name).campaigns[0].counts == {"COMPLETED": tasks}
    assert [e for e in logged(name) if e.action == "give_up"] == []
    assert all(s.tries == 0 and s.state == "released" for s in store.submissions(record.id))
    return notes


def test_a_campaign_larger_than_the_submit_limit_goes_out_as_room_frees(
        state_home: Path, tmp_path: Path, limit: int) -> None:
    assert slurm.submit_limit() == limit  # read from sacctmgr, never hard-coded
    _campaign(tmp_path, "limit-read")
    notes = _finishes_with_nothing_given_up("limit-read", limit)
    # the second piece waited at submit without asking Slurm: the limit said it would not fit
    assert notes and f"of {limit} queued" in notes[0]


def test_a_limit_the_user_cannot_read_is_learnt_from_slurms_refusal(
        state_home: Path, tmp_path: Path, limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # as where sacctmgr tells a user nothing (cached like the real one: `forget_site` clears it)
    monkeypatch.setattr(slurm, "submit_limit", functools.cache(lambda: None))
    _campaign(tmp_path, "limit-learnt")
    notes = _finishes_with_nothing_given_up("limit-learnt", limit)
    assert notes and "accounting/QOS policy" in notes[0]  # Slurm's own words, on either version
    record = Store.open().campaign("limit-learnt")
    assert record is not None
    assert not any(s.last_error.startswith(WAITING) and s.tries for s in Store.open().submissions(record.id))


def test_a_packed_campaign_larger_than_the_submit_limit_goes_out_as_room_frees(
        state_home: Path, tmp_path: Path, small_limit: int) -> None:
    """Issue 40: packs under a site limit. Each element of a pack is one queued job to Slurm."""
    _campaign(tmp_path, "limit-packed", "pack: {per_job: 2}\n", tasks=60)
    notes = _finishes_with_nothing_given_up("limit-packed", small_limit, tasks=60)
    assert notes and f"of {small_limit} queued" in notes[0]
    record = Store.open().campaign("limit-packed")
    assert record is not None and all(s.pack for s in Store.open().submissions(record.id))
