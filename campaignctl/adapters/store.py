"""Campaign state in SQLAlchemy Core: SQLite by default, PostgreSQL via CAMPAIGNCTL_DB_URL."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any

import sqlalchemy as sa

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.history_store import HistoryStore
from campaignctl.adapters.metrics_store import MetricsStore
from campaignctl.adapters.node_marks import NodeMarks
from campaignctl.adapters.notify_store import NotifyStore
from campaignctl.adapters.profile_store import ProfileStore
from campaignctl.adapters.revision_rows import (
    insert_revision,
    revision_record,
    spec_revision,
    sync_tasks,
    task_row,
)
from campaignctl.adapters.store_engine import (
    DONE,
    OPEN,
    default_url,
    driver_sql,
    in_parts,
    insert_many,
    inserted_id,
    migrate,
    open_engine,
    rederivable,
    utc_now,
)
from campaignctl.adapters.store_schema import attempts, campaigns, decisions, revisions, submissions, tasks
from campaignctl.adapters.submission_rows import insert_submission
from campaignctl.adapters.telemetry_store import TelemetryStore
from campaignctl.adapters.usage_queries import UsageQueries
from campaignctl.core.decisions.actions import SubmissionIntent
from campaignctl.core.model.params import Scalar, TaskSpec
from campaignctl.core.model.records import (
    AttemptRecord,
    CampaignRecord,
    HistoryRow,
    ObservedChange,
    RevisionRecord,
    SubmissionRecord,
)
from campaignctl.core.spec.spec import CampaignSpec


class Store:
    """Campaigns, revisions, submissions and attempts; the other stores on the same database
    through their doors (`log`, `metrics`, `telemetry`, `profiles`, `notices`, `histories`, `nodes`, `usage`)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        # a revision row is written once and never changed: read each at most once per Store
        self._revisions: dict[tuple[int, int], RevisionRecord] = {}

    @cached_property
    def log(self) -> DecisionLog:
        return DecisionLog(self.engine)

    @cached_property
    def metrics(self) -> MetricsStore:
        return MetricsStore(self.engine)

    @cached_property
    def telemetry(self) -> TelemetryStore:
        return TelemetryStore(self.engine)

    @cached_property
    def profiles(self) -> ProfileStore:
        return ProfileStore(self.engine)

    @cached_property
    def notices(self) -> NotifyStore:
        return NotifyStore(self.engine)

    @cached_property
    def histories(self) -> HistoryStore:
        return HistoryStore(self.engine)

    @cached_property
    def nodes(self) -> NodeMarks:
        return NodeMarks(self.engine)

    @cached_property
    def usage(self) -> UsageQueries:
        return UsageQueries(self.engine)

    @classmethod
    def open(cls, url: str | None = None) -> Store:
        store = cls(open_engine(url or os.environ.get("CAMPAIGNCTL_DB_URL") or default_url()))
        store.migrate()
        return store

    def migrate(self) -> list[str]:
        return migrate(self.engine)

    # campaigns and revisions
    def campaign(self, name: str) -> CampaignRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(campaigns).where(campaigns.c.name == name)).one_or_none()
        return CampaignRecord(**row._mapping) if row else None

    def campaigns(self) -> list[CampaignRecord]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(campaigns).order_by(campaigns.c.id)).all()
        return [CampaignRecord(**r._mapping) for r in rows]

    def create_campaign(self, spec: CampaignSpec, spec_text: str, spec_path: str, owner: str,
                        captured_env: str = "") -> CampaignRecord:
        """The campaign, its first revision and its tasks, in one transaction; the record as written."""
        now = utc_now()
        with self.engine.begin() as conn:
            campaign_id = int(inserted_id(conn.execute(campaigns.insert().values(
                name=spec.name, state="active", current_revision=1, run_dir=spec.run_dir,
                owner=owner, created_at=now))))
            insert_revision(conn, spec_revision(campaign_id, spec, spec_text, spec_path, owner, "initial",
                                                  captured_env), 1)
            insert_many(conn, tasks, [task_row(campaign_id, t) for t in spec.tasks])
        return CampaignRecord(campaign_id, spec.name, "active", 1, spec.run_dir, owner, now)

    def add_revision(self, campaign_id: int, spec: CampaignSpec, spec_text: str, spec_path: str,
                     author: str, reason: str, captured_env: str = "") -> int:
        """A changed spec at submit: a new current revision (a candidate shadow policy stays)."""
        current = self.revision(campaign_id, self.campaign_by_id(campaign_id).current_revision)
        draft = spec_revision(campaign_id, spec, spec_text, spec_path, author, reason, captured_env)
        return self.insert_revision(replace(draft, shadow_policy_json=current.shadow_policy_json), spec.tasks)

    def insert_revision(self, draft: RevisionRecord, task_specs: Sequence[TaskSpec] = ()) -> int:
        """Record `draft` as the campaign's next revision and make it current; returns its number.
        `task_specs`: a spec revision's tasks, recorded with it (those it adds; new parameters for
        an index that `submit --replace-tasks` gave other ones)."""
        with self.engine.begin() as conn:
            number = int(conn.execute(sa.select(sa.func.max(revisions.c.number))
                                      .where(revisions.c.campaign_id == draft.campaign_id)).scalar_one()) + 1
            insert_revision(conn, draft, number)
            sync_tasks(conn, draft.campaign_id, task_specs)
            conn.execute(campaigns.update().where(campaigns.c.id == draft.campaign_id)
                         .values(current_revision=number))
        return number

    def revision(self, campaign_id: int, number: int) -> RevisionRecord:
        key = (campaign_id, number)
        if key not in self._revisions:
            with self.engine.connect() as conn:
                row = conn.execute(sa.select(revisions).where(
                    revisions.c.campaign_id == campaign_id, revisions.c.number == number)).one()
            self._revisions[key] = revision_record(row)
        return self._revisions[key]

    def untouched(self, campaign_id: int) -> bool:
        """Nothing has happened to the campaign yet: no submission and no decision (one read)."""
        with self.engine.connect() as conn:
            return conn.execute(sa.select(submissions.c.id).where(submissions.c.campaign_id == campaign_id)
                                .union_all(sa.select(decisions.c.id).where(decisions.c.campaign_id == campaign_id))
                                .limit(1)).first() is None

    def revisions(self, campaign_id: int) -> list[RevisionRecord]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(revisions).where(revisions.c.campaign_id == campaign_id)
                                .order_by(revisions.c.number)).all()
        return [revision_record(r) for r in rows]

    def campaign_by_id(self, campaign_id: int) -> CampaignRecord:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(campaigns).where(campaigns.c.id == campaign_id)).one()
        return CampaignRecord(**row._mapping)

    # submissions and attempts
    def record_intent(self, campaign_id: int, intent: SubmissionIntent) -> int:
        """Write the submission and one attempt per task before sbatch runs (one per array
        element, or several sharing one where the chunk is packed)."""
        with self.engine.begin() as conn:
            return insert_submission(conn, campaign_id, intent)

    def set_submission_state(self, token: str, state: str, job_id: str | None = None) -> None:
        with self.engine.begin() as conn:
            values: dict[str, object] = {"state": state, "updated_at": utc_now()}
            if job_id is not None:
                values["job_id"] = job_id
            submission_id = conn.execute(submissions.update().where(submissions.c.token == token)
                                         .values(**values).returning(submissions.c.id)).scalar_one()
            attempt_state = {"submitted": "SUBMITTED", "released": "SUBMITTED", "abandoned": "ABANDONED"}
            update = attempts.update().where(attempts.c.submission_id == submission_id)
            if job_id is not None:
                update = update.values(job_id=sa.literal(f"{job_id}_") + sa.cast(attempts.c.array_index, sa.Text))
            conn.execute(update.values(state=attempt_state.get(state, "SUBMITTING")))

    def record_refusal(self, token: str, error: str, next_try_at: str) -> int:
        """One more refused try of submission `token`; returns how many tries failed so far."""
        with self.engine.begin() as conn:
            return int(conn.execute(submissions.update().where(submissions.c.token == token).values(
                tries=submissions.c.tries + 1, last_error=error, next_try_at=next_try_at,
                updated_at=utc_now()).returning(submissions.c.tries)).scalar_one())

    def rebase_submission(self, token: str, revision: int, resources_json: str) -> None:
        """A submission that never reached Slurm goes out under `revision` instead, due at once,
        its refused tries forgotten (they were the old revision's)."""
        with self.engine.begin() as conn:
            conn.execute(submissions.update().where(submissions.c.token == token, submissions.c.job_id.is_(None))
                         .values(revision=revision, resources_json=resources_json, tries=0, last_error="",
                                 next_try_at=None, updated_at=utc_now()))

    def record_wait(self, token: str, why: str, next_try_at: str) -> None:
        """Submission `token` waits for room under a site limit: noted, and no try counted."""
        with self.engine.begin() as conn:
            conn.execute(submissions.update().where(submissions.c.token == token).values(
                last_error=why, next_try_at=next_try_at, updated_at=utc_now()))

    def campaign_state(self, campaign_id: int) -> str:
        with self.engine.connect() as conn:
            return str(conn.execute(sa.select(campaigns.c.state).where(campaigns.c.id == campaign_id)).scalar_one())

    def set_campaign_state(self, campaign_id: int, state: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(campaigns.update().where(campaigns.c.id == campaign_id).values(state=state))

    def submission(self, token: str) -> SubmissionRecord:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(submissions).where(submissions.c.token == token)).one()
        return SubmissionRecord(**{k: row._mapping[k] for k in SubmissionRecord.__slots__})

    def submitters(self, tokens: Collection[str]) -> set[str]:
        """The users who submitted the submissions `tokens` (their jobs' owners)."""
        if not tokens:
            return set()
        with self.engine.connect() as conn:
            return {user for part in in_parts(sorted(tokens)) for user in conn.execute(
                sa.select(submissions.c.submitted_by).distinct().where(submissions.c.token.in_(part))).scalars()
                } - {None, ""}

    def submissions(self, campaign_id: int, states: Sequence[str] | None = None) -> list[SubmissionRecord]:
        query = sa.select(submissions).where(submissions.c.campaign_id == campaign_id)
        if states is not None:
            query = query.where(submissions.c.state.in_(states))
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(submissions.c.id)).all()
        return [SubmissionRecord(**{k: r._mapping[k] for k in SubmissionRecord.__slots__}) for r in rows]

    def attempts(self, campaign_id: int) -> list[AttemptRecord]:
        params = sa.func.coalesce(attempts.c.params_json, tasks.c.params_json).label("params_json")
        query = (sa.select(tasks.c.task_index, params, attempts.c.attempt_number,
                           attempts.c.array_index, attempts.c.token, attempts.c.job_id,
                           attempts.c.state, submissions.c.state.label("submission_state"),
                           attempts.c.created_at)
                 .join(tasks, tasks.c.id == attempts.c.task_id)
                 .join(submissions, submissions.c.id == attempts.c.submission_id)
                 .where(tasks.c.campaign_id == campaign_id)
                 .order_by(tasks.c.task_index, attempts.c.attempt_number))
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [AttemptRecord(task_index=r.task_index, params=json.loads(r.params_json),
                              attempt_number=r.attempt_number, array_index=r.array_index,
                              token=r.token, job_id=r.job_id, state=r.state,
                              submission_state=r.submission_state, created_at=r.created_at)
                for r in rows]

    def history(self, campaign_id: int, done_tasks: bool = True, only: Sequence[int] | None = None) -> list[HistoryRow]:
        """Attempts of the campaign, oldest first per task, with their effective resources.
        `done_tasks=False` leaves out tasks whose one attempt COMPLETED: nothing about them can
        change or matter to a decision, and in a long campaign they are most of the rows.
        `only`: those tasks' (at most IN_LIMIT). Plain SQL through the driver, repeated strings
        shared: a tick may read 100,000 rows."""
        if only is not None and not only:
            return []
        named = f" AND t.task_index IN ({', '.join('?' * len(only))})" if only is not None else ""
        sql = _HISTORY_SQL.format(filter=("" if done_tasks else _UNDONE_FILTER) + named,
                                  campaign="+t.campaign_id" if not done_tasks else "t.campaign_id")
        bound = (campaign_id, *(() if done_tasks else (campaign_id,)), *(only or ()))
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(driver_sql(conn, sql), bound).fetchall()
        share: Callable[[Any, Any], Any] = {}.setdefault  # one object per distinct value; a C call
        return [HistoryRow(i, task, number, index, token, job, share(state, state), share(slurm, slurm), code,
                           share(nodes, nodes), elapsed, rss, ended, missing, share(res, res), share(sub, sub),
                           share(sub_state, sub_state), share(created, created), params, bool(own), cause,
                           evidence or "", bool(packed))
                for (i, task, number, index, token, job, state, slurm, code, nodes, elapsed, rss, ended, missing,
                     res, sub, sub_state, created, params, own, cause, evidence, packed) in rows]

    def first_done(self, campaign_id: int, first: int) -> list[int]:
        """The indices of the first `first` tasks history(done_tasks=False) leaves out (one
        attempt, COMPLETED): a screen shows a page of them and counts the rest."""
        with self.engine.connect() as conn:
            return [int(i) for i in conn.exec_driver_sql(driver_sql(conn, _FIRST_DONE_SQL),
                                                         (campaign_id, first)).scalars()]

    def tasks_started(self, campaign_id: int, below: int | None = None, abandoned: bool = True) -> int:
        """The campaign's tasks (under index `below`) with an attempt (one abandoned before Slurm, if `abandoned`)."""
        if below is None and abandoned:
            # a task's first attempt is numbered 1 (UNIQUE (task_id, attempt_number); none is
            # deleted): counted in attempts_done and attempts_open, where the tasks' join counted
            # a million tasks in 0.46 s and this 0.07 s
            query: sa.Executable = sa.text(_STARTED_SQL).bindparams(c=campaign_id)
        else:
            within = [tasks.c.task_index < below] if below is not None else []
            within += [] if abandoned else [attempts.c.state != "ABANDONED"]
            query = (sa.select(sa.func.count(sa.distinct(attempts.c.task_id)))
                     .join(tasks, tasks.c.id == attempts.c.task_id).where(tasks.c.campaign_id == campaign_id, *within))
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def last_completed(self, campaign_id: int) -> str:
        """When the campaign's latest COMPLETED attempt ended ('' when none has)."""
        with self.engine.connect() as conn:
            query = (sa.select(sa.func.max(attempts.c.ended_at)).join(tasks, tasks.c.id == attempts.c.task_id)
                     .where(tasks.c.campaign_id == campaign_id, attempts.c.state == "COMPLETED"))
            return conn.execute(query).scalar_one() or ""

    def record_observations(self, tick_id: int, changes: Sequence[ObservedChange]) -> None:
        """Write the latest Slurm facts onto attempts; keep a row per change of a fact a rule
        reads (the history a replay needs), not one per tick nor per growing elapsed time."""
        if not changes:
            return
        now = utc_now()
        with self.engine.connect() as conn, rederivable(conn), conn.begin():
            conn.exec_driver_sql(driver_sql(
                conn, "UPDATE attempts SET state=?, slurm_state=?, exit_code=?, nodes=?, elapsed_s=?, "
                "max_rss=?, ended_at=?, missing_since=?, alloc_tres=COALESCE(NULLIF(?, ''), alloc_tres), "
                "consumed_energy_j=COALESCE(?, consumed_energy_j) WHERE id=?"),
                [(*c.facts, c.alloc_tres, c.consumed_energy_j, c.attempt_id) for c in changes])
            moved = [(c.attempt_id, tick_id, *c.facts[:5], now, *c.facts[5:]) for c in changes if c.for_history]
            if moved:
                conn.exec_driver_sql(driver_sql(
                    conn, "INSERT INTO observations (attempt_id, tick_id, state, slurm_state, exit_code, "
                    "nodes, elapsed_s, observed_at, max_rss, ended_at, missing_since) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"), moved)

    def array_throttles(self, campaign_id: int) -> dict[str, int | None]:
        """Current throttle per submitted array job id (the `%N` of its array spec)."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(submissions.c.job_id, submissions.c.array_spec).where(
                submissions.c.campaign_id == campaign_id, submissions.c.job_id.is_not(None))).all()
        return {r.job_id: int(r.array_spec.split("%")[1]) if "%" in r.array_spec else None for r in rows}

    def set_array_throttle(self, job_id: str, throttle: int) -> None:
        with self.engine.begin() as conn:
            spec = conn.execute(sa.select(submissions.c.array_spec)
                                .where(submissions.c.job_id == job_id)).scalar_one()
            conn.execute(submissions.update().where(submissions.c.job_id == job_id).values(
                array_spec=f"{spec.split('%')[0]}%{throttle}", updated_at=utc_now()))

    def set_attempt_resources(self, tokens: Sequence[str], resources_json: str) -> None:
        with self.engine.begin() as conn:
            for part in in_parts(tokens):
                conn.execute(attempts.update().where(attempts.c.token.in_(part)).values(resources_json=resources_json))

    def set_attempt_causes(self, causes: Mapping[int, tuple[str, str]]) -> None:
        """(cause, evidence) by attempt id, as the runner wrote them into exit.json."""
        if not causes:
            return
        with self.engine.begin() as conn:
            conn.exec_driver_sql(driver_sql(conn, "UPDATE attempts SET cause=?, evidence=? WHERE id=?"),
                                 [(c, e, i) for i, (c, e) in causes.items()])

    def attempt_params(self, submission_token: str) -> dict[int, dict[str, Scalar]]:
        """Task parameters a rule set for elements of one submission, by array index (an
        element absent here runs with its task's own)."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(attempts.c.array_index, attempts.c.params_json)
                                .join(submissions, submissions.c.id == attempts.c.submission_id)
                                .where(submissions.c.token == submission_token,
                                       attempts.c.params_json.is_not(None))).all()
        return {r.array_index: json.loads(r.params_json) for r in rows}

    def task_params(self, campaign_id: int) -> dict[int, dict[str, Scalar]]:
        """Each task's params."""
        return self._params(self._of_tasks(campaign_id))

    def unstarted_params(self, campaign_id: int, started: int) -> dict[int, dict[str, Scalar]]:
        """The params of the tasks with no attempt yet; `started`: how many have one
        (tasks_started): when that is every task, one count answers, not a probe of each."""
        with self.engine.connect() as conn:
            count = conn.execute(sa.select(sa.func.count()).where(tasks.c.campaign_id == campaign_id)).scalar_one()
        if count == started:
            return {}
        return self._params(self._of_tasks(campaign_id).where(~sa.exists().where(attempts.c.task_id == tasks.c.id)))

    @staticmethod
    def _of_tasks(campaign_id: int) -> sa.Select[Any]:
        return sa.select(tasks.c.task_index, tasks.c.params_json).where(tasks.c.campaign_id == campaign_id)

    def _params(self, query: sa.Select[Any]) -> dict[int, dict[str, Scalar]]:
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return {r.task_index: json.loads(r.params_json) for r in rows}


_HISTORY_SQL = """
SELECT a.id, t.task_index, a.attempt_number, a.array_index, a.token, a.job_id, a.state, a.slurm_state,
       a.exit_code, a.nodes, a.elapsed_s, a.max_rss, a.ended_at, a.missing_since,
       COALESCE(a.resources_json, s.resources_json), s.token, s.state, a.created_at,
       COALESCE(a.params_json, t.params_json), a.params_json IS NOT NULL, a.cause, a.evidence, s.pack != ''
FROM attempts a JOIN tasks t ON t.id = a.task_id JOIN submissions s ON s.id = a.submission_id
WHERE {campaign} = ?{filter} ORDER BY t.task_index, a.attempt_number"""
_STARTED_SQL = f"""SELECT (SELECT COUNT(*) FROM attempts a WHERE a.submission_id IN (SELECT id FROM submissions
WHERE campaign_id = :c) AND {DONE.format(a="a")}) + (SELECT COUNT(*) FROM attempts a WHERE +a.submission_id IN
(SELECT id FROM submissions WHERE campaign_id = :c) AND {OPEN.format(a="a")} AND a.attempt_number = 1)"""
# the complement of _UNDONE_FILTER among tasks with an attempt, in index order: the scan of the
# tasks' (campaign_id, task_index) index stops at the LIMIT (100 of 100,000: under 1 ms)
_FIRST_DONE_SQL = f"""SELECT t.task_index FROM tasks t WHERE t.campaign_id = ?
AND EXISTS (SELECT 1 FROM attempts a WHERE a.task_id = t.id)
AND NOT EXISTS (SELECT 1 FROM attempts x WHERE x.task_id = t.id AND {OPEN.format(a="x")})
ORDER BY t.task_index LIMIT ?"""
# the open tasks' ids from the attempts_open index (10,309 of 1,000,000 tasks in 10 ms, where a
# per-task EXISTS took 1.8 s); "+" keeps SQLite from starting at the campaign's every task instead
_UNDONE_FILTER = f""" AND a.task_id IN (SELECT x.task_id FROM attempts x
  WHERE x.submission_id IN (SELECT id FROM submissions WHERE campaign_id = ?) AND {OPEN.format(a="x")})"""
