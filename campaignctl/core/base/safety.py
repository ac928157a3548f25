r"""Allow-lists for every string that can reach Slurm, a job script or the filesystem.

A newline inside an `#SBATCH` line ends the directive and the rest runs as shell in the job
script; `%` in an output path is expanded by Slurm (`%x` job name, `%j` id); a backslash is dropped by
sbatch's `#SBATCH` parser where bash would keep `\\` as one (Slurm 22.05, the lab cluster:
`#SBATCH --output=/tmp/bs/one\back\\two.out` wrote `/tmp/bs/onebacktwo.out`), so the job's
files would land elsewhere than campaignctl looks. So names use small alphabets, paths hold
neither, and no string anywhere may hold NUL, CR or LF.
"""

from __future__ import annotations

import re

CONTROL_CHARS = re.compile(r"[\x00\r\n]")
CAMPAIGN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SLURM_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")  # partition, account, qos, gpu type
CONSTRAINT = re.compile(r"^[A-Za-z0-9_.&|,!*()\[\]:-]{1,256}$")  # sbatch --constraint expression
HOSTLIST = re.compile(r"^[A-Za-z0-9_.,\[\]-]{1,1024}$")  # node1,node[3-4]
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")  # param and env var names
CPU_BIND = ("none", "cores", "threads", "sockets", "ldoms", "rank")
GPU_BIND = re.compile(r"^(none|closest|single:\d{1,3})$")


def has_control_chars(text: str) -> bool:
    return bool(CONTROL_CHARS.search(text))


NAME_MAX = 255  # bytes in one path component on Linux filesystems (ext4, XFS, NFS, Lustre)


def path_problem(text: str) -> str:
    """Why `text` cannot be used as a path in a job script, or '' if it can."""
    if has_control_chars(text):
        return "must not contain newline, carriage return or NUL"
    if "%" in text:
        return "must not contain '%' (Slurm expands %x, %j … in job file paths)"
    if "\\" in text:
        return "must not contain '\\' (sbatch drops backslashes from #SBATCH paths; bash would keep them)"
    if len(text) > 1024:
        return "is longer than 1024 characters"
    if any(len(part.encode()) > NAME_MAX for part in text.split("/")):
        return f"has a component longer than {NAME_MAX} bytes, more than a filesystem allows in one name"
    return ""
