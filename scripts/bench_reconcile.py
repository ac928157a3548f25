#!/usr/bin/env python3
"""Benchmark one `campaignctl reconcile` tick over a recorded-shape sacct text, side by side with
submitit's own sacct parser (`SlurmInfoWatcher.read_info`) on the same lines.

The campaign (--tasks, default 10,000) is built in a throw-away state directory the way `submit`
leaves it (chunks of ≤ MaxArraySize 1001, job ids recorded, released) and primed by one tick that
saw every element RUNNING. The timed tick then reads one `sacct --parsable2 --noheader` text
whose lines copy the shape of the real recordings in tests/fixtures/sacct (allocation line +
`.batch` + `.extern` + `.0` srun step per element): ~94 % COMPLETED, ~3 % FAILED 1:0 and ~1 %
`CANCELLED by <uid>` (both given up by the default policy: decisions written, no Slurm call),
~2 % still RUNNING. No OOM/TIMEOUT/NODE_FAIL, so the tick makes no sbatch: acting is not measured.
The timed tick runs a real `sacct` process: a stub on PATH that `cat`s the recorded text through a
pipe, so the streaming read is measured as it runs on a cluster; one Slurm call, nothing else.

Per run, alternating: (a) submitit `read_info(header + lines)`; (b) campaignctl parse only,
`observe_jobs(text)`; (c) the whole tick, `reconcile()` on a fresh copy of the
primed database (parse + diff + decide + persist observations and decisions). Medians of
--repeat runs. Then --big (default 100,000) tasks: one tick and one read_info, each in a child
process, with wall time and peak RSS (VmHWM of the child's own address space; its RSS after
imports and after reading the text are printed too; ru_maxrss is reported alongside, but Linux
carries the parent's peak into it across fork+exec), and the tick's phases at that size.
Setup is not measured. State lives under a temporary XDG_STATE_HOME, never the user's.
With --max-parallel N the spec has `array: {max_parallel: N}`: the priming tick sees the
campaign's first N elements RUNNING and the rest PENDING (squeue lists the waiting arrays, and
the tick throttles the arrays after the first, once), and the timed tick sees those N end (the
mix above) and the next N start: the tick of a throttled campaign, whose pending elements sacct
prints as one line per array.

Usage: .venv/bin/python scripts/bench_reconcile.py [--tasks 10000] [--big 100000] [--repeat 5]
       [--max-parallel 0] [--json] [--profile] [--tracemalloc]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from submitit.slurm.slurm import SlurmInfoWatcher

from campaignctl.adapters import identity, paths, proc
from campaignctl.adapters import slurm as slurm_mod
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.proc import ProcResult
from campaignctl.adapters.store import Store
from campaignctl.core.decisions.actions import SubmissionIntent
from campaignctl.core.slurm.plan import plan_chunks
from campaignctl.core.slurm.sacct import SACCT_FIELDS, observe_jobs
from campaignctl.services import reconcile as reconcile_mod
from campaignctl.services.submit import load_spec

ROOT = Path(__file__).resolve().parent.parent
MAX_ARRAY = 1001
FIRST_JOB_ID = 500_000
CAMPAIGN = "bench-reconcile"
UID = "1000"
TARGET_RATIO, TARGET_S, TARGET_MB = 2.0, 10.0, 300.0
# Share of elements per state in the timed tick (the rest stays RUNNING).
MIX = (("COMPLETED", 0.94), ("FAILED", 0.03), ("CANCELLED", 0.01))
TRES = "cpu=8,gres/gpu:a100=1,gres/gpu=1,mem=16G,node=1"  # shape of tests/fixtures/sacct/array_completed.txt


# ---------------------------------------------------------------------------------------------
# sacct text, line shapes as recorded in tests/fixtures/sacct (array_completed, cancelled, failed,
# oom_srun_step, preempted_requeued): JobID|JobIDRaw|JobName|Partition|State|ExitCode|
# DerivedExitCode|Elapsed|Timelimit|NodeList|AllocTRES|ReqMem|MaxRSS|Submit|Start|End|ConsumedEnergyRaw|Comment
# (DerivedExitCode, the highest step exit, only on the allocation line; campaign_task_sigterm.txt).
# The recordings have no `.extern` step (the lab cluster runs without PrologFlags=Contain); sites with it print one per
# element, modelled here on the `.batch` line with the allocation's TRES.


@dataclass(frozen=True, slots=True)
class Chunk:
    job_id: int
    token: str
    size: int


def _hms(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def element_lines(chunk: Chunk, index: int, state: str, elapsed_s: int, node: str, submit: datetime) -> str:
    """The four lines sacct prints for one array element launched by submitit's srun."""
    job = f"{chunk.job_id}_{index}"
    # JobIDRaw: the elements get fresh ids after the array's own, which goes to the last element.
    raw = chunk.job_id if index == chunk.size - 1 else chunk.job_id + 1 + index
    start = submit + timedelta(seconds=30 + index % 600)
    sub_s, start_s = submit.isoformat(timespec="seconds"), start.isoformat(timespec="seconds")
    el = _hms(elapsed_s)
    if state == "RUNNING":
        end, alloc, code, batch, step, rss_b, rss_0 = "Unknown", "RUNNING", "0:0", "RUNNING", "RUNNING", "", ""
        extern = "RUNNING"
    else:
        end = (start + timedelta(seconds=elapsed_s)).isoformat(timespec="seconds")
        rss_b, rss_0, extern = f"{4040 + index % 20}K", f"{23800 + index % 50}K", "COMPLETED"
        if state == "COMPLETED":
            alloc, code, batch, step = "COMPLETED", "0:0", "COMPLETED", "COMPLETED"
        elif state == "FAILED":  # the program raised: srun step and batch exit 1
            alloc, code, batch, step = "FAILED", "1:0", "FAILED", "FAILED"
        else:  # scancel by a user: the job line names the uid, steps got SIGTERM
            alloc, code, batch, step = f"CANCELLED by {UID}", "0:0", "CANCELLED", "CANCELLED"
    step_code = {"FAILED": "1:0", "CANCELLED": "0:15"}.get(batch, "0:0")
    comment = f"campaignctl campaign={CAMPAIGN} revision=1 token={chunk.token}"
    derived = "1:0" if step == "FAILED" else "0:0"
    return (
        f"{job}|{raw}|cc.{chunk.token}.{CAMPAIGN}|batch|{alloc}|{code}|{derived}|{el}|04:00:00|{node}"
        f"|billing=8,{TRES}|16G||{sub_s}|{start_s}|{end}|0|{comment}\n"
        f"{job}.batch|{raw}.batch|batch||{batch}|{step_code}||{el}||{node}|{TRES}||{rss_b}|{start_s}|{start_s}"
        f"|{end}|0|\n"
        f"{job}.extern|{raw}.extern|extern||{extern}|0:0||{el}||{node}|billing=8,{TRES}||{'0' if rss_b else ''}"
        f"|{start_s}|{start_s}|{end}|0|\n"
        f"{job}.0|{raw}.0|python3||{step}|{step_code}||{el}||{node}|{TRES}||{rss_0}|{start_s}|{start_s}|{end}|0|\n"
    )


def pending_line(chunk: Chunk, first: int, throttle: int | None, submit: datetime) -> str:
    """The one line sacct prints for an array's elements that have not started (from `first` on,
    JobIDRaw the array's own id; shape of tests/fixtures/sacct: `54_[0-9%2]|54|…|PENDING|…`)."""
    cap = f"%{throttle}" if throttle else ""
    return (f"{chunk.job_id}_[{first}-{chunk.size - 1}{cap}]|{chunk.job_id}|cc.{chunk.token}.{CAMPAIGN}|batch|PENDING"
            f"|0:0||00:00:00|04:00:00|None assigned||16G||{submit.isoformat(timespec='seconds')}|Unknown|Unknown|0"
            f"|campaignctl campaign={CAMPAIGN} revision=1 token={chunk.token}\n")


def sacct_text(chunks: Sequence[Chunk], states: Sequence[str], elapsed_shift_s: int, submit: datetime,
               throttle: int | None = None) -> str:
    """Each element's lines; a chunk's PENDING elements (its last ones) as one array line."""
    parts, k = [], 0
    for chunk in chunks:
        for i in range(chunk.size):
            if states[k] == "PENDING":
                parts.append(pending_line(chunk, i, throttle, submit))
                k += chunk.size - i
                break
            node = f"gpu{k % 64 + 1:03d}"
            parts.append(element_lines(chunk, i, states[k], 600 + k % 3000 + elapsed_shift_s, node, submit))
            k += 1
    return "".join(parts)


def tick_states(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        r, state = rng.random(), "RUNNING"
        for name, share in MIX:
            if r < share:
                state = name
                break
            r -= share
        out.append(state)
    return out


def throttled(states: Sequence[str], throttle: int | None, started: int) -> list[str]:
    """`states` under the campaign's throttle: the first (`started` - 1) × throttle elements take
    theirs (they ran by this tick: the earlier ones ended), the next throttle are RUNNING (they
    took the freed slots) and the rest are PENDING. No throttle: as given."""
    if not throttle:
        return list(states)
    return [states[k] if k < (started - 1) * throttle else "RUNNING" if k < started * throttle else "PENDING"
            for k in range(len(states))]


# ---------------------------------------------------------------------------------------------
# fake Slurm and the primed campaign


def queue_file(sacct_file: Path) -> Path:
    """Beside the sacct text: what `squeue --me -r` prints for the arrays that still wait."""
    return sacct_file.with_name(sacct_file.name.replace("sacct-", "squeue-", 1))


def queue_text(chunks: Sequence[Chunk], states: Sequence[str]) -> str:
    """One squeue line (QUEUE_FORMAT `%F|%T|%j|%i|%r|%S`) per array with waiting elements: the
    throttle section acts only on arrays squeue shows as this user's."""
    lines, k = [], 0
    for chunk in chunks:
        waiting = [i for i in range(chunk.size) if states[k + i] == "PENDING"]
        if waiting:
            lines.append(f"{chunk.job_id}|PENDING|cc.{chunk.token}.{CAMPAIGN}|{chunk.job_id}_[{waiting[0]}-"
                         f"{waiting[-1]}]|JobArrayTaskLimit|N/A\n")
        k += chunk.size
    return "".join(lines)


class RecordedSlurm:
    """`proc.EXECUTOR`: sacct answers the recorded text, squeue the queue's; MaxArraySize 1001."""

    def __init__(self, sacct: str, queue: str = "") -> None:
        self.sacct = sacct
        self.queue = queue
        self.calls: Counter[str] = Counter()

    def __call__(self, argv: Sequence[str], timeout: float, env: Mapping[str, str]) -> ProcResult:
        name = argv[0]
        if list(argv[1:]) == ["--version"]:  # the client's own version (version-aware parsing): no RPC
            return ProcResult(tuple(argv), 0, "slurm 22.05.8\n", "")
        self.calls[name] += 1
        if name == "sacct":
            return ProcResult(tuple(argv), 0, self.sacct, "")
        if name == "squeue":
            return ProcResult(tuple(argv), 0, self.queue, "")
        if name == "scontrol" and list(argv[1:3]) == ["show", "config"]:
            return ProcResult(tuple(argv), 0, f"MaxArraySize            = {MAX_ARRAY}\n", "")
        if name == "scontrol" and argv[1] == "update":  # an array's throttle (the priming tick's only action)
            return ProcResult(tuple(argv), 0, "", "")
        raise RuntimeError(f"bench: unexpected Slurm call {list(argv)} (acting is not benchmarked)")


class StubSlurm:
    """Real executables on PATH for the timed tick: `sacct` streams the recorded file through a
    pipe (`cat`), as the real command would, so campaignctl's streaming read is what is measured;
    `squeue` prints nothing. Counts come from proc.call_count()."""

    def __init__(self, directory: Path, sacct_file: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        version = "if [ \"$1\" = --version ]; then echo 'slurm 22.05.8'; exit 0; fi\n"
        queue = queue_file(sacct_file)
        for name, body in (("sacct", f"{version}exec cat '{sacct_file}'"),
                           ("squeue", f"cat '{queue}' 2>/dev/null; exit 0"),
                           ("scontrol", f"echo 'MaxArraySize            = {MAX_ARRAY}'")):
            path = directory / name
            path.write_text(f"#!/bin/sh\n{body}\n")
            path.chmod(0o755)
        self.directory = directory
        self.saved_path = os.environ.get("PATH", "")

    def __enter__(self) -> StubSlurm:
        os.environ["PATH"] = f"{self.directory}:{self.saved_path}"
        proc.EXECUTOR = proc.subprocess_executor
        self.calls_at_start = proc.call_count()
        return self

    def __exit__(self, *exc: object) -> None:
        os.environ["PATH"] = self.saved_path

    @property
    def calls(self) -> int:
        return proc.call_count() - self.calls_at_start


class SqliteStores:
    """Where a run's store lives: the default SQLite file under XDG_STATE_HOME=directory. A
    database for PostgreSQL instead: scripts/bench_store.py's PostgresStores, same methods."""

    name = "SQLite"

    def use(self, directory: Path) -> None:
        """Make the store at `directory` the one campaignctl opens (created on first use)."""
        use_state(directory)

    def seal(self, directory: Path) -> None:
        """Make the store at `directory` a consistent template to copy."""
        checkpoint(directory)

    def copy(self, template: Path, directory: Path) -> None:
        shutil.rmtree(directory, ignore_errors=True)
        shutil.copytree(template, directory)
        use_state(directory)

    def remove(self, directory: Path) -> None:
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class Prepared:
    n: int
    template: Path  # XDG_STATE_HOME holding the primed database (its name, for another store)
    text: str  # the timed tick's sacct output
    sacct_file: Path  # the same, on disk, for the stub sacct
    states: Counter[str]
    prime_s: float
    stores: Any = field(default_factory=SqliteStores)


def use_state(directory: Path) -> None:
    os.environ.pop("CAMPAIGNCTL_DB_URL", None)
    os.environ["XDG_STATE_HOME"] = str(directory)


def prepare(root: Path, n: int, seed: int, stores: Any = None, max_parallel: int = 0) -> Prepared:
    """Campaign of n tasks as `submit` leaves it, then one tick that saw every element RUNNING;
    with `max_parallel`, each array's first max_parallel elements RUNNING and the rest PENDING, and
    the timed tick sees those end (the mix) and the next max_parallel start."""
    stores = stores or SqliteStores()
    template = root / f"template-{n}"
    stores.use(template)
    spec_path = root / f"bench-{n}.yaml"
    values = ", ".join(str(i) for i in range(n))
    spec_path.write_text(f"name: {CAMPAIGN}\ncommand: [python3, -c, pass, \"{{i}}\"]\nmatrix: {{i: [{values}]}}\n"
                         "resources: {gpus: 1, gpu_type: a100, cpus_per_task: 8, mem: 16G, time: \"04:00:00\"}\n"
                         + (f"array: {{max_parallel: {max_parallel}}}\n" if max_parallel else ""))
    spec, text = load_spec(spec_path)
    store = Store.open()
    campaign_id = store.create_campaign(spec, text, str(spec_path), identity.user_name()).id  # its owner may tick it
    rng = random.Random(seed)
    chunks, job_id = [], FIRST_JOB_ID
    for plan in plan_chunks([t.index for t in spec.tasks], MAX_ARRAY, spec.max_parallel):
        token = f"{rng.getrandbits(48):012x}"
        store.record_intent(campaign_id, SubmissionIntent(token, 1, plan, str(Path(spec.run_dir) / "slurm"),
                                                          spec.resources, spec.policy.slurm_requeue, "initial"))
        store.set_submission_state(token, "released", str(job_id))
        chunks.append(Chunk(job_id, token, plan.size))
        job_id += plan.size  # the elements' JobIDRaw take the ids after the array's own
    store.engine.dispose()
    submit = datetime.now().replace(microsecond=0) - timedelta(hours=4)
    cap = max_parallel or None
    first = throttled(["RUNNING"] * n, cap, 1)
    fake = RecordedSlurm(sacct_text(chunks, first, 0, submit, cap), queue_text(chunks, first))
    proc.EXECUTOR = fake
    started = time.perf_counter()
    primed = reconcile_mod.reconcile(CAMPAIGN)
    prime_s = time.perf_counter() - started
    tick = primed.campaigns[0]
    # with a throttle, the tick holds the arrays after the first to the campaign's max_parallel
    # (`scontrol update … ArrayTaskThrottle`, once) and asks squeue what waits
    throttles = [d for d in tick.decisions if (d.rule, d.action, d.status) == ("max_parallel", "throttle", "applied")]
    if (tick.observed, tick.changed, len(tick.decisions)) != (n, n, len(throttles)) or (not cap and throttles) or \
            fake.calls - Counter(squeue=1, scontrol=len(throttles)) != Counter(sacct=1):
        raise RuntimeError(f"priming tick went wrong: {tick} {dict(fake.calls)}")
    states = throttled(tick_states(n, seed), cap, 2)
    del primed, fake
    proc.EXECUTOR = proc.subprocess_executor
    stores.seal(template)
    text = sacct_text(chunks, states, 90, submit, cap)
    sacct_file = root / f"sacct-{n}.txt"
    sacct_file.write_text(text)
    queue_file(sacct_file).write_text(queue_text(chunks, states))
    return Prepared(n, template, text, sacct_file, Counter(states), prime_s, stores)


def checkpoint(state_home: Path) -> None:
    """Fold the WAL into the database file so that a directory copy is a consistent snapshot."""
    gc.collect()  # engines of finished ticks close their pooled connections
    db = state_home / "campaignctl" / "campaignctl.db"
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def fresh_copy(prepared: Prepared, directory: Path) -> None:
    prepared.stores.copy(prepared.template, directory)


# ---------------------------------------------------------------------------------------------
# the three measurements


def time_read_info(text_with_header: str) -> tuple[float, int]:
    watcher = SlurmInfoWatcher()
    gc.collect()
    started = time.perf_counter()
    info = watcher.read_info(text_with_header)
    return time.perf_counter() - started, len(info)


def time_parse(text: str) -> tuple[float, int]:
    gc.collect()
    started = time.perf_counter()
    observed = observe_jobs(text)
    return time.perf_counter() - started, len(observed)


@dataclass
class TickRun:
    seconds: float
    observed: int
    changed: int
    decisions: Counter[str]
    calls: int


def time_tick(prepared: Prepared, run_dir: Path, hook: Callable[[Callable[[], Any]], Any] | None = None,
              steady: bool = False) -> TickRun:
    """The tick that sees the recorded text first (every attempt changed since the last tick), or,
    with `steady`, the next tick over the same text (nothing changed: the usual cron tick)."""
    fresh_copy(prepared, run_dir)
    gc.collect()
    with StubSlurm(run_dir.parent / "stub-bin", prepared.sacct_file) as stub:
        if steady:
            reconcile_mod.reconcile(CAMPAIGN)
            gc.collect()
            stub.calls_at_start = proc.call_count()
        started = time.perf_counter()
        result = hook(lambda: reconcile_mod.reconcile(CAMPAIGN)) if hook else reconcile_mod.reconcile(CAMPAIGN)
        seconds = time.perf_counter() - started
        calls = stub.calls
    tick = result.campaigns[0]
    del result
    gc.collect()
    prepared.stores.remove(run_dir)
    return TickRun(seconds, tick.observed, tick.changed,
                   Counter(f"{d.rule}:{d.action}:{d.status}" for d in tick.decisions), calls)


class Phases:
    """Wall time per step of the tick, by wrapping the functions `reconcile` calls (a separate,
    untimed-for-the-headline run: the wrappers cost a little)."""

    PATCHES: tuple[tuple[str, Any, str], ...] = (
        ("open store + migrations", Store, "open"),
        ("load history", Store, "history"),
        ("load decided tokens", DecisionLog, "decided_tokens"),
        ("load unresolved tokens", DecisionLog, "unresolved_tokens"),
        ("sacct streamed into observe_jobs", slurm_mod, "observe"),
        ("diff_observations", reconcile_mod, "diff_observations"),
        ("persist observations", Store, "record_observations"),
        ("task_views", reconcile_mod, "task_views"),
        ("telemetry ingest (no files here: one stat each)", reconcile_mod, "ingest"),
        ("decide", reconcile_mod, "decide"),
        ("persist decisions", DecisionLog, "write_intents"),
    )

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()

    def __call__(self, run: Callable[[], Any]) -> Any:
        saved = []
        for label, owner, attr in self.PATCHES:
            original = vars(owner).get(attr)
            if original is None:  # not (or no longer) part of the tick
                continue
            saved.append((owner, attr, original))
            setattr(owner, attr, self._wrap(label, original))
        try:
            return run()
        finally:
            for owner, attr, original in reversed(saved):
                setattr(owner, attr, original)

    def finish(self, total: float) -> dict[str, float]:
        out = dict(self.seconds)
        out["other (lock, tick rows, repair check, …)"] = total - sum(self.seconds.values())
        out["total (instrumented)"] = total
        return out

    def _wrap(self, label: str, original: Any) -> Any:
        func = original.__func__ if isinstance(original, classmethod) else original

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - started

        return classmethod(timed) if isinstance(original, classmethod) else timed


def profile_tick(prepared: Prepared, run_dir: Path, top: int = 10) -> dict[str, list[dict[str, Any]]]:
    profiler = cProfile.Profile()

    def hook(run: Callable[[], Any]) -> Any:
        return profiler.runcall(run)

    time_tick(prepared, run_dir, hook)
    stats = pstats.Stats(profiler)
    rows = [{"function": f"{Path(file).relative_to(ROOT) if file.startswith(str(ROOT)) else file}:{line}({name})",
             "calls": nc, "tottime_s": round(tt, 4), "cumtime_s": round(ct, 4)}
            for (file, line, name), (_cc, nc, tt, ct, _callers) in stats.stats.items()]  # type: ignore[attr-defined]
    own = [r for r in rows if r["function"].startswith("campaignctl/")]
    return {"campaignctl_cumulative": sorted(own, key=lambda r: -r["cumtime_s"])[:top],
            "all_tottime": sorted(rows, key=lambda r: -r["tottime_s"])[:top]}


# ---------------------------------------------------------------------------------------------
# the big run, in child processes (peak RSS of a process that did only that)


def proc_status_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (peak) of this process's own address space, from /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024  # kB
    return float("nan")


def ru_maxrss_mb() -> float:
    """getrusage's peak: on Linux it keeps the peak of the address space replaced by execve, so a
    child started from a big parent starts at the parent's size. Reported, but VmHWM is the figure."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child(args: argparse.Namespace) -> None:
    out: dict[str, Any] = {"baseline_rss_mb": proc_status_mb("VmRSS")}
    if args.tracemalloc:
        import tracemalloc
        tracemalloc.start()
    if args.child == "read_info":
        text = Path(args.sacct).read_text()  # read_info needs the whole text in memory
        out["after_text_rss_mb"] = proc_status_mb("VmRSS")
        header = "|".join(SACCT_FIELDS) + "\n"
        started = time.perf_counter()
        info = SlurmInfoWatcher().read_info(header + text)
        out.update(wall_s=time.perf_counter() - started, elements=len(info))
    else:
        use_state(Path(args.state))
        out["after_text_rss_mb"] = proc_status_mb("VmRSS")  # the tick streams: no text read here
        phases = Phases() if args.phases else None
        with StubSlurm(Path(args.state).parent / "stub-bin", Path(args.sacct)) as stub:
            started = time.perf_counter()
            result = (phases(lambda: reconcile_mod.reconcile(CAMPAIGN)) if phases
                      else reconcile_mod.reconcile(CAMPAIGN))
            out.update(wall_s=time.perf_counter() - started, elements=result.campaigns[0].observed,
                       changed=result.campaigns[0].changed, decisions=len(result.campaigns[0].decisions),
                       calls=stub.calls)
        if phases:
            out["phases_s"] = phases.finish(out["wall_s"])
    out["peak_rss_mb"] = proc_status_mb("VmHWM")
    out["ru_maxrss_mb"] = ru_maxrss_mb()
    if args.tracemalloc:
        out["tracemalloc_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    print(json.dumps(out))


def run_child(kind: str, sacct_file: Path, state: Path | None, *flags: str) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--sacct", str(sacct_file), *flags]
    if state is not None:
        argv += ["--state", str(state)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child {kind} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def big_run(root: Path, n: int, seed: int, trace: bool, max_parallel: int = 0) -> dict[str, Any]:
    prepared = prepare(root, n, seed, max_parallel=max_parallel)
    sacct_file = prepared.sacct_file
    out: dict[str, Any] = {"tasks": n, "sacct_lines": prepared.text.count("\n"),
                           "sacct_mb": len(prepared.text) / 2**20, "prime_s": prepared.prime_s}
    out["read_info"] = run_child("read_info", sacct_file, None)
    fresh_copy(prepared, root / "big-run")
    out["tick"] = run_child("tick", sacct_file, root / "big-run")
    fresh_copy(prepared, root / "big-run")
    out["tick_phases"] = run_child("tick", sacct_file, root / "big-run", "--phases")
    if trace:
        fresh_copy(prepared, root / "big-run")
        out["tick_tracemalloc"] = run_child("tick", sacct_file, root / "big-run", "--tracemalloc")
        out["read_info_tracemalloc"] = run_child("read_info", sacct_file, None, "--tracemalloc")
    shutil.rmtree(root / "big-run", ignore_errors=True)
    shutil.rmtree(prepared.template, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--big", type=int, default=100_000, help="0 skips the big run")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-parallel", type=int, default=0,
                        help="the spec's array throttle (0: none): each array's first N elements run, the rest wait")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--profile", action="store_true", help="cProfile one --tasks tick, top 10 entries")
    parser.add_argument("--tracemalloc", action="store_true", help="also the big run's tracemalloc peaks")
    parser.add_argument("--child", choices=("tick", "read_info"), help=argparse.SUPPRESS)
    parser.add_argument("--sacct", help=argparse.SUPPRESS)
    parser.add_argument("--state", help=argparse.SUPPRESS)
    parser.add_argument("--phases", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory(prefix="bench-reconcile-", ignore_cleanup_errors=True) as tmp:
        report = run_all(Path(tmp), args)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print_report(report)


def run_all(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    prepared = prepare(root, args.tasks, args.seed, max_parallel=args.max_parallel)
    with_header = "|".join(SACCT_FIELDS) + "\n" + prepared.text
    runs: dict[str, list[float]] = {"read_info": [], "parse": [], "tick": [], "steady": []}
    ticks: list[TickRun] = []
    counts = {}
    for _ in range(args.repeat):  # alternate, so drift hits all three alike
        seconds, counts["read_info"] = time_read_info(with_header)
        runs["read_info"].append(seconds)
        seconds, counts["parse"] = time_parse(prepared.text)
        runs["parse"].append(seconds)
        ticks.append(time_tick(prepared, root / "run"))
        runs["tick"].append(ticks[-1].seconds)
        runs["steady"].append(time_tick(prepared, root / "run", steady=True).seconds)
    phase_runs = []
    for _ in range(args.repeat):
        phases = Phases()
        phase_runs.append(phases.finish(time_tick(prepared, root / "run", phases).seconds))
    medians = {k: statistics.median(v) for k, v in runs.items()}
    last = ticks[-1]
    report: dict[str, Any] = {
        "tasks": args.tasks, "repeat": args.repeat, "python": sys.version.split()[0],
        "max_parallel": args.max_parallel,
        "state_fs": paths.filesystem_type(root), "sacct_lines": prepared.text.count("\n"),
        "sacct_mb": len(prepared.text) / 2**20, "states": dict(prepared.states), "prime_s": prepared.prime_s,
        "median_s": medians, "runs_s": runs,
        "ratio_tick_vs_read_info": medians["tick"] / medians["read_info"],
        "ratio_parse_vs_read_info": medians["parse"] / medians["read_info"],
        "ratio_steady_vs_read_info": medians["steady"] / medians["read_info"],
        "elements": {"read_info": counts["read_info"], "parse": counts["parse"], "tick_observed": last.observed},
        "tick": {"changed": last.changed, "decisions": dict(last.decisions), "slurm_calls": last.calls},
        "phases_median_s": {k: statistics.median(p[k] for p in phase_runs) for k in phase_runs[0]},
    }
    if args.profile:
        report["profile"] = profile_tick(prepared, root / "run")
    shutil.rmtree(prepared.template, ignore_errors=True)
    del prepared, with_header
    gc.collect()
    if args.big:
        report["big"] = big_run(root, args.big, args.seed, args.tracemalloc, args.max_parallel)
    got_s = report["big"]["tick"]["wall_s"] if args.big else None
    got_mb = report["big"]["tick"]["peak_rss_mb"] if args.big else None
    report["targets"] = {"ratio": [TARGET_RATIO, report["ratio_tick_vs_read_info"]],
                         "ratio_steady": [TARGET_RATIO, report["ratio_steady_vs_read_info"]],
                         "big_s": [TARGET_S, got_s], "big_mb": [TARGET_MB, got_mb]}
    return report


def print_report(r: dict[str, Any]) -> None:
    n, med = r["tasks"], r["median_s"]
    throttle = f", array: {{max_parallel: {r['max_parallel']}}}" if r.get("max_parallel") else ", no throttle"
    print(f"{n:,} tasks{throttle}, sacct text {r['sacct_lines']:,} lines ({r['sacct_mb']:.1f} MiB), states "
          + ", ".join(f"{k} {v}" for k, v in sorted(r["states"].items()))
          + f"; Python {r['python']}, state on {r['state_fs']}")
    print(f"{'what':<52} {'elements':>8} {'median s':>9} {'x read_info':>11} {'runs':>5}")
    rows = (("submitit SlurmInfoWatcher.read_info", "read_info", r["elements"]["read_info"]),
            ("campaignctl parse only (parse_sacct+observe_jobs)", "parse", r["elements"]["parse"]),
            ("campaignctl tick, every attempt changed", "tick", r["elements"]["tick_observed"]),
            ("campaignctl tick, nothing changed since the last", "steady", r["elements"]["tick_observed"]))
    for label, key, elements in rows:
        print(f"{label:<52} {elements:>8} {med[key]:>9.3f} {med[key] / med['read_info']:>11.2f} {r['repeat']:>5}")
    tick = r["tick"]
    print(f"tick: {tick['changed']:,} attempts changed; decisions {tick['decisions']}; Slurm calls "
          f"{tick['slurm_calls']} (no sbatch: acting is not what is measured); the priming tick "
          f"(all SUBMITTED → RUNNING) took {r['prime_s']:.2f} s")
    print("\nphases of the tick (instrumented runs, median s):")
    for label, seconds in r["phases_median_s"].items():
        print(f"  {label:<44} {seconds:>7.3f}")
    if "profile" in r:
        print("\ncProfile of one tick, top campaignctl entries by cumulative time:")
        print(f"  {'cumtime s':>9} {'tottime s':>9} {'calls':>8}  function")
        for row in r["profile"]["campaignctl_cumulative"]:
            print(f"  {row['cumtime_s']:>9.3f} {row['tottime_s']:>9.3f} {row['calls']:>8}  {row['function']}")
        print("top entries by own time (any code):")
        for row in r["profile"]["all_tottime"]:
            print(f"  {row['cumtime_s']:>9.3f} {row['tottime_s']:>9.3f} {row['calls']:>8}  {row['function']}")
    if "big" in r:
        b = r["big"]
        print(f"\n{b['tasks']:,} tasks, sacct text {b['sacct_lines']:,} lines ({b['sacct_mb']:.1f} MiB), "
              "one run each in a fresh child process (RSS in MB):")
        print(f"{'what':<24} {'elements':>8} {'wall s':>7} {'peak RSS':>8} {'after imports':>13} "
              f"{'+ text read':>11} {'ru_maxrss':>9}")
        for label, key in (("submitit read_info", "read_info"), ("campaignctl tick", "tick")):
            c = b[key]
            print(f"{label:<24} {c['elements']:>8} {c['wall_s']:>7.2f} {c['peak_rss_mb']:>8.0f} "
                  f"{c['baseline_rss_mb']:>13.0f} {c['after_text_rss_mb']:>11.0f} {c['ru_maxrss_mb']:>9.0f}")
        print(f"tick: {b['tick']['changed']:,} changed, {b['tick']['decisions']} decisions, Slurm calls "
              f"{b['tick']['calls']}; the priming tick (all SUBMITTED → RUNNING) took {b['prime_s']:.2f} s")
        print("phases of the tick (one instrumented run, s):")
        for label, seconds in b["tick_phases"]["phases_s"].items():
            print(f"  {label:<44} {seconds:>7.3f}")
        for key in ("tick_tracemalloc", "read_info_tracemalloc"):
            if key in b:
                print(f"{key}: tracemalloc peak {b[key]['tracemalloc_peak_mb']:.0f} MB "
                      f"(wall {b[key]['wall_s']:.2f} s under tracing)")
    t = r["targets"]
    big_s = f"{t['big_s'][1]:.2f} s" if t["big_s"][1] is not None else "not run"
    big_mb = f"{t['big_mb'][1]:.0f} MB" if t["big_mb"][1] is not None else "not run"
    print(f"\ntarget: ratio ≤ {t['ratio'][0]} (got {t['ratio'][1]:.2f} when every attempt changed, "
          f"{t['ratio_steady'][1]:.2f} when nothing did), 100k ≤ {t['big_s'][0]:g} s (got {big_s}), "
          f"≤ {t['big_mb'][0]:g} MB (got {big_mb})")


if __name__ == "__main__":
    main()
