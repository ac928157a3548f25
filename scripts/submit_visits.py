#!/usr/bin/env python3
"""How often `campaignctl submit` of a new campaign visits the store, before its first sbatch and
in all: the store's and the decision log's method calls, and the SQL statements they run (counted
by an SQLAlchemy `before_cursor_execute` listener; transaction control and PRAGMAs left out). An
8-task grid, a fake Slurm at the process boundary, a throw-away state directory; the database
exists before (its migrations are not the submit's).

Usage: .venv/bin/python scripts/submit_visits.py [--tasks 8] [-v]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa

from campaignctl.adapters import proc
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.services.submit import submit
from tests.fakeslurm import FakeSlurm

QUIET = ("PRAGMA", "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


class Counted:
    """Method calls and SQL statements, and where the first sbatch fell among them."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.statements: list[str] = []
        self.at_sbatch: tuple[int, int] | None = None

    def wrap(self, cls: type) -> None:
        for name, fn in list(vars(cls).items()):
            if callable(fn) and not name.startswith("_"):
                setattr(cls, name, self._counting(f"{cls.__name__}.{name}", fn))

    def _counting(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(label)
            return fn(*args, **kwargs)
        return counted

    def statement(self, _conn: object, _cursor: object, sql: str, *_: object) -> None:
        if sql.split()[0].upper() not in QUIET:
            self.statements.append(" ".join(sql.split())[:100])


class MarkingSlurm(FakeSlurm):
    def __init__(self, counted: Counted) -> None:
        super().__init__(max_array_size=1001)
        self.counted = counted

    def __call__(self, argv: list[str], *args: Any, **kwargs: Any) -> Any:
        c = self.counted
        if argv and argv[0] == "sbatch" and "--test-only" not in argv and c.at_sbatch is None:
            c.at_sbatch = (len(c.calls), len(c.statements))
        return super().__call__(argv, *args, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("-v", action="store_true", help="list the calls and statements")
    args = parser.parse_args()
    counted = Counted()
    with tempfile.TemporaryDirectory(prefix="submit-visits-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        os.environ.pop("CAMPAIGNCTL_DB_URL", None)
        seeds = ", ".join(str(i) for i in range(args.tasks))
        spec = Path(tmp) / "spec.yaml"
        spec.write_text(f'name: visits\ncommand: ["true", "{{seed}}"]\nmatrix: {{seed: [{seeds}]}}\n'
                        'resources: {mem: 100M, time: "00:01:00"}\n')
        proc.EXECUTOR = MarkingSlurm(counted)
        Store.open()
        for cls in (Store, DecisionLog):
            counted.wrap(cls)
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", counted.statement)
        submit(spec)
    calls_at, statements_at = counted.at_sbatch or (len(counted.calls), len(counted.statements))
    reads = sum(1 for s in counted.statements if s.upper().startswith(("SELECT", "WITH")))
    print(f"submit of a new {args.tasks}-task grid (fake Slurm):")
    print(f"  store/log method calls: {len(counted.calls)} ({calls_at} before the first sbatch)")
    print(f"  SQL statements: {len(counted.statements)} ({statements_at} before the first sbatch), {reads} reads")
    if args.v:
        for label, n in Counter(counted.calls).most_common():
            print(f"    {n:3d} {label}")
        for s in counted.statements:
            print(f"    {s}")


if __name__ == "__main__":
    main()
