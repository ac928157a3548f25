"""`campaignctl simulate`: figures side by side, the same output for a seed, and input errors that
name the file and the key (exit 3)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_main

SPEC = """\
name: sim-cli
command: ["python", "train.py", "--lr", "{lr}"]
matrix: {lr: [0.1, 0.01]}
resources: {partition: batch, gpus: 1, gpu_type: a100, cpus_per_task: 2, mem: 4G, time: "01:00:00"}
policy: default
"""


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "sim.yaml"
    path.write_text(SPEC)
    return path


def simulate_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code, out, err = run_main(monkeypatch, capsys, "simulate", *args, "--json")
    assert code == 0, err
    assert err == ""  # no progress lines under --json
    return json.loads(out)["data"]


def test_the_campaign_policy_and_the_baseline_side_by_side(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str], spec: Path) -> None:
    code, out, err = run_main(monkeypatch, capsys, "simulate", str(spec), "--workload", "synthetic:tasks=200,oom=0.2")
    assert code == 0
    assert "campaign" in out and "attempt-scaled" in out
    for row in ("completed", "makespan (h)", "GPU-hours wasted", "wasted ÷ attempt-scaled", "out_of_memory → resubmit",
                "attempt-scaled → resubmit"):
        assert row in out, row
    assert "campaign: 200 of 200 tasks settled" in err  # progress on stderr


def test_the_same_seed_prints_the_same_and_another_seed_differs(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str], spec: Path) -> None:
    args = (str(spec), "--workload", "synthetic:tasks=150,oom=0.2,node_fail=0.05")
    first = simulate_json(monkeypatch, capsys, *args, "--seed", "3")
    again = simulate_json(monkeypatch, capsys, *args, "--seed", "3")
    other = simulate_json(monkeypatch, capsys, *args, "--seed", "4")
    assert first == again
    assert first["runs"] != other["runs"]
    mine, base = first["runs"]
    assert mine["tasks"] == base["tasks"] == 150
    assert base["wasted_vs_baseline"] == 1.0


def test_a_cluster_file_with_an_unknown_key_names_the_file_and_the_key(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec: Path, tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("nodes:\n  - {name: 'node[1-2]', cpus: 8, mem: 64G, gpus: 4, gpu_typ: a100}\n")
    code, _, err = run_main(monkeypatch, capsys, "simulate", str(spec), "--cluster", str(cluster))
    assert code == 3
    assert f"{cluster}: 1 problem(s)" in err
    assert "nodes[0].gpu_typ: unknown key; allowed: name, cpus, mem, gpus, gpu_type" in err


def test_a_cluster_file_with_a_bad_memory_size_says_what_is_allowed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec: Path, tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("nodes:\n  - {name: n1, cpus: 8, mem: lots}\n")
    code, _, err = run_main(monkeypatch, capsys, "simulate", str(spec), "--cluster", str(cluster))
    assert code == 3 and "nodes[0].mem: 'lots' is not a memory size above 0 (e.g. 64G, 4000M)" in err


@pytest.mark.parametrize("text, said", [
    ("nodes:\n  - {name: 'n[1-100000000]', cpus: 8, mem: 64G}\n",
     "nodes[0].name: 'n[1-100000000]' names 100,000,000 nodes, more than 100,000"),
    ("nodes:\n  - {name: n1, cpus: 8, mem: 0}\n", "nodes[0].mem: 0 is not a memory size above 0"),
    ("nodes:\n  - {name: 'n[1-2]', cpus: 8, mem: 4G}\n  - {name: n2, cpus: 8, mem: 4G}\n",
     "nodes: n2 is named twice; each node once"),
    ("nodes:\n  - {name: n1, cpus: 100000000000000000, mem: 4G}\n", "nodes[0].cpus: 100000000000000000 is not"),
    ("nodes: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 64 levels deep"),
])
def test_a_hostile_cluster_file_is_exit_3_naming_the_key(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec: Path, tmp_path: Path,
        text: str, said: str) -> None:
    """Issue 26: these ran out of memory, exited 1 or were accepted."""
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(text)
    code, _, err = run_main(monkeypatch, capsys, "simulate", str(spec), "--cluster", str(cluster))
    assert code == 3 and said in err, err


@pytest.mark.parametrize("workload, said", [
    ("synthetic:tasks=3e6", "tasks: 3e6 is out of range (0 to 1,000,000)"),
    ("synthetic:oom=nan", "oom: nan is out of range"),
    ("synthetic:mem_mean=inf", "mem_mean: inf is out of range"),
    ("synthetic:dur_mean=1e400", "dur_mean: 1e400 is out of range"),
])
def test_a_synthetic_workload_out_of_range_is_exit_3(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec: Path,
        workload: str, said: str) -> None:
    code, _, err = run_main(monkeypatch, capsys, "simulate", str(spec), "-w", workload)
    assert code == 3 and said in err, err


@pytest.mark.parametrize("cell, said", [("1e400", "'1e400' is not a number"), ("nan", "'nan' is not a number"),
                                        ("1e13", "1e13 is out of range")])
def test_a_trace_cell_that_is_no_finite_number_is_exit_3_naming_the_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec: Path, tmp_path: Path,
        cell: str, said: str) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("submit_s,duration_s,gpus,cpus,mem_mb,final_state\n0,60,0,1,100,COMPLETED\n"
                     f"0,{cell},0,1,100,COMPLETED\n")
    code, _, err = run_main(monkeypatch, capsys, "simulate", str(spec), "-w", str(trace))
    assert code == 3 and f"line 3, duration_s: {said}" in err, err


HEADER = b"submit_s,duration_s,gpus,cpus,mem_mb,final_state\n"


@pytest.mark.parametrize("trace, said", [
    (HEADER + b"0,60,1,2,4000,COMPLETED\n\xff\xfe,60\n", "line 3: byte 0xff is not UTF-8 text"),
    (HEADER + b"0,60,1,2," + b"9" * 200_000 + b",COMPLETED\n", "not CSV (field larger than field limit"),
    ("fifo", "is a FIFO, not a file"),
    ("/dev/zero", "is a character device, not a file"),
])
def test_a_hostile_trace_is_exit_3_saying_what_is_wrong(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec: Path, tmp_path: Path,
        trace: bytes | str, said: str) -> None:
    """Issue 40's probe: bytes that are no UTF-8 and a 200 KB cell exited 1; a FIFO or /dev/zero
    as the trace hung `simulate` (and the MCP tool) for ever."""
    path = tmp_path / "trace.csv"
    if trace == "fifo":
        os.mkfifo(path)
    elif isinstance(trace, bytes):
        path.write_bytes(trace)
    else:
        path = Path(trace)
    code, _, err = run_main(monkeypatch, capsys, "simulate", str(spec), "--workload", str(path))
    assert code == 3 and said in err, err


def test_a_cluster_file_runs_the_campaign_on_its_nodes(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], spec: Path,
                                                       tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("nodes:\n  - {name: 'gpu[1-3]', cpus: 16, mem: 128G, gpus: 4, gpu_type: a100}\n"
                       "partitions:\n  - {name: batch, priority_tier: 1}\n  - {name: high, priority_tier: 10}\n")
    data = simulate_json(monkeypatch, capsys, str(spec), "--cluster", str(cluster), "--policy", "campaign",
                         "--workload", "synthetic:tasks=50")
    assert data["nodes"] == 3 and [r["policy"] for r in data["runs"]] == ["campaign"]


def test_a_trace_with_an_unknown_state_names_the_line_and_column(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("submit_s,duration_s,gpus,cpus,mem_mb,final_state\n0,60,1,2,4000,COMPLETED\n5,60,1,2,4000,DONE\n")
    code, _, err = run_main(monkeypatch, capsys, "simulate", str(spec), "--workload", str(trace))
    assert code == 3
    assert f"{trace}: 1 problem(s)" in err and "line 3, final_state: 'DONE'; allowed: COMPLETED, FAILED" in err


def test_a_trace_without_a_column_says_which(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                             spec: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("submit_s,duration_s,gpus,cpus,final_state\n0,60,1,2,COMPLETED\n")
    code, _, err = run_main(monkeypatch, capsys, "simulate", str(spec), "--workload", str(trace))
    assert code == 3 and "header: column mem_mb is missing" in err


def test_an_unknown_synthetic_key_lists_the_keys(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                 spec: Path) -> None:
    code, _, err = run_main(monkeypatch, capsys, "simulate", str(spec), "--workload", "synthetic:taks=5")
    assert code != 0 and "unknown synthetic workload key 'taks'; allowed: tasks, mem_mean" in err


def test_help_ends_with_an_example(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(monkeypatch, capsys, "simulate", "--help")
    assert code == 0 and "Example: campaignctl simulate templates/sweep.yaml -w synthetic:tasks=5000\n" in out
