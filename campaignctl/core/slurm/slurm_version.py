"""Which Slurm campaignctl talks to, and what of its output means something else in that version.

The differences found between the versions tested (22.05 and 24.11 on the lab; 25.11 from its
release notes) are listed in docs/real-sites.md, each with the test that shows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# `sacct --version` prints `slurm 24.11.5` (SchedMD's build), `slurm-wlm 22.05.8` (Debian's);
# release candidates and site builds add a suffix: `slurm 25.11.0-0rc1`, `slurm 23.02.7-ubuntu1`
# ASCII digits, a few of them: `\d` takes any Unicode digit, which int() may refuse, and int()
# refuses a run of more than 4,300 digits (a wrapper printing anything made every tick exit 1)
_VERSION = re.compile(r"^slurm(?:-wlm)?\s+([0-9]{1,9})\.([0-9]{1,9})(?:\.([0-9]{1,9}))?(?![0-9])", re.MULTILINE)


@dataclass(frozen=True, slots=True, order=True)
class SlurmVersion:
    major: int
    minor: int
    micro: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.micro}"

    @property
    def exit_codes_verbatim(self) -> bool:
        """Slurm 25.11 (SchedMD commit 831571cb84) stopped subtracting 128 from an exit status
        above 128 when it prints ExitCode: up to 25.05 a program that exited 143 reads `15:0`,
        from 25.11 on `143:0`, and `15:0` means it exited 15."""
        return (self.major, self.minor) >= (25, 11)


def parse_version(text: str) -> SlurmVersion | None:
    """`slurm 24.11.5` → 24.11.5; None for anything else (a wrapper's own output, an error)."""
    match = _VERSION.search(text.strip())
    if not match:
        return None
    return SlurmVersion(int(match[1]), int(match[2]), int(match[3] or 0))


def parse_cluster_name(config: str) -> str:
    """`ClusterName             = lab` of `scontrol show config` (both Slurms pad the key alike),
    or `ClusterName=lab` of a slurm.conf (whose keys are case-insensitive); 'default' when it is missing."""
    for line in config.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "clustername" and value.split("#")[0].strip():
            return value.split("#")[0].strip()
    return "default"
