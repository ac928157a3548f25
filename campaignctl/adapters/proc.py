"""The one subprocess choke point: argv lists (never a shell), a timeout, bounded retries of
transient Slurm errors, and errors that carry argv, exit code and stderr."""

from __future__ import annotations

import io
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

from campaignctl.core.errors import SlurmTransientError, SlurmUnavailableError

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
# sacct/squeue honour these variables and would change the columns or time format we parse.
_SCRUBBED = ("SACCT_FORMAT", "SQUEUE_FORMAT", "SQUEUE_FORMAT2", "SQUEUE_SORT", "SINFO_FORMAT",
             "SLURM_TIME_FORMAT")


@dataclass(frozen=True, slots=True)
class ProcResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


T = TypeVar("T")
Executor = Callable[[Sequence[str], float, Mapping[str, str]], ProcResult]


def subprocess_executor(argv: Sequence[str], timeout: float, env: Mapping[str, str]) -> ProcResult:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              env=dict(env), check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return ProcResult(tuple(argv), 124, "", f"timed out after {timeout:g} s (Socket timed out)")
    except FileNotFoundError:
        raise SlurmUnavailableError(
            f"{argv[0]}: command not found",
            "install the Slurm client tools, or run `scripts/slurmlab up` and export SLURM_CONF",
        ) from None
    return ProcResult(tuple(argv), done.returncode, done.stdout, done.stderr)


EXECUTOR: Executor = subprocess_executor  # tests swap in a fake Slurm here
_CALLS = [0]


def call_count() -> int:
    """Commands run so far by this process (retries included): a tick reports its own cost."""
    return _CALLS[0]


def slurm_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["SLURM_TIME_FORMAT"] = "standard"  # 2026-11-21T12:00:00, what the parsers expect
    return env


def is_transient(result: ProcResult) -> bool:
    return result.returncode == 124 or any(m in result.stderr for m in TRANSIENT_MARKERS)


def run(argv: Sequence[str], *, timeout: float = 60.0, attempts: int = 4,
        backoff_s: float = 1.0, check: bool = True) -> ProcResult:
    """Run `argv`; retry transient failures with exponential backoff, then raise."""
    result = ProcResult(tuple(argv), -1, "", "")
    for attempt in range(attempts):
        _CALLS[0] += 1
        result = EXECUTOR(argv, timeout, slurm_env())
        if result.returncode == 0 or not is_transient(result):
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
        if not is_transient(result):
            break
        if attempt + 1 < attempts:
            time.sleep(backoff_s * 2 ** attempt)
    raise command_error(result, transient=is_transient(result))


def _stream_once(argv: Sequence[str], consume: Callable[[Iterable[str]], T],
                 timeout: float) -> tuple[T | None, ProcResult]:
    # stderr goes to a file, not a pipe: a chatty stderr could fill its pipe and block the
    # child while we are still reading stdout.
    with tempfile.TemporaryFile("w+") as err:
        try:
            child = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=err, text=True,
                                     env=slurm_env(), stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise SlurmUnavailableError(f"{argv[0]}: command not found",
                                        "install the Slurm client tools, or run `scripts/slurmlab up` "
                                        "and export SLURM_CONF") from None
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            child.kill()

        timer = threading.Timer(timeout, expire)
        timer.start()
        try:
            assert child.stdout is not None
            value = consume(child.stdout)
            child.stdout.read()  # whatever the consumer left, so the child can exit
            code = child.wait()
        finally:
            timer.cancel()
        err.seek(0)
        stderr = err.read()
    if expired.is_set():
        return None, ProcResult(tuple(argv), 124, "", f"timed out after {timeout:g} s (Socket timed out)")
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
