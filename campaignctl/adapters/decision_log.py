"""The decision log: ticks, decisions (intent, written before acting) and their outcomes
(written after). Rows are only ever inserted; SQLite triggers refuse UPDATE and DELETE."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import sqlalchemy as sa

from campaignctl.adapters.node_marks import Marks, insert_marks
from campaignctl.adapters.store_engine import CHAIN_LOCK_KEY, driver_sql, inserted_id, utc_now, write_lock
from campaignctl.adapters.store_schema import attempts, campaigns, decision_outcomes, decisions, submissions, ticks
from campaignctl.adapters.submission_rows import insert_submission
from campaignctl.core.base.errors import AnsweredElsewhereError, WriteConflictError
from campaignctl.core.decisions.action_records import RECORD, ActionRecord, Cancel, Stop, Verdict, effect_of, record_of
from campaignctl.core.decisions.actions import SubmissionIntent
from campaignctl.core.decisions.answers import ACTING, ANSWERS
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.decisions.decision_rows import GROUPED, MEMBERS, collapse, expand
from campaignctl.core.governance import chain
from campaignctl.core.governance.chain import DECISION_FIELDS, EMPTY, OUTCOME_FIELDS, Head
from campaignctl.core.policy.policy import Policy

# core/decisions/answers.py: ACTING answer an attempt for good, a stop (early stopping) once carried out or
# about to be (no outcome yet, no approval awaited): one that failed, waits for approval, was
# rejected or expired leaves the attempt to the other rules. ANSWERS answer it whatever their
# outcome: the schema allows one of them per attempt (migration 011's unique index: PostgreSQL
# names it, SQLite names its column).
ONE_ANSWER = ("decisions_one_answer", "decisions.attempt_token")


@dataclass(frozen=True, slots=True)
class LoggedDecision:
    id: int
    tick_id: int
    campaign: str
    task_index: int
    attempt_token: str
    policy: str
    policy_digest: str
    rule: str
    action: str
    params: dict[str, object]
    inputs: dict[str, object]
    reason: str
    mode: str
    group_token: str
    created_at: str
    status: str  # pending | awaiting-approval (no outcome yet) | applied | failed | proposed | rejected | expired
    detail: dict[str, object]
    error: str
    outcome_at: str | None
    revision: int = 0
    gate: str = ""

    @property
    def typed(self) -> ActionRecord:
        return record_of(self.action, self.params)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class DecisionLog:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def begin_tick(self, scope: str, clock: str = "") -> int:
        """`clock`: the UTC time the tick's rules compare against (replay reuses it)."""
        with self.engine.begin() as conn:
            return inserted_id(conn.execute(ticks.insert().values(
                started_at=utc_now(), status="running", scope=scope, clock=clock)))

    def finish_tick(self, tick_id: int, status: str, slurm_calls: int, decided: int, note: str = "") -> None:
        with self.engine.begin() as conn:
            conn.execute(ticks.update().where(ticks.c.id == tick_id).values(
                finished_at=utc_now(), status=status, slurm_calls=slurm_calls, decisions=decided, note=note))

    def write_intents(self, tick_id: int, campaign_id: int, policy: Policy,
                      planned: Sequence[tuple[Decision, str]], intents: Sequence[SubmissionIntent],
                      revision: int, marks: Marks | None = None) -> list[int]:
        """In ONE transaction: every decision of the tick, the submission intent rows of the
        resubmissions, the outcome of decisions that need no Slurm call (effect RECORD) and, given
        `marks` (each decision's cluster, user), the node ledger's rows of its node evidence. A crash after this
        commit is finished by the next tick; before it, nothing happened at all."""
        now = utc_now()
        label, digest = policy.label, policy.digest  # the digest hashes the whole policy: once
        try:
            return self._write_intents(tick_id, campaign_id, label, digest, planned, intents, revision, now, marks)
        except WriteConflictError as exc:
            if exc.constraint not in ONE_ANSWER:
                raise
            answering = {d.attempt_token for d, _ in planned if d.mode == "enforce" and d.action in ANSWERS}
            taken = ", ".join(sorted(answering & self.decided_tokens(campaign_id))) or "?"
            raise AnsweredElsewhereError(
                f"another tick answered attempt(s) {taken} at the same moment; the decisions this tick was "
                "writing for the campaign were rolled back, none of them carried out",
                "nothing to do: the other tick acts on them",
                exc.constraint) from None

    def _write_intents(self, tick_id: int, campaign_id: int, label: str, digest: str,
                       planned: Sequence[tuple[Decision, str]], intents: Sequence[SubmissionIntent],
                       revision: int, now: str, marks: Marks | None = None) -> list[int]:
        rows, where = collapse(planned)  # pending tasks resized alike share a row (core/decisions/decision_rows.py)
        with self.engine.begin() as conn:
            write_lock(conn, CHAIN_LOCK_KEY)
            head = chain_head(conn, "decisions")
            ids = list(range(head.id + 1, head.id + 1 + len(rows)))
            values = [(i, tick_id, campaign_id, d.task_index, d.attempt_token, label, digest, d.rule, d.action,
                       _dump(d.params), _dump(d.inputs), d.reason, d.mode, group, now, revision, d.gate)
                      for i, (d, group) in zip(ids, rows, strict=True)]
            _insert_chained(conn, "decisions", DECISION_FIELDS, head, values)
            for intent in intents:
                insert_submission(conn, campaign_id, intent)
            done = [i for i, (d, _) in zip(ids, rows, strict=True)
                    if effect_of(d.action) == RECORD and d.mode == "enforce" and not d.gate]
            _insert_outcomes(conn, done, "applied", {}, "")
            proposed = [i for i, (d, _) in zip(ids, rows, strict=True) if d.mode == "shadow"]
            _insert_outcomes(conn, proposed, "proposed", {}, "")
            if marks is not None:
                insert_marks(conn, *marks, campaign_id=campaign_id, at=now, decided=[
                    (i, d) for i, (d, _) in zip(ids, rows, strict=True) if d.mode == "enforce" and not d.gate])
        return [ids[at] for at in where]

    def write_outcomes(self, decision_ids: Sequence[int], status: str,
                       detail: dict[str, object], error: str = "") -> None:
        with self.engine.begin() as conn:
            write_lock(conn, CHAIN_LOCK_KEY)
            _insert_outcomes(conn, decision_ids, status, detail, error)

    def decided_tokens(self, campaign_id: int) -> set[str]:
        d, o = decisions.c, decision_outcomes.c
        stopped = sa.and_(d.action == "stop", sa.or_(o.status == "applied", sa.and_(o.id.is_(None), d.gate == "")))
        query = (sa.select(d.attempt_token).outerjoin(decision_outcomes, o.decision_id == d.id)
                 .where(d.campaign_id == campaign_id, d.mode == "enforce",  # a shadow proposal answers nothing
                        d.action.in_(ACTING), sa.or_(d.action != "stop", stopped)))
        with self.engine.connect() as conn:
            return set(conn.execute(query).scalars())

    def cancelled_pending_tokens(self, campaign_id: int) -> set[str]:
        """Attempts whose element this campaign cancelled while it was pending (an applied cancel
        or stop with only_if PENDING, or `campaignctl cancel` of one seen PENDING): Slurm 24.11
        keeps no accounting record of such an element."""
        d, o = decisions.c, decision_outcomes.c
        query = (sa.select(d.attempt_token, d.action, d.params_json).join(decision_outcomes, o.decision_id == d.id)
                 .where(d.campaign_id == campaign_id, d.mode == "enforce", d.action.in_(("cancel", "stop")),
                        o.status == "applied"))
        with self.engine.connect() as conn:
            rows = [(token, record_of(action, json.loads(params))) for token, action, params in conn.execute(query)]
        return {token for token, p in rows if isinstance(p, (Cancel, Stop)) and "PENDING" in (p.only_if, _seen(p))}

    def unresolved_tokens(self, campaign_id: int) -> set[str]:
        """Attempts whose resubmission Slurm refused for good: answered (never retried blindly
        every tick) but not settled, so the campaign does not count as finished."""
        query = (sa.select(decisions.c.attempt_token)
                 .join(decision_outcomes, decision_outcomes.c.decision_id == decisions.c.id)
                 .where(decisions.c.campaign_id == campaign_id, decisions.c.action == "resubmit",
                        decision_outcomes.c.status == "failed"))
        with self.engine.connect() as conn:
            return set(conn.execute(query).scalars())

    def unanswered_abandoned(self, campaign_id: int) -> dict[str, tuple[str, int]]:
        """Abandoned submissions with an attempt no decision answers (left by a version that
        abandoned a refused retry without giving its tasks up): token → (last error, tries)."""
        a, s, d = attempts.c, submissions.c, decisions.c
        answered = sa.select(d.id).where(d.attempt_token == a.token, d.mode == "enforce", d.action.in_(ACTING))
        query = (sa.select(s.token, s.last_error, s.tries).join(attempts, a.submission_id == s.id)
                 .where(s.campaign_id == campaign_id, s.state == "abandoned", ~answered.exists()).distinct())
        with self.engine.connect() as conn:
            return {token: (error, tries) for token, error, tries in conn.execute(query).all()}

    def entry(self, decision_id: int) -> LoggedDecision | None:
        found = self.entries(ids=[decision_id])
        return found[0] if found else None

    def proposal_keys(self, campaign_id: int) -> set[tuple[str, str, str, str]]:
        """(policy digest, attempt token, rule, action) of every shadow proposal so far."""
        d = decisions.c
        query = sa.select(d.policy_digest, d.attempt_token, d.rule, d.action).where(
            d.campaign_id == campaign_id, d.mode == "shadow")
        with self.engine.connect() as conn:
            return {(r[0], r[1], r[2], r[3]) for r in conn.execute(query)}

    def approvals(self, campaign_id: int | None = None) -> dict[int, str]:
        """Approved decision id → the submission token its approval named."""
        return {p.decision_id: p.token for e in self.entries(campaign_id, actions=("approve",))
                if isinstance(p := e.typed, Verdict)}

    def awaiting(self, campaign_id: int | None = None) -> list[LoggedDecision]:
        """Decisions waiting for `campaignctl approve`: gated, no outcome, not approved yet."""
        approved = self.approvals(campaign_id)
        return [e for e in self.entries(campaign_id, open_only=True, grouped=True)
                if e.gate and e.mode == "enforce" and e.id not in approved]

    def entries(self, campaign_id: int | None = None, task_index: int | None = None,
                open_only: bool = False, limit: int | None = None,
                actions: Sequence[str] | None = None, ids: Sequence[int] | None = None,
                grouped: bool = False, params: bool = True) -> list[LoggedDecision]:
        """The log's decisions with their outcomes, oldest first: one per task (a grouped row
        expanded, each copy with the row's id), or with `grouped` one per row as written.
        `params` False: each decision's params left empty, but for a grouped row's members (a
        1,000,000-task campaign's `start` and `pack` list their tasks: 16 MB of JSON `status`
        never shows)."""
        d, o = decisions.c, decision_outcomes.c
        query = (sa.select(d.id, d.tick_id, campaigns.c.name, d.task_index, d.attempt_token, d.policy,
                           d.policy_digest, d.rule, d.action, d.params_json, d.inputs_json, d.reason,
                           d.mode, d.group_token, d.created_at, o.status, o.detail_json, o.error,
                           o.created_at.label("outcome_at"), d.revision, d.gate)
                 .join(campaigns, campaigns.c.id == d.campaign_id)
                 .outerjoin(decision_outcomes, o.decision_id == d.id).order_by(d.id))
        if campaign_id is not None:
            query = query.where(d.campaign_id == campaign_id)
        if task_index is not None:  # a grouped row names its first task: the others are in its params
            query = query.where(sa.or_(d.task_index == task_index, d.action.in_(GROUPED)))
        if open_only:
            query = query.where(o.id.is_(None))
        if actions is not None:
            query = query.where(d.action.in_(actions))
        if ids is not None:
            query = query.where(d.id.in_(ids))
        if limit:
            query = query.order_by(None).order_by(d.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        out = [LoggedDecision(
            r.id, r.tick_id, r.name, task, token, r.policy, r.policy_digest, r.rule,
            r.action, said, inputs, r.reason, r.mode,
            r.group_token, r.created_at, r.status or ("awaiting-approval" if r.gate else "pending"),
            json.loads(r.detail_json or "{}"), r.error or "", r.outcome_at, r.revision, r.gate)
            for r in rows for task, token, said, inputs in _decisions_of(r, grouped, params)
            if task_index is None or task == task_index]
        return sorted(out, key=lambda e: e.id)


def _seen(p: Cancel | Stop) -> str:
    return p.seen if isinstance(p, Stop) else ""


def _decisions_of(row: Any, grouped: bool, wanted: bool) -> list[tuple[int, str, dict[str, object], dict[str, object]]]:
    text = row.params_json
    params = json.loads(text) if wanted or (not grouped and f'"{MEMBERS}"' in text) else {}
    inputs = json.loads(row.inputs_json)
    if grouped:
        return [(row.task_index, row.attempt_token, params, inputs)]
    return expand(row.task_index, row.attempt_token, params, inputs)


def _insert_outcomes(conn: sa.Connection, decision_ids: Sequence[int], status: str,
                     detail: dict[str, object], error: str) -> None:
    decision_ids = list(dict.fromkeys(decision_ids))  # the decisions of one grouped row share its id
    if decision_ids:
        now, detail_json = utc_now(), _dump(detail)
        head = chain_head(conn, "decision_outcomes")
        _insert_chained(conn, "decision_outcomes", OUTCOME_FIELDS, head, [
            (head.id + n, i, status, detail_json, error, now) for n, i in enumerate(decision_ids, start=1)])


def chain_head(conn: sa.Connection, table: str) -> Head:
    """The chain's last row (EMPTY when it has none), read in the caller's transaction, which holds
    the chain's write lock (`write_lock(conn, CHAIN_LOCK_KEY)`, its first statement). Without it two
    ticks on different campaigns of one PostgreSQL read the same head and the second failed on
    `decisions_pkey` (issue 15); the primary key still keeps the chain from forking silently."""
    row = conn.exec_driver_sql(f"SELECT id, row_hash FROM {table} ORDER BY id DESC LIMIT 1").first()
    return Head(int(row[0]), row[1]) if row else EMPTY


def _insert_chained(conn: sa.Connection, table: str, fields: Sequence[tuple[str, type]], head: Head,
                    rows: Sequence[tuple[object, ...]]) -> None:
    """Insert rows with explicit ids (head.id + 1, …: their hash covers the id) after `head`:
    hashes computed in one pass, one executemany."""
    if not rows:
        return
    links = chain.extend_chain(head.row_hash, fields, rows)
    columns = ", ".join(name for name, _ in fields) + ", prev_hash, row_hash"
    marks = ", ".join("?" * (len(fields) + 2))
    conn.exec_driver_sql(driver_sql(conn, f"INSERT INTO {table} ({columns}) VALUES ({marks})"),
                         [(*row, prev, digest) for row, (prev, digest) in zip(rows, links, strict=True)])


def _dump(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)
