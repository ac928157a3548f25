"""Telemetry lines → per-attempt summaries, folded tick by tick."""

from __future__ import annotations

import json

import pytest

from campaignctl.core.usage.telemetry import WINDOW_KEEP, Summary, fold, summary_from_dict, summary_to_dict

START = json.dumps({"event": "start", "t": 0.0, "interval_s": 10, "nvml": "ok", "gpus": [0, 1]})


def sample(t: float, cpu: float, rss: float = 100.0, utils: tuple[float | None, ...] = (50.0, 30.0)) -> str:
    gpus = [{"index": i, "util_pct": u, "mem_used_mb": 1000.0 * (i + 1), "mem_total_mb": 40000.0, "power_w": None}
            for i, u in enumerate(utils)]
    return json.dumps({"t": t, "cpu_pct": cpu, "rss_mb": rss, "nproc": 2, "gpus": gpus})


def test_means_and_maxima_over_two_ticks_equal_one_fold_of_everything() -> None:
    lines = [START] + [sample(10.0 * i, cpu=100.0 + i, rss=100.0 + 10 * i) for i in range(1, 7)]
    once = fold(Summary(), lines)
    twice = fold(fold(Summary(), lines[:3]), lines[3:])
    assert once == twice
    assert once.samples == 6 and once.cpu_mean == pytest.approx(103.5) and once.cpu_max == 106.0
    assert once.rss_max_mb == 160.0 and once.gpu_util_mean == pytest.approx(40.0)  # mean of the 2 GPUs
    assert once.gpu_mem_max_mb == 3000.0 and once.nvml == "ok" and not once.ended


def test_no_gpu_telemetry_gives_cpu_only_and_says_why() -> None:
    s = fold(Summary(), [json.dumps({"event": "start", "t": 0, "interval_s": 10, "nvml": "NVML library not found",
                                     "gpus": []}), sample(10, 250.0, utils=()),
                         json.dumps({"event": "end", "t": 11, "samples": 1})])
    assert (s.samples, s.gpu_samples, s.gpu_util_mean, s.nvml, s.ended) == (
        1, 0, None, "NVML library not found", True)


def test_a_null_gpu_metric_is_skipped_not_counted_as_zero() -> None:
    s = fold(Summary(), [sample(10, 1.0, utils=(None, 80.0))])
    assert s.gpu_util_mean == 80.0


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]", json.dumps({"t": "x", "cpu_pct": 1, "rss_mb": 1})])
def test_bad_lines_are_counted_and_skipped(bad: str) -> None:
    s = fold(Summary(), [sample(10, 5.0), bad, sample(20, 7.0)])
    assert (s.samples, s.bad_lines, s.cpu_max) == (2, 1, 7.0)


def test_recent_samples_are_bounded_and_windowed() -> None:
    s = fold(Summary(), [sample(10.0 * i, float(i)) for i in range(WINDOW_KEEP + 30)])
    assert len(s.recent) == WINDOW_KEEP and s.samples == WINDOW_KEEP + 30
    assert [x.cpu_pct for x in s.window(30)] == [float(i) for i in range(WINDOW_KEEP + 26, WINDOW_KEEP + 30)]


def test_summary_round_trips_through_its_stored_form() -> None:
    s = fold(Summary(), [START, sample(10, 3.0), sample(20, 4.0, utils=())])
    assert summary_from_dict(json.loads(json.dumps(summary_to_dict(s)))) == s


def test_the_sample_taken_after_the_program_was_reaped_is_not_an_idle_interval() -> None:
    reaped = json.dumps({"t": 30.0, "cpu_pct": 0.0, "rss_mb": 0.0, "nproc": 0, "gpus": []})
    s = fold(Summary(), [sample(10, 100.0), sample(20, 100.0), reaped])
    assert (s.samples, s.cpu_mean, s.bad_lines) == (2, 100.0, 0)


def test_io_is_summed_over_the_samples_that_carry_it_into_a_rate() -> None:
    def io_sample(t: float, read_mb: float) -> str:
        return json.dumps({"t": t, "cpu_pct": 80.0, "cpu_sys_pct": 60.0, "rss_mb": 10.0, "nproc": 1, "gpus": [],
                           "io_read_mb": read_mb, "io_write_mb": 1.0, "io_disk_read_mb": 0.5, "io_disk_write_mb": 0.0})
    old = sample(10, 50.0)  # a sampler before I/O: no figure, no seconds
    s = fold(Summary(), [START, old, io_sample(20, 300.0), io_sample(30, 500.0)])
    assert (s.io_read_mb, s.io_write_mb, s.io_disk_read_mb, s.io_s) == (800.0, 2.0, 1.0, 20.0)
    assert s.io_mbps == pytest.approx(40.1) and s.cpu_sys_mean == 60.0
    assert summary_from_dict(json.loads(json.dumps(summary_to_dict(s)))) == s
    assert fold(Summary(), [START, old]).io_mbps is None


def test_the_cgroup_s_working_set_keeps_its_highest_reading() -> None:
    def ws(t: float, mb: float) -> str:
        return json.dumps({"t": t, "cpu_pct": 1.0, "rss_mb": 10.0, "nproc": 1, "gpus": [], "cgroup_mem_peak_mb": 140.0,
                           "cgroup_mem_ws_mb": mb})
    s = fold(Summary(), [START, ws(10, 80.0), ws(20, 20.0)])
    assert (s.cgroup_mem_peak_mb, s.cgroup_ws_peak_mb) == (140.0, 80.0)


def test_the_gpus_interconnect_is_averaged_and_summed_into_rates() -> None:
    def linked(t: float, nvlink_mb: float | None) -> str:
        gpus = [{"index": i, "util_pct": 30, "pcie_tx_kbs": 1000.0, "pcie_rx_kbs": 3000.0,
                 **({"nvlink_tx_mb": nvlink_mb, "nvlink_rx_mb": nvlink_mb} if nvlink_mb is not None else {})}
                for i in range(2)]
        return json.dumps({"t": t, "cpu_pct": 50.0, "rss_mb": 10.0, "nproc": 1, "gpus": gpus})
    s = fold(Summary(), [START, linked(10, None), linked(20, 2500.0), linked(30, 2500.0)])
    assert s.pcie_kbs_mean == 8000.0 and s.pcie_samples == 3
    assert (s.nvlink_mb, s.nvlink_s, s.nvlink_mbps) == (20_000.0, 20.0, 1000.0)
    assert summary_from_dict(json.loads(json.dumps(summary_to_dict(s)))) == s


def test_the_nodes_network_lustre_and_the_cgroups_block_io_are_summed_into_rates() -> None:
    def node(t: float, **counters: float) -> str:
        return json.dumps({"t": t, "cpu_pct": 150.0, "rss_mb": 10.0, "nproc": 2, "gpus": [], **counters})
    s = fold(Summary(), [START, node(10), node(20, node_net_rx_mb=4000.0, node_net_tx_mb=4000.0),
                         node(30, node_net_rx_mb=1000.0, node_net_tx_mb=1000.0, node_lustre_read_mb=50.0,
                              node_lustre_write_mb=0.0, cgroup_io_read_mb=3.0, cgroup_io_write_mb=1.0)])
    assert (s.net_mb, s.net_s, s.net_mbps) == (10_000.0, 20.0, 500.0)
    assert (s.cgroup_io_mb, s.cgroup_io_s) == (4.0, 10.0)
    assert (s.lustre_mb, s.lustre_s, s.lustre_mbps) == (50.0, 10.0, 5.0)
    assert summary_from_dict(json.loads(json.dumps(summary_to_dict(s)))) == s
    assert fold(Summary(), [START, node(10)]).net_mbps is None  # a one-node attempt: no network read
