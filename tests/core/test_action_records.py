"""The typed decision vocabulary (core/decisions/action_records.py): each action's params decode to its
record; a missing or mistyped key reads as the field's default, never as an exception; an action
this release does not know stays raw; an older version is converted before it is read."""

from __future__ import annotations

from dataclasses import fields

import pytest

from campaignctl.core.decisions import action_records
from campaignctl.core.decisions.action_records import (
    RECORDS,
    Cancel,
    GiveUp,
    Hold,
    Promote,
    Release,
    ResizePending,
    Resubmit,
    Retire,
    Throttle,
    Unknown,
    changes_of,
    record_of,
    resources_of,
)
from campaignctl.core.resources import Resources


def test_each_action_decodes_to_its_record_as_the_tick_writes_it() -> None:
    """Shapes as the log of tests/fixtures/stores/v2026-11-27.sql and the rules hold them."""
    assert record_of("resubmit", {"changes": {"mem_mb": [1024, 1536]}, "max_retries": 3, "retry": 1}) == Resubmit(
        {"mem_mb": (1024, 1536)}, 1, 3)
    assert record_of("give_up", {}) == GiveUp()
    resize = record_of("resize_pending", {"array_job_id": "100", "changes": {"time_min": [10, 15]},
                                          "resources": {"mem_mb": 1536, "time_min": 15}})
    assert resize == ResizePending({"time_min": (10, 15)}, "100", Resources(mem_mb=1536, time_min=15))
    assert record_of("hold", {"arrays": {"100": [1, 2]}, "level": "limit"}) == Hold({"100": (1, 2)}, "limit")
    assert record_of("release", {"arrays": {"100": [1, 2]}, "limits": {"gpu_hours": 0.5}}) == Release(
        {"100": (1, 2)}, {"gpu_hours": 0.5})
    assert record_of("promote", {"config": 3, "from_rung": 0, "to_rung": 1}) == Promote(3, 0, 1)
    assert record_of("retire", {"config": 0, "from_rung": 0}) == Retire(0, 0)
    assert record_of("throttle", {"array_job_id": "12", "throttle": 4, "changes": {"throttle": [None, 4]}}) == \
        Throttle("12", 4, {"throttle": (None, 4)})
    cancel = record_of("cancel", {"changes": {"gpu_type": ["a100", "h100"]}, "only_if": "PENDING",
                                  "replacement": {"gpus": 1, "gpu_type": "h100"}})
    assert isinstance(cancel, Cancel) and cancel.replacement == Resources(gpus=1, gpu_type="h100")
    assert resources_of(cancel) is None and changes_of(cancel) == {"gpu_type": ("a100", "h100")}
    # a resubmit replacing a cancelled attempt says so with a flag, not with resources
    assert record_of("resubmit", {"changes": {}, "replacement": True}) == Resubmit(replacement=True)


def test_a_missing_or_mistyped_key_reads_as_the_default_and_an_unknown_action_stays_raw() -> None:
    assert record_of("throttle", {"array_job_id": 12, "throttle": "4"}) == Throttle()  # hand-edited
    assert record_of("hold", {"arrays": {"100": [1, "x", 2]}}) == Hold({"100": (1, 2)})
    assert record_of("resize_pending", {"resources": {"mem_mb": 512, "no_such_field": 1}}).resources == \
        Resources(mem_mb=512)  # type: ignore[union-attr]
    assert record_of("resubmit", {"resources": {"mem_mb": "lots"}}) == Resubmit()  # not Resources at all
    assert record_of("transmogrify", {"a": 1}) == Unknown({"a": 1})


def test_every_record_field_has_a_reader() -> None:
    for record in set(RECORDS.values()):
        for f in fields(record):
            assert f.name in action_records._READERS or (record, f.name) in action_records._OWN_READERS, f


def test_a_row_of_an_older_version_is_converted_before_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """How a later release changes a record: version 2 renames hold's `level` to `why`, say; a row
    written at version 1 (no version key, as every row so far) converts, a version-2 row does not."""
    monkeypatch.setattr(action_records, "RECORD_VERSION", 2)
    monkeypatch.setitem(action_records._UPGRADES, 1, lambda action, raw: {
        **{k: v for k, v in raw.items() if k != "why"}, "level": raw.get("why", "")} if action == "hold" else raw)
    monkeypatch.setitem(action_records.RECORDS, "hold", Hold)
    assert record_of("hold", {"why": "limit", "arrays": {}}) == Hold({}, "limit")
    assert record_of("hold", {"_v": 2, "level": "warn"}) == Hold({}, "warn")
