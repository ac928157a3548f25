"""Which tasks a person names on the command line: `--task 0,3-5` (indices and ranges) and/or
`--state FAILED,CANCELLED` (the latest attempt's state). Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from campaignctl.core.errors import UsageError

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
MAX_SELECTED = 100_000


def parse_task_list(text: str) -> list[int]:
    """`0,3-5` → [0, 3, 4, 5]. Raises UsageError naming what is wrong."""
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


def select_tasks(states: Mapping[int, str], tasks: Iterable[int] | None, wanted_states: Iterable[str] | None,
                 campaign: str) -> list[int]:
    """The tasks of `states` (task index → its latest attempt's state) named by index and/or
    by state; both given: both must hold. A named index the campaign does not have is an error."""
    chosen = set(states)
    if tasks is not None:
        named = set(tasks)
        unknown = sorted(named - set(states))
        if unknown:
            raise UsageError(f"campaign {campaign!r} has no task {', '.join(map(str, unknown[:10]))}",
                             f"its tasks are 0-{max(states)}" if states else "it has no tasks yet")
        chosen &= named
    if wanted_states is not None:
        wanted = {s.strip().upper() for s in wanted_states if s.strip()}
        chosen = {t for t in chosen if states[t] in wanted}
    return sorted(chosen)
