"""The spec reader composes with libyaml when PyYAML has it, and with PyYAML's Python loader when
it has not (or when libyaml refuses a text, to quote the Python loader's words): both must read
every spec alike — values, line numbers, YAML 1.1 traps and duplicate keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from campaignctl.adapters import yaml_source
from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.base.errors import SpecError
from tests.conftest import REPO

TRICKY = {
    "traps": "name: t\ntime: 1:30:00\ndescription: no\nmode: 0755\nwhen: 2026-11-30\nquoted: 'no'\n",
    "duplicates": "name: a\nresources: {mem: 1G}\nname: b\n",
    "styles": "name: t\ncommand: [echo, \"{x}\"]\nsetup: |\n  module load cuda\n  echo 'ok'\n"
              "note: >\n  folded\n  text\n",
    "aliases": "base: &b {mem: 16G, gpus: 1}\nresources: *b\nmatrix: {x: [1, 2.5, true, null, ~, 0x1f]}\n",
    "nesting": "a: " + "[" * 70 + "]" * 70 + "\n",
    "matrix": "name: big\nmatrix: {seed: [" + ", ".join(map(str, range(5000))) + "]}\n",
}
SPECS = sorted(p for p in (REPO / "templates").rglob("*.yaml"))


def both(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    def read() -> object:
        try:
            doc = parse_yaml(text, "spec.yaml")
        except SpecError as exc:
            return ("refused", exc.problems)
        return (doc.data, doc.lines, doc.problems)
    fast = read()
    monkeypatch.setattr(yaml_source, "_LIBYAML", None)
    return fast, read()


@pytest.mark.skipif(getattr(yaml, "CSafeLoader", None) is None, reason="this PyYAML was built without libyaml")
@pytest.mark.parametrize("name", [*TRICKY, *(str(p.relative_to(REPO)) for p in SPECS)])
def test_libyaml_and_the_python_loader_read_a_spec_alike(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = TRICKY[name] if name in TRICKY else (REPO / name).read_text()
    fast, python = both(text, monkeypatch)
    assert fast == python


def test_the_traps_are_found_through_libyaml_too() -> None:
    problems = parse_yaml(TRICKY["traps"], "spec.yaml").problems
    assert any("line 2: time: '1:30:00' is read by YAML 1.1 as a base-60 number" in p for p in problems)
    assert any("line 3: description: 'no' is read by YAML 1.1 as a boolean" in p for p in problems)
    assert any("line 4: mode: '0755' is read by YAML 1.1 as an octal number" in p for p in problems)
    assert not any("quoted" in p for p in problems)  # 'no' in quotes is the text it says


def test_a_text_libyaml_refuses_is_said_in_the_python_loaders_words(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as refused:
        parse_yaml("name: t\nmatrix: {x: [1, 2\n", str(tmp_path / "spec.yaml"))
    [problem] = refused.value.problems
    assert problem.startswith("not valid YAML: while parsing a flow sequence")
    assert "expected ',' or ']', but got" in problem and f"{tmp_path}/spec.yaml" in problem
