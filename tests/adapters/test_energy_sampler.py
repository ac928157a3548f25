"""The real sampler thread with the in-process fake NVML (tests/adapters/test_telemetry_sampler.py): the
power it writes, folded, is the GPUs' energy."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from campaignctl.adapters.telemetry_sampler import TelemetrySampler
from campaignctl.core.usage.telemetry import Summary, fold
from tests.adapters.test_telemetry_sampler import install_nvml, read_telemetry, sleeper  # noqa: F401 (fixtures)


def test_the_samplers_power_lines_integrate_to_watts_times_seconds(
        tmp_path: Path, install_nvml: Callable[..., ModuleType],  # noqa: F811
        sleeper: subprocess.Popen[bytes]) -> None:  # noqa: F811
    install_nvml()  # GPU 0 draws 100 W, GPU 1 250 W
    path = tmp_path / "telemetry.jsonl"
    sampler = TelemetrySampler(path, sleeper.pid, 0.1, cuda_visible="0,1").start()
    # Until it has integrated some energy: a loaded machine (CI runs suites side by side) may stall
    # the thread past 3 intervals between readings, a gap the fold does not integrate.
    deadline = time.monotonic() + 120
    while not (_complete_lines(path) >= 6 and fold(Summary(), _lines(path)).gpu_energy_j > 0):
        assert time.monotonic() < deadline, path.read_text() if path.exists() else "no telemetry file"
        time.sleep(0.1)
    sampler.stop()
    _start, samples, _end = read_telemetry(path)
    assert [g["power_w"] for g in samples[0]["gpus"]] == [100.0, 250.0]
    # By hand: a constant 100 W + 250 W = 350 W from the first reading to the last, less any
    # stretch over 3 intervals (0.3 s) a stalled thread left (not integrated).
    span = samples[-1]["t"] - samples[0]["t"]
    summary = fold(Summary(), path.read_text().splitlines())
    assert summary.gpu_energy_j > 0 and summary.energy_gap_s < span
    assert summary.gpu_energy_j == pytest.approx(350.0 * (span - summary.energy_gap_s))


def _lines(path: Path) -> list[str]:
    """The lines the sampler has finished writing (not a line it is writing)."""
    text = path.read_text() if path.exists() else ""
    return text[:text.rfind("\n") + 1].splitlines()


def _complete_lines(path: Path) -> int:
    return len(_lines(path))
