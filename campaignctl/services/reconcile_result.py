"""What a reconcile tick reports: per campaign, what it observed and decided, the campaigns it
left alone or failed on; `reconcile --json` prints it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from campaignctl.services.notify import NotifyResult


@dataclass(frozen=True, slots=True)
class DecisionSummary:
    task: int
    rule: str
    action: str
    reason: str
    status: str
    job_id: str | None = None


@dataclass(frozen=True, slots=True)
class CampaignTick:
    name: str
    state: str
    observed: int
    changed: int
    decisions: list[DecisionSummary] = field(default_factory=list)
    repaired: int = 0


@dataclass(frozen=True, slots=True)
class LeftAlone:
    """A campaign this tick did not act on: another process holds its lease, or answered one of
    its attempts at the same moment (its decisions of this tick were then dropped)."""

    name: str
    why: str
    holder: dict[str, object] | None = None  # the lease's holder (Holder.to_dict), when that is why


@dataclass(frozen=True, slots=True)
class CampaignFailure:
    """A campaign whose part of the tick raised: nothing more was done on it this tick."""

    name: str
    error: str


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    status: str  # ok | locked (the flock, or every campaign's lease held elsewhere) | dry-run | nothing-to-do
    tick_id: int | None
    campaigns: list[CampaignTick]
    slurm_calls: int
    message: str = ""
    skipped_lines: int = 0  # lines of sacct/squeue output this tick could not read and skipped
    skipped: list[str] = field(default_factory=list)  # the first few, "command: why: line"
    stall: str = ""  # locked: the holder has run longer than a stall (core/screens/stall.py), said on stderr
    notify: NotifyResult | None = None  # what the tick told the campaigns' notify channels
    left_alone: list[LeftAlone] = field(default_factory=list)
    left_out: int = 0  # --all: active campaigns of others, not shared with the caller, left alone
    failed: list[CampaignFailure] = field(default_factory=list)  # the CLI then exits 75

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
