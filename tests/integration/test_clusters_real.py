"""One campaign on the lab's two clusters, `lab` and `lab2`, behind one slurmdbd (scripts/slurmlab),
both Slurms. Ticks run from a cron-like environment (`env -i`, the crontab's PATH) through
counting shims in front of every Slurm client:

- 200 tasks, `clusters: [lab, lab2]`: its two arrays are placed one on each (the clusters tie, idle);
  lab's nodes are drained while most of its array waits; a held job of ours on lab has the SAME
  job id as lab2's array (both counters moved there with FirstJobId before the campaign); lab's
  pending elements move to lab2 (a `move` cancel, then a resubmission there); every task
  completes exactly once (sacct of both clusters), each task's attempts read their own cluster's
  records (job N of lab and job N of lab2 never mix), each tick runs one `sacct -M` and one
  `squeue -M` for both, and `policy replay` reproduces every placement and move;
- lab's slurmctld stopped mid-campaign: its running tasks are UNKNOWN (not failed, not
  resubmitted), a campaign submitted meanwhile goes to lab2, and when lab's slurmctld returns its
  tasks end as they ran, nothing duplicated;
- lab2's slurmctld hung (`kill -STOP`: still registered, squeue prints its heading and times
  out): its running and pending tasks are UNKNOWN, not gone, and once it answers again they run
  on, each once."""

from __future__ import annotations

import json
import os
import pwd
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.adapters.store import Store
from campaignctl.core.model.sacct_values import certain_indices
from campaignctl.core.slurm import job_ref
from tests.conftest import write_spec
from tests.cron_path import CRON_PATH
from tests.integration.test_node_ledger_real import replayed
from tests.integration.test_reconcile_real import wait_for
from tests.integration.test_top_real import counting_shims

pytestmark = [pytest.mark.slurm, pytest.mark.alone]
REPO = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def lab2(slurm_conf: str) -> Path:
    """lab2's slurm.conf. In CI the second cluster must be up: missing, the test fails."""
    conf = Path(slurm_conf).parent.parent / "lab2" / "etc" / "slurm.conf"
    listed = proc.run(["sacctmgr", "-n", "-P", "show", "clusters", "format=Cluster,ControlPort"], check=False).stdout
    if not conf.exists() or "lab2|0" in listed or "lab2|" not in listed:
        message = f"the lab's second cluster is not up ({conf}; `sacctmgr show clusters`: {listed.strip()!r})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return conf


def lab_nodes() -> list[str]:
    return sorted(set(proc.run(["sinfo", "-h", "-N", "-o", "%N"]).stdout.split()))


@pytest.fixture
def drained_lab() -> Iterator[list[str]]:
    """lab's nodes, resumed after the test whatever it did to them."""
    nodes = lab_nodes()
    yield nodes
    proc.run(["scontrol", "update", f"nodename={','.join(nodes)}", "state=resume"], check=False)


class Ticks:
    """`campaignctl reconcile NAME` as a crontab line runs it, with every Slurm client counted."""

    def __init__(self, tmp_path: Path, slurm_conf: str) -> None:
        self.log = tmp_path / "slurm-calls.log"
        self.log.touch()
        shims = counting_shims(tmp_path / "shims", self.log).split(":", 1)[0]
        self.env = {"PATH": f"{shims}:{CRON_PATH}", "HOME": str(tmp_path), "SLURM_CONF": slurm_conf,
                    **{k: os.environ[k] for k in ("CAMPAIGNCTL_DB_URL", "XDG_STATE_HOME") if k in os.environ}}
        self.calls: list[list[str]] = []  # each tick's Slurm commands

    def __call__(self, name: str) -> None:
        before = len(self.log.read_text().splitlines())
        done = subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in self.env.items()), sys.executable, "-m",
                               "campaignctl", "reconcile", name], capture_output=True, text=True, timeout=300,
                              cwd=REPO)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        self.calls.append(self.log.read_text().splitlines()[before:])


def store_of(name: str) -> tuple[Store, int]:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    return store, record.id


def latest_states(name: str) -> dict[int, str]:
    store, cid = store_of(name)
    return {r.task_index: r.state for r in store.history(cid)}


def slurmctld_pid(pid_file: Path) -> int:
    """The live slurmctld the pid file names. After `scontrol reconfigure` 24.11's file has a second
    line (seen: `793\n8\n`, slurmctld still 793): the first number that is a running slurmctld."""
    for word in pid_file.read_text().split():
        comm = Path(f"/proc/{word}/comm")
        if word.isdigit() and comm.exists() and comm.read_text().strip() == "slurmctld":
            return int(word)
    raise AssertionError(f"{pid_file} names no running slurmctld: {pid_file.read_text()!r}")


def next_job_id(cluster: str) -> int:
    probe = proc.run(["sbatch", "-M", cluster, "--parsable", "--hold", "--wrap", "true"]).stdout
    job = probe.strip().split(";")[0]
    proc.run(["scancel", "-M", cluster, job])
    return int(job) + 1


def move_counter(cluster: str, conf: Path, to: int) -> None:
    """`cluster`'s next job id moved forward to `to` (FirstJobId, then `scontrol -M <cluster>
    reconfigure`; slurmctld only moves its counter forward, and keeps it when the line goes). The
    file is replaced whole both ways: its slurmds re-read it on the reconfigure, and one that read
    it while `write_text` had just truncated it died (`slurm.conf is empty`, 22.05: node DOWN, its
    job NODE_FAIL)."""
    text = conf.read_text()
    _replace(conf, text + f"FirstJobId={to}\n")
    try:
        proc.run(["scontrol", "-M", cluster, "reconfigure"])
    finally:
        _replace(conf, text)


def _replace(path: Path, text: str) -> None:
    staged = path.with_name(path.name + ".staged")
    staged.write_text(text)
    staged.chmod(path.stat().st_mode & 0o777)
    os.replace(staged, path)


def held_on_lab(first: int, count: int) -> list[str]:
    """`count` held arrays of ours on lab with job ids `first`… (lab's counter moved there first):
    lab2's array, submitted next with lab2's counter at `first`, takes one of these ids. Held,
    they never run. Made while both clusters are idle: a reconfigure while a step starts failed it
    with 127, and while jobs run on 22.05 ended them NODE_FAIL."""
    return [proc.run(["sbatch", "-M", "lab", "--parsable", "--hold", "--array=0-98", "-J", "not-ours",
                      "--wrap", "exit 3"]).stdout.strip().split(";")[0] for _ in range(count)]


def idle_clusters() -> None:
    """No job of ours left queued on either cluster by an earlier test."""
    user = pwd.getpwuid(os.getuid()).pw_name
    proc.run(["scancel", "-M", "lab,lab2", "-u", user], check=False)
    wait_for("our earlier jobs to leave both queues", lambda: not proc.run(
        ["squeue", "-M", "lab,lab2", "--me", "--noheader"]).stdout.strip(), 60)


def ran_once_each(name: str) -> dict[str, Counter[str]]:
    """From sacct of both clusters: per task, how its attempts' elements ended, each read on its own
    cluster (an element that never started, cancelled while pending, has no Start)."""
    store, cid = store_of(name)
    rows = store.history(cid)
    ids = sorted({r.job_id.partition("_")[0] for r in rows if r.job_id}, key=job_ref.order)
    out = proc.run(["sacct", "-M", "lab,lab2", "-X", "-n", "-P", "--format=Cluster,JobID,State,Start,NodeList",
                    "-S", "now-2hours", f"--jobs={','.join(sorted({job_ref.plain(i) for i in ids}))}"]).stdout
    by_element = {}
    for line in out.splitlines():
        cluster, job, state, start, nodes = line.split("|")
        array, _, index = job.partition("_")
        # elements cancelled while pending print as one line, `12_[8-100]`
        indices = certain_indices(index[1:-1])[0] if index.startswith("[") else (int(index),)
        for i in indices:
            by_element[job_ref.qualified("" if cluster == "lab" else cluster, f"{array}_{i}")] = (state, start, nodes)
    ran: dict[str, Counter[str]] = {}
    for r in rows:
        if r.job_id not in by_element:
            # 24.11 keeps no record of an element cancelled while pending (`scancel --state=PENDING
            # 30_0`: sacct lists 30_[1] only; core/slurm/observe.py): it never ran
            assert r.state == "CANCELLED" and not r.nodes and "24.11" in os.environ["SLURM_CONF"], r
            continue
        state, start, nodes = by_element[r.job_id]
        if start not in ("Unknown", "None", ""):
            ran.setdefault(str(r.task_index), Counter())[state] += 1
        assert r.nodes == ("" if nodes == "None assigned" else nodes), (r, by_element[r.job_id])
    return ran


def test_pending_work_moves_off_a_drained_cluster_and_every_task_runs_once(
        slurm_conf: str, lab2: Path, drained_lab: list[str], state_home: Path, tmp_path: Path) -> None:
    ticks = Ticks(tmp_path, slurm_conf)
    idle_clusters()  # placement compares the clusters' queues: ours must not weigh on either
    # job ids lab has taken, and lab2 will take next: its array's is one of them
    first = max(next_job_id("lab"), next_job_id("lab2")) + 500
    move_counter("lab", Path(slurm_conf), first)
    held = held_on_lab(first, 6)
    move_counter("lab2", lab2, first)
    submitted = subprocess.run([sys.executable, "-m", "campaignctl", "submit", "--json", str(write_spec(tmp_path, """\
name: two
command: [python3, -c, "import time; time.sleep(0.5)"]
matrix: {i: [TASKS]}
resources: {cpus_per_task: 1, mem: 100M, time: "00:05:00"}
clusters: [lab, lab2]
telemetry: {interval: 0}
""".replace("TASKS", ", ".join(map(str, range(200))))))], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert submitted.returncode == 0, submitted.stderr
    # drained while most of lab's array waits: its running elements end, the rest cannot start there
    proc.run(["scontrol", "update", f"nodename={','.join(drained_lab)}", "state=drain", "reason=moved-away"])
    chunks = json.loads(submitted.stdout)["data"]["chunks"]
    assert [(c["first_task"], c["last_task"]) for c in chunks] == [(0, 100), (101, 199)]
    lab_id, lab2_id = (c["job_id"] for c in chunks)
    assert job_ref.cluster_of(lab_id) == "" and job_ref.cluster_of(lab2_id) == "lab2", chunks
    # a held job of ours with the same id (and indices) on lab, PENDING for ever: read as the
    # campaign's, lab2's elements would never complete
    assert job_ref.plain(lab2_id) in held, (lab2_id, held)

    wait_for("every task to complete", lambda: (ticks("two"), set(latest_states("two").values()) == {"COMPLETED"})[1],
             600)
    store, cid = store_of("two")
    moves = [e for e in store.log.entries(cid) if e.rule == "move"]
    cancels = [e for e in moves if e.action == "cancel"]
    assert cancels and len([e for e in moves if e.action == "resubmit"]) == len(cancels)
    assert all(e.inputs["cluster"] == "lab" and e.inputs["to"] == "lab2" and "lab2" in e.inputs["predictions"]
               for e in cancels)
    assert all(r.job_id and r.job_id.startswith("lab2:") for r in store.history(cid)
               if r.task_index >= 101 or r.attempt_number == 2)
    # every task ran exactly once, read on its own cluster: lab's job N and lab2's job N never mixed
    ran = ran_once_each("two")
    assert len(ran) == 200 and all(c == Counter({"COMPLETED": 1}) for c in ran.values()), ran
    nodes = {r.task_index: r.nodes for r in store.history(cid) if r.state == "COMPLETED"}
    assert all(re.fullmatch(r"[a-z]+b\d+", nodes[t]) for t in range(101, 200))  # lab2's nodes: nodeb1, trixieb2
    # each tick: one sacct and one squeue, both over the two clusters
    for calls in ticks.calls:
        asked = Counter(c.split()[0] for c in calls if c.split()[1:] != ["--version"])  # --version: no RPC
        assert asked["sacct"] <= 1 and asked["squeue"] == 1, calls
        # squeue over both always (which answered); sacct over the clusters the live attempts are on
        assert all(c.startswith(("squeue -M lab,lab2 ", "sacct -M lab,lab2 ", "sacct -M lab2 ")) for c in calls
                   if c.split()[0] in ("sacct", "squeue") and c.split()[1:] != ["--version"]), calls
    assert sum(1 for calls in ticks.calls if any(c.startswith("sacct") for c in calls)) >= 2
    assert {("start", "start"), ("move", "cancel"), ("move", "resubmit")} <= replayed("two")
    proc.run(["scancel", "-M", "lab", *held])
    # the screens: where each task ran, and what each cluster spent
    shown = json.loads(subprocess.run([sys.executable, "-m", "campaignctl", "status", "two", "--json"],
                                      capture_output=True, text=True, check=True, cwd=REPO).stdout)["data"]
    where = Counter(t["cluster"] for t in shown["tasks"])
    assert where == Counter({"lab2": 99 + len(cancels), "lab": 101 - len(cancels)})  # each move: its task on lab2
    spent = shown["spend"]["by_cluster"]
    assert set(spent) == {"lab", "lab2"} and spent["lab2"]["cpu_hours"] > 0
    table = subprocess.run([sys.executable, "-m", "campaignctl", "status", "two"], capture_output=True, text=True,
                           check=True, cwd=REPO, env={**os.environ, "COLUMNS": "120"}).stdout
    assert " cluster " in table and " lab2 " in table and "lab2:" in table  # a line of what lab2 spent
    subprocess.run([sys.executable, "-m", "campaignctl", "report", "two", "--out", str(tmp_path / "report")],
                   check=True, capture_output=True, cwd=REPO)
    assert "Spend by cluster" in (tmp_path / "report" / "index.html").read_text()


def test_a_cluster_whose_slurmctld_is_down_has_its_tasks_unknown_and_nothing_runs_twice(
        slurm_conf: str, lab2: Path, state_home: Path, tmp_path: Path) -> None:
    ticks = Ticks(tmp_path, slurm_conf)
    subprocess.run([sys.executable, "-m", "campaignctl", "submit", str(write_spec(tmp_path, """\
name: outage
command: [python3, -c, "import time; time.sleep(15)"]
matrix: {i: [0, 1, 2, 3]}
resources: {cpus_per_task: 1, mem: 100M, time: "00:05:00"}
clusters: [lab, lab2]
telemetry: {interval: 0}
"""))], check=True, capture_output=True, timeout=300, cwd=REPO)
    wait_for("the tasks to run on lab", lambda: (ticks("outage"), set(latest_states("outage").values()) == {
        "RUNNING"})[1], 120)
    os.kill(slurmctld_pid(Path(slurm_conf).parent.parent / "run" / "slurmctld.pid"), signal.SIGTERM)
    try:
        # stopped for squeue too, which is what the tick asks: a slurmctld that `scontrol ping` already
        # reads DOWN was once still answering the tick's squeue (CI run 41, 24.11: tasks kept RUNNING);
        # one still registered with slurmdbd gets a heading from `squeue -M` and no answer (core/slurm/clusters.py)
        wait_for("lab's slurmctld to stop", lambda: (
            proc.run(["scontrol", "ping"], check=False).returncode != 0
            or "DOWN" in proc.run(["scontrol", "ping"], check=False).stdout)
            and proc.run(["squeue", "-M", "lab", "-h"], check=False).returncode != 0, 30)
        ticks("outage")
        assert set(latest_states("outage").values()) == {"UNKNOWN"}  # not failed, not lost
        # a campaign submitted meanwhile goes where a slurmctld answers
        later = subprocess.run([sys.executable, "-m", "campaignctl", "submit", "--json", str(write_spec(
            tmp_path, "name: meanwhile\ncommand: [python3, -c, pass]\nmatrix: {i: [0, 1]}\n"
                      "resources: {cpus_per_task: 1, mem: 100M, time: \"00:05:00\"}\nclusters: [lab, lab2]\n"
                      "telemetry: {interval: 0}\n", "meanwhile.yaml"))], capture_output=True, text=True,
            timeout=300, cwd=REPO)
        assert later.returncode == 0, later.stderr
        [chunk] = json.loads(later.stdout)["data"]["chunks"]
        assert chunk["job_id"].startswith("lab2:"), chunk
        ticks("outage")
        assert set(latest_states("outage").values()) == {"UNKNOWN"}
    finally:
        env = {**os.environ, "SLURMLAB_KEEP_JOBS": "1"}
        version = "24.11" if "24.11" in slurm_conf else "22.05"
        subprocess.run([str(REPO / "scripts" / "slurmlab"), "up"], env={**env, "SLURMLAB_SLURM": version},
                       check=True, capture_output=True, timeout=300)
    wait_for("the tasks to end as they ran", lambda: (ticks("outage"), set(latest_states("outage").values()) == {
        "COMPLETED"})[1], 180)
    store, cid = store_of("outage")
    assert [e.action for e in store.log.entries(cid)] == ["start"]  # nothing resubmitted, nothing given up
    assert len(store.history(cid)) == 4  # one attempt per task


def test_a_hung_slurmctld_leaves_its_tasks_unknown_and_they_run_on_when_it_answers(
        slurm_conf: str, lab2: Path, state_home: Path, tmp_path: Path) -> None:
    ticks = Ticks(tmp_path, slurm_conf)
    # lab2's 4 nodes of 2 CPUs run 8 tasks of 1 CPU at once: 10 tasks leave 2 pending
    subprocess.run([sys.executable, "-m", "campaignctl", "submit", str(write_spec(tmp_path, """\
name: hung
command: [python3, -c, "import time; time.sleep(30)"]
matrix: {i: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
resources: {cpus_per_task: 1, mem: 100M, time: "00:05:00"}
clusters: [lab2]
telemetry: {interval: 0}
"""))], check=True, capture_output=True, timeout=300, cwd=REPO)
    wait_for("the tasks to run on lab2", lambda: (ticks("hung"), "RUNNING" in latest_states("hung").values())[1], 120)
    pid = slurmctld_pid(lab2.parent.parent / "run" / "slurmctld.pid")
    os.kill(pid, signal.SIGSTOP)
    try:
        ticks("hung")  # its squeue waits out MessageTimeout (10 s) for lab2
        seen = set(latest_states("hung").values())
    finally:
        os.kill(pid, signal.SIGCONT)
    assert seen == {"UNKNOWN"}, seen  # running and pending alike: neither failed nor lost
    wait_for("the tasks to end as they ran", lambda: (ticks("hung"), set(latest_states("hung").values()) == {
        "COMPLETED"})[1], 240)
    store, cid = store_of("hung")
    assert [e.action for e in store.log.entries(cid)] == ["start"]  # nothing resubmitted, nothing given up
    assert len(store.history(cid)) == 10  # one attempt per task
