"""What the known-good verdict reads about one revision's time as current: a few COUNT/SELECTs
over attempts, observations and the decision log."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from campaignctl.adapters.store_engine import driver_sql
from campaignctl.core.base.clock import read_time
from campaignctl.core.governance.governance import RevisionRun
from campaignctl.core.model.records import RevisionRecord

# Failures a policy's own choice of resources can cause; a node failure or a preemption is not its doing.
_POLICY_MADE = ("OUT_OF_MEMORY", "TIMEOUT", "FAILED")
_RAN = """
SELECT COUNT(DISTINCT o.attempt_id) FROM observations o JOIN attempts a ON a.id = o.attempt_id
JOIN tasks t ON t.id = a.task_id
WHERE t.campaign_id = ? AND o.observed_at >= ? AND o.state NOT IN ('PENDING', 'SUBMITTED', 'SUBMITTING', 'UNKNOWN')"""
_REFUSED = """
SELECT d.id, d.rule, d.action, o.error FROM decisions d JOIN decision_outcomes o ON o.decision_id = d.id
WHERE d.campaign_id = ? AND d.revision = ? AND o.status = 'failed'"""
_FAILED_RETRIES = f"""
SELECT a.token, a.state FROM attempts a JOIN submissions s ON s.id = a.submission_id
WHERE s.campaign_id = ? AND s.revision = ? AND s.kind = 'retry' AND a.state IN {_POLICY_MADE}"""
_FAILED_RESIZED = f"""
SELECT a.token, a.state FROM decisions d JOIN decision_outcomes o ON o.decision_id = d.id
JOIN attempts a ON a.token = d.attempt_token
WHERE d.campaign_id = ? AND d.revision = ? AND d.action = 'resize_pending' AND o.status = 'applied'
  AND a.state IN {_POLICY_MADE}"""


def revision_run(engine: sa.Engine, revision: RevisionRecord) -> RevisionRun:
    campaign, number = revision.campaign_id, revision.number
    with engine.connect() as conn:
        def rows(sql: str, *args: object) -> list[Any]:
            return list(conn.exec_driver_sql(driver_sql(conn, sql), args).fetchall())

        ran = int(rows(_RAN, campaign, revision.created_at)[0][0])
        failures = [f"decision #{i} ({rule} → {action}) failed: {error}"
                    for i, rule, action, error in rows(_REFUSED, campaign, number)]
        failures += [f"retry {token} made by this revision ended {state}"
                     for token, state in rows(_FAILED_RETRIES, campaign, number)]
        failures += [f"attempt {token} resized by this revision ended {state}"
                     for token, state in rows(_FAILED_RESIZED, campaign, number)]
    return RevisionRun(number, read_time(revision.created_at), ran, tuple(failures))
