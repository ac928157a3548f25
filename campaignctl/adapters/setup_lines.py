"""The spec's `setup:` lines, run in the job before the program on every attempt.

One bash runs the lines one by one in the same shell (so `module load`, `source …/activate` and
`export` last), each through `eval` so an unfinished line (`if true; then`) fails alone, stopping
at the first that fails. Each line is announced in output.log (`campaignctl setup [2/3]: …`),
its output follows it there. Then bash hands the resulting environment back as `NAME=value\\0`
records on a private, unlinked temp file: the program is still started from its argv,
without a shell, with what the setup exported (exported bash functions such as Lmod's `module`
included). A failing line fails the attempt with the cause `setup_failed` and, as evidence,
the line, its exit status and its last output lines, secrets masked (core/base/redact.py: the evidence
becomes the give-up reason, hence the log, webhooks and reports).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from campaignctl.core.base.redact import mask_secrets
from campaignctl.core.model.job_env import decode_environment

SETUP_FAILED = "setup_failed"
MARKER = "campaignctl setup [{i}/{n}]: "
EVIDENCE_LINES = 20
EVIDENCE_CHARS = 3000  # exit.json's evidence stays under 4 KiB with the headline
SHOWN_LINE_CHARS = 500
# bash's own bookkeeping, not something a setup line chose: taken from the environment before setup
SHELL_OWNED = ("_", "SHLVL", "PWD", "OLDPWD")
DUMP = ("import os,sys;sys.stdout.buffer.write(b''.join(k+b'='+v+b'\\0' "
        "for k,v in os.environb.items()))")


@dataclass(frozen=True, slots=True)
class SetupOutcome:
    env: dict[str, str]  # what the program gets (unchanged input when it failed)
    code: int = 0  # the failing line's exit status (never 0 when failed)
    evidence: str = ""  # '' when the setup succeeded

    @property
    def failed(self) -> bool:
        return bool(self.evidence)


def setup_script(lines: Sequence[str], fd: int) -> str:
    """Bash text running `lines`; the outcome and the environment go to file descriptor `fd`."""
    quoted = " ".join(shlex.quote(line) for line in lines)
    return f"""__cc_lines=({quoted})
__cc_n=${{#__cc_lines[@]}}
__cc_i=0
while [ "$__cc_i" -lt "$__cc_n" ]; do
  printf 'campaignctl setup [%d/%d]: %s\\n' "$((__cc_i + 1))" "$__cc_n" "${{__cc_lines[$__cc_i]}}"
  eval "${{__cc_lines[$__cc_i]}}"
  __cc_rc=$?
  if [ "$__cc_rc" -ne 0 ]; then printf 'failed %d %d\\0' "$((__cc_i + 1))" "$__cc_rc" >&{fd}; exit "$__cc_rc"; fi
  __cc_i=$((__cc_i + 1))
done
printf 'ok\\0' >&{fd}
exec "$__cc_py" -I -c {shlex.quote(DUMP)} >&{fd}
"""


def run_setup(lines: Sequence[str], env: Mapping[str, str], workdir: str, log: BinaryIO,
              log_path: Path) -> SetupOutcome:
    """Run `lines` with `env` in `workdir`, output appended to `log` (open on `log_path`)."""
    start = log_path.stat().st_size
    bash = shutil.which("bash", path=env.get("PATH")) or "/bin/bash"
    with tempfile.NamedTemporaryFile("w", prefix="campaignctl-setup-", suffix=".sh") as script, \
            tempfile.TemporaryFile(prefix="campaignctl-setup-") as result:
        script.write(f"__cc_py={shlex.quote(sys.executable)}\n" + setup_script(lines, result.fileno()))
        script.flush()
        try:
            code = subprocess.run([bash, script.name], cwd=workdir, env=dict(env), stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=subprocess.STDOUT, pass_fds=(result.fileno(),)).returncode
        except OSError as exc:
            return SetupOutcome(dict(env), 127, f"cannot start bash for the setup lines: {exc}")
        result.seek(0)
        status, _, dumped = result.read().partition(b"\0")
    if status == b"ok" and code == 0:
        return SetupOutcome(_after_setup(env, decode_environment(dumped)))
    failure = _failure(lines, status.decode(errors="replace"), code, log_path, start)
    return SetupOutcome(failure.env, failure.code, mask_secrets(failure.evidence, env))


def _after_setup(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in after.items() if k not in SHELL_OWNED}
    env.update({k: before[k] for k in SHELL_OWNED if k in before})
    return env


def _failure(lines: Sequence[str], status: str, code: int, log_path: Path, start: int) -> SetupOutcome:
    output = _tail_since(log_path, start)
    fields = status.split()
    if len(fields) == 3 and fields[0] == "failed":
        number, code = int(fields[1]), int(fields[2])
        headline = f"setup line {number} `{_shown(lines[number - 1])}` exited {code}"
    elif status == "ok":  # every line passed, but their environment could not be handed back
        number, code = len(lines), code or 1
        headline = f"the environment after the setup lines could not be read (exit status {code})"
    else:  # `exit` or `set -e` in a setup line ended the shell: name the last line announced
        number = _last_announced(output, len(lines))
        shown = f" `{_shown(lines[number - 1])}`" if number else ""
        headline = (f"setup line {number}{shown} ended the setup shell (exit status {code}) "
                    "before the program started")
        code = code or 1
    return SetupOutcome({}, code, f"{headline}:\n{_output_of(output, number, len(lines))}")


def _shown(line: str) -> str:
    return line if len(line) <= SHOWN_LINE_CHARS else line[:SHOWN_LINE_CHARS] + "…"


def _tail_since(log_path: Path, start: int) -> str:
    with open(log_path, "rb") as handle:
        handle.seek(max(start, log_path.stat().st_size - 65536))
        return handle.read().decode(errors="replace")


def _last_announced(output: str, n: int) -> int:
    announced = [i for i in range(1, n + 1) if MARKER.format(i=i, n=n) in output]
    return announced[-1] if announced else 0


def _output_of(output: str, number: int, n: int) -> str:
    """The last lines printed after line `number` was announced."""
    marker = MARKER.format(i=number, n=n)
    at = output.rfind(marker)
    if at >= 0:
        output = output[at:].split("\n", 1)[1] if "\n" in output[at:] else ""
    tail = "\n".join(output.rstrip("\n").splitlines()[-EVIDENCE_LINES:])
    return (tail[-EVIDENCE_CHARS:] if len(tail) > EVIDENCE_CHARS else tail) or "(no output)"
