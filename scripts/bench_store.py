#!/usr/bin/env python3
"""Benchmark the store: one `campaignctl reconcile` tick and one `status` of the same campaign on
SQLite and on PostgreSQL, side by side in one run.

The campaign and the sacct text are bench_reconcile.py's (--tasks, default 2,000: submitted in
chunks of ≤ 1001, primed by a tick that saw every element RUNNING; the timed tick's text ~94 %
COMPLETED, ~3 % FAILED 1:0, ~1 % CANCELLED by a user, all given up by the default policy: decisions
and outcomes written, no sbatch; sacct is a stub on PATH that `cat`s the text). Each run starts
from a copy of the primed store (SQLite: a copy of the file; PostgreSQL: CREATE DATABASE …
TEMPLATE) and times, one after the other: the tick that sees the text first (every attempt
changed), the next tick over the same text (nothing changed: the usual cron tick), and `status
<campaign>` (the service, rendering aside, for the table's page of 100 rows: the store reads
plus the one stub sacct). The two
stores alternate run by run, so drift on a shared machine hits both alike; medians of --repeat.

PostgreSQL: the server of CAMPAIGNCTL_TEST_PG_URL (`eval "$(scripts/pglab up)"`: PostgreSQL 15 on
loopback), as its owner role, in throw-away databases bench_<pid>_*; SQLite: WAL, under a
temporary XDG_STATE_HOME. Setup is not measured.

Usage: .venv/bin/python scripts/bench_store.py [--tasks 2000] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_reconcile import CAMPAIGN, Prepared, SqliteStores, StubSlurm, fresh_copy, prepare

from campaignctl.adapters import paths
from campaignctl.services import reconcile as reconcile_mod
from campaignctl.services import status as status_mod

PG_URL_VAR = "CAMPAIGNCTL_TEST_PG_URL"
# what `campaignctl status NAME` asks for: a page of rows and no campaign-wide efficiency (no
# table shows it); a tree from before either (run with PYTHONPATH=<its checkout> to compare) does
# what its status did
_ASKS = inspect.signature(status_mod.status).parameters
PAGE = {k: v for k, v in (("limit", 100), ("campaign_figures", False)) if k in _ASKS}
MEASURES = (("tick", "tick, every attempt changed"), ("steady", "tick, nothing changed since the last"),
            ("status", f"status {CAMPAIGN} (store reads + one stub sacct)"))


class PostgresStores:
    """bench_reconcile's stores on a PostgreSQL server: the store at `directory` is the database
    bench_<pid>_<directory name> (XDG_STATE_HOME stays `directory`, for the lock files)."""

    name = "PostgreSQL"

    def __init__(self, url: str) -> None:
        self.url = sa.make_url(url)
        self.admin = sa.create_engine(self.url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
        with self.admin.connect() as conn:
            self.version = conn.exec_driver_sql("SHOW server_version").scalar_one()

    def database(self, directory: Path) -> str:
        return f"bench_{os.getpid()}_{directory.name.replace('-', '_')}"

    def use(self, directory: Path) -> None:
        name = self.database(directory)
        with self.admin.connect() as conn:
            if not conn.exec_driver_sql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'").first():
                conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        self._point(directory, name)

    def seal(self, directory: Path) -> None:
        """A template may have no sessions: the pooled connections of the engines used so far end
        (CREATE DATABASE itself stops an autovacuum worker there, which only a superuser may)."""
        gc.collect()
        with self.admin.connect() as conn:
            conn.exec_driver_sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 f"WHERE datname = '{self.database(directory)}' AND backend_type = 'client backend'")

    def copy(self, template: Path, directory: Path) -> None:
        self.remove(directory)
        self.seal(template)
        name = self.database(directory)
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}" TEMPLATE "{self.database(template)}"')
        self._point(directory, name)

    def remove(self, directory: Path) -> None:
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{self.database(directory)}" WITH (FORCE)')
        shutil.rmtree(directory, ignore_errors=True)

    def _point(self, directory: Path, name: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        os.environ["XDG_STATE_HOME"] = str(directory)
        os.environ["CAMPAIGNCTL_DB_URL"] = self.url.set(database=name).render_as_string(hide_password=False)


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def one_run(prepared: Prepared, run_dir: Path) -> dict[str, Any]:
    """From a fresh copy of the primed store: the changed tick, the steady tick, then status."""
    fresh_copy(prepared, run_dir)
    with StubSlurm(run_dir.parent / "stub-bin", prepared.sacct_file):
        tick_s, first = timed(lambda: reconcile_mod.reconcile(CAMPAIGN))
        steady_s, second = timed(lambda: reconcile_mod.reconcile(CAMPAIGN))
        status_s, shown = timed(lambda: status_mod.status(CAMPAIGN, **PAGE))
    changed, again = first.campaigns[0], second.campaigns[0]
    out = {"tick": tick_s, "steady": steady_s, "status": status_s, "observed": changed.observed,
           "changed": changed.changed, "decisions": len(changed.decisions), "steady_changed": again.changed,
           "steady_decisions": len(again.decisions), "status_tasks": shown.campaigns[0].tasks}
    del first, second, shown
    prepared.stores.remove(run_dir)
    return out


def run_all(root: Path, args: argparse.Namespace, pg: PostgresStores) -> dict[str, Any]:
    stores = {"sqlite": SqliteStores(), "postgresql": pg}
    for key in stores:
        (root / key).mkdir()
    prepared = {key: prepare(root / key, args.tasks, args.seed, store) for key, store in stores.items()}
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key in stores}
    try:
        for _ in range(args.repeat):
            for key in stores:  # alternate
                runs[key].append(one_run(prepared[key], root / key / "run"))
    finally:
        for key, store in stores.items():
            store.remove(prepared[key].template)
    facts = {key: {k: v for k, v in runs[key][-1].items() if k not in dict(MEASURES)} for key in stores}
    if facts["sqlite"] != facts["postgresql"]:
        raise RuntimeError(f"the two stores did not do the same work: {facts}")
    medians = {key: {m: statistics.median(r[m] for r in runs[key]) for m, _ in MEASURES} for key in stores}
    return {"tasks": args.tasks, "repeat": args.repeat, "python": sys.version.split()[0],
            "postgresql": pg.version, "postgresql_host": pg.url.host, "state_fs": paths.filesystem_type(root),
            "load_avg": os.getloadavg(), "facts": facts["sqlite"], "states": dict(prepared["sqlite"].states),
            "median_s": medians, "runs_s": {key: {m: [r[m] for r in runs[key]] for m, _ in MEASURES} for key in stores},
            "ratio_pg_vs_sqlite": {m: medians["postgresql"][m] / medians["sqlite"][m] for m, _ in MEASURES}}


def print_report(r: dict[str, Any]) -> None:
    f = r["facts"]
    print(f"{r['tasks']:,} tasks, states " + ", ".join(f"{k} {v}" for k, v in sorted(r["states"].items()))
          + f"; Python {r['python']}; SQLite (WAL) on {r['state_fs']}; PostgreSQL {r['postgresql']} on "
          f"{r['postgresql_host']}; load average at the end {', '.join(f'{x:.1f}' for x in r['load_avg'])}")
    print(f"changed tick: {f['observed']:,} observed, {f['changed']:,} changed, {f['decisions']} decisions; "
          f"steady tick: {f['steady_changed']} changed, {f['steady_decisions']} decisions; status: "
          f"{f['status_tasks']:,} tasks")
    print(f"{'median of ' + str(r['repeat']) + ' runs':<54} {'SQLite s':>9} {'PostgreSQL s':>13} {'PG/SQLite':>10}")
    for key, label in MEASURES:
        sq, pg = r["median_s"]["sqlite"][key], r["median_s"]["postgresql"][key]
        print(f"{label:<54} {sq:>9.3f} {pg:>13.3f} {r['ratio_pg_vs_sqlite'][key]:>10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args()
    url = os.environ.get(PG_URL_VAR)
    if not url:
        sys.exit(f"bench_store: {PG_URL_VAR} is unset: run eval \"$(scripts/pglab up)\" first")
    pg = PostgresStores(url)
    with tempfile.TemporaryDirectory(prefix="bench-store-", ignore_cleanup_errors=True) as tmp:
        report = run_all(Path(tmp), args, pg)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print_report(report)


if __name__ == "__main__":
    main()
