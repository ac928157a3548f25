"""A step `CANCELLED by <uid>` inside a FAILED job is the job failing when the uid is the job's own
user's (Slurm kills the step under that uid: toil's recording 765096, the lab's
step_cancelled_by_uid.txt), whoever runs the tick. In a campaign shared on one database a
teammate's tick reads jobs it did not submit: before, it read the same line as a person's cancel."""

from __future__ import annotations

import pwd
from dataclasses import replace
from pathlib import Path

import sqlalchemy as sa

from campaignctl.adapters.store import Store
from campaignctl.adapters.store_schema import submissions
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm


def test_a_step_killed_under_the_job_owner_s_uid_reads_as_the_job_failing_for_every_ticker(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit(write_spec(tmp_path, "name: team\ncommand: [python3, train.py]\nresources: {mem: 1G}\n"))
    owner = pwd.getpwnam("nobody")  # the teammate who submitted it; this process is the one ticking
    store = Store.open()
    with store.engine.begin() as conn:
        conn.execute(sa.update(submissions).values(submitted_by=owner.pw_name))
    (job,) = fake_slurm.jobs
    fake_slurm.set_state(job, 0, "FAILED", "0:9")
    fake_slurm.states[(job, 0)] = replace(fake_slurm.states[(job, 0)],
                                          steps=(("0", f"CANCELLED by {owner.pw_uid}", "0:9"),))
    reconcile("team")
    [row] = store.history(store.campaign("team").id)  # type: ignore[union-attr]
    assert row.state == "FAILED", row.slurm_state
