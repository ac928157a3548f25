"""What `sbatch --test-only` printed on both lab Slurms for each mistake a spec can make
(tests/fixtures/test_only/, recorded on the lab): each is a refusal `submit` reports with Slurm's
words before it records anything, never a Slurm outage."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.core.base.errors import SpecError
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm

FIXTURES = Path(__file__).parent.parent / "fixtures" / "test_only"
RECORDED = [(version, *line.split("\t")) for version in ("22.05", "24.11")
            for line in (FIXTURES / f"refusals-{version}.tsv").read_text().splitlines() if not line.startswith("#")]


@pytest.mark.parametrize(("version", "option", "printed"), RECORDED)
def test_each_recorded_refusal_ends_submit_with_slurms_words_and_nothing_recorded(
        version: str, option: str, printed: str, tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    fake_slurm.version = f"{version}.5"
    fake_slurm.fail_next["sbatch --test-only"] = printed
    with pytest.raises(SpecError) as refused:
        submit(write_spec(tmp_path, "name: m\ncommand: [\"true\"]\n", name="m.yaml"))
    reason = printed.removeprefix("allocation failure: ")
    assert refused.value.problems == [f"resources (task 0): Slurm would refuse its tasks: {reason}"], option
    assert fake_slurm.submitted == 0
