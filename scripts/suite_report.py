"""The table scripts/test ends with: each suite's counts and wall time against its budget, and the
slowest and CPU-heaviest tests of the run, from the JUnit XML each suite's pytest wrote. A suite past its budget
is a warning, not a failure: CI's hard limit is 90 minutes, the budgets keep it near 40 with
room to grow (docs/testing.md).

    python scripts/suite_report.py OUT_DIR SUITE... [--total SECONDS]
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

# Wall seconds each suite may take before the table warns, as measured on the project's 2-core
# machine with all four suites at once (docs/testing.md, CI run 31: 28, 26, 28 and 26 minutes),
# with room for a slower machine (CI has run ~1.25× slower than on this one). CI's wall is
# about the longest suite plus set-up: the whole run warns at 36 minutes, 4 before the 40 CI must
# stay within.
BUDGET_S = {"unit": 1920, "postgresql": 1920, "slurm-22.05": 1740, "slurm-24.11": 1740}
TOTAL_BUDGET_S = 2160
SLOWEST = 12


@dataclass
class Suite:
    name: str
    rc: str = "-"
    wall_s: int | None = None
    cpu_s: int | None = None
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("passed", "failed", "error", "skipped"), 0))
    cases: list[tuple[float, str]] = field(default_factory=list)
    cpu_cases: list[tuple[float, str]] = field(default_factory=list)


def read_suite(out: Path, name: str) -> Suite:
    suite = Suite(name)
    if (rc := out / f"{name}.rc").exists():
        suite.rc = rc.read_text().strip()
    if (secs := out / f"{name}.secs").exists():
        suite.wall_s = int(secs.read_text().strip())
    if (cpu := out / f"{name}.cpu").exists():
        suite.cpu_s = int(cpu.read_text().strip())
    # a Slurm lane writes two: its tests shared between the lab's clusters, then those run alone
    cases = [case for xml in (out / f"{name}.xml", out / f"{name}.alone.xml") if xml.exists()
             for case in ET.parse(xml).getroot().iter("testcase")]
    for case in cases:
        outcome = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        suite.counts[{"failure": "failed"}.get(outcome, outcome)] += 1
        test_id = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        suite.cases.append((float(case.get("time") or 0), test_id))
        cpu = [p.get("value") for p in case.iter("property") if p.get("name") == "cpu_s"]
        if cpu:
            suite.cpu_cases.append((float(cpu[0] or 0), test_id))
    return suite


def minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def machine_cpu(out: Path) -> tuple[int, int] | None:
    """The machine's busy and idle CPU seconds over the run, from scripts/test's two /proc/stat reads."""
    try:
        start, end = ([int(v) for v in (out / f"machine.cpu.{at}").read_text().split()] for at in ("start", "end"))
    except (OSError, ValueError):
        return None
    return end[0] - start[0], end[1] - start[1]


def services_cpu(out: Path) -> dict[str, int]:
    """CPU seconds each kind of service process used over the run (those up before it count
    from its start), from scripts/test's two reads."""
    def read(at: str) -> dict[str, int]:
        totals: dict[str, int] = {}
        for line in (out / f"services.cpu.{at}").read_text().splitlines():
            name, seconds = line.split()
            totals[name] = totals.get(name, 0) + int(seconds)
        return totals
    try:
        start, end = read("start"), read("end")
    except (OSError, ValueError):
        return {}
    return {name: seconds - start.get(name, 0) for name, seconds in end.items() if seconds > start.get(name, 0)}


def report(suites: list[Suite], total_s: int | None, machine: tuple[int, int] | None = None,
           services: dict[str, int] | None = None) -> tuple[str, list[str]]:
    warnings = []
    lines = [f"{'suite':<13} {'exit':>4} {'passed':>7} {'failed':>6} {'error':>5} {'skipped':>7} "
             f"{'wall':>6} {'budget':>6} {'cpu':>6}"]
    for s in suites:
        budget = BUDGET_S.get(s.name)
        c = s.counts
        lines.append(f"{s.name:<13} {s.rc:>4} {c['passed']:>7} {c['failed']:>6} {c['error']:>5} {c['skipped']:>7} "
                     f"{minutes(s.wall_s):>6} {minutes(budget):>6} {minutes(s.cpu_s):>6}")
        if budget is not None and s.wall_s is not None and s.wall_s > budget:
            warnings.append(f"{s.name} took {minutes(s.wall_s)}, past its budget of {minutes(budget)}")
    if total_s is not None:
        total = {k: sum(s.counts[k] for s in suites) for k in ("passed", "failed", "error", "skipped")}
        lines.append(f"{'all':<13} {'':>4} {total['passed']:>7} {total['failed']:>6} {total['error']:>5} "
                     f"{total['skipped']:>7} {minutes(total_s):>6} {minutes(TOTAL_BUDGET_S):>6}")
        if total_s > TOTAL_BUDGET_S:
            warnings.append(f"scripts/test took {minutes(total_s)}, past its budget of {minutes(TOTAL_BUDGET_S)}")
    if machine is not None:
        busy, idle = machine
        lines.append(f"the machine's CPU: {minutes(busy)} busy, {minutes(idle)} idle (core-minutes; cpu above is "
                     "each lane's own processes, its Slurm jobs and the daemons are the rest of busy)")
    if services:
        lines.append("of which services: " + ", ".join(
            f"{name} {minutes(s)}" for name, s in sorted(services.items(), key=lambda kv: -kv[1])))
    slowest = sorted(((t, s.name, test) for s in suites for t, test in s.cases), reverse=True)[:SLOWEST]
    if slowest:
        lines += ["", f"slowest {len(slowest)} tests:"]
        lines += [f"  {t:7.1f} s  {name:<12} {test}" for t, name, test in slowest]
    # CPU seconds of the test's process and the commands it waited for (not its Slurm jobs')
    heaviest = sorted(((t, s.name, test) for s in suites for t, test in s.cpu_cases), reverse=True)[:SLOWEST]
    if heaviest:
        lines += ["", f"CPU-heaviest {len(heaviest)} tests (its process and the commands it ran):"]
        lines += [f"  {t:7.1f} s  {name:<12} {test}" for t, name, test in heaviest]
    return "\n".join(lines), warnings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the directory scripts/test wrote its logs and XML to")
    parser.add_argument("suites", nargs="+", help="the suites that ran")
    parser.add_argument("--total", type=int, help="the whole run's wall seconds")
    args = parser.parse_args()
    text, warnings = report([read_suite(args.out, name) for name in args.suites], args.total, machine_cpu(args.out),
                            services_cpu(args.out))
    print(text)
    for warning in warnings:
        print(f"warning: {warning}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
