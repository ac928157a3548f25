"""Packs in the simulation, as submit makes them (core/pack_plan.py): a first submission's tasks
cut into packs of `per_element`, each pack one array element (the host job the queue schedules,
asking for the pack's allocation), each task a member job with its own fate, its own memory and
time limits (its step's), and its share of the host's allocation. The host leaves its node when
its last member ends; a node failure or a preemption of the host ends every member still
running. A member that fails is retried alone, as any task (the engine's retries are unpacked).
A pack of plain processes (`processes`) starts that many members, the next as one ends; its
allocation holds that many tasks' worth, so each member's share is one of them; members that never
started when the host ends get the host's end."""

from __future__ import annotations

from collections.abc import Sequence

from campaignctl.core.pack_plan import PackShape, allocation
from campaignctl.core.resources import Resources
from campaignctl.core.sim.scheduler import Array, Job

PACK = -2  # a host's task: not a task of the campaign (the members are)


def make_packs(tasks: Sequence[int], each: Resources, shape: PackShape, array: Array, now: int) -> list[Job]:
    """One host per `shape.per_element` tasks of `array` (first attempts), each with its members."""
    whole = allocation(each, shape)
    hosts = []
    for n, start in enumerate(range(0, len(tasks), shape.per_element)):
        chunk = tasks[start:start + shape.per_element]
        host = Job(f"{array.id}_{n}", array, PACK, 1, f"pack{array.id}_{n}", whole, now)
        host.members, host.at_once = [], shape.processes
        for task in chunk:
            member = Job(host.jid, array, task, 1, f"t{task}a1", each, now)
            member.host, member.share = host, 1 / min(len(chunk), shape.processes or len(chunk))
            host.members.append(member)
        hosts.append(host)
    return hosts


def idle_hours(host: Job, now: int) -> tuple[float, float]:
    """(GPU-, CPU-hours) of the host's allocation its members' shares did not count."""
    assert host.start is not None and host.members is not None
    held = (now - host.start) / 3600
    used = sum(((m.end_at if m.end_at is not None else now) - (m.start if m.start is not None else now)) * m.share
               for m in host.members) / 3600
    return (max(0.0, held * host.res.gpus - used * host.res.gpus),
            max(0.0, held * host.res.cpus_per_task - used * host.res.cpus_per_task))


def all_ended(host: Job) -> bool:
    return host.members is not None and all(m.state not in ("PENDING", "RUNNING") for m in host.members)
