"""Read one campaign's recorded history for replay: the ticks that saw it, its attempts with
their submissions, every observation and every decision (with its outcome), the current
revision's settings, the stored telemetry summaries and the metric points. Read-only."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import sqlalchemy as sa

from campaignctl.adapters.store_schema import (
    attempts,
    decision_outcomes,
    decisions,
    metrics,
    observations,
    revisions,
    submissions,
    tasks,
    telemetry,
    tick_failures,
    ticks,
)
from campaignctl.core.base.clock import read_time
from campaignctl.core.decisions.decision_rows import expand
from campaignctl.core.decisions.recorded import (
    CampaignHistory,
    RecordedAttempt,
    RecordedDecision,
    RecordedObservation,
    RecordedPoint,
    RecordedTick,
)
from campaignctl.core.model.records import AttemptFacts, CampaignRecord
from campaignctl.core.spec.settings import CampaignSettings, campaign_settings
from campaignctl.core.usage.telemetry import Summary, summary_from_dict

# Ticks that decided nothing at all: sacct failed before anything was observed.
_SILENT = ("observed-nothing",)


class HistoryStore:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def campaign_history(self, record: CampaignRecord) -> CampaignHistory:
        with self.engine.connect() as conn:
            recorded = _attempts(conn, record.id)
            seen = _observations(conn, record.id)
            logged = _decisions(conn, record.id)
            decided = {d.tick_id for d in logged}
            ran = _ticks(conn, record, {o.tick_id for o in seen} | decided, decided)
            settings = _settings(conn, record)
            summaries = _summaries(conn, record.id)
            points = _points(conn, record.id)
        return CampaignHistory(tuple(ran), tuple(recorded), tuple(seen), tuple(logged), settings, summaries,
                               tuple(points))


def _attempts(conn: sa.Connection, campaign_id: int) -> list[RecordedAttempt]:
    a, s, t = attempts.c, submissions.c, tasks.c
    query = (sa.select(a.id, t.task_index, a.attempt_number, a.array_index, a.token, a.job_id, s.token.label("sub"),
                       s.kind, s.resources_json.label("sub_res"), a.resources_json, a.created_at,
                       sa.func.coalesce(a.params_json, t.params_json).label("params"),
                       a.params_json.label("own_params"), a.cause, a.evidence, a.alloc_tres, s.array_spec, s.pack)
             .join(tasks, t.id == a.task_id).join(submissions, s.id == a.submission_id)
             .where(t.campaign_id == campaign_id).order_by(t.task_index, a.attempt_number))
    return [RecordedAttempt(r.id, r.task_index, r.attempt_number, r.array_index, r.token, r.job_id, r.sub,
                            r.kind, r.sub_res, r.resources_json is not None, _aware(r.created_at),
                            r.params, r.own_params is not None, r.cause, r.evidence or "", r.alloc_tres or "",
                            int(r.array_spec.split("%")[1]) if r.array_spec and "%" in r.array_spec else None,
                            bool(r.pack))
            for r in conn.execute(query)]


def _observations(conn: sa.Connection, campaign_id: int) -> list[RecordedObservation]:
    o = observations.c
    query = (sa.select(o.attempt_id, o.tick_id, o.state, o.slurm_state, o.exit_code, o.nodes, o.elapsed_s,
                       o.max_rss, o.ended_at, o.missing_since)
             .join(attempts, attempts.c.id == o.attempt_id).join(tasks, tasks.c.id == attempts.c.task_id)
             .where(tasks.c.campaign_id == campaign_id).order_by(o.id))
    return [RecordedObservation(r.attempt_id, r.tick_id, AttemptFacts(r.state, r.slurm_state, r.exit_code, r.nodes,
                                                                      r.elapsed_s, r.max_rss, r.ended_at,
                                                                      r.missing_since))
            for r in conn.execute(query)]


def _decisions(conn: sa.Connection, campaign_id: int) -> list[RecordedDecision]:
    d, out = decisions.c, decision_outcomes.c
    query = (sa.select(d.id, d.tick_id, d.task_index, d.attempt_token, d.policy, d.policy_digest, d.rule,
                       d.action, d.params_json, d.reason, d.mode, d.group_token, d.gate, out.status, d.inputs_json)
             .outerjoin(decision_outcomes, out.decision_id == d.id)
             .where(d.campaign_id == campaign_id).order_by(d.id))
    return [RecordedDecision(r.id, r.tick_id, task, token, r.policy, r.policy_digest, r.rule,
                             r.action, params, r.reason, r.mode, r.group_token,
                             r.status or ("awaiting-approval" if r.gate else "pending"), inputs)
            for r in conn.execute(query)  # a grouped row is the decisions it holds (core/decisions/decision_rows.py)
            for task, token, params, inputs in expand(r.task_index, r.attempt_token, json.loads(r.params_json),
                                                      json.loads(r.inputs_json or "{}"))]


def _settings(conn: sa.Connection, record: CampaignRecord) -> CampaignSettings:
    query = sa.select(revisions.c.settings_json).where(revisions.c.campaign_id == record.id,
                                                       revisions.c.number == record.current_revision)
    return campaign_settings(json.loads(conn.execute(query).scalar_one() or "{}"))


def _summaries(conn: sa.Connection, campaign_id: int) -> dict[int, Summary]:
    query = (sa.select(telemetry.c.attempt_id, telemetry.c.summary_json)
             .join(attempts, attempts.c.id == telemetry.c.attempt_id).join(tasks, tasks.c.id == attempts.c.task_id)
             .where(tasks.c.campaign_id == campaign_id))
    return {r.attempt_id: summary_from_dict(json.loads(r.summary_json)) for r in conn.execute(query)}


def _points(conn: sa.Connection, campaign_id: int) -> list[RecordedPoint]:
    m = metrics.c
    query = (sa.select(m.attempt_id, tasks.c.task_index, m.step, m.name, m.value, m.t.label("reported"))
             .join(attempts, attempts.c.id == m.attempt_id).join(tasks, tasks.c.id == attempts.c.task_id)
             .where(tasks.c.campaign_id == campaign_id)
             .order_by(tasks.c.task_index, attempts.c.attempt_number, m.id))
    return [RecordedPoint(r.attempt_id, r.task_index, r.step, r.name, r.value, r.reported) for r in conn.execute(query)]


def _ticks(conn: sa.Connection, record: CampaignRecord, touched: set[int], decided: set[int]) -> list[RecordedTick]:
    """Reconcile ticks (aimed at its name or --all) that observed or decided something of the
    campaign, or saw nothing change: from its first tick to its last, and after that while the
    campaign is still open (a finished campaign is left out of --all). A person's command logs
    under a tick of its own (`resume NAME`, `cancel NAME`): its decisions are history, read by the
    reconcile ticks after it, but no rules ran in it, so it is not replayed. Nor is a tick killed
    before it decided for the campaign (still `running`, or the campaign's part of it raised, with
    no decision of it logged): what it observed is history for the ticks after it, which decided
    in its place; replayed, it would decide a tick early on less than they saw."""
    if not touched:
        return []
    undecided = sa.select(tick_failures.c.tick_id).where(tick_failures.c.campaign_id == record.id,
                                                         tick_failures.c.tick_id.is_not(None))
    first, last = min(touched), max(touched)
    t = ticks.c
    aimed = sa.and_(t.id > first, t.status.not_in(_SILENT), t.scope.in_((record.name, "--all")))
    if record.state == "finished":  # --all skips it from then on; a tick naming it still decides on it
        aimed = sa.and_(aimed, sa.or_(t.id < last, t.scope == record.name))
    reconciling = t.scope.in_((record.name, "--all"))
    died = sa.or_(t.status == "running", t.id.in_(undecided))
    query = (sa.select(t.id, t.clock, t.started_at)
             .where(reconciling, sa.or_(t.id.in_(touched), aimed), sa.or_(sa.not_(died), t.id.in_(decided)))
             .order_by(t.id))
    return [RecordedTick(r.id, _clock(r.clock, r.started_at), _aware(r.started_at)) for r in conn.execute(query)]


def _aware(stored: str) -> datetime:
    """The store keeps UTC with its offset (`utc_now`)."""
    value = datetime.fromisoformat(stored)
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _clock(clock: str, started_at: str) -> datetime:
    """The UTC time the tick's rules compared against (a naive one, from before times were UTC:
    local time, core/base/clock.py); ticks from before it was stored: their start."""
    return read_time(clock) if clock else _aware(started_at).replace(microsecond=0)
