"""The runner's tail read: only the last 64 KiB, from a line boundary; nothing on success."""

from __future__ import annotations

from pathlib import Path

from campaignctl.adapters.output_causes import output_cause, read_tail

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."


def test_an_oom_in_the_last_64_kib_is_found(tmp_path: Path) -> None:
    log = tmp_path / "output.log"
    log.write_text("step ok\n" * 50_000 + OOM + "\n")
    assert output_cause(log, 1)["cause"] == "gpu_out_of_memory"


def test_an_oom_before_the_tail_is_not_read(tmp_path: Path) -> None:
    log = tmp_path / "output.log"
    log.write_text(OOM + "\n" + "step ok\n" * 50_000)
    assert output_cause(log, 1) == {"cause": None, "evidence": ""}
    assert not read_tail(log).startswith("ok")  # the cut first line is dropped


def test_a_successful_program_has_no_cause(tmp_path: Path) -> None:
    log = tmp_path / "output.log"
    log.write_text(OOM + "\n")
    assert output_cause(log, 0)["cause"] is None


def test_a_missing_log_is_no_cause(tmp_path: Path) -> None:
    assert output_cause(tmp_path / "missing.log", 1)["cause"] is None
