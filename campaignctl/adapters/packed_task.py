"""One packed task's step: `python -m campaignctl.adapters.packed_task <attempt dir>/launch.pickle`,
started by adapters/pack_runner.py under `srun`; runs the task as any attempt runs
(adapters/runner.py run_task), and exits as it does.

A pickle is code: in a shared campaign the attempt directory is the group's, so a member could
put a file of their own in its place. The payload is read only if it is a regular file this user
owns that nobody else may write (checked on the open descriptor, not the path)."""

from __future__ import annotations

import os
import pickle
import stat
import sys

from campaignctl.adapters.job_files import regular_file
from campaignctl.adapters.runner import run_task


class ForeignPayloadError(RuntimeError):
    """The launch file is not this user's own, private file."""


def main(payload: str) -> None:
    with regular_file(payload) as handle:
        st = os.fstat(handle.fileno())
        if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ForeignPayloadError(f"{payload}: owned by uid {st.st_uid}, mode {stat.filemode(st.st_mode)}: "
                                      "not this user's private launch file; not run")
        launch = pickle.load(handle)
    run_task(launch)


if __name__ == "__main__":
    main(sys.argv[1])
