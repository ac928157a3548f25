"""One line per node of a multi-node attempt, from each node's sampler file (`telemetry.jsonl`
on the first node, `telemetry.node<k>.jsonl` on node k; adapters/runner.py), so a node that lags
the others (less CPU, an idle GPU, more memory, less network) shows next to them. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from campaignctl.core.usage.telemetry import Summary, fold, parse_line


@dataclass(frozen=True, slots=True)
class NodeLine:
    task_index: int
    attempt: int
    node: str
    samples: int
    cpu_mean_pct: float | None
    rss_max_mb: float
    gpu_util_mean_pct: float | None
    net_mbps: float | None = None  # the node's network, received + sent (adapters/node_io.py)


def node_line(task_index: int, attempt: int, lines: Iterable[str]) -> NodeLine:
    """The node is the one the sampler's start line names."""
    kept = list(lines)
    node = next((str(r.get("node", "")) for r in map(parse_line, kept) if r and r.get("event") == "start"), "")
    s = fold(Summary(), kept)
    return NodeLine(task_index, attempt, node or "?", s.samples, s.cpu_sum / s.samples if s.samples else None,
                    s.rss_max_mb, s.gpu_util_sum / s.gpu_samples if s.gpu_samples else None, s.net_mbps)


def node_cells(line: NodeLine) -> list[str]:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"
    return [str(line.task_index), str(line.attempt), line.node, str(line.samples), pct(line.cpu_mean_pct),
            f"{line.rss_max_mb:.0f}", pct(line.gpu_util_mean_pct), pct(line.net_mbps)]


NODE_HEADERS = ("task", "attempt", "node", "samples", "cpu % (mean)", "rss MiB (peak)", "gpu % (mean)",
                "network MB/s (mean)")
