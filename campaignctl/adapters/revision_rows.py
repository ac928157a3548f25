"""The rows a campaign's revision and its task set are written as, and a revision read back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import sqlalchemy as sa

from campaignctl.adapters.store_engine import insert_many, utc_now
from campaignctl.adapters.store_schema import revisions, tasks
from campaignctl.core.model.params import TaskSpec
from campaignctl.core.model.records import RevisionRecord
from campaignctl.core.policy.policy import policy_to_dict
from campaignctl.core.spec.spec import CampaignSpec

# the key in a revision's settings_json naming the file of the environment captured for it
# (adapters/env_capture.py): a reference only, never the values
CAPTURED_ENV = "captured_env"


def task_row(campaign_id: int, task: TaskSpec) -> dict[str, object]:
    return {"campaign_id": campaign_id, "task_index": task.index, "params_json": json.dumps(dict(task.params)),
            "argv_json": json.dumps(list(task.argv)), "env_json": json.dumps(dict(task.env)) if task.env else "{}"}


def sync_tasks(conn: sa.Connection, campaign_id: int, task_specs: Sequence[TaskSpec]) -> None:
    known = dict(conn.execute(sa.select(tasks.c.task_index, tasks.c.params_json)
                              .where(tasks.c.campaign_id == campaign_id)).all())
    added = [task_row(campaign_id, t) for t in task_specs if t.index not in known]
    insert_many(conn, tasks, added)
    for t in task_specs:
        if t.index not in known:
            continue
        row = task_row(campaign_id, t)
        if known[t.index] != row["params_json"]:
            conn.execute(tasks.update().where(tasks.c.campaign_id == campaign_id, tasks.c.task_index == t.index)
                         .values(params_json=row["params_json"], argv_json=row["argv_json"], env_json=row["env_json"]))


def spec_revision(campaign_id: int, spec: CampaignSpec, spec_text: str, spec_path: str,
                   author: str, reason: str, captured_env: str = "") -> RevisionRecord:
    settings = {**spec.settings(), **({CAPTURED_ENV: captured_env} if captured_env else {})}
    return RevisionRecord(campaign_id=campaign_id, number=0, spec_text=spec_text, spec_hash=spec.spec_hash,
                          spec_path=spec_path, created_at="",
                          policy_json=json.dumps(policy_to_dict(spec.policy), sort_keys=True),
                          settings_json=json.dumps(settings), author=author, reason=reason, kind="spec")


def insert_revision(conn: sa.Connection, draft: RevisionRecord, number: int) -> None:
    conn.execute(revisions.insert().values(
        campaign_id=draft.campaign_id, number=number, spec_text=draft.spec_text, spec_hash=draft.spec_hash,
        spec_path=draft.spec_path, author=draft.author, reason=draft.reason, created_at=utc_now(),
        policy_json=draft.policy_json, settings_json=draft.settings_json, kind=draft.kind,
        shadow_policy_json=draft.shadow_policy_json, source_revision=draft.source_revision))


def revision_record(row: sa.Row[Any]) -> RevisionRecord:
    m = row._mapping
    return RevisionRecord(**{f.name: m[f.name] for f in fields(RevisionRecord)})
