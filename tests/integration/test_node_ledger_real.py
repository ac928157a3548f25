"""The node ledger on the real cluster (docs/nodes.md), both Slurms:

- a node set DOWN under alice's task is left out of bob's first sbatch (another Unix user, the
  same PostgreSQL store, his own campaign), then after the exclusion expires it is on probation,
  takes one one-task array, and the clean run clears it;
- a node made slow for the toy trainer (`--slow-on`) is found from its tasks' steps per second and
  left out of the next submission;
- a ledger that blames every node excludes a quarter of the partition and no more, and a job that
  needs every node is submitted as if the ledger said nothing (`sbatch --test-only` refused it);
- elements waiting in the queue take a node the ledger comes to exclude, keep it out while it is
  on probation, and give it back once it is forgiven, keeping the spec's own `exclude`;
- a task failing with the same evidence each time holds the campaign after three attempts, and
  `policy replay` reproduces every decision, the ledger's included.

Ticks run from a cron-like environment (`env -i`, the crontab's PATH) as the campaigns' owners."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters import proc
from campaignctl.adapters.history_store import HistoryStore
from campaignctl.adapters.store import Store
from campaignctl.adapters.store_schema import node_marks
from campaignctl.core.governance.replay import actual_decisions, replay
from campaignctl.core.governance.replay_compare import compare
from campaignctl.services.campaigns import current_policy
from tests.conftest import write_spec
from tests.cron_path import CRON_PATH
from tests.integration.test_multiuser_real import (  # noqa: F401 (fixtures)
    ALICE,
    BOB,
    HERE,
    Team,
    team,
    unix_users,
    user_python,
)
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import wait_for

pytestmark = pytest.mark.slurm
EXPIRE_S = 45


def lab_nodes() -> list[str]:
    """The default partition's nodes (node1-4 on the 22.05 lab, trixie1-4 on 24.11's)."""
    return sorted(set(proc.run(["sinfo", "-h", "-N", "-o", "%N"]).stdout.split()))


def decisions(name: str, action: str | None = None) -> list:  # the store's LoggedDecision rows
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    return [e for e in store.log.entries(record.id) if action is None or e.action == action]


def attempts(name: str) -> list:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    return store.history(record.id)


def first_array(name: str) -> str:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    [sub] = [s for s in store.submissions(record.id) if s.kind == "initial"]
    assert sub.job_id
    return sub.job_id


def excluded_by_slurm(array_job_id: str) -> str:
    """ExcNodeList as slurmctld holds it for the array (before MinJobAge forgets the job)."""
    shown = proc.run(["scontrol", "show", "job", array_job_id]).stdout
    return next(w.split("=", 1)[1] for w in shown.split() if w.startswith("ExcNodeList="))


def ledger(crew: Team | None, user: str = BOB) -> dict[str, dict]:
    """`campaignctl nodes --json` by node; the team's scored with its policy (exclusions of EXPIRE_S)."""
    shown = crew.cctl(user, "nodes", "--json", "--policy", str(crew.base / "ledger.yaml")) if crew \
        else cli("nodes", "--json")
    assert shown.returncode == 0, shown.stderr
    return {n["node"]: n for n in json.loads(shown.stdout)["data"]["nodes"]}


def ticked(crew: Team, user: str, name: str, check: Callable[[], bool]) -> bool:
    """One cron-like tick of `name` by `user`, then `check`."""
    done = crew.cctl(user, "reconcile", name, "--json")
    assert done.returncode in (0, 75), done.stderr  # 75: Slurm or the database busy, the next tick goes on
    return check()


def state(name: str) -> str:
    record = Store.open().campaign(name)
    assert record is not None
    return record.state


@pytest.fixture
def sleepers() -> Iterator[list[str]]:
    """Root's jobs that hold whole nodes, cancelled after the test."""
    held: list[str] = []
    yield held
    for job in held:
        proc.run(["scancel", job], check=False)


def own_dir(crew: Team, user: str) -> Path:
    where = crew.base / user
    where.mkdir(exist_ok=True)
    shutil.copy(HERE / "chaos_task.py", where / "chaos.py")
    shutil.chown(where, user, user)
    shutil.chown(where / "chaos.py", user, user)
    return where


def spec_of(crew: Team, user: str, name: str, modes: list[str]) -> Path:
    where = own_dir(crew, user)
    tasks = "\n".join(f"  - {{mode: {m}, mb: 0}}" for m in modes)
    spec = where / f"{name}.yaml"
    spec.write_text(f"""\
name: {name}
command: [{crew.python}, chaos.py, "{{mode}}", "{{mb}}"]
tasks:
{tasks}
resources: {{cpus_per_task: 2, mem: 200M, time: "00:05:00"}}
telemetry: {{interval: 0}}
policy: {{use: default, nodes: {{exclude_for: {EXPIRE_S}s}}}}
""")
    shutil.chown(spec, user, user)
    return spec


def test_a_node_that_failed_alices_task_is_left_out_of_bobs_first_sbatch_until_a_clean_probation_run(
        team: Team, sleepers: list[str]) -> None:  # noqa: F811 (the fixture)
    a, b, c = (f"{x}-{team.base.name}" for x in ("ledger-a", "ledger-b", "ledger-c"))
    (team.base / "ledger.yaml").write_text(f"name: lab-ledger\nuse: default\nnodes: {{exclude_for: {EXPIRE_S}s}}\n")
    (team.base / "ledger.yaml").chmod(0o644)
    assert team.cctl(ALICE, "submit", str(spec_of(team, ALICE, a, ["slow"])), cwd=team.base / ALICE).returncode == 0

    wait_for("alice's task to run", lambda: ticked(team, ALICE, a, lambda: any(
        r.state == "RUNNING" and r.nodes for r in attempts(a))), 120)
    bad = next(r.nodes for r in attempts(a) if r.state == "RUNNING")
    proc.run(["scontrol", "update", f"NodeName={bad}", "State=DOWN", "Reason=campaignctl-ledger-test"])
    try:
        wait_for("alice's tick to log the node failure", lambda: ticked(team, ALICE, a, lambda: bool(
            decisions(a, "suspect_node"))), 120)
    finally:
        proc.run(["scontrol", "update", f"NodeName={bad}", "State=RESUME"], check=False)
    [evidence] = decisions(a, "suspect_node")
    assert evidence.params == {"node": bad, "kind": "node_fail", "weight": 1.0}
    seen = ledger(team)[bad]  # bob sees alice's evidence
    assert (seen["state"], seen["campaigns"], seen["evidence"]) == ("excluded", [a], {"node_fail": 1})

    assert team.cctl(BOB, "submit", str(spec_of(team, BOB, b, ["ok", "ok", "ok"])),
                     cwd=team.base / BOB).returncode == 0
    assert excluded_by_slurm(first_array(b)) == bad  # bob's first sbatch, as slurmctld holds it
    [start] = decisions(b, "start")
    assert f"the node ledger leaves out {bad}: score 1" in start.reason
    assert start.inputs["node_ledger"]["excluded"] == [bad]
    shown = team.cctl(BOB, "status", b)
    assert "node ledger (at " in shown.stdout and f"{bad}: score 1" in shown.stdout, shown.stdout
    wait_for("bob's campaign to finish", lambda: ticked(team, BOB, b, lambda: state(b) == "finished"), 180)
    assert {r.nodes for r in attempts(b)}.isdisjoint({bad})

    expires = datetime.fromisoformat(ledger(team)[bad]["expires"])
    time.sleep(max(0.0, (expires - datetime.now(timezone.utc)).total_seconds()) + 1)
    assert ledger(team)[bad]["state"] == "probation"
    for node in (n for n in lab_nodes() if n != bad):  # every other node busy: the probation node is the one free
        out = proc.run(["sbatch", "--parsable", "-w", node, "-c2", "--mem=100M", "-J", "ledger-sleeper",
                        "-o", "/dev/null", "--wrap", "sleep 300"]).stdout
        sleepers.append(out.strip().split(";")[0])
    wait_for("the sleepers to run", lambda: len(proc.run(["squeue", "-h", "-t", "R", "-n", "ledger-sleeper"])
                                                .stdout.splitlines()) == 3, 60)
    assert team.cctl(BOB, "submit", str(spec_of(team, BOB, c, ["ok"])), cwd=team.base / BOB).returncode == 0
    assert excluded_by_slurm(first_array(c)) == "(null)"  # one task may run on a node on probation
    [probe] = decisions(c, "start")
    assert f"it is the one task let onto {bad} on probation" in probe.reason
    assert ledger(team)[bad]["state"] == "probing"  # no other array goes there until the probe has run
    wait_for("the probation task to finish", lambda: ticked(team, BOB, c, lambda: state(c) == "finished"), 180)
    assert [r.nodes for r in attempts(c)] == [bad]
    [cleared] = decisions(c, "clear_node")
    assert cleared.params == {"node": bad} and "completed there on probation" in cleared.reason
    assert bad not in ledger(team, ALICE)


def test_a_slow_node_is_found_and_left_out_of_the_next_submission(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    shutil.copy(HERE / "toy_trainer.py", tmp_path / "toy.py")
    slow = lab_nodes()[2]
    grid = "\n".join(f"  - {{lr: 0.00{i + 1}}}" for i in range(8))
    spec = f"""\
name: NAME
command: [{sys.executable}, toy.py, "{{lr}}", "64", --steps, "6", --gpu-mb, "0", --slow-on, {slow}, --slow-factor, "3"]
tasks:
{grid}
resources: {{cpus_per_task: 1, mem: 200M, time: "00:05:00"}}
telemetry: {{interval: 0}}
"""
    cli("submit", str(write_spec(tmp_path, spec.replace("NAME", "slow-a"), "a.yaml")))
    wait_for("the first campaign to finish", lambda: cli("reconcile", "slow-a").returncode in (0, 75)
             and state("slow-a") == "finished", 240)
    assert {r.state for r in attempts("slow-a")} == {"COMPLETED"}
    on_slow = [r for r in attempts("slow-a") if r.nodes == slow]
    assert len(on_slow) >= 2, [(r.task_index, r.nodes, r.elapsed_s) for r in attempts("slow-a")]
    found = decisions("slow-a", "suspect_node")
    assert {(e.params["node"], e.params["kind"]) for e in found} == {(slow, "slow")}
    assert all("slower than the median" in e.reason for e in found)
    assert ledger(None)[slow]["state"] == "excluded"
    assert ("nodes", "suspect_node") in replayed("slow-a")  # from the recorded steps and elapsed times
    cli("submit", str(write_spec(tmp_path, spec.replace("NAME", "slow-b"), "b.yaml")))
    assert excluded_by_slurm(first_array("slow-b")) == slow
    proc.run(["scancel", first_array("slow-b")], check=False)


def test_the_cap_keeps_three_quarters_of_the_partition_and_a_job_needing_every_node_still_runs(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    store = Store.open()
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    cluster = json.loads(cli("nodes", "--json").stdout)["data"]["cluster"]
    nodes = lab_nodes()
    worst = nodes[-1]
    with store.engine.begin() as conn:  # a ledger that blames every node, the last the most
        conn.execute(sa.insert(node_marks), [
            {"cluster": cluster, "node": n, "at": now, "kind": "node_fail", "weight": 1.0 + (n == worst),
             "campaign_id": None, "decision_id": None, "user_name": "test", "reason": "made up by the test"}
            for n in nodes])
    assert {n["state"] for n in ledger(None).values()} == {"excluded"}
    shutil.copy(HERE / "chaos_task.py", tmp_path / "chaos.py")
    cli("submit", str(write_spec(tmp_path, """\
name: cap
command: [python3, chaos.py, ok, "0"]
tasks: [{i: 0}, {i: 1}, {i: 2}, {i: 3}]
resources: {cpus_per_task: 2, mem: 200M, time: "00:05:00"}
telemetry: {interval: 0}
""", "cap.yaml")))
    assert excluded_by_slurm(first_array("cap")) == worst  # a quarter of four nodes: one, the worst
    wait_for("the capped campaign to finish", lambda: cli("reconcile", "cap").returncode in (0, 75)
             and state("cap") == "finished", 180)
    assert {r.state for r in attempts("cap")} == {"COMPLETED"}
    assert ("start", "start") in replayed("cap")  # its --exclude from the exclusion the start recorded
    assert cli("report", "cap", "--out", str(tmp_path / "report")).returncode == 0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Node ledger" in page and f"{worst}: score 2" in page and "left out of start" in page
    cli("submit", str(write_spec(tmp_path, """\
name: wide
command: [python3, chaos.py, ok, "0"]
resources: {nodes: 4, tasks_per_node: 1, cpus_per_task: 1, mem: 200M, time: "00:05:00"}
telemetry: {interval: 0}
""", "wide.yaml")))
    assert excluded_by_slurm(first_array("wide")) == "(null)"  # leaving one node out would make it unschedulable
    [start] = decisions("wide", "start")
    assert "node_ledger" not in start.inputs
    wait_for("the four-node task to finish", lambda: cli("reconcile", "wide").returncode in (0, 75)
             and state("wide") == "finished", 180)


def test_pending_elements_take_a_node_the_ledger_excludes_and_give_it_back_once_it_is_forgiven(
        slurm_conf: str, state_home: Path, tmp_path: Path, sleepers: list[str]) -> None:
    """Before, pending work kept every node ever pushed onto it: over a long queue the ledger's
    exclusions moved from node to node and its elements came to exclude the whole partition."""
    for node in lab_nodes():  # the campaign's elements wait behind root's jobs holding every node
        out = proc.run(["sbatch", "--parsable", "--exclusive", "-w", node, "-J", "ledger-sleeper",
                        "-o", "/dev/null", "--wrap", "sleep 300"]).stdout
        sleepers.append(out.strip().split(";")[0])
    shutil.copy(HERE / "chaos_task.py", tmp_path / "chaos.py")
    assert cli("submit", str(write_spec(tmp_path, """\
name: back
command: [python3, chaos.py, ok, "0"]
tasks: [{i: 0}, {i: 1}]
resources: {cpus_per_task: 1, mem: 100M, time: "00:05:00", exclude: NOSUCH}
telemetry: {interval: 0}
""".replace("NOSUCH", lab_nodes()[0]), "back.yaml"))).returncode == 0
    mine, bad = lab_nodes()[0], lab_nodes()[-1]  # the spec's own exclusion, the one the ledger will blame
    array = first_array("back")
    assert set(exclusions(array)) == {mine}
    store = Store.open()
    cluster = json.loads(cli("nodes", "--json").stdout)["data"]["cluster"]
    with store.engine.begin() as conn:
        conn.execute(sa.insert(node_marks), [{
            "cluster": cluster, "node": bad, "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "kind": "node_fail", "weight": 1.0, "campaign_id": None, "decision_id": None, "user_name": "test",
            "reason": "made up by the test"}])
    # the tick resizes the elements it has seen pending, and sacct lists a new array a second or
    # two after sbatch: a tick straight after submit saw none (both SUBMITTED; 1 run in 3 on 22.05)
    wait_for("a tick to push the ledger's node onto both pending elements",
             lambda: cli("reconcile", "back").returncode == 0 and set(exclusions(array)) == {f"{mine},{bad}"}, 60)
    # its exclusion over (the evidence made 31 minutes ago): on probation, one task at a time may
    # run there, so the pending elements keep it out and nothing is resized
    with store.engine.begin() as conn:
        conn.execute(sa.update(node_marks).where(node_marks.c.node == bad).values(
            at=(datetime.now(timezone.utc) - timedelta(minutes=31)).isoformat(timespec="seconds")))
    assert ledger(None)[bad]["state"] == "probation"
    before = len(decisions("back", "resize_pending"))
    assert cli("reconcile", "back").returncode == 0
    assert set(exclusions(array)) == {f"{mine},{bad}"} and len(decisions("back", "resize_pending")) == before
    assert cli("nodes", "forgive", bad, "--reason", "replaced").returncode == 0
    assert cli("reconcile", "back").returncode == 0
    assert set(exclusions(array)) == {mine}
    resizes = decisions("back", "resize_pending")
    pushed = [d for d in resizes if "let_back" not in d.inputs]
    let_back = [d for d in resizes if "let_back" in d.inputs]
    assert sorted(d.task_index for d in pushed) == sorted(d.task_index for d in let_back) == [0, 1]
    assert all(d.inputs["excluded_nodes"] == [bad] for d in pushed)
    assert all(d.inputs["let_back"] == [bad] and f"nothing excludes {bad} any longer" in d.reason for d in let_back)
    for job in sleepers:
        proc.run(["scancel", job], check=False)
    wait_for("the campaign to finish", lambda: cli("reconcile", "back").returncode in (0, 75)
             and state("back") == "finished", 180)
    assert mine not in {r.nodes for r in attempts("back")}


def exclusions(array_job_id: str) -> list[str]:
    """ExcNodeList of every element slurmctld holds for the array."""
    shown = proc.run(["scontrol", "show", "job", array_job_id]).stdout
    return [w.split("=", 1)[1] for w in shown.split() if w.startswith("ExcNodeList=")]


def test_a_crash_loop_is_held_with_its_signature_and_replay_reproduces_the_ledger(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    cli("submit", str(write_spec(tmp_path, """\
name: loop
command: [python3, -c, "import sys; print('ValueError: corrupt shard 17 at 0x7f3a'); sys.exit(1)"]
tasks: [{i: 0}, {i: 1}]
resources: {mem: 200M, time: "00:05:00"}
telemetry: {interval: 0}
policy:
  use: default
  causes: {corrupt_shard: {pattern: "ValueError: corrupt shard"}}
  rules: {corrupt_shard: {action: resubmit, max_retries: 10}}
""", "loop.yaml")))
    # what a crontab line runs: nothing of this shell's environment but the store and the cluster
    env = {"PATH": CRON_PATH, "HOME": str(tmp_path), "SLURM_CONF": slurm_conf,
           **{k: os.environ[k] for k in ("CAMPAIGNCTL_DB_URL", "XDG_STATE_HOME") if k in os.environ}}
    wait_for("the crash-loop hold", lambda: subprocess.run(
        ["env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "campaignctl", "reconcile",
         "loop"], capture_output=True, check=False, cwd=tmp_path) is not None and state("loop") == "paused", 180)
    [hold] = decisions("loop", "hold")
    assert hold.rule == "crash_loop" and "crash loop: 3 failures in a row" in hold.reason
    assert hold.params["signature"].startswith("corrupt_shard:") and hold.params["signature"] in hold.reason
    assert len(attempts("loop")) <= 4  # not 2 × 11
    assert replayed("loop") >= {("crash_loop", "hold"), ("corrupt_shard", "resubmit")}


def replayed(name: str) -> set[tuple[str, str]]:
    """Replay the campaign's recorded ticks under its own policy: every decision is reproduced.
    Returns the (rule, action) pairs it replayed."""
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    history = HistoryStore(store.engine).campaign_history(record)
    policy = current_policy(store, record)[0]
    actual = actual_decisions(history)
    comparison = compare(actual, replay(history, policy), policy.prices, lambda _d: None, {})
    assert comparison.differences == () and comparison.reproduced == len(actual), comparison.differences
    return {(d.rule, d.action) for d in actual}

