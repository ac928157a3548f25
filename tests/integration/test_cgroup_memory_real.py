"""Memory efficiency on the real cluster is read from the memory cgroup that enforces the limit,
and right-sizing from that cgroup's working set (its usage less the inactive page cache).

Four forked workers share a 60 MiB buffer: summed RSS (the sampler's, and sacct MaxRSS under
jobacct_gather/linux) counts it five times, 300 MiB of a 200M allocation, though the job never
came near its limit. The lab runs cgroup v1 with ConstrainRAMSpace=yes, as Slurm 22.05 and 24.11
set it up: the task sits in a `task_0` leaf without a limit, below `step_batch`, which has one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from campaignctl.adapters import slurm
from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_store import TelemetryStore
from campaignctl.core.model.sacct_values import rss_mb
from campaignctl.core.slurm.slurm_version import SlurmVersion
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.integration.test_reconcile_real import latest, ticking_until_finished

pytestmark = pytest.mark.slurm

SHARED = """\
import os, time
block = bytearray(os.urandom(60 * 2**20))  # touched: 60 MiB resident
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:  # a worker that only reads: its pages stay shared with the parent
        time.sleep(4)
        os._exit(0 if block[-1] >= 0 else 1)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
"""


def test_memory_efficiency_is_the_cgroup_peak_not_the_summed_rss_of_forked_workers(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    (tmp_path / "shared.py").write_text(SHARED)
    submit(write_spec(tmp_path, """\
name: forked
command: [python3, shared.py]
tasks: [{}]
resources: {mem: 200M, time: "00:05:00"}
telemetry: {interval: 1s}
""", "forked.yaml"))
    ticking_until_finished("forked", timeout_s=120)
    store = Store.open()
    record = store.campaign("forked")
    assert record is not None
    summary = TelemetryStore(store.engine).by_task(record.id)[0]
    assert summary.rss_max_mb > 200  # the shared block counted once per process
    assert 60 < summary.cgroup_mem_peak_mb < 200  # the kernel's count: once, under the limit
    [row] = status("forked").tasks
    assert row.state == "COMPLETED"
    assert row.efficiency is not None and row.efficiency.mem_source == "cgroup"
    assert row.efficiency.mem is not None and 0.3 < row.efficiency.mem < 1.0


# one program, two tasks: a file larger than the limit read once (page cache fills the cgroup,
# mostly inactive) and a smaller one read again and again (its pages turn active: a working set)
READER = """\
import subprocess, sys, time
path, times = sys.argv[1], int(sys.argv[2])
for _ in range(times):
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
time.sleep(3)
"""


def test_page_cache_fills_the_cgroup_while_rss_stays_low_and_right_sizing_reads_the_working_set(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    (tmp_path / "reader.py").write_text(READER)
    big, hot = uncached(tmp_path / "big.bin", 256), uncached(tmp_path / "hot.bin", 64)
    profile = f"cache-{tmp_path.name[-8:]}"
    submit(write_spec(tmp_path, f"""\
name: cached
profile: {profile}
command: [python3, reader.py, "{{path}}", "{{times}}"]
tasks: [{{path: "{big}", times: 1}}, {{path: "{hot}", times: 6}}]
resources: {{mem: 150M, time: "00:05:00"}}
telemetry: {{interval: 1s}}
""", "cached.yaml"))
    ticking_until_finished("cached", timeout_s=120)
    store = Store.open()
    record = store.campaign("cached")
    assert record is not None
    once, again = (TelemetryStore(store.engine).by_task(record.id)[i] for i in (0, 1))
    figures = {name: (s.rss_max_mb, s.cgroup_mem_peak_mb, s.cgroup_ws_peak_mb) for name, s in
               (("read once", once), ("read again", again))}
    print(f"(task RSS, cgroup peak, cgroup working set) MB: {figures}")
    assert once.cgroup_mem_peak_mb > 0.8 * 150 and once.rss_max_mb < 40, figures  # the cache, not the task
    [row, _] = status("cached").tasks
    assert row.efficiency is not None and row.efficiency.mem_source == "cgroup" and (row.efficiency.mem or 0) > 0.8
    # the working set holds the file read six times (active cache) though RSS does not. The file
    # read once is mostly inactive cache (22 MB quiet), but its sampled peak can catch the kernel's
    # lists behind a stream: 139 MB in CI run 43 (22.05, loaded). No bound is asserted on it
    assert once.cgroup_ws_peak_mb > 0 and again.cgroup_ws_peak_mb > again.rss_max_mb + 50, figures
    # sacct's MaxRSS of the same attempt (jobacct_gather/cgroup, cgroup v1) differs by version:
    # Slurm 24.11 reports the cgroup's usage, page cache included; 22.05 what the processes hold
    max_rss = rss_mb(latest("cached")[0].max_rss)
    version = slurm.version()
    print(f"Slurm {version}: MaxRSS of the file read once {max_rss} MB")
    assert max_rss is not None and version is not None
    if version >= SlurmVersion(24, 11):
        assert max_rss > 0.8 * 150, max_rss
    else:
        assert max_rss < 40, max_rss
    # right-sizing's samples: each task's peak is its working set where that is above its RSS,
    # whatever MaxRSS says (sorted on both sides: the read-once peak may be the larger, above)
    peaks = sorted(round(s.rss_mb or 0) for s in store.profiles.samples(profile))
    print(f"right-sizing's peaks: {peaks} MB")
    assert peaks == sorted(round(max(s.rss_max_mb, s.cgroup_ws_peak_mb)) for s in (once, again)), figures


def uncached(path: Path, mib: int) -> Path:
    """A file of `mib` MiB on disk and out of the page cache: a page is charged to the cgroup of
    the process that brought it into the cache, so pages this test wrote would be the test's, and
    the job reading them would add nothing to its own cgroup. Written back, then dropped
    (POSIX_FADV_DONTNEED evicts clean pages), as a dataset on the shared filesystem is."""
    with path.open("wb") as out:
        for _ in range(mib):
            out.write(bytes([mib % 251]) * 2**20)
        out.flush()
        os.fsync(out.fileno())
        os.posix_fadvise(out.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return path
