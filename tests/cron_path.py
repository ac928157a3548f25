"""The PATH a crontab line gives a real-cluster test's commands: cron's /usr/bin:/bin, after the
directory of the Slurm clients this test run uses. On the 22.05 lab that is /usr/bin itself; the
24.11 lab puts its own clients first on PATH (scripts/slurmlab), as `module load slurm` does at a
site, and `campaignctl cron install` writes the submitter's PATH on the line (core/base/crontab.py)."""

from __future__ import annotations

import os
import shutil

CRON_PATH = ":".join(dict.fromkeys([os.path.dirname(shutil.which("sbatch") or "/usr/bin/sbatch"), "/usr/bin", "/bin"]))
