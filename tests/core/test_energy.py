"""NVML power readings → energy per attempt, checked by hand; sacct ConsumedEnergyRaw on real text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaignctl.core.slurm.sacct import observe_jobs
from campaignctl.core.usage.energy import attempt_energy, consumed_energy_j, kwh
from campaignctl.core.usage.telemetry import Summary, fold, summary_from_dict, summary_to_dict

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sacct_energy"


def start(interval_s: float = 10.0, t: float = 0.0) -> str:
    return json.dumps({"event": "start", "t": t, "interval_s": interval_s, "nvml": "ok", "gpus": [0, 1]})


def reading(t: float, *watts: float | None, nproc: int = 3) -> str:
    gpus = [{"index": i, "util_pct": 90, "mem_used_mb": 1.0, "mem_total_mb": 2.0, "power_w": w}
            for i, w in enumerate(watts)]
    return json.dumps({"t": t, "cpu_pct": 100.0, "rss_mb": 10.0, "nproc": nproc, "gpus": gpus})


def test_two_gpus_at_250_and_300_watts_for_one_hour_is_0_55_kwh() -> None:
    # By hand: (250 W + 300 W) × 3600 s = 1,980,000 J = 1,980,000 / 3,600,000 kWh = 0.55 kWh.
    # 361 readings 10 s apart span 3600 s; the last is the one after the program was reaped
    # (nproc 0): not a sample for the means, but the job still held the GPUs, so it counts here.
    lines = [start()] + [reading(10.0 * i, 250.0, 300.0, nproc=0 if i == 360 else 3) for i in range(361)]
    s = fold(Summary(), lines)
    assert s.gpu_energy_j == pytest.approx(1_980_000.0)
    assert kwh(s.gpu_energy_j) == pytest.approx(0.55)
    assert s.samples == 360 and s.energy_gap_s == 0.0


def test_the_trapezoid_follows_a_changing_draw_per_gpu_across_ticks() -> None:
    # GPU 0: 100 W → 300 W over 10 s = (100 + 300) / 2 × 10 = 2000 J, then 300 → 300 over 10 s = 3000 J.
    # GPU 1: no power at t=10 (NVML said null): 200 W at 0 and 200 W at 20 → 200 × 20 = 4000 J.
    # Total 9000 J. Folded in two ticks (the per-GPU last readings carry over), the same.
    lines = [start(), reading(0, 100.0, 200.0), reading(10, 300.0, None), reading(20, 300.0, 200.0)]
    once = fold(Summary(), lines)
    stored = summary_from_dict(json.loads(json.dumps(summary_to_dict(fold(Summary(), lines[:2])))))
    twice = fold(stored, lines[2:])
    assert once.gpu_energy_j == pytest.approx(9000.0) and twice.gpu_energy_j == pytest.approx(9000.0)


def test_a_gap_longer_than_three_intervals_is_not_bridged_and_is_reported() -> None:
    # 10 s interval: 0→10 s integrated (2 × 100 W × 10 s = 2000 J); 10→50 s (40 s > 3 × 10 s) is
    # a gap, counted as 40 s, no energy; 50→60 s integrated again: 2000 J. Total 4000 J.
    lines = [start(), reading(0, 100.0, 100.0), reading(10, 100.0, 100.0),
             reading(50, 100.0, 100.0), reading(60, 100.0, 100.0)]
    s = fold(Summary(), lines)
    assert s.gpu_energy_j == pytest.approx(4000.0) and s.energy_gap_s == pytest.approx(40.0)


def test_a_restarted_sampler_begins_a_new_series() -> None:
    # Two runs in one attempt directory, 5 s apart: 10 s at 2 × 100 W each = 2000 J + 2000 J;
    # nothing between the first run's last reading (t=10) and the second's first (t=15).
    lines = [start(), reading(0, 100.0, 100.0), reading(10, 100.0, 100.0),
             start(t=15.0), reading(15, 500.0, 500.0), reading(25, 100.0, 100.0)]
    first_two = fold(Summary(), lines[:3]).gpu_energy_j
    s = fold(Summary(), lines)
    assert first_two == pytest.approx(2000.0)
    assert s.gpu_energy_j == pytest.approx(2000.0 + (500 + 100) / 2 * 10 * 2)


def test_a_summary_stored_before_energy_reads_as_none_measured() -> None:
    old = summary_to_dict(Summary(samples=2))
    for key in ("interval_s", "gpu_energy_j", "energy_gap_s", "power_last"):
        del old[key]
    s = summary_from_dict(old)
    assert s.gpu_energy_j == 0.0 and attempt_energy(None, s.gpu_energy_j) is None


def test_sacct_node_energy_is_preferred_to_the_gpus() -> None:
    node = attempt_energy(101630, 5000.0)
    gpus = attempt_energy(None, 5000.0, gap_s=30.0)
    assert node is not None and (node.source, node.joules) == ("node", 101630.0)
    assert gpus is not None and (gpus.source, gpus.gap_s) == ("gpu", 30.0)


def test_consumed_energy_raw_as_a_site_with_an_energy_plugin_prints_it() -> None:
    # fixtures/sacct_energy/reportseff_issue66.txt: sacct's two columns as posted (reportseff #66,
    # 2024-11-20: 2 min 2 s at ~830 W from IPMI); every line, job and steps, says 101630 J.
    lines = (FIXTURES / "reportseff_issue66.txt").read_text().splitlines()
    printed = [line.split() for line in lines if not line.startswith("-")]
    assert printed == [["101.63K", "101630"]] * 3
    assert {consumed_energy_j(raw) for _, raw in printed} == {101630}
    assert kwh(101630) == pytest.approx(0.02823, abs=1e-5)  # 101630 / 3.6e6


@pytest.mark.parametrize("raw", ["0", "", "  "])
def test_no_energy_plugin_prints_zero_which_means_unknown(raw: str) -> None:
    assert consumed_energy_j(raw) is None


def test_the_lab_cluster_accounts_no_energy() -> None:
    # tests/fixtures/sacct/energy_none.txt: the lab (AcctGatherEnergyType=acct_gather_energy/none)
    # prints ConsumedEnergyRaw 0 on a finished element and its steps.
    obs = observe_jobs((FIXTURES.parent / "sacct" / "energy_none.txt").read_text())
    assert [o.consumed_energy_j for o in obs.values()] == [None]


def test_the_job_line_carries_the_node_energy_into_the_observation() -> None:
    # The lab's recording with ConsumedEnergyRaw set to reportseff #66's figure (the only field changed).
    text = (FIXTURES.parent / "sacct" / "energy_none.txt").read_text().replace("|0|campaignctl", "|101630|campaignctl")
    [obs] = observe_jobs(text).values()
    assert obs.consumed_energy_j == 101630
