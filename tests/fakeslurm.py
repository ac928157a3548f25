"""A fake Slurm at the subprocess boundary: answers sbatch/scontrol/squeue/sacct/scancel by argv[0]."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from campaignctl.adapters.proc import ProcResult, subprocess_executor
from campaignctl.core.slurm.sacct import SACCT_FIELDS


@dataclass
class FakeJob:
    job_id: str
    name: str
    size: int
    held: bool = True
    cancelled: bool = False
    dependency: str = ""  # `#SBATCH --dependency=…` as given (the fake starts nothing by itself)


class CommandRefused(Exception):
    """What the fake command prints on stderr as it exits 1."""


@dataclass(frozen=True)
class ElementState:
    state: str = "COMPLETED"
    exit_code: str = "0:0"
    nodes: str = "node1"
    end: str = ""
    elapsed: str = "00:00:03"
    ended: float | None = None  # epoch: End is printed in the caller's TZ, as sacct does (localtime(3))
    energy: str = "0"  # ConsumedEnergyRaw: 0 without an energy plugin, as on the lab
    steps: tuple[tuple[str, str, str], ...] = ()  # (step id, State, ExitCode): lines `<job>_<i>.<step>`


@dataclass
class FakeSlurm:
    max_array_size: int = 1001
    version: str = "22.05.8"  # what `sacct --version` prints after "slurm "
    # the user's MaxSubmitJobs (every queued element counts): sbatch over it is refused with the
    # generic text alone (no reason line, as for a QOS limit); `sacctmgr show assoc` states it
    # unless `limit_hidden` (a user who may not read it)
    max_submit: int | None = None
    limit_hidden: bool = False
    states_default_pending: bool = False  # released elements stay PENDING until `finish` (else COMPLETED)
    next_id: int = 100
    jobs: dict[str, FakeJob] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    argvs: list[tuple[str, ...]] = field(default_factory=list)
    # command ("sbatch") or command and first argument ("sbatch --test-only", "scontrol release")
    # -> stderr of one failure / of every call
    fail_next: dict[str, str] = field(default_factory=dict)
    fail_always: dict[str, str] = field(default_factory=dict)
    # `sbatch --hold` creates the job, then fails with this stderr (the reply lost: "Socket timed out")
    fail_after_create: list[str] = field(default_factory=list)
    sbatch_stdout: str | None = None  # what `sbatch --hold` prints instead of "<id>\n" (once)
    states: dict[tuple[str, int], ElementState] = field(default_factory=dict)  # released elements
    vanished: set[str] = field(default_factory=set)  # job ids neither sacct nor squeue knows
    before_sacct: Callable[[], None] | None = None  # a hook, e.g. to hold a tick inside sacct
    env: Mapping[str, str] = field(default_factory=dict)  # the environment of the latest call
    # `sinfo -N -O NodeList:|,CPUs:|,Memory:|,Gres:|,StateLong:`: nodes roomy enough that a
    # memory raise of a pending sibling keeps as many tasks per node (core/tick/siblings.py)
    sinfo_nodes: str = "node1|64|256000|gpu:a100:8(S:0-1)|idle\nnode2|64|256000|gpu:a100:8(S:0-1)|mixed\n"

    def __call__(self, argv: Sequence[str], timeout: float, env: Mapping[str, str]) -> ProcResult:
        name = argv[0]
        if Path(name).name == "crontab":  # not Slurm: a test's fake crontab on PATH answers (tests/cli/test_cron.py)
            return subprocess_executor(argv, timeout, env)
        if list(argv[1:]) == ["--version"]:  # the client's own version: no RPC, not counted
            return ProcResult(tuple(argv), 0, f"slurm {self.version}\n", "")
        self.calls[name] += 1
        self.argvs.append(tuple(argv))
        self.env = env
        for key in (" ".join(argv[:2]), name):
            if key in self.fail_next:
                return ProcResult(tuple(argv), 1, "", self.fail_next.pop(key))
            if key in self.fail_always:
                return ProcResult(tuple(argv), 1, "", self.fail_always[key])
        handler = getattr(self, f"_{name}")
        try:
            out = handler(list(argv[1:]))
        except CommandRefused as exc:
            return ProcResult(tuple(argv), 1, "", str(exc))
        if name == "sbatch" and "--hold" in argv:
            if self.fail_after_create:
                return ProcResult(tuple(argv), 1, "", self.fail_after_create.pop(0))
            if self.sbatch_stdout is not None:
                out, self.sbatch_stdout = self.sbatch_stdout, None
        return ProcResult(tuple(argv), 0, out, "")

    @property
    def submitted(self) -> int:
        """sbatch calls that submitted (or tried to submit) a job, not `--test-only` questions."""
        return sum(1 for a in self.argvs if a[0] == "sbatch" and "--hold" in a)

    def _scontrol(self, args: list[str]) -> str:
        if args[:2] == ["show", "config"]:
            return f"Configuration data as of now\nMaxArraySize            = {self.max_array_size}\n"
        if args[0] in ("hold", "release") and "_" in args[1]:
            return ""  # array elements (`12_[3,5]`): a budget hold or its release
        if args[0] == "release":
            self.jobs[args[1]].held = False
            return ""
        if args[0] == "update":
            return ""
        raise AssertionError(f"unexpected scontrol {args}")

    def _sinfo(self, args: list[str]) -> str:
        return self.sinfo_nodes

    def _sbatch(self, args: list[str]) -> str:
        if args[0] == "--test-only":  # Slurm would take it (make it refuse with fail_next)
            return ""
        assert "--hold" in args and "--parsable" in args
        script = Path(args[-1]).read_text()
        array = re.search(r"^#SBATCH --array=0-(\d+)", script, re.MULTILINE)
        name = re.search(r"^#SBATCH --job-name=(\S+)", script, re.MULTILINE)
        assert array and name, script
        size = int(array[1]) + 1
        assert size <= self.max_array_size, "array index above MaxArraySize"
        if self.max_submit is not None and self.queued_elements() + size > self.max_submit:
            raise CommandRefused("sbatch: error: Batch job submission failed: Job violates accounting/QOS policy "
                                "(job submit limit, user's size and/or time limits)")
        job_id = str(self.next_id)
        self.next_id += 1
        dependency = re.search(r"^#SBATCH --dependency=(\S+)", script, re.MULTILINE)
        self.jobs[job_id] = FakeJob(job_id, name[1], size, dependency=dependency[1] if dependency else "")
        return f"{job_id}\n"

    def _squeue(self, args: list[str]) -> str:
        named = next((a.split("=", 1)[1] for a in args if a.startswith("--name=")), None)
        return "".join(f"{j.job_id}|PENDING|{j.name}|{j.job_id}_{i}|\n" for j in self.jobs.values()
                       if self._queued(j) and named in (None, j.name) for i in self._queued_indices(j))

    def _queued_indices(self, job: FakeJob) -> list[int]:
        """`squeue -r`: one line per element still queued (every one while the job is held)."""
        return [i for i in range(job.size) if job.held or self.element(job.job_id, i).state in ("PENDING", "RUNNING")]

    def queued_elements(self) -> int:
        return sum(len(self._queued_indices(j)) for j in self.jobs.values() if self._queued(j))

    def _sacctmgr(self, args: list[str]) -> str:
        if bad := [a for a in args if " " in a]:  # sacctmgr takes `where user=x` as two words
            raise CommandRefused(f" Unknown condition: {bad[0]}")
        if self.limit_hidden:
            raise CommandRefused("sacctmgr: error: Problem talking to the database: Access/permission denied")
        if "assoc" in args:
            return f"{'' if self.max_submit is None else self.max_submit}|normal\n"
        return "\n"  # show qos: the normal QOS sets no MaxSubmitPU

    def _queued(self, job: FakeJob) -> bool:
        if job.cancelled or job.job_id in self.vanished:
            return False
        return job.held or any(self.element(job.job_id, i).state in ("PENDING", "RUNNING")
                               for i in range(job.size))

    def element(self, job_id: str, index: int) -> ElementState:
        pending = self.states_default_pending and not self.jobs[job_id].held
        return self.states.get((job_id, index), ElementState("PENDING") if pending else ElementState())

    def finish(self, job_id: str) -> None:
        """Every element of `job_id` that is still pending COMPLETES (a released job only)."""
        job = self.jobs[job_id]
        if not job.held:
            for i in range(job.size):
                if self.element(job_id, i).state == "PENDING":
                    self.set_state(job_id, i, "COMPLETED")

    def set_state(self, job_id: str, index: int, state: str, exit_code: str = "0:0",
                  nodes: str = "node1", end: str = "", elapsed: str = "00:00:03", energy: str = "0") -> None:
        self.states[(job_id, index)] = ElementState(state, exit_code, nodes, end, elapsed, energy=energy)

    def _scancel(self, args: list[str]) -> str:
        if args[0].startswith("--state="):  # `scancel --state=RUNNING 12_3`: that element, only in that state
            job_id, _, index = args[1].partition("_")
            if self.element(job_id, int(index)).state == args[0].split("=", 1)[1]:
                self.set_state(job_id, int(index), "CANCELLED by 1000", "0:15")
            return ""
        job_id, _, index = args[0].partition("_")
        if index:  # `scancel 12_3`: that element, whatever its state (`campaignctl cancel`)
            if self.element(job_id, int(index)).state in ("PENDING", "RUNNING"):
                self.set_state(job_id, int(index), "CANCELLED by 1000", "0:15")
            return ""
        self.jobs[args[0]].cancelled = True
        return ""

    def _sacct(self, args: list[str]) -> str:
        if self.before_sacct:
            self.before_sacct()
        wanted = next(a for a in args if a.startswith("--jobs=")).split("=", 1)[1].split(",")
        lines = []
        for job_id in wanted:
            job = self.jobs.get(job_id)
            if job is None or job_id in self.vanished:
                continue
            for i in range(job.size):
                element = self.element(job_id, i)
                state = "CANCELLED by 0" if job.cancelled else ("PENDING" if job.held else element.state)
                values = {f: "" for f in SACCT_FIELDS}
                values.update(JobID=f"{job_id}_{i}", JobIDRaw=job_id, JobName=job.name, State=state,
                              ExitCode=element.exit_code, Elapsed=element.elapsed, NodeList=element.nodes,
                              End=self._end(element), ConsumedEnergyRaw=element.energy)
                lines.append("|".join(values[f] for f in SACCT_FIELDS))
                for step, step_state, step_exit in element.steps:
                    values.update(JobID=f"{job_id}_{i}.{step}", JobName=step, State=step_state, ExitCode=step_exit)
                    lines.append("|".join(values[f] for f in SACCT_FIELDS))
        return "\n".join(lines) + "\n"

    def _end(self, element: ElementState) -> str:
        if element.ended is None:
            return element.end
        zone = ZoneInfo(self.env["TZ"]) if self.env.get("TZ") else None
        return datetime.fromtimestamp(element.ended, zone).strftime("%Y-%m-%dT%H:%M:%S")

    def live_jobs(self) -> list[FakeJob]:
        return [j for j in self.jobs.values() if not j.cancelled]
