"""Teams on one database (issue 15), with real Unix users on the real cluster: alice owns a
campaign shared with group cctl-team, bob (in the group) runs `reconcile --all` from his own
cron at the same moments as alice; carol (not in it) may read the campaign, never change it.
The campaign is packed two tasks to a job (`pack: {per_job: 2}`): a teammate's tick reads the
packed steps of alice's jobs and retries their failed tasks alone, as his own jobs (issue 40).

The users are real (useradd; the test runs as root, as CI does) and each command runs as that
user through `runuser` with the environment a cron line gives (`env -i`, our crontab words), so
Slurm sees three submitters and the files in the run directory three owners. Each user runs a
Python it can reach: root's virtualenv may sit under a private /root (pyenv here, the CI clone
there), so a world-readable virtualenv is built once under /var/tmp from the system python3
(same minor version) and the test's own site-packages, and this working tree's package is
copied into it on every run. The jobs run that interpreter too: the batch script starts
`sys.executable -m campaignctl.adapters.job_main`. Both labs may run this test at once (scripts/test runs
the 22.05 and 24.11 suites side by side): the users are made under a lock, the site-packages are
copied once under it, and each lab gets its own virtualenv of hard links to them."""

from __future__ import annotations

import fcntl
import grp
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from tests.conftest import REPO
from tests.cron_path import CRON_PATH

pytestmark = pytest.mark.slurm
HERE = Path(__file__).parent
ROOT = Path("/var/tmp/campaignctl-multiuser")
GROUP = "cctl-team"
ALICE, BOB, CAROL = "cctl-alice", "cctl-bob", "cctl-carol"
TASKS = 4
ROUNDS = 30


@pytest.fixture(scope="module")
def unix_users() -> None:
    """alice and bob in cctl-team, carol not (idempotent: kept between runs)."""
    if os.geteuid() != 0:
        message = "the multi-user test creates Unix users: run it as root (CI does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with _locked("users"):  # useradd, groupadd and usermod fail on a /etc/passwd another one has locked
        _run(["groupadd", "-f", GROUP])
        for user in (ALICE, BOB, CAROL):
            try:
                pwd.getpwnam(user)
            except KeyError:
                _run(["useradd", "-M", "-d", "/nonexistent", "-s", "/usr/sbin/nologin", user])
        for user in (ALICE, BOB):
            _run(["usermod", "-aG", GROUP, user])
    # the lab enforces associations (AccountingStorageEnforce), as sites do: no submitting without one
    # (`sacctmgr add` exits 1 with "Nothing new added" when they exist: the listing says if they do)
    subprocess.run(["sacctmgr", "-i", "add", "user", ",".join((ALICE, BOB, CAROL)), "Account=lab"],
                   capture_output=True, check=False, timeout=120)
    listed = subprocess.run(["sacctmgr", "-n", "-P", "show", "assoc", "where", f"user={ALICE},{BOB},{CAROL}",
                             "format=User"], capture_output=True, text=True, check=True, timeout=120).stdout
    assert set(listed.split()) == {ALICE, BOB, CAROL}
    assert set(grp.getgrnam(GROUP).gr_mem) >= {ALICE, BOB} and CAROL not in grp.getgrnam(GROUP).gr_mem


@pytest.fixture(scope="module")
def user_python(unix_users: None) -> Path:
    """A virtualenv every user can run: the system python3 of this minor version, this test's
    site-packages (rebuilt when the installed distributions change) and this tree's package."""
    base = _system_python()
    purelib = Path(sysconfig.get_paths()["purelib"])
    installed = sorted(p.name for p in purelib.iterdir() if p.name.endswith(".dist-info"))
    stamp = hashlib.sha256("\n".join([str(base), *installed]).encode()).hexdigest()[:16]
    deps = ROOT / f"site-packages-{stamp}"
    with _locked("site-packages"):
        # A copy is trusted by the token written last into it, never by its name: a process killed
        # while deleting one left a directory of that name with most of its packages gone, and CI
        # then read "No module named 'annotated_doc'". Two checkouts on one machine (a CI clone and
        # a working tree: different distributions, different stamps) keep each other's copy a day.
        if not (deps / ".complete").exists():
            for old in ROOT.glob("site-packages-*"):
                if not (old / ".complete").exists() or time.time() - (old / ".complete").stat().st_mtime > 86400:
                    _discard(old)
            building = deps.with_name(f"{deps.name}.new-{os.getpid()}")
            shutil.copytree(purelib, building, ignore=shutil.ignore_patterns("__editable__*", "campaignctl"))
            _run(["chmod", "-R", "a+rX", str(building)])
            (building / ".complete").write_text(uuid.uuid4().hex)
            building.rename(deps)
        token = (deps / ".complete").read_text()
    # one per cluster of each lab (scripts/test runs two labs at once, each in two workers, one on
    # lab, one on lab2, whose slurm.conf is under lab's directory): the last two parts of the path
    venv = ROOT / ("venv-" + "-".join(Path(os.environ["SLURM_CONF"]).resolve().parent.parent.parts[-2:]))
    target = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    if not (venv / f".deps-{token}").exists():
        _discard(venv)
        _run([str(base), "-m", "venv", "--without-pip", str(venv)])
        shutil.copytree(deps, target, dirs_exist_ok=True, symlinks=True, copy_function=os.link)
        (venv / f".deps-{token}").touch()
    shutil.rmtree(target / "campaignctl", ignore_errors=True)
    shutil.copytree(REPO / "campaignctl", target / "campaignctl", ignore=shutil.ignore_patterns("__pycache__"))
    _run(["chmod", "-R", "a+rX", str(venv)])
    python = venv / "bin" / "python"
    imported = _as(BOB, python, ["-c", "import campaignctl.cli, submitit, psycopg"], {}, Path("/"))
    assert imported.returncode == 0, imported.stderr
    return python


def _discard(path: Path) -> None:
    """Renamed away first, then deleted: a name that exists always names a whole directory."""
    if path.exists():
        doomed = path.with_name(f".discard-{path.name}-{uuid.uuid4().hex[:8]}")
        path.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
    for stale in ROOT.glob(".discard-*"):  # what an interrupted deletion left
        shutil.rmtree(stale, ignore_errors=True)


@contextmanager
def _locked(what: str) -> Iterator[None]:
    """Held by one test process at a time on this machine."""
    ROOT.mkdir(mode=0o755, exist_ok=True)
    with open(ROOT / f".{what}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _system_python() -> Path:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        found = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                               capture_output=True, text=True, check=False) if Path(candidate).exists() else None
        if found is not None and found.stdout.strip() == str(sys.version_info[:2]):
            return Path(candidate)
    pytest.fail(f"no system python3 {sys.version_info[:2]} that other users can run (/usr/bin, /usr/local/bin)")


def _run(argv: list[str]) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120)


def _as(user: str, python: Path, args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`args` run by `user` with only `env`: what a crontab line of that user runs."""
    return subprocess.run(["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                           str(python), *args], capture_output=True, text=True, timeout=300, cwd=cwd)


class Team:
    """Three users on one database, each with a private state directory and a cron-like env."""

    def __init__(self, python: Path, base: Path, db_url: str, slurm_conf: str) -> None:
        self.python, self.base = python, base
        self.project = base / "alice"  # alice's project directory, which her group may use
        self.project.mkdir()
        shutil.chown(self.project, ALICE, GROUP)
        os.chmod(self.project, 0o2770)
        shutil.copy(HERE / "chaos_task.py", self.project / "chaos.py")
        self.name = f"owner-team-{base.name}"
        self.envs = {}
        for user in (ALICE, BOB, CAROL):
            state = base / f"state-{user}"
            state.mkdir(mode=0o700)
            shutil.chown(state, user, user)
            self.envs[user] = {"HOME": "/nonexistent", "LOGNAME": user, "SHELL": "/bin/sh", "PATH": CRON_PATH,
                               "SLURM_CONF": slurm_conf, "XDG_STATE_HOME": str(state),
                               "CAMPAIGNCTL_DB_URL": db_url, "COLUMNS": "200"}

    def cctl(self, user: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return _as(user, self.python, ["-m", "campaignctl", *args], self.envs[user], cwd or self.project)

    def started(self, user: str, *args: str) -> subprocess.Popen[str]:
        env = self.envs[user]
        return subprocess.Popen(["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                                 str(self.python), "-m", "campaignctl", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.project)


@pytest.fixture
def team(user_python: Path, pg_url: str, slurm_conf: str) -> Iterator[Team]:
    base = ROOT / uuid.uuid4().hex[:8]
    base.mkdir(mode=0o755)
    yield Team(user_python, base, pg_url, slurm_conf)
    for user in (ALICE, BOB, CAROL):  # whatever a failed run left queued: only these test users' jobs
        subprocess.run(["scancel", "-u", user], capture_output=True, check=False)
    shutil.rmtree(base, ignore_errors=True)


def spec_for(team: Team, directory: Path, owner: str, share: bool = True) -> Path:
    tasks = "\n".join("  - {mode: flaky, mb: 0}" for _ in range(TASKS))
    spec = directory / "spec.yaml"
    spec.write_text(f"""\
name: {team.name}
command: [{team.python}, chaos.py, "{{mode}}", "{{mb}}"]
tasks:
{tasks}
resources: {{mem: 200M, time: "00:05:00"}}
telemetry: {{interval: 0}}
policy: {{use: default, rules: {{failed: {{backoff: 0}}}}}}
""" + (f"share: {{group: {GROUP}}}\npack: {{per_job: 2}}\n" if share else ""))
    shutil.chown(spec, owner, GROUP)
    os.chmod(spec, 0o640)
    return spec


def attempts_per_task(name: str) -> Counter[int]:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    return Counter(a.task_index for a in store.attempts(record.id))


def retry_submitters(name: str) -> set[str]:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    return {s.submitted_by for s in store.submissions(record.id) if s.kind == "retry"}


def campaign_state(name: str) -> str:
    record = Store.open().campaign(name)
    assert record is not None
    return record.state


def drive(team: Team, actors: tuple[str, ...]) -> list[tuple[str, int, str]]:
    """Every actor's `reconcile --all` started at the same moment, round after round, until the
    campaign finishes (at most ROUNDS rounds), and carol's too, which must leave it alone.
    Returns (user, exit code, stderr) of every tick."""
    ticks, left_alone = [], 0
    for _ in range(ROUNDS):
        running = [(user, team.started(user, "reconcile", "--all", "--json")) for user in (*actors, CAROL)]
        for user, proc in running:
            out, err = proc.communicate(timeout=300)
            ticks.append((user, proc.returncode, err))
            if user == CAROL and proc.returncode == 0:
                data = json.loads(out)["data"]
                assert team.name not in [c["name"] for c in data["campaigns"]], data
                left_alone += data["left_out"]
        if campaign_state(team.name) == "finished":
            break
        time.sleep(4)
    assert left_alone >= 1  # carol's ticks saw the active campaign and said they left it alone
    return ticks


def carol_can_read_but_not_change(team: Team) -> None:
    store = Store.open()
    record = store.campaign(team.name)
    assert record is not None
    before = (len(store.revisions(record.id)), len(DecisionLog(store.engine).entries(record.id)),
              attempts_per_task(team.name), record.state)
    for args in (["status", team.name], ["log", "show", team.name], ["revisions", team.name]):
        shown = team.cctl(CAROL, *args)
        assert shown.returncode == 0, (args, shown.stdout, shown.stderr)
    assert team.name in team.cctl(CAROL, "status", team.name).stdout
    carols = team.base / "carol"
    carols.mkdir()
    shutil.chown(carols, CAROL, CAROL)
    own_spec = spec_for(team, carols, CAROL, share=False)
    shutil.chown(own_spec, CAROL, CAROL)
    shutil.copy(HERE / "chaos_task.py", carols / "chaos.py")
    for args in (["policy", "set", team.name, "conservative"], ["rollback", team.name, "--to", "1"],
                 ["resume", team.name], ["submit", str(own_spec)], ["reconcile", team.name]):
        refused = team.cctl(CAROL, *args, cwd=carols)
        assert refused.returncode == 77, (args, refused.stdout, refused.stderr)
        assert f"it belongs to {ALICE}" in refused.stderr and "share: {group: GROUP}" in refused.stderr
    sharing = carols / "sharing.yaml"
    sharing.write_text(own_spec.read_text().replace(team.name, f"{team.name}-carol") + f"share: {{group: {GROUP}}}\n")
    shutil.chown(sharing, CAROL, CAROL)
    refused = team.cctl(CAROL, "submit", str(sharing), cwd=carols)  # a group she is not in
    assert refused.returncode == 3 and f"cctl-carol is not in Unix group {GROUP!r}" in refused.stderr, refused.stderr
    tick = team.cctl(CAROL, "reconcile", "--all", "--json")
    assert tick.returncode == 0, tick.stderr
    assert team.name not in [c["name"] for c in json.loads(tick.stdout)["data"]["campaigns"]]
    record = store.campaign(team.name)
    assert record is not None
    after = (len(store.revisions(record.id)), len(DecisionLog(store.engine).entries(record.id)),
             attempts_per_task(team.name), record.state)
    assert after == before


def run_scenario(team: Team, actors: tuple[str, ...]) -> None:
    submitted = team.cctl(ALICE, "submit", str(spec_for(team, team.project, ALICE)))
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    ticks = drive(team, actors)
    failed = [(user, code, err[:600]) for user, code, err in ticks if code not in (0, 75)]
    assert failed == [], failed  # 75: the database or Slurm was busy, try again: never a crash (1)
    assert campaign_state(team.name) == "finished", ticks[-2:]
    assert attempts_per_task(team.name) == {t: 2 for t in range(TASKS)}  # each task retried exactly once
    store = Store.open()
    record = store.campaign(team.name)
    assert record is not None
    first = [s for s in store.submissions(record.id) if s.kind == "initial"]
    assert first and all(s.pack for s in first) and sum(s.size for s in first) == TASKS  # packed, 2 a job
    assert retry_submitters(team.name) <= set(actors)  # each acting user's retries are its own jobs
    if len(actors) == 1:
        assert retry_submitters(team.name) == set(actors)
    for user in (ALICE, BOB, CAROL):
        verified = team.cctl(user, "log", "verify")
        assert verified.returncode == 0, (user, verified.stdout, verified.stderr)
    run_dir = team.project / "runs" / team.name
    for part in ("slurm", "tasks"):
        st = (run_dir / part).stat()
        assert (oct(st.st_mode & 0o7777), grp.getgrgid(st.st_gid).gr_name) == ("0o2770", GROUP)
    [env_file] = (run_dir / ".campaignctl-private").glob("env.*")
    assert oct(env_file.stat().st_mode & 0o777) == "0o640"  # the group's members' retries read it, others never
    carol_can_read_but_not_change(team)


def test_two_users_reconciling_a_shared_campaign_at_the_same_moments(team: Team) -> None:
    """The issue's standard: alice and bob tick together for up to 30 rounds over tasks that each
    fail once with a retryable code: exactly one retry per task, no tick exits 1, the log verifies."""
    run_scenario(team, (ALICE, BOB))


@pytest.mark.parametrize("actor", [ALICE, BOB])
def test_one_user_reconciling_a_shared_campaign(team: Team, actor: str) -> None:
    """The same campaign with only alice, or only bob, ticking: what ownership and sharing must
    give without the race (ticks racing each other need the per-campaign lease). With bob, every
    retry is his job: it reads alice's staged environment and writes into her run directory."""
    run_scenario(team, (actor,))


def test_a_teammate_retries_a_given_up_task_and_cancels_the_shared_campaign(team: Team) -> None:
    """Issue 40: `retry` and `cancel` by another Unix user, in a shared (and packed) campaign.
    Alice's job runs task 0 (a bug, given up) beside task 1 (running for 2 minutes). Bob retries
    task 0: the retry is his own job. Bob cancels the campaign: his job is stopped; Alice's is not
    (Slurm lets only its owner cancel it), and the command says whose it is. Alice's own cancel then
    stops it (it used to exit 5: "nothing to cancel"), and the campaign ends cancelled."""
    spec = team.project / "mixed.yaml"
    name = f"{team.name}-mixed"
    spec.write_text(spec_for(team, team.project, ALICE).read_text().replace(team.name, name)
                    .replace("tasks:\n" + "\n".join("  - {mode: flaky, mb: 0}" for _ in range(TASKS)),
                             "tasks:\n  - {mode: bug, mb: 0}\n  - {mode: late_flaky, mb: 120}"))
    shutil.chown(spec, ALICE, GROUP)
    assert team.cctl(ALICE, "submit", str(spec)).returncode == 0

    def tasks() -> dict[int, dict[str, Any]]:
        shown = team.cctl(ALICE, "status", name, "--json")
        return {t["index"]: t for t in json.loads(shown.stdout)["data"]["tasks"]}

    def given_up_beside_a_running_one() -> bool:
        team.cctl(ALICE, "reconcile", name)
        now = tasks()
        return "give_up" in now[0]["last_decision"] and now[1]["state"] == "RUNNING"
    deadline = time.monotonic() + 90
    while not given_up_beside_a_running_one():
        assert time.monotonic() < deadline, tasks()
        time.sleep(2)

    retried = team.cctl(BOB, "retry", name, "--task", "0", "--reason", "bob fixed the data path")
    assert retried.returncode == 0, retried.stderr
    assert "task 0: retry (applied), job " in retried.stdout, retried.stdout
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    [bobs] = [s for s in store.submissions(record.id) if s.submitted_by == BOB]
    owner = subprocess.run(["squeue", "-h", "-j", str(bobs.job_id), "-o", "%u"], capture_output=True, text=True,
                           check=False).stdout.split()
    assert owner in ([BOB], []), owner  # his job (or already gone: a bug exits at once)

    cancelled = team.cctl(BOB, "cancel", name, "--reason", "wrong dataset")
    assert cancelled.returncode == 0, cancelled.stderr
    alices_job = tasks()[1]["job_id"].partition("_")[0]
    assert (f"task 1: stop (failed): job {alices_job} is {ALICE}'s, and Slurm lets only its owner (or an operator) "
            "change it") in cancelled.stdout.replace("\n", " "), cancelled.stdout
    assert tasks()[1]["state"] == "RUNNING"  # left alone

    mine = team.cctl(ALICE, "cancel", name)
    assert mine.returncode == 0 and "task 1: stop (applied)" in mine.stdout, mine.stdout + mine.stderr
    again = team.cctl(ALICE, "cancel", name)
    assert again.returncode == 5, again.stdout + again.stderr  # every stop sent: nothing left to cancel
    deadline = time.monotonic() + 90
    while campaign_state(name) != "cancelled":
        assert time.monotonic() < deadline, tasks()
        team.cctl(BOB, "reconcile", name)
        time.sleep(2)


def test_a_teammates_ticks_run_a_shared_search_to_its_end(team: Team) -> None:
    """Issue 40: a search in a shared campaign, ticked by another Unix user: alice submits it (its
    first tick asks the first trials as her jobs); bob's ticks alone tell every trial once and ask
    the rest, as his own jobs, until it finishes."""
    name = f"{team.name}-search"
    shutil.copy(HERE / "toy_trainer.py", team.project / "toy_trainer.py")
    spec = team.project / "search.yaml"
    spec.write_text(f"""\
name: {name}
command: [{team.python}, toy_trainer.py, "{{lr}}", "{{width}}", --dropout, "{{dropout}}", --steps, "2", --gpu-mb, "100"]
resources: {{gpus: 1, mem: 200M, time: "00:05:00"}}
telemetry: {{interval: 0}}
share: {{group: {GROUP}}}
search:
  sampler: tpe
  metric: val_loss
  trials: 5
  parallel: 2
  seed: 1
  space:
    lr: {{loguniform: [1.0e-5, 1.0e-1]}}
    width: {{int: [16, 256]}}
    dropout: {{uniform: [0.0, 0.5]}}
""")
    shutil.chown(spec, ALICE, GROUP)
    submitted = team.cctl(ALICE, "submit", str(spec))
    assert submitted.returncode == 0 and "asked the first 2 trial(s)" in submitted.stdout, submitted.stdout
    deadline = time.monotonic() + 240
    while campaign_state(name) != "finished":
        assert time.monotonic() < deadline, team.cctl(ALICE, "status", name).stdout
        ticked = team.cctl(BOB, "reconcile", name)
        assert ticked.returncode in (0, 1, 75), ticked.stderr
        time.sleep(2)
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    entries = DecisionLog(store.engine).entries(record.id)
    assert sorted(e.task_index for e in entries if e.action == "ask") == [0, 1, 2, 3, 4]
    assert sorted(e.task_index for e in entries if e.action == "tell") == [0, 1, 2, 3, 4]
    by = {s.submitted_by for s in store.submissions(record.id)}
    assert by == {ALICE, BOB}, by  # the first trials hers (submit's tick), the rest his
    verified = team.cctl(BOB, "log", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
