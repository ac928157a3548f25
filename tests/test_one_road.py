"""One road to sbatch: only the Actor (services/act.py) changes Slurm, through the exactly-once
protocol it drives (services/dispatch.py), and only the tick opens a tick. The package's calls
are walked, as tests/test_import_cycles.py walks its imports: a new caller of sbatch, scancel,
`scontrol update`/`release`/`hold` or of the protocol anywhere else fails here."""

from __future__ import annotations

import ast

from tests.test_import_cycles import PACKAGE, module_name

# adapters/slurm.py's calls that change a job, and adapters/submission.py's sbatch
SLURM_MUTATIONS = {"sbatch_held", "submit_held", "cancel", "release", "update_pending", "hold", "release_elements",
                   "set_array_throttle", "cancel_if", "cancel_step_named", "adopt_named", "adopt_from"}
PROTOCOL = {"dispatch", "dispatch_within", "recover", "abandon"}  # services/dispatch.py's steps
ACTOR, PROTOCOL_MODULE = "campaignctl.services.act", "campaignctl.services.dispatch"


def calls(names: set[str]) -> dict[str, set[str]]:
    """Module → the `names` it calls, as `module.name(…)` or a bare `name(…)` it imported."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    for a in n.names if a.name in names}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            called = (f.attr if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                      and f.value.id in ("slurm", "dispatch", "submission")
                      else f.id if isinstance(f, ast.Name) and f.id in imported else None)
            if called in names:
                found.setdefault(module_name(path), set()).add(called)
    return found


def test_only_the_actor_and_its_protocol_change_slurm() -> None:
    callers = calls(SLURM_MUTATIONS)
    assert set(callers) <= {ACTOR, PROTOCOL_MODULE, "campaignctl.adapters.submission"}, callers
    assert callers.get("campaignctl.adapters.submission") == {"sbatch_held"}  # the renderer's own sbatch


def test_only_the_actor_drives_the_submission_protocol() -> None:
    callers = {m: n for m, n in calls(PROTOCOL).items() if m != PROTOCOL_MODULE}
    assert set(callers) == {ACTOR}, callers


def test_a_tick_is_opened_only_by_the_tick_and_a_persons_command() -> None:
    """`submit` runs the campaign's tick; `cancel`, `retry`, `resume` log under a tick of their own
    (services/manual.py), which later ticks read as history."""
    opened = {module_name(p) for p in PACKAGE.rglob("*.py") if "begin_tick(" in p.read_text()}
    assert opened == {"campaignctl.services.reconcile", "campaignctl.services.manual",
                      "campaignctl.adapters.decision_log"}, opened


def test_the_walk_sees_the_calls_it_allows() -> None:
    """The walker finds both spellings it looks for (the test above cannot pass by seeing nothing)."""
    assert {"campaignctl.services.act"} <= set(calls(SLURM_MUTATIONS))
    assert "cancel" in calls(SLURM_MUTATIONS)[PROTOCOL_MODULE] and "dispatch_within" in calls(PROTOCOL)[ACTOR]
