"""What `status` reads: the attempts a screen needs (every task not done, and a page's worth of
the done ones: the rest only counted), and sacct's view of those the last tick did not store settled."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta

from campaignctl.adapters import identity, slurm
from campaignctl.adapters.store import Store
from campaignctl.adapters.store_engine import IN_LIMIT
from campaignctl.core.base.clock import read_time
from campaignctl.core.base.errors import SlurmTransientError, SlurmUnavailableError
from campaignctl.core.model.params import Scalar
from campaignctl.core.model.records import CampaignRecord, HistoryRow
from campaignctl.core.screens.status import TaskRow, task_rows
from campaignctl.core.slurm.sacct import Observed, element_key
from campaignctl.services.campaigns import current_policy


@dataclass(frozen=True, slots=True)
class Read:
    history: list[HistoryRow]
    unstarted: dict[int, dict[str, Scalar]]  # the params of the tasks with no attempt
    done: int = 0  # tasks left out of `history`, each with one attempt, stored COMPLETED


def read(store: Store, record: CampaignRecord, page: int | None, tasks: Collection[int] = ()) -> Read:
    """The attempts of every task that is not done (history(done_tasks=False)), of the first
    `page` done ones and of `tasks`; the other done tasks counted. Everything when `page` is None
    (every row wanted), for a ladder or a search (their rungs and trials read every task), or
    when `tasks` names more than one query may bind. A done task has one attempt, settled as
    COMPLETED: the rows of the first `page` of them are all a page of rows in index order can
    hold (any later one has `page` done tasks before it)."""
    settings = current_policy(store, record)[1]
    started = store.tasks_started(record.id)
    unstarted = store.unstarted_params(record.id, started)
    if page is None or settings.progressive or settings.search or len(tasks) + page > IN_LIMIT:
        return Read(store.history(record.id), unstarted)
    undone = store.history(record.id, done_tasks=False)
    open_ = {h.task_index for h in undone}
    # every task with an attempt is one or the other
    done = started - len(open_)
    wanted = sorted((set(store.first_done(record.id, page) if page and done else ()) | set(tasks)) - open_)
    extra = store.history(record.id, only=wanted)
    return Read(undone + extra, unstarted, done - len({h.task_index for h in extra}))


# status is read by people at a prompt: a Slurm that does not answer costs one retry and at most
# STATUS_SACCT_TIMEOUT_S, then the stored state is shown, marked stale. With slurmdbd down, sacct
# fails at once ("sacct: error: Problem talking to the database: Connection refused", 22.05); the
# tick's four tries with backoff made status exit 75 after 13 s, showing nothing.
STATUS_SACCT_TRIES = 2
STATUS_SACCT_TIMEOUT_S = 20.0


def _observe(store: Store, attempts: list[HistoryRow]) -> tuple[Observed, int]:
    """sacct's view of `attempts`, only their elements folded (and packed ones' steps)."""
    keyed = {key: a for a in attempts if a.job_id and (key := element_key(a.job_id)) is not None}
    if not keyed:
        return Observed(), 0
    # an hour of slack covers clock skew between store and controller
    since = min(read_time(a.created_at) for a in keyed.values()) - timedelta(hours=1)
    return slurm.observe(sorted({job for job, _ in keyed}), since, wanted=keyed.keys(),
                         timeout=STATUS_SACCT_TIMEOUT_S, attempts=STATUS_SACCT_TRIES,
                         step_tokens={a.token for a in attempts if a.packed},
                         owners=identity.uids_of(store.submitters({a.submission_token for a in attempts}))), 1


@dataclass(frozen=True, slots=True)
class Seen:
    observed: Observed
    calls: int
    skipped: list[str]
    stale: str = ""  # why the stored state is shown instead: Slurm's error
    stored: bool = False  # Slurm was not asked: every row as the last tick stored it


STORED = Seen(Observed(), 0, [], stored=True)


def look(store: Store, attempts: list[HistoryRow]) -> Seen:
    """sacct's view of `attempts`, or why Slurm did not answer; the lines it printed that were skipped."""
    mark = slurm.skipped_mark()
    try:
        observed, calls = _observe(store, attempts)
    except (SlurmTransientError, SlurmUnavailableError) as exc:
        return Seen(Observed(), 1, [], exc.message)
    return Seen(observed, calls, slurm.skipped_since(mark))


def rows_of(read: Read, seen: Seen) -> list[TaskRow]:
    """A row per task: its latest attempt as sacct shows it now (as stored when settled or when
    Slurm did not answer); tasks with no attempt NOT_SUBMITTED."""
    return task_rows(read.unstarted, read.history, seen.observed, stale=bool(seen.stale) or seen.stored,
                     steps=seen.observed.steps)
