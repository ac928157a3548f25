"""What a new revision does to a campaign's tasks. Tasks are known by index (every attempt, metric
and decision is stored under one), so a revision may keep each task's index and parameters and add
tasks after the last (a grid grown by a value of its first key, a longer `tasks:` list, more
trials), which run; anything else would read one config's history as another's, and is refused
unless asked for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from campaignctl.core.model.params import Scalar, TaskSpec
from campaignctl.core.screens.status import param_text

SHOWN = 10  # tasks named one by one in a refusal; the rest are counted


@dataclass(frozen=True, slots=True)
class TaskSetChange:
    added: tuple[int, ...] = ()
    changed: tuple[tuple[int, str, str], ...] = ()  # index, its parameters before, after
    removed: tuple[int, ...] = ()

    @property
    def reshapes(self) -> bool:
        """Tasks whose index would name other parameters, or that would leave the campaign."""
        return bool(self.changed or self.removed)

    def lines(self) -> list[str]:
        """What would happen to each task, for the refusal."""
        said = [f"task {i}: {before or 'no parameters'} would become {after or 'no parameters'}; its attempts, "
                "metrics and decisions so far would be read as the new config's" for i, before, after in self.changed]
        said += [f"task {i}: no longer in the spec; its history stays, nothing runs or retries it"
                 for i in self.removed]
        said += [f"task {i}: added, runs now" for i in self.added]
        return said[:SHOWN] + ([f"… and {len(said) - SHOWN} more"] if len(said) > SHOWN else [])


def _label(params: Mapping[str, Scalar], rung: int) -> str:
    return param_text(params) + (f" (rung {rung})" if rung else "")


def task_set_change(before: Sequence[TaskSpec], after: Sequence[TaskSpec]) -> TaskSetChange:
    changed = tuple((b.index, _label(b.params, b.rung), _label(a.params, a.rung))
                    for b, a in zip(before, after, strict=False) if (b.params, b.rung) != (a.params, a.rung))
    return TaskSetChange(added=tuple(t.index for t in after[len(before):]), changed=changed,
                         removed=tuple(t.index for t in before[len(after):]))
