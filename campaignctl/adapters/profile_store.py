"""A profile's history, read from the facts the store already holds: every ended attempt of the
campaigns whose revision names the profile (`settings_json`), with sacct's MaxRSS and Elapsed and
the sampler's summary. A sample's peak memory is the largest of sacct's MaxRSS, the sampler's
summed RSS and the working set of the memory cgroup that enforced its limit (its usage less the
inactive page cache, adapters/cgroup_memory.py: shared memory and file pages in use count, a file
read once does not). No copy: a profile is a query.

Read for a viewer, a profile pools the viewer's own campaigns, those shared with a group of
theirs, and other users' that say `profile: {shared: true}`. A peak memory that cannot be a
measurement (core/tick/right_size.plausible_peak) is left out of its sample."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from campaignctl.adapters.store_engine import driver_sql
from campaignctl.core.governance.ownership import Identity, Ownership, share_of
from campaignctl.core.model.sacct_values import rss_mb
from campaignctl.core.packing.profile import group_of
from campaignctl.core.slurm.observe import resources_parser
from campaignctl.core.tick.right_size import ENDED, RULE, SIZE_FIRST, UsageSample, plausible_peak
from campaignctl.core.usage.bottleneck import bottleneck
from campaignctl.core.usage.telemetry import Summary, summary_from_dict

# settings_json is written by json.dumps with its default separators (": ")
_SAMPLES_SQL = """
SELECT c.name, c.id, c.owner, r.settings_json, t.task_index, COALESCE(a.params_json, t.params_json), a.state,
       a.elapsed_s, a.max_rss, COALESCE(a.resources_json, s.resources_json), tel.summary_json, a.token, s.token
FROM attempts a JOIN tasks t ON t.id = a.task_id JOIN submissions s ON s.id = a.submission_id
JOIN campaigns c ON c.id = t.campaign_id JOIN revisions r ON r.campaign_id = c.id AND r.number = s.revision
LEFT JOIN telemetry tel ON tel.attempt_id = a.id
WHERE a.state IN ({states}) AND r.settings_json LIKE ? {campaign}
ORDER BY a.id"""

_RIGHT_SIZED_SQL = """
SELECT d.action, d.attempt_token, d.group_token FROM decisions d
WHERE d.rule = ? AND d.mode = 'enforce' AND d.campaign_id IN ({ids})"""

_LOWERED_SQL = ("SELECT attempt_token FROM decisions WHERE campaign_id = ? AND rule = ? "
                "AND action = 'resize_pending'")

_PROFILES_SQL = "SELECT DISTINCT c.name, r.settings_json FROM revisions r JOIN campaigns c ON c.id = r.campaign_id " \
                "WHERE r.settings_json LIKE ?"


@dataclass(frozen=True, slots=True)
class ProfileCampaign:
    name: str
    profile: str


class ProfileStore:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def campaigns(self) -> list[ProfileCampaign]:
        """Every (campaign, profile) a revision names."""
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(driver_sql(conn, _PROFILES_SQL), ('%"profile": {"name": %',)).fetchall()
        found = {(name, _profile(settings)[0]) for name, settings in rows}
        return [ProfileCampaign(n, p) for n, p in sorted(found) if p]

    def samples(self, profile: str, campaign_id: int | None = None,
                viewer: Identity | None = None) -> list[UsageSample]:
        """The profile's ended attempts (of one campaign when `campaign_id` is given), oldest first;
        with `viewer`, only of the campaigns it may pool (the module's docstring)."""
        sql = _SAMPLES_SQL.format(states=", ".join(f"'{s}'" for s in ENDED),
                                  campaign="" if campaign_id is None else "AND c.id = ?")
        args: tuple[object, ...] = (f'%"profile": {{"name": {json.dumps(profile)}%',)
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(driver_sql(conn, sql), args + ((campaign_id,) if campaign_id else ())
                                        ).fetchall()
            sized = self._right_sized(conn, sorted({r[1] for r in rows}))
        parse = resources_parser()
        out = []
        for name, _, owner, settings_json, index, params, state, elapsed, max_rss, res, summary_json, token, sub \
                in rows:
            settings = json.loads(settings_json)
            pname, by = _profile(settings_json)
            if pname != profile or (viewer is not None and not _pooled(viewer, owner, settings)):
                continue
            requested = parse(res)
            rung = index // int(settings["configs"]) if settings.get("rungs") else 0
            summary = summary_from_dict(json.loads(summary_json)) if summary_json else None
            peaks = [v for v in _peaks(max_rss, summary) if v is not None and plausible_peak(v, requested.mem_mb)]
            peak = max(peaks) if peaks else None
            held = bottleneck(summary, requested.cpus_per_task, requested.mem_mb, requested.gpus, peak)
            out.append(UsageSample(
                name, group_of(rung, json.loads(params), by), state, peak, elapsed,
                requested, gpu_mem_mb=summary.gpu_mem_max_mb if summary and summary.gpu_samples else None,
                cpu_pct=summary.cpu_mean if summary else None, right_sized=token in sized or sub in sized,
                gpu_mem_total_mb=summary.gpu_mem_total_mb or None if summary else None,
                gpu_util_pct=summary.gpu_util_mean if summary else None, bottleneck=held.label if held else None))
        return out

    def lowered(self, campaign_id: int) -> set[str]:
        """Attempts of the campaign a right_size decision already resized in place (any mode)."""
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(driver_sql(conn, _LOWERED_SQL), (campaign_id, RULE)).fetchall()
        return {r[0] for r in rows}

    def _right_sized(self, conn: sa.Connection, campaign_ids: Sequence[int]) -> set[str]:
        """Tokens of attempts (resized in place) and submissions (sized at submit) whose limits
        an enforced right_size decision chose."""
        if not campaign_ids:
            return set()
        sql = _RIGHT_SIZED_SQL.format(ids=", ".join(str(int(i)) for i in campaign_ids))
        rows = conn.exec_driver_sql(driver_sql(conn, sql), (RULE,)).fetchall()
        return {group if action == SIZE_FIRST else token for action, token, group in rows}


def _pooled(viewer: Identity, owner: str, settings: dict[str, Any]) -> bool:
    shared = bool((settings.get("profile") or {}).get("shared"))
    return shared or Ownership(owner, share_of(settings)).may_act(viewer)


def _profile(settings_json: str) -> tuple[str, tuple[str, ...]]:
    value = json.loads(settings_json).get("profile") or {}
    return str(value.get("name", "")), tuple(value.get("by", ()))


def _peaks(max_rss: str | None, summary: Summary | None) -> tuple[float | None, ...]:
    """What a sample's peak memory is the largest of. Where the sampler read the cgroup's working
    set, that and its RSS: sacct's MaxRSS means different things by site and version (the summed
    RSS of the step's processes under jobacct_gather/linux; under jobacct_gather/cgroup on cgroup
    v1, the cgroup's usage page cache included on the lab's Slurm 24.11 — 147 MB for a task of
    14 MB that read a 256 MiB file once —, not on its 22.05), and the working set already holds
    every anonymous page of the cgroup. Without it, MaxRSS and the sampler's RSS."""
    sampled = summary if summary is not None and summary.samples else None
    if sampled is not None and sampled.cgroup_ws_peak_mb > 0:
        return sampled.rss_max_mb, sampled.cgroup_ws_peak_mb
    return rss_mb(max_rss or ""), sampled.rss_max_mb if sampled else None
