"""What spend is computed from: a campaign's attempts that reached Slurm, grouped by state and
resources (one GROUP BY: a handful of rows however many attempts), or one row per attempt for
the few whose phase sacct may tell differently now (`status` moves those into the phase it says,
so the spend line agrees with the task table it prints)."""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa

from campaignctl.adapters.store_engine import DONE, OPEN, driver_sql
from campaignctl.core.slurm.observe import resources_parser
from campaignctl.core.usage.cost import UsageGroup, phase_of

# a campaign's attempts that reached Slurm (found by its submissions), with their energy: sacct's
# ConsumedEnergyRaw (the node) where the site accounts it, else their GPUs' (NVML)
_ENERGY = ("COALESCE(a.consumed_energy_j, a.gpu_energy_j, 0)",
           "CASE WHEN a.consumed_energy_j IS NOT NULL THEN 1 ELSE 0 END",
           "CASE WHEN a.consumed_energy_j IS NULL AND a.gpu_energy_j > 0 THEN 1 ELSE 0 END")
_SUBMISSIONS = "a.submission_id IN (SELECT id FROM submissions WHERE campaign_id = ?) AND a.job_id IS NOT NULL"
_SUMS = ("a.state, a.resources_json AS res, a.submission_id AS sub, a.alloc_tres, COUNT(*) AS n, "
         "SUM(a.elapsed_s) AS elapsed, "
         + ", ".join(f"SUM({e}) AS {name}" for e, name in zip(_ENERGY, ("energy", "node", "gpu"), strict=True)))
_BY = " GROUP BY a.submission_id, a.resources_json, a.alloc_tres, a.state"
# grouped by state, the attempt's own resources (set by an in-place resize) and its submission,
# whose resources and cluster are joined to the groups (grouping by the JSON text took twice as
# long). The done attempts are read from attempts_done alone, every column in it; the open ones
# through attempts_open ("+" keeps SQLite's planner off attempts_submission, which would look up
# every attempt of the campaign). (cluster or job id, state, resources, AllocTRES, attempts,
# elapsed, energy, by node, by GPU)
_GROUPED = ("SELECT COALESCE(s.cluster, ''), g.state, COALESCE(g.res, s.resources_json), g.alloc_tres, SUM(g.n), "
            "SUM(g.elapsed), SUM(g.energy), SUM(g.node), SUM(g.gpu) FROM ("
            f"SELECT {_SUMS} FROM attempts a WHERE {_SUBMISSIONS} AND {DONE.format(a='a')}{{filter}}{_BY} UNION ALL "
            f"SELECT {_SUMS} FROM attempts a WHERE +{_SUBMISSIONS} AND {OPEN.format(a='a')}{{filter}}{_BY}"
            ") g JOIN submissions s ON s.id = g.sub GROUP BY g.sub, g.res, g.alloc_tres, g.state, s.cluster, "
            "s.resources_json")
# the attempts sacct may still change are open: read through attempts_open alone
_EACH = ("SELECT a.job_id, a.state, COALESCE(a.resources_json, s.resources_json), a.alloc_tres, 1, a.elapsed_s, "
         + ", ".join(_ENERGY) + f" FROM attempts a JOIN submissions s ON s.id = a.submission_id "
         f"WHERE +{_SUBMISSIONS} AND {OPEN.format(a='a')}{{filter}}")


def _in(states: Collection[str], negate: bool) -> str:
    if not states:
        return ""
    return f" AND a.state {'NOT ' if negate else ''}IN ({', '.join('?' * len(states))})"


class UsageQueries:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def groups(self, campaign_id: int, states: Collection[str] = ()) -> list[UsageGroup]:
        """The attempts (in `states`, when given) grouped by state and resources."""
        return [group for _, group in self.groups_by_cluster(campaign_id, states)]

    def groups_by_cluster(self, campaign_id: int, states: Collection[str] = ()) -> list[tuple[str, UsageGroup]]:
        """groups, each with the cluster its submission went to ('' the default one, SLURM_CONF's)."""
        return self._read(_GROUPED, campaign_id, states, negate=False, halves=2)

    def each(self, campaign_id: int, except_states: Collection[str]) -> list[tuple[str, UsageGroup]]:
        """One group per attempt not in `except_states`, with its job id. `except_states` holds
        COMPLETED (they are the settled states), so every attempt left is open."""
        if "COMPLETED" not in except_states:
            raise ValueError("UsageQueries.each reads open attempts only: except_states must hold COMPLETED")
        return self._read(_EACH, campaign_id, except_states, negate=True, halves=1)

    def _read(self, template: str, campaign_id: int, states: Collection[str],
              negate: bool, halves: int) -> list[tuple[str, UsageGroup]]:
        """`halves`: the SELECTs the template's UNION holds, each bound the campaign and the states."""
        listed = sorted(states)
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(driver_sql(conn, template.format(filter=_in(listed, negate))),
                                        (campaign_id, *listed) * halves).fetchall()
        parse = resources_parser()
        return [(key, UsageGroup(phase_of(state), parse(res), tres or "", int(n), int(elapsed or 0),
                                 float(energy or 0.0), int(node or 0), int(gpu or 0)))
                for key, state, res, tres, n, elapsed, energy, node, gpu in rows]
