"""quick_init: the same constructor as the dataclass's, only faster; classes it cannot serve are
refused at import."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from campaignctl.core.quick_init import quick_init
from campaignctl.core.records import HistoryRow, ObservedChange
from campaignctl.core.sacct import JobObservation


@quick_init
@dataclass(frozen=True, slots=True)
class Sample:
    a: int
    b: str = "b"
    c: tuple[int, ...] = field(default_factory=tuple)
    d: list[int] = field(default_factory=list)


def test_positional_keyword_defaults_and_factories_as_the_dataclass() -> None:
    assert Sample(1) == Sample(a=1, b="b", c=(), d=[])
    assert Sample(1, "x", (2,), [3]) == Sample(d=[3], c=(2,), b="x", a=1)
    assert Sample(1).d is not Sample(1).d  # a factory runs per object
    assert repr(Sample(1)) == "Sample(a=1, b='b', c=(), d=[])"
    with pytest.raises(TypeError):
        Sample()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Sample(1, a=2)  # type: ignore[misc]


def test_the_objects_stay_frozen_and_replaceable() -> None:
    s = Sample(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.a = 2  # type: ignore[misc]
    assert dataclasses.replace(s, b="y") == Sample(1, "y")


@pytest.mark.parametrize("cls", [HistoryRow, ObservedChange, JobObservation])
def test_the_tick_records_use_it(cls: type) -> None:
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
    assert any(name.startswith("_set_") for name in cls.__init__.__code__.co_names)


def test_a_class_it_cannot_serve_is_refused() -> None:
    with pytest.raises(TypeError, match="frozen, slotted"):
        @quick_init
        @dataclass(slots=True)
        class Mutable:
            a: int

    with pytest.raises(TypeError, match="frozen, slotted"):
        @quick_init
        @dataclass(frozen=True)
        class NoSlots:
            a: int

    with pytest.raises(TypeError, match="frozen, slotted"):
        @quick_init
        @dataclass(frozen=True, slots=True)
        class Checked:
            a: int

            def __post_init__(self) -> None:
                pass
