"""Which tasks a person names on the command line: `--task 0,3-5` (indices and ranges) and/or
`--state FAILED,CANCELLED` (the latest attempt's state). Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from campaignctl.core.base.errors import NotFoundError, UsageError
from campaignctl.core.screens.status import index_ranges

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
MAX_SELECTED = 100_000


def parse_task_list(text: str) -> list[int]:
    """`0,3-5` → [0, 3, 4, 5]. Raises UsageError naming what is wrong; an empty list too (a
    script's unset variable, `--task "$T"`, must not read as "every task")."""
    if not text.strip():
        raise UsageError(f"--task {text!r} names no task", "e.g. --task 0,3-5; leave --task out to mean every task")
    out: set[int] = set()
    for part in text.replace(" ", "").split(","):
        match = _RANGE.fullmatch(part)
        if not match:
            raise UsageError(f"--task {text!r}: {part!r} is not an index or a range such as 3-5",
                             "e.g. --task 0,3-5")
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if last < first or last - first >= MAX_SELECTED:
            raise UsageError(f"--task {text!r}: {part!r} is not a range from low to high", "e.g. --task 3-5")
        out.update(range(first, last + 1))
    return sorted(out)


def parse_state_list(text: str) -> list[str]:
    """`FAILED,cancelled` → ["FAILED", "CANCELLED"]; UsageError for an empty list."""
    states = [s.strip().upper() for s in text.split(",") if s.strip()]
    if not states:
        raise UsageError(f"--state {text!r} names no state", "e.g. --state FAILED,CANCELLED")
    return states


def select_tasks(states: Mapping[int, str], tasks: Iterable[int] | None, wanted_states: Iterable[str] | None,
                 campaign: str) -> list[int]:
    """The tasks of `states` (task index → its latest attempt's state) named by index and/or
    by state; both given: both must hold. A named index the campaign does not have is not found
    (exit 4, as for every command that names a task)."""
    chosen = set(states)
    if tasks is not None:
        named = set(tasks)
        unknown = sorted(named - set(states))
        if unknown:
            raise NotFoundError(f"campaign {campaign!r} has no task {', '.join(map(str, unknown[:10]))}",
                                f"its tasks are {index_ranges(states)}" if states else "it has no tasks yet")
        chosen &= named
    if wanted_states is not None:
        wanted = {s.strip().upper() for s in wanted_states if s.strip()}
        chosen = {t for t in chosen if states[t] in wanted}
    return sorted(chosen)
