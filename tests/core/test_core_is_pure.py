"""The functional core imports only itself and the standard library (style.md, habit 1)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "campaignctl" / "core"


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module)
    return roots


def test_core_imports_nothing_outside_core_and_stdlib() -> None:
    offenders = []
    for path in sorted(CORE.rglob("*.py")):  # its folders (docs/design.md#the-layout-of-campaignctlcore) too
        for module in imported_roots(path):
            top = module.split(".")[0]
            allowed = module.startswith("campaignctl.core") or top in sys.stdlib_module_names or top == "__future__"
            if not allowed:
                offenders.append(f"{path.relative_to(CORE)}: {module}")
    assert not offenders, offenders
    assert len(list(CORE.rglob("*.py"))) > 90  # the walk really saw the core
