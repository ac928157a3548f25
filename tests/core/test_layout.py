"""The layout of campaignctl/core/ (docs/design.md#the-layout-of-campaignctlcore): folders by role,
none of them a crowd, and the classes a queued job's pickled payload names left where it names them."""

from __future__ import annotations

from pathlib import Path

from campaignctl.core.pack_plan import Pack, PackShape
from campaignctl.core.resources import Resources
from campaignctl.core.task_launch import TaskLaunch

CORE = Path(__file__).resolve().parent.parent.parent / "campaignctl" / "core"


def test_payload_classes_keep_the_module_paths_pickles_name() -> None:
    # submitit pickles run_task(TaskLaunch) per element, and run_pack(Pack, …) for a packed one; a
    # job queued by an earlier release unpickles them by these names when it starts
    assert {c.__qualname__: c.__module__ for c in (TaskLaunch, Pack, PackShape, Resources)} == {
        "TaskLaunch": "campaignctl.core.task_launch", "Pack": "campaignctl.core.pack_plan",
        "PackShape": "campaignctl.core.pack_plan", "Resources": "campaignctl.core.resources"}


def test_core_is_folders_of_at_most_a_dozen_modules() -> None:
    top = sorted(p.stem for p in CORE.glob("*.py") if p.stem != "__init__")
    assert top == ["pack_plan", "resources", "task_launch"]
    folders = {d.name: [p.stem for p in d.glob("*.py") if p.stem != "__init__"]
               for d in CORE.iterdir() if d.is_dir() and d.name != "__pycache__"}
    assert all(0 < len(modules) <= 12 for modules in folders.values()), folders
