"""The one subprocess choke point: argv lists (never a shell), a timeout, bounded retries of
transient Slurm errors, and errors that carry argv, exit code and stderr.

Every command runs in its own process group with a scrubbed environment (`slurm_env`). On
timeout the whole group is killed and the read ends at the deadline: a hung client whose child
kept stdout open once held one tick for 1,208 s when only the client itself was killed. Output
is decoded as UTF-8 with replacement: one job with a Latin-1 name must not break every tick.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import IO, TypeVar, cast

from campaignctl.core.base.errors import SlurmTransientError, SlurmUnavailableError

# Messages slurmctld/slurmdbd clients print when the controller is busy, restarting or
# unreachable; retrying later succeeds. (sbatch: "Socket timed out on send/recv operation",
# "Unable to contact slurm controller (connect failure)", "Slurm temporarily unable to accept
# job, sleeping and retrying", sacct: "Problem talking to the database: Connection refused".)
TRANSIENT_MARKERS = (
    "Socket timed out",
    "Unable to contact slurm controller",
    "temporarily unable",
    "Transaction rate limit",
    "Resource temporarily unavailable",
    "Problem talking to the database",
    "Connection refused",
    "Zero Bytes were transmitted or received",
)
# Variables Slurm's clients read as input options (INPUT ENVIRONMENT VARIABLES in sbatch(1),
# squeue(1), sacct(1), scontrol(1), scancel(1), sinfo(1), 22.05). For sbatch the environment
# beats `#SBATCH` lines: SBATCH_ARRAY_INX=0-99 turned a 4-task campaign into a 96-element array,
# SBATCH_JOB_NAME renamed its jobs, SQUEUE_STATES=RUNNING hid a held job from crash repair, and
# SACCT_FORMAT/SQUEUE_FORMAT change the columns parsed. campaignctl builds every option its
# commands need, so all of them go, by prefix. The job's own environment is another matter:
# SRUN_*/SALLOC_* are read by srun inside the job, not by the commands campaignctl runs, and stay.
SCRUBBED_PREFIXES = ("SBATCH_", "SQUEUE_", "SACCT_", "SINFO_", "SCONTROL_", "SCANCEL_")
# SLURM_CLUSTERS (-M for squeue/scontrol/scancel/sinfo) would point them at another cluster than
# the one sbatch submitted to (SBATCH_CLUSTERS is scrubbed): every command talks to SLURM_CONF's
# cluster, which stays. SLURM_EXIT_ERROR changes the exit code sbatch fails with.
SCRUBBED = frozenset({"SLURM_CLUSTERS", "SLURM_EXIT_ERROR"})
# Set for every command. SLURM_BITSTR_LEN: sacct(1) "the string length to be used for holding a
# job array's task ID expression. The default value is 64 bytes. A value of 0 will print the full
# expression": without it a pending array list is cut (`1_[0-4,…,51-...%1]`, seen on 22.05).
# TZ=UTC: sacct and squeue print times, and read `sacct -S`, in the local zone of the process
# (localtime(3); the same job's End read `2026-11-24T03:11:54` under TZ=UTC, `12:11:54` under
# Asia/Tokyo, `2026-11-23T22:11:54` under America/New_York, 22.05). Without a zone in the text, a
# tick under another TZ than the one before it compared times hours apart (core/base/clock.py).
# It reaches the batch job only as far as the runner: the program gets the submitter's captured
# environment (docs/real-sites.md: the environment every attempt runs in).
FORCED = {"SLURM_TIME_FORMAT": "standard",  # 2026-11-21T12:00:00, what the parsers expect
          "SLURM_BITSTR_LEN": "0",
          "TZ": "UTC"}
AFTER_KILL_S = 2.0  # how long the pipes are drained after the process group was killed
STDERR_KEPT = 64 * 1024  # of a notify command's stderr, its end


@dataclass(frozen=True, slots=True)
class ProcResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


T = TypeVar("T")
Executor = Callable[[Sequence[str], float, Mapping[str, str]], ProcResult]


def _spawn(argv: Sequence[str], env: Mapping[str, str], stderr: int | IO[bytes]) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=stderr, env=dict(env),
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except FileNotFoundError:
        raise SlurmUnavailableError(
            f"{argv[0]}: command not found",
            "install the Slurm client tools, or run `scripts/slurmlab up` and export SLURM_CONF",
        ) from None


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command and whatever it started (its own session, see `_spawn`)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)


def timed_out(argv: Sequence[str], timeout: float) -> ProcResult:
    return ProcResult(tuple(argv), 124, "", f"timed out after {timeout:g} s (Socket timed out)")


def decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def subprocess_executor(argv: Sequence[str], timeout: float, env: Mapping[str, str]) -> ProcResult:
    return _finish(argv, _spawn(argv, env, subprocess.PIPE), timeout)


def _finish(argv: Sequence[str], child: subprocess.Popen[bytes], timeout: float,
            data: bytes | None = None) -> ProcResult:
    """Its output and exit; on timeout the whole group killed, and exit 124."""
    try:
        out, err = child.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        try:
            child.communicate(timeout=AFTER_KILL_S)
        except subprocess.TimeoutExpired:  # a grandchild that left the group still holds the pipes
            for pipe in (child.stdout, child.stderr):
                if pipe is not None:
                    pipe.close()
        return timed_out(argv, timeout)
    return ProcResult(tuple(argv), child.returncode, decode(out or b""), decode(err or b""))


def run_command(argv: Sequence[str], data: bytes, env: Mapping[str, str], timeout: float) -> ProcResult:
    """A command that is not Slurm's (a notify channel's), `data` on its stdin, in its own session
    and killed as a group on timeout, as Slurm's clients are; not counted among a tick's Slurm
    calls, never retried. OSError when it cannot start: the caller says what that means.
    Its stderr goes to a file, not a pipe: a child it leaves running (`curl … &`) would hold a
    pipe open past its exit, and a wait for the pipe's end would read a command that finished
    as one that timed out."""
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                 stderr=err, env=dict(env), start_new_session=True)
        done = _finish(argv, child, timeout, data)
        err.seek(max(0, err.seek(0, os.SEEK_END) - STDERR_KEPT))  # its last words are what is shown
        return done if done.returncode == 124 else replace(done, stderr=decode(err.read()))


EXECUTOR: Executor = subprocess_executor  # tests swap in a fake Slurm here
_CALLS = [0]


def call_count() -> int:
    """Commands run so far by this process (retries included): a tick reports its own cost."""
    return _CALLS[0]


def slurm_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every Slurm command: `environ` (os.environ) without the variables Slurm
    reads as input options, plus FORCED."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if not (k in SCRUBBED or k.startswith(SCRUBBED_PREFIXES))}
    env.update(FORCED)
    return env


def scrubbed_names(environ: Mapping[str, str] | None = None) -> list[str]:
    """Which of the caller's variables `slurm_env` drops (for a diagnostic)."""
    source = os.environ if environ is None else environ
    return sorted(k for k in source if k in SCRUBBED or k.startswith(SCRUBBED_PREFIXES))


def is_transient(result: ProcResult) -> bool:
    return result.returncode == 124 or any(m in result.stderr for m in TRANSIENT_MARKERS)


def run(argv: Sequence[str], *, timeout: float = 60.0, attempts: int = 4,
        backoff_s: float = 1.0, check: bool = True) -> ProcResult:
    """Run `argv`; retry transient failures with exponential backoff, then raise. A command that
    ran out its `timeout` is not retried: `timeout` bounds the call, the next tick tries again."""
    result = ProcResult(tuple(argv), -1, "", "")
    for attempt in range(attempts):
        _CALLS[0] += 1
        result = EXECUTOR(argv, timeout, slurm_env())
        if result.returncode in (0, 124) or not is_transient(result):
            break
        if attempt + 1 < attempts:
            time.sleep(backoff_s * 2 ** attempt)
    if result.returncode != 0 and check:
        raise command_error(result, transient=is_transient(result))
    return result


def stream(argv: Sequence[str], consume: Callable[[Iterable[str]], T], *, timeout: float = 120.0,
           attempts: int = 4, backoff_s: float = 1.0) -> T:
    """Run `argv` and hand its stdout to `consume` line by line, as it arrives: sacct prints
    ~800 bytes per array element, so 100,000 elements never sit in memory as one text (twice,
    bytes and str, with `run`). A failed run's partial result is discarded and the run retried
    like `run`. Test executors (not a real subprocess) get their whole stdout as lines."""
    if EXECUTOR is not subprocess_executor:
        return consume(io.StringIO(run(argv, timeout=timeout, attempts=attempts, backoff_s=backoff_s).stdout))
    result = ProcResult(tuple(argv), -1, "", "")
    for attempt in range(attempts):
        _CALLS[0] += 1
        value, result = _stream_once(argv, consume, timeout)
        if result.returncode == 0:
            return cast(T, value)
        if result.returncode == 124 or not is_transient(result):
            break
        if attempt + 1 < attempts:
            time.sleep(backoff_s * 2 ** attempt)
    raise command_error(result, transient=is_transient(result))


class _Expired(Exception):
    """The deadline passed while reading a command's output."""


def _bounded_lines(fd: int, deadline: float) -> Iterator[str]:
    """Lines of `fd` as they arrive, decoded (UTF-8, replacement), until EOF or `deadline`. Cut at
    b'\\n' only, which no UTF-8 sequence contains; StringIO splits on '\\n' alone, as sacct means."""
    pending = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise _Expired
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        pending += chunk
        cut = pending.rfind(b"\n") + 1
        if cut:
            yield from io.StringIO(decode(pending[:cut]))
            pending = pending[cut:]
    if pending:
        yield decode(pending)


def _stream_once(argv: Sequence[str], consume: Callable[[Iterable[str]], T],
                 timeout: float) -> tuple[T | None, ProcResult]:
    # stderr goes to a file, not a pipe: a chatty stderr could fill its pipe and block the
    # child while we are still reading stdout.
    with tempfile.TemporaryFile("w+b") as err:
        child = _spawn(argv, slurm_env(), err)
        assert child.stdout is not None
        deadline = time.monotonic() + timeout
        lines = _bounded_lines(child.stdout.fileno(), deadline)
        try:
            value = consume(lines)
            for _ in lines:  # whatever the consumer left, so the child can exit
                pass
            code = child.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except (_Expired, subprocess.TimeoutExpired):
            _kill_group(child)
            child.stdout.close()
            child.wait()
            return None, timed_out(argv, timeout)
        finally:
            child.stdout.close()
        err.seek(0)
        stderr = decode(err.read())
    return (value if code == 0 else None), ProcResult(tuple(argv), code, "", stderr)


def command_error(result: ProcResult, transient: bool) -> SlurmTransientError | SlurmUnavailableError:
    stderr = result.stderr.strip().splitlines()
    detail = stderr[-1] if stderr else "(no stderr)"
    shown = " ".join(result.argv[:4]) + (" …" if len(result.argv) > 4 else "")
    message = f"`{shown}` exited {result.returncode}: {detail}"
    if transient:
        return SlurmTransientError(message, "Slurm is busy or unreachable; nothing was half-recorded, "
                                            "run it again later")
    return SlurmUnavailableError(message, "check the Slurm command's message above and `scontrol ping`")
