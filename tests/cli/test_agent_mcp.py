"""`campaignctl mcp` driven by the MCP SDK's own client over stdio, as a coding assistant drives
it: the tools it lists, "why did task 1 fail" answered from the log's evidence and the task's
output, an unknown campaign as a tool error with the hint, and nothing in the store changed."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from mcp.client.session import ClientSession  # the test extras install the SDK: no skip
from mcp.client.stdio import StdioServerParameters, stdio_client

from campaignctl.adapters.store import Store
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import COMMAND_TIMEOUT_S, REPO, run_main, write_spec
from tests.fakeslurm import FakeSlurm

TOOLS = {"campaigns", "campaign_status", "task_output", "decisions", "results", "profile", "next_tick", "simulate"}
TRACEBACK = 'Traceback (most recent call last):\n  File "train.py", line 9\nValueError: shape mismatch\n'


@pytest.fixture
def failed_task(tmp_path: Path, fake_slurm: FakeSlurm) -> Path:
    """Task 1 of `agent` failed with exit 1 (a bug: given up); its output has the traceback."""
    submit(write_spec(tmp_path, "name: agent\ncommand: [python3, train.py, '{i}']\nmatrix: {i: [0, 1]}\n"))
    (job,) = fake_slurm.jobs
    fake_slurm.set_state(job, 0, "COMPLETED", "0:0", "node1")
    fake_slurm.set_state(job, 1, "FAILED", "1:0", "node2")
    reconcile("agent")
    store = Store.open()
    record = store.campaign("agent")
    assert record is not None
    attempt = next(a for a in store.attempts(record.id) if a.task_index == 1)
    log = tmp_path / "runs" / "agent" / "tasks" / "1" / attempt.token / "output.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("epoch 1\n" + TRACEBACK)
    return tmp_path


def _rows(store: Store) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {t: conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar_one()
                for t in ("campaigns", "revisions", "submissions", "attempts", "decisions", "ticks", "leases")}


async def _session(state_home: Path, tmp_path: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    bare = tmp_path / "no-slurm"  # the server's own sacct calls fail: status shows the stored state
    bare.mkdir(exist_ok=True)
    params = StdioServerParameters(command=sys.executable, args=["-m", "campaignctl", "mcp"], cwd=str(REPO),
                                   env={"XDG_STATE_HOME": str(state_home), "PATH": str(bare), "HOME": str(tmp_path),
                                        **{k: v for k, v in os.environ.items() if k == "CAMPAIGNCTL_DB_URL"}})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        return [listed, *[await session.call_tool(name, args) for name, args in calls]]


def _data(answer: Any) -> Any:
    assert not answer.is_error, answer.content
    (text,) = answer.content
    return json.loads(text.text)


def test_an_assistant_reads_why_a_task_failed_and_changes_nothing(failed_task: Path, state_home: Path) -> None:
    before = _rows(Store.open())
    spec = write_spec(failed_task, "name: sim\ncommand: [python3, t.py, '{i}']\nmatrix: {i: [0, 1, 2]}\n"
                                   "resources: {gpus: 1, mem: 4G, time: '01:00:00'}\n", "sim.yaml")
    listed, campaigns, status, output, decided, results, unknown, simulated = anyio.run(
        _session, state_home, failed_task, [
            ("campaigns", {}), ("campaign_status", {"campaign": "agent", "states": ["FAILED"]}),
            ("task_output", {"campaign": "agent", "task": 1, "lines": 2}),
            ("decisions", {"campaign": "agent", "task": 1}), ("results", {"campaign": "agent"}),
            ("campaign_status", {"campaign": "ghost"}),
            ("simulate", {"spec": str(spec), "workload": "synthetic:tasks=50", "seed": 3})])
    assert {t.name for t in listed.tools} == TOOLS
    assert all(t.annotations and t.annotations.read_only_hint for t in listed.tools)
    assert [c["name"] for c in _data(campaigns)["campaigns"]] == ["agent"]
    rows = _data(status)["tasks"]
    assert [(r["index"], r["state"]) for r in rows] == [(1, "FAILED")]
    shown = _data(output)
    assert shown["output"] == "  File \"train.py\", line 9\nValueError: shape mismatch\n" and shown["task"] == 1
    (decision,) = _data(decided)["decisions"]
    assert decision["action"] == "give_up" and decision["inputs"]["exit_code"] == 1
    assert "exit code 1" in decision["reason"]
    assert _data(results)["campaign"] == "agent"
    assert unknown.is_error and "no campaign named 'ghost'" in unknown.content[0].text
    assert "known campaigns: agent" in unknown.content[0].text
    runs = _data(simulated)["runs"]
    assert [r["policy"] for r in runs] == ["campaign", "attempt-scaled"] and runs[0]["tasks"] == 50
    assert _rows(Store.open()) == before  # read-only: not a row added or changed


def test_without_the_mcp_extra_the_server_exits_69_saying_what_to_install(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)  # `import` raises ImportError
    code, out, err = run_main(monkeypatch, capsys, "mcp")
    assert code == 69 and out == ""  # the exit-code table's "a program it needs is missing"
    assert "error: campaignctl mcp needs the MCP SDK" in err and "pip install 'campaignctl[mcp]'" in err


def test_hostile_paths_and_huge_outputs_are_answered_and_the_server_lives_on(
        failed_task: Path, state_home: Path) -> None:
    fifo = failed_task / "spec.fifo"
    os.mkfifo(fifo)  # before: the server's read waited for a writer for ever
    store = Store.open()
    attempt = next(a for a in store.attempts(store.campaign("agent").id) if a.task_index == 1)  # type: ignore[union-attr]
    log = failed_task / "runs" / "agent" / "tasks" / "1" / attempt.token / "output.log"
    log.write_text("x" * (3 << 20) + "\nlast line\n")  # one 3 MB line, as an unended progress bar leaves
    zero, hung, big, alive = anyio.run(_session, state_home, failed_task, [
        ("simulate", {"spec": "/dev/zero"}), ("simulate", {"spec": str(fifo)}),
        ("task_output", {"campaign": "agent", "task": 1, "lines": 2}), ("campaigns", {})])[1:]
    assert zero.is_error and "is a character device, not a file" in zero.content[0].text
    assert hung.is_error and "is a FIFO, not a file" in hung.content[0].text
    shown = _data(big)
    assert shown["cut"] and len(shown["output"]) == 256 * 1024 and shown["output"].endswith("x\nlast line\n")
    assert [c["name"] for c in _data(alive)["campaigns"]] == ["agent"]


def test_a_line_that_is_no_json_rpc_message_gets_a_parse_error_and_the_server_goes_on(
        state_home: Path, tmp_path: Path) -> None:
    """Issue 40's probe: a malformed line got no reply at all (the SDK hands the parse error to
    its session, which answers nothing). JSON-RPC 2.0: error -32700 with id null."""
    import select
    import subprocess

    env = {"XDG_STATE_HOME": str(state_home), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "probe", "version": "0"}}}
    server = subprocess.Popen([sys.executable, "-m", "campaignctl", "mcp"], cwd=REPO, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write("{not json\n")
        server.stdin.flush()
        ready, _, _ = select.select([server.stdout], [], [], COMMAND_TIMEOUT_S)
        assert ready, f"no reply to a malformed line in {COMMAND_TIMEOUT_S} s"
        answer = json.loads(server.stdout.readline())
        assert answer == {"jsonrpc": "2.0", "id": None,
                          "error": {"code": -32700, "message": "Parse error: not a JSON-RPC 2.0 message"}}
        server.stdin.write(json.dumps(hello) + "\n")
        server.stdin.flush()
        reply = json.loads(server.stdout.readline())
        assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "campaignctl"
    finally:
        server.kill()
        server.communicate(timeout=COMMAND_TIMEOUT_S)
