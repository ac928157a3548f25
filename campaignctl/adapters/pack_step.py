"""One packed task's step: `python -m campaignctl.adapters.pack_step <attempt dir>/launch.pickle`,
started by adapters/pack_runner.py under `srun`; runs the task as any attempt runs
(adapters/runner.py run_task), and exits as it does."""

from __future__ import annotations

import pickle
import sys

from campaignctl.adapters.runner import run_task


def main(payload: str) -> None:
    with open(payload, "rb") as handle:  # written by this job's pack runner, in the owner's run dir
        run_task(pickle.load(handle))


if __name__ == "__main__":
    main(sys.argv[1])
