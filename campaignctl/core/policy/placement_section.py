"""The policy's `placement` section: when a pending array element moves to another of the
campaign's clusters (core/placement/moves.py applies it). Pure values and their reader.

    placement: {move_margin: 30m, move_fraction: 0.5, max_moves: 1, mode: enforce}

A pending element moves when another cluster would start it sooner by at least `move_margin` AND
by at least `move_fraction` of its predicted wait where it is; never more than `max_moves` times
per task (a task never bounces between two busy clusters). `move_margin: 0` turns moving off."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from campaignctl.core.base.rawdoc import KeyPath
from campaignctl.core.base.reader import Reader

PLACEMENT_KEYS = ("move_margin", "move_fraction", "max_moves", "mode")
MODES = ("enforce", "shadow")


@dataclass(frozen=True, slots=True)
class Placement:
    move_margin_s: int = 1800
    move_fraction: float = 0.5
    max_moves: int = 1
    mode: str = "enforce"


def read_placement(r: Reader, path: KeyPath, base: Placement) -> Placement:
    if r.mapping(path, PLACEMENT_KEYS) is None:
        return base
    fraction = r.bounded((*path, "move_fraction"), 0.0, 1.0, "a fraction of the wait from 0 to 1, e.g. 0.5")
    moves = r.integer((*path, "max_moves"), 1, 100, default=base.max_moves)
    return Placement(move_margin_s=r.duration((*path, "move_margin"), base.move_margin_s),
                     move_fraction=base.move_fraction if fraction is None else fraction,
                     max_moves=base.max_moves if moves is None else moves,
                     mode=r.choice((*path, "mode"), MODES) or base.mode)


def placement_from_dict(data: Mapping[str, object] | None) -> Placement:
    if not isinstance(data, Mapping):
        return Placement()
    base = Placement()
    margin, fraction, moves, mode = (data.get(k) for k in ("move_margin_s", "move_fraction", "max_moves", "mode"))
    return Placement(move_margin_s=margin if isinstance(margin, int) else base.move_margin_s,
                     move_fraction=float(fraction) if isinstance(fraction, (int, float)) else base.move_fraction,
                     max_moves=moves if isinstance(moves, int) else base.max_moves,
                     mode=mode if mode in MODES else base.mode)
