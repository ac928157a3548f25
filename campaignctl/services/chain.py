"""`log verify` and `log export`: check the decision log's hash chain, write it out line by line."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

from campaignctl.adapters import decision_chain
from campaignctl.adapters.paths import open_atomic
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import IntegrityError, StateError
from campaignctl.core.governance.chain import ChainReport, verify_chain
from campaignctl.services.campaigns import find_campaign

EXPORT_FORMATS = ("jsonl",)


@dataclass(frozen=True, slots=True)
class VerifyResult:
    decisions: ChainReport
    outcomes: ChainReport
    head_file: str | None = None
    campaign: str | None = None
    campaign_decisions: int | None = None  # how many of the verified decisions are the campaign's

    @property
    def ok(self) -> bool:
        return self.decisions.ok and self.outcomes.ok

    @property
    def problems(self) -> list[str]:
        return [r.problem for r in (self.decisions, self.outcomes) if r.problem]

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ok": self.ok}


def verify_log(campaign: str | None = None, head_file: Path | None = None) -> VerifyResult:
    """Recompute both chains from every stored row. The head file is read before the rows, so a
    tick that appends meanwhile only makes the chain longer than the head, never shorter."""
    store = Store.open()
    if missing := decision_chain.missing_tables(store.engine):
        raise IntegrityError(f"the decision log does not verify: the {' and '.join(missing)} table is missing "
                             "(dropped)", "a table was dropped outside campaignctl; keep the database as it "
                             "is for inspection and restore a backup to continue")
    record = find_campaign(store, campaign) if campaign else None
    recorded = decision_chain.read_head_file(head_file) if head_file else {}
    reports = {}
    for chain in ("decision", "outcome"):
        with decision_chain.stored_rows(store.engine, chain) as rows:
            reports[chain] = verify_chain(chain, rows, recorded.get(chain))
    counted = decision_chain.campaign_decisions(store.engine, record.id) if record else None
    return VerifyResult(reports["decision"], reports["outcome"], str(head_file) if head_file else None,
                        campaign, counted)


@dataclass(frozen=True, slots=True)
class ExportResult:
    decisions: int
    output: str | None  # None: written to the stream the caller gave


def export_log(campaign: str, output: Path | None, stream: TextIO) -> ExportResult:
    """One JSON object per decision, oldest first, to `output` (replaced only once complete)
    or to `stream`. Rows are written as they are read: memory does not grow with the log."""
    store = Store.open()
    record = find_campaign(store, campaign)
    rows = decision_chain.export_rows(store.engine, record.id)
    if output is None:
        return ExportResult(_write_jsonl(rows, stream), None)
    try:
        with open_atomic(output, mode=0o600) as handle:
            count = _write_jsonl(rows, handle)
    except OSError as exc:
        raise StateError(f"cannot write {output}: {exc.strerror or exc}",
                         "give --output a path in an existing, writable directory") from None
    return ExportResult(count, str(output))


def _write_jsonl(rows: Iterable[dict[str, object]], sink: TextIO) -> int:
    count = 0
    for row in rows:
        sink.write(json.dumps(row, ensure_ascii=False) + "\n")
        count += 1
    return count
