"""Causes named by the program's output, read for attempts sacct shows FAILED this tick."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from campaignctl.adapters import slurm
from campaignctl.adapters.exit_status import read_rank_causes, read_returncode
from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_files import task_dirs
from campaignctl.core.base.clock import read_time
from campaignctl.core.base.hostlist import split_nodes
from campaignctl.core.model.attempt_paths import AttemptPaths, tasks_dir
from campaignctl.core.model.records import AttemptFacts, HistoryRow, ObservedChange
from campaignctl.core.model.sacct_values import MAX_SIGNAL, runner_exit
from campaignctl.core.policy.suspects import (
    NODE_EVENTS,
    attempt_cause,
    failed_node_events,
    node_events_evidence,
    parse_node_events,
)

# slurmctld marks the node DOWN and ends the job in the same second (the lab: event 08:30:19, job
# End 08:30:19); a node that stops answering is marked after SlurmdTimeout, maybe after the End
EVENT_SLACK = timedelta(minutes=5)


def settle_exit_codes(run_dir: str, rows: Sequence[HistoryRow],
                      changes: Sequence[ObservedChange]) -> list[ObservedChange]:
    """`changes` with the exit code of an attempt sacct says FAILED with a signal-sized code (1-64,
    which Slurm 22.05 also prints for 128+N) taken from the runner's exit.json when it says 128+N
    (core/slurm/sacct.runner_exit); one small read each, nothing for any other. A FAILED attempt
    whose retry waits out its backoff is read again at the next tick, which sacct's 15 must not
    undo: the 143 already settled is kept (the retry rule read 15 and gave up on it otherwise)."""
    by_id = {r.id: r for r in rows}
    out = []
    for change in changes:
        row, facts = by_id.get(change.attempt_id), change.facts
        if (row is not None and facts.state == "FAILED"
                and facts.exit_code is not None and 0 < facts.exit_code <= MAX_SIGNAL):
            if row.state == "FAILED" and row.exit_code == 128 + facts.exit_code:
                code: int | None = row.exit_code
            else:
                code = runner_exit(facts.exit_code,
                                   read_returncode(AttemptPaths.of(run_dir, row.task_index, row.token)),
                                   slurm.reading().exit_codes_verbatim)
            change = replace(change, facts=facts._replace(exit_code=code))
        out.append(change)
    return out


def ingest_causes(store: Store | None, run_dir: str, rows: Sequence[HistoryRow],
                  changes: Sequence[ObservedChange]) -> dict[int, tuple[str, str]]:
    """(cause, evidence) by attempt id, stored with the attempt (not with `store` None: a dry
    run). One small read per rank of an attempt that turned FAILED this tick (a cause refines
    FAILED), and one `sacctmgr show event` per multi-node attempt that turned NODE_FAIL (which of
    its nodes failed); nothing for any other."""
    by_id = {r.id: r for r in rows}
    causes = {}
    listed: set[str] | None = None  # names under <run_dir>/tasks, listed once
    for change in changes:
        row = by_id.get(change.attempt_id)
        facts = change.facts
        if row is None or row.state == facts.state:
            continue
        found = None
        if facts.state == "FAILED":
            if listed is None:
                listed = task_dirs(str(tasks_dir(run_dir)))
            if str(row.task_index) in listed:  # no directory, no exit*.json: one listing, not a glob per attempt
                files = AttemptPaths.of(run_dir, row.task_index, row.token)
                found = attempt_cause(read_rank_causes(files), facts.nodes)
        elif facts.state == "NODE_FAIL" and len(split_nodes(facts.nodes)) > 1:
            found = failed_nodes_of(facts)
        if found is not None:
            causes[row.id] = found
    if store is not None:
        store.set_attempt_causes(causes)
    return causes


def failed_nodes_of(facts: AttemptFacts) -> tuple[str, str] | None:
    """(NODE_EVENTS, sacctmgr's lines) for the nodes of a multi-node NODE_FAIL that went down
    during its run (core/policy/suspects.py); None when the accounting database has none yet."""
    if not facts.ended_at:
        return None
    ended = read_time(facts.ended_at)
    started = ended - timedelta(seconds=facts.elapsed_s or 0)
    text = slurm.node_events(split_nodes(facts.nodes), started - EVENT_SLACK, ended + EVENT_SLACK)
    failed = failed_node_events(parse_node_events(text), facts.nodes, started)
    return (NODE_EVENTS, node_events_evidence(failed)) if failed else None
