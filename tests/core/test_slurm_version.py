"""Which Slurm: `sacct --version` text, and the readings that change with it (docs/real-sites.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.core.model.sacct_values import runner_exit, shell_exit
from campaignctl.core.model.slurm_states import State
from campaignctl.core.slurm.sacct import SACCT_FIELDS, observe_jobs
from campaignctl.core.slurm.sacct_records import Reading
from campaignctl.core.slurm.slurm_version import SlurmVersion, parse_version

SITES = Path(__file__).resolve().parents[1] / "fixtures" / "sacct_sites"


@pytest.mark.parametrize(("text", "expected"), [
    ("slurm-wlm 22.05.8\n", SlurmVersion(22, 5, 8)),  # Debian 12's build (the lab)
    ("slurm-wlm 24.11.5\n", SlurmVersion(24, 11, 5)),  # Debian 13's build (the lab)
    ("slurm 25.11.0-0rc1\n", SlurmVersion(25, 11, 0)),  # SchedMD's rpm, a release candidate
    ("slurm 23.02.7-ubuntu1", SlurmVersion(23, 2, 7)),
    ("slurm 24.05", SlurmVersion(24, 5, 0)),
    ("sacct: command not found", None), ("", None),
])
def test_version_text(text: str, expected: SlurmVersion | None) -> None:
    assert parse_version(text) == expected


def test_only_25_11_and_later_print_exit_codes_verbatim() -> None:
    assert [str(v) for v in (SlurmVersion(22, 5, 8), SlurmVersion(24, 11, 5))] == ["22.05.8", "24.11.5"]
    assert not SlurmVersion(22, 5, 8).exit_codes_verbatim
    assert not SlurmVersion(24, 11, 5).exit_codes_verbatim
    assert not SlurmVersion(25, 5, 3).exit_codes_verbatim
    assert SlurmVersion(25, 11, 0).exit_codes_verbatim
    assert SlurmVersion(26, 5, 0).exit_codes_verbatim


# ExitCode, DerivedExitCode → (exit status, signal) up to 25.05 and from 25.11 on. The 25.11 rule,
# from its release (SchedMD commit 831571cb84: sacct no longer subtracts 128 from a status above
# 128): a program that exits 143 prints `143:0`; `15:0` with DerivedExitCode `0:15` is a program
# that exited 15 (its step's last signal was TERM), where 22.05–25.05 meant 143.
EXIT_TABLE = [
    # exit, derived, before 25.11, 25.11+
    ("15:0", "0:15", (143, 15), (15, 0)),
    ("15:0", "143:0", (143, 0), (15, 0)),
    ("143:0", "143:0", (143, 0), (143, 0)),  # only 25.11 prints this
    ("9:0", "0:9", (137, 9), (9, 0)),
    ("0:15", "", (143, 15), (143, 15)),  # the batch shell killed by TERM: a signal either way
    ("0:9", "0:0", (137, 9), (137, 9)),
    ("0:125", "", (0, 125), (0, 125)),  # OUT_OF_MEMORY: 125 is no signal
    ("3:0", "3:0", (3, 0), (3, 0)),
    ("", "", (None, None), (None, None)),
]


@pytest.mark.parametrize(("exit_", "derived", "before", "verbatim"), EXIT_TABLE)
def test_exit_code_rule_by_version(exit_: str, derived: str, before: tuple[int | None, int | None],
                                   verbatim: tuple[int | None, int | None]) -> None:
    assert shell_exit(exit_, derived) == before
    assert shell_exit(exit_, derived, verbatim=True) == verbatim


def test_runner_correction_only_before_25_11() -> None:
    assert runner_exit(15, -15) == 143  # 22.05 printed the runner's 143 as 15
    assert runner_exit(15, -15, verbatim=True) == 15  # 25.11 would have printed 143


def _line(job_id: str, state: str, exit_: str) -> str:
    fields = dict.fromkeys(SACCT_FIELDS, "")
    fields.update(JobID=job_id, JobIDRaw=job_id, State=state, ExitCode=exit_)
    return "|".join(fields[f] for f in SACCT_FIELDS)


def _toil(reading: Reading) -> tuple[State, str | None, int | None]:
    lines = [_line(*line.split("|")) for line in (SITES / "toil_765096.txt").read_text().splitlines()]
    obs = observe_jobs("\n".join(lines) + "\n", reading=reading)[("765096", None)]
    return obs.state, obs.cancelled_by, obs.exit_code


def test_a_step_cancelled_by_the_jobs_own_user_inside_a_failed_job_is_a_failure() -> None:
    # the recording: job FAILED 0:9, step .0 CANCELLED by 54386, the job's own user: SIGKILL, 137
    assert _toil(Reading(own_cancellers=frozenset({"0", "54386"}))) == (State.FAILED, None, 137)
    # verbatim exit codes (25.11) change nothing here: 0:9 is a signal in every version
    assert _toil(Reading(True, frozenset({"0", "54386"}))) == (State.FAILED, None, 137)


def test_a_step_cancelled_by_someone_else_is_a_cancellation() -> None:
    # the same text, seen by a tick whose user, root and SlurmUser are not 54386: an operator
    assert _toil(Reading(own_cancellers=frozenset({"0", "1000"}))) == (State.CANCELLED, "54386", 137)


def test_a_version_line_of_odd_digits_is_no_version_not_a_crash() -> None:
    # a wrapper's output: more than the 4,300 digits int() reads, or digits of another script
    assert parse_version("slurm " + "9" * 5000 + ".1") is None
    assert parse_version("slurm ٢٤.١١") is None
