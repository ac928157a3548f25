"""A `metrics.from_output` pattern that matched nothing: said in `status` and `results`, with the
pattern and the last line of output it read, instead of "no config reported acc yet"."""

from __future__ import annotations

import contextlib
from pathlib import Path

from campaignctl.adapters.output_causes import read_tail
from campaignctl.adapters.store import Store
from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.base.errors import SpecError
from campaignctl.core.base.redact import mask_secrets, printable
from campaignctl.core.model.attempt_paths import AttemptPaths
from campaignctl.core.model.records import CampaignRecord, RevisionRecord
from campaignctl.core.screens.status import index_ranges
from campaignctl.core.tuning.output_metrics import pattern_problem, unmatched_patterns

LAST_LINE_CHARS = 200


def unmatched_pattern_warnings(store: Store, record: CampaignRecord) -> list[str]:
    """One warning per pattern that no COMPLETED task's output matched (a task that failed or
    timed out may never have printed its metric line; a completed one printed all it would)."""
    patterns = _patterns(store.revision(record.id, record.current_revision))
    if not patterns:
        return []
    latest = {row.task_index: row for row in store.history(record.id)}  # by attempt: the last wins
    completed = [t for t, row in latest.items() if row.state == "COMPLETED"]
    found = unmatched_patterns(patterns, store.metrics.names_by_task(record.id), completed)
    warnings = []
    for pattern, tasks in found:
        row = latest[tasks[0]]
        line = _last_line(AttemptPaths.of(record.run_dir, row.task_index, row.token).output())
        seen = f"task {row.task_index}'s last line: {line!r}" if line else f"task {row.task_index} printed nothing"
        warnings.append(f"metrics.from_output {pattern!r} matched no line of the output of the "
                        f"{len(tasks)} completed task(s) ({index_ranges(tasks)}); {seen}")
    return warnings


def _patterns(revision: RevisionRecord) -> list[str]:
    """The revision's `metrics.from_output`, read from its text: from the top-level `metrics:`
    block alone where that parses (a 10,000-entry `tasks:` list is most of such a spec, and
    composing it took PyYAML 0.5 s of every `status`), else from the whole text."""
    text = revision.spec_text
    if "from_output" not in text:
        return []
    data = None
    if (block := _top_level_block(text, "metrics")) is not None:
        with contextlib.suppress(SpecError):
            data = parse_yaml(block, revision.spec_path).data
    if not isinstance(data, dict) or "metrics" not in data:
        try:
            data = parse_yaml(text, revision.spec_path).data
        except SpecError:
            return []
    metrics = data.get("metrics") if isinstance(data, dict) else None
    found = metrics.get("from_output") if isinstance(metrics, dict) else None
    found = found if isinstance(found, list) else [found] if found else []
    return [p for p in found if isinstance(p, str) and not pattern_problem(p)]


def _top_level_block(text: str, key: str) -> str | None:
    """The lines of `key:` at the document's top level and those indented under it (None when
    the text has no such line): a mapping of that one key, as YAML reads it in place — unless it
    names an anchor defined elsewhere, when parsing it alone fails and the caller reads the whole."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"{key}:")), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t#"):
        end += 1
    return "\n".join(lines[start:end]) + "\n"


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [ln for ln in read_tail(path, 8192).splitlines() if ln.strip()]
        return printable(mask_secrets(lines[-1]))[:LAST_LINE_CHARS] if lines else ""
    return ""
