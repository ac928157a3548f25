"""Each node of a multi-node attempt as one line, from its own sampler file."""

from __future__ import annotations

import json

from campaignctl.core.usage.node_telemetry import node_cells, node_line


def sampler_file(node: str, cpus: list[float], gpu: float | None = None, net_mb: float | None = None) -> list[str]:
    gpus = [] if gpu is None else [{"index": 0, "util_pct": gpu, "mem_used_mb": 1000.0}]
    net = {} if net_mb is None else {"node_net_rx_mb": net_mb, "node_net_tx_mb": net_mb}
    return [json.dumps({"event": "start", "t": 0.0, "interval_s": 10.0, "nvml": "ok", "gpus": [0], "node": node}),
            *(json.dumps({"t": 10.0 * (i + 1), "cpu_pct": c, "rss_mb": 500.0 + i, "nproc": 3, "gpus": gpus, **net})
              for i, c in enumerate(cpus)),
            json.dumps({"t": 99.0, "cpu_pct": 0.0, "rss_mb": 0.0, "nproc": 0, "gpus": []}),  # after the exit
            json.dumps({"event": "end", "t": 100.0, "samples": 3})]


def test_a_straggler_node_reads_lower_than_its_peer() -> None:
    busy = node_line(0, 1, sampler_file("node1", [190.0, 200.0], gpu=95.0, net_mb=6000.0))
    slow = node_line(0, 1, sampler_file("node2", [40.0, 60.0], gpu=20.0, net_mb=500.0))  # 100 MB/s: its link
    assert node_cells(busy) == ["0", "1", "node1", "2", "195", "501", "95", "1200"]
    assert node_cells(slow) == ["0", "1", "node2", "2", "50", "501", "20", "100"]


def test_no_samples_and_no_gpu_read_as_dashes() -> None:
    assert node_cells(node_line(3, 2, sampler_file("node4", []))) == ["3", "2", "node4", "0", "-", "0", "-", "-"]
