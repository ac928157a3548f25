"""Each fact of the decision vocabulary is written once (issue 41): what answers an attempt, what
ends a task, what acts on one (core/decisions/answers.py) and which rule answers which end
(core/policy/policy.py), walked over the package's source as tests/test_import_cycles.py walks imports."""

from __future__ import annotations

import ast
from pathlib import Path

from campaignctl.core.decisions.answers import ACTING, ANSWERS, SETTLING
from campaignctl.core.policy.policy import CAUSE_OF_STATE, CAUSES

PACKAGE = Path(__file__).resolve().parent.parent.parent / "campaignctl"
HOMES = {"ANSWERS": "core/decisions/answers.py", "SETTLING": "core/decisions/answers.py",
         "ACTING": "core/decisions/answers.py", "CAUSES": "core/policy/policy.py",
         "CAUSE_OF_STATE": "core/policy/policy.py"}
FACTS = {"core/decisions/answers.py": [frozenset(ANSWERS), frozenset(SETTLING), frozenset(ACTING)],
         "core/policy/policy.py": [frozenset(CAUSES), frozenset(CAUSE_OF_STATE)]}


def _modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(PACKAGE)): ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def test_each_fact_is_named_in_one_module() -> None:
    named: dict[str, list[str]] = {}
    for path, tree in _modules().items():
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id in HOMES:
                    named.setdefault(target.id, []).append(path)
    assert named == {name: [home] for name, home in HOMES.items()}


def test_no_module_spells_a_fact_out_again() -> None:
    """A literal holding exactly a fact's words (a tuple, list, set or a dict's keys or values)
    anywhere but the fact's home is a second copy of it."""
    again = []
    for path, tree in _modules().items():
        others = [fact for home, facts in FACTS.items() if home != path for fact in facts]
        for node in ast.walk(tree):
            words: list[ast.expr] = []
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                words = list(node.elts)
            elif isinstance(node, ast.Dict):
                words = [k for k in node.keys if k is not None]
                values = node.values
                if all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in values) and \
                        frozenset(v.value for v in values) in others and len(values) > 1:  # type: ignore[attr-defined]
                    again.append((path, node.lineno))
            if len(words) > 1 and all(isinstance(w, ast.Constant) and isinstance(w.value, str) for w in words) \
                    and frozenset(w.value for w in words) in others:  # type: ignore[attr-defined]
                again.append((path, node.lineno))
    assert again == []


def test_decisions_are_built_from_their_params_records() -> None:
    """Typed on write: a Decision's params are its action's record (core/decisions/action_records.py), never
    a dict, which only the codec (`raw_of`) makes where the log writes it."""
    untyped = []
    for path, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Decision":
                given = [*node.args[6:7], *(k.value for k in node.keywords if k.arg == "typed")]
                if not given or any(isinstance(g, (ast.Dict, ast.DictComp, ast.Call)) and not _is_record(g)
                                    for g in given):
                    untyped.append(f"{path}:{node.lineno}")
    assert not untyped, untyped


def _is_record(node: ast.expr) -> bool:
    """A call of a record class (capitalised, as every record in core/decisions/action_records.py is)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id[:1].isupper()


def test_task_ends_are_made_in_one_place() -> None:
    """The live tick, `policy replay` and the simulator each know their attempts differently, and
    make them TaskEnds through core/tuning/ladder.py:task_ends only."""
    made = [f"{path}:{node.lineno}" for path, tree in _modules().items() for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "TaskEnd"]
    assert [m.rsplit(":", 1)[0] for m in made] == ["core/tuning/ladder.py"], made
