"""The spec's `pack:` key (core/spec/pack_spec.py): the forms it takes and what it refuses, with the
key and what is allowed."""

from __future__ import annotations

import pytest

from campaignctl.core.base.rawdoc import RawDoc
from campaignctl.core.base.reader import Reader
from campaignctl.core.resources import Resources
from campaignctl.core.spec.pack_spec import AUTO_DEFAULT_MAX, PackSpec, read_pack

ONE_GPU = Resources(gpus=1)


def read(value: object, resources: Resources = ONE_GPU, profile: bool = True) -> tuple[PackSpec | None, list[str]]:
    r = Reader(RawDoc("spec.yaml", {"pack": value}))
    return read_pack(r, resources, profile), [str(p) for p in r.problems]


@pytest.mark.parametrize(("value", "expected"), [
    ("auto", PackSpec(AUTO_DEFAULT_MAX, 1, True)),
    ({"auto": True}, PackSpec(AUTO_DEFAULT_MAX, 1, True)),
    ({"auto": {"max_per_gpu": 4}}, PackSpec(4, 1, True)),
    ({"per_gpu": 4}, PackSpec(4, 1, False)),
    ({"per_job": 8}, PackSpec(1, 8, False)),
    ({"per_gpu": 2, "per_job": 6}, PackSpec(2, 6, False)),
    ({"per_job": 500, "processes": 4}, PackSpec(1, 500, False, processes=4)),
])
def test_the_forms_pack_takes(value: object, expected: PackSpec) -> None:
    assert read(value) == (expected, [])


@pytest.mark.parametrize(("value", "resources", "profile", "says"), [
    ({"per_gpu": 4}, Resources(gpus=1, nodes=2), True, "multi-node tasks are never packed"),
    ({"per_gpu": 4}, Resources(gpus=2), True, "tasks of exactly one GPU"),
    ({"per_gpu": 4}, Resources(), True, "per_job packs tasks without GPUs"),
    ("auto", ONE_GPU, False, "give the spec a profile:"),
    ({"per_gpu": 4, "auto": True}, ONE_GPU, True, "give one"),
    ({"per_gpu": 1}, ONE_GPU, True, "give per_gpu"),
    ({"per_gpu": 99}, ONE_GPU, True, "pack.per_gpu"),
    ({"per_gpus": 4}, ONE_GPU, True, "per_gpus"),
    ("yes", ONE_GPU, True, "must be auto"),
    ({"processes": 4}, ONE_GPU, True, "it needs per_job"),
    ({"per_job": 3, "processes": 4}, ONE_GPU, True, "at least 4"),
    ({"auto": True, "per_job": 8, "processes": 2}, ONE_GPU, True, "and no auto"),
    ({"per_job": 8, "processes": 0}, ONE_GPU, True, "pack.processes"),
])
def test_what_pack_refuses(value: object, resources: Resources, profile: bool, says: str) -> None:
    pack, problems = read(value, resources, profile)
    assert pack is None or problems
    assert any(says in p for p in problems), problems


def test_auto_takes_cpu_tasks_too_it_packs_only_short_ones() -> None:
    assert read({"auto": True, "cpus": 8}, Resources(cpus_per_task=2)) == (PackSpec(AUTO_DEFAULT_MAX, 1, True, 8), [])


def test_no_pack_key_is_no_packing() -> None:
    r = Reader(RawDoc("spec.yaml", {}))
    assert read_pack(r, ONE_GPU, True) is None and not r.problems
