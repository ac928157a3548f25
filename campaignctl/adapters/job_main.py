"""The first Python an array element runs: `python -u -m campaignctl.adapters.job_main FOLDER`,
the command of the element's `srun` (adapters/submission.py renders it). It loads the call staged
for this element — the runner of one task, or of a pack — and makes it.

It stands in for submitit's `python -m submitit.core._submit`, whose imports (numpy, asyncio and
submitit itself) every element paid: 0.45 s of CPU to the runner's start against 0.20 s here
(medians of 7 side by side). This module imports the standard library only, and the payload
names just the runner it needs. A job submitted by an earlier release keeps its own script, which names
submitit's bootstrap and its pickle of a submitit call: both still work.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# what an element runs: a module-level function (pickled by name) and its arguments
Call = tuple[Callable[..., Any], tuple[Any, ...]]

# how long an element waits for its payload to be visible: on a shared filesystem the node may see
# the file a little after the login node moved it into place (submitit waits as long)
PAYLOAD_WAIT_S = 60


def payload_path(folder: Path, job_id: str) -> Path:
    """Where the element `job_id` ("1234_5") finds its call: submitit's name for it, so that the
    folder reads as before (`JobPaths.submitted_pickle`)."""
    return folder / f"{job_id}_submitted.pkl"


def dump_call(call: Call, path: Path) -> None:
    path.write_bytes(pickle.dumps(call, protocol=pickle.HIGHEST_PROTOCOL))


def load_call(path: Path) -> Call:
    function, args = pickle.loads(path.read_bytes())
    return function, tuple(args)


def element_id(environ: dict[str, str] | os._Environ[str]) -> str:
    """This element's id as sbatch names array elements (`%A_%a`), from the variables Slurm sets
    in every step of an array job."""
    return f"{environ['SLURM_ARRAY_JOB_ID']}_{environ['SLURM_ARRAY_TASK_ID']}"


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        sys.exit("usage: python -m campaignctl.adapters.job_main FOLDER (run by an array element's srun)")
    path = payload_path(Path(argv[0]), element_id(os.environ))
    waited = 0
    while not path.exists() and waited < PAYLOAD_WAIT_S:
        time.sleep(1)
        waited += 1
    if not path.exists():
        sys.exit(f"campaignctl: no payload at {path} after {PAYLOAD_WAIT_S} s: was it delivered?")
    function, args = load_call(path)
    function(*args)  # the runners end the process with the task's status (SystemExit)


if __name__ == "__main__":
    main(sys.argv[1:])
