"""Hostile or absurd spec and policy files end in exit 3 naming file, key and what is allowed:
never an internal error (exit 1), never a value the budget guard or Slurm cannot use."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.adapters import yaml_source
from campaignctl.adapters.policy_source import load_policy
from campaignctl.core.base.errors import SpecError
from campaignctl.services.submit import load_spec
from tests.cli.test_cli import assert_user_error, run_cli
from tests.conftest import write_spec

HEAD = "name: x\ncommand: [echo]\n"

HOSTILE = {
    "custom tag": (HEAD + "env: {A: !custom a}\n", "line 3: env.A: YAML tag '!custom' is not allowed"),
    "python tag": ('name: x\ncommand: [echo, !!python/name:os.system ""]\n',
                   "line 2: command[1]: YAML tag 'tag:yaml.org,2002:python/name:os.system' is not allowed"),
    "tagged mapping": (HEAD + "resources: !!set {a: null}\n", "resources: YAML tag"),
    "binary": (HEAD + "env: {A: !!binary aGVsbG8=}\n", "env.A: YAML tag"),
    "deep nesting": (HEAD + "tasks: " + "[" * 490 + "]" * 490 + "\n", "nested more than"),
    "moderate nesting": (HEAD + "tasks: " + "[" * 120 + "]" * 120 + "\n", "nested more than"),
    "huge integer": (HEAD + "matrix: {a: [" + "1" * 5000 + "]}\n", "line 3: matrix.a[0]: an integer of 5000 digits"),
    "escape past unicode": (HEAD + 'env: {A: "\\U00111111"}\n', "a \\U escape names no Unicode character"),
    "nested gpu type": (HEAD + "resources: {gpus: 1, gpu_type: [[a100]]}\n",
                        "resources.gpu_type[0]: must be a string"),
    "nan budget": (HEAD + "budget: {gpu_hours: .nan}\n", "budget.gpu_hours: must be a finite number"),
    "inf budget": (HEAD + "budget: {money: .inf}\n", "budget.money: must be a finite number"),
    "nan warn_at": (HEAD + "budget: {money: 10, warn_at: .nan}\n", "budget.warn_at: must be a finite number"),
    "huge mem": (HEAD + "resources: {mem: 100000000000000000000000}\n", "resources.mem: 100000000000000000000000"),
    "huge mem text": (HEAD + "resources: {mem: " + "9" * 400 + "G}\n", "resources.mem:"),
    "huge time": (HEAD + "resources: {time: 100000000000000000000000}\n", "resources.time: 100000000000000000000000"),
    "huge duration": (HEAD + "policy: {unknown_grace: " + "9" * 30 + "}\n", "policy.unknown_grace:"),
    "huge duration text": (HEAD + "policy: {unknown_grace: " + "9" * 5000 + "s}\n", "policy.unknown_grace:"),
    # issue 26: float() of a 309-digit integer overflowed; a 70 KB name is too long for open()
    "309-digit budget": (HEAD + "budget: {gpu_hours: " + "9" * 309 + "}\n",
                         "budget.gpu_hours: must be a finite number above 0"),
    "70 KB policy name": (HEAD + "policy: {use: " + "a" * 70_000 + "}\n", "policy.use: no built-in policy named"),
    "70 KB policy path": (HEAD + "policy: {use: ./" + "a" * 70_000 + ".yaml}\n", "not found"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_specs_are_refused_as_spec_errors(name: str, tmp_path: Path, state_home: Path) -> None:
    text, fragment = HOSTILE[name]
    with pytest.raises(SpecError) as raised:
        load_spec(write_spec(tmp_path, text))
    assert fragment in raised.value.message and str(tmp_path / "spec.yaml") in raised.value.message


def test_a_spec_above_the_size_cap_is_refused_before_parsing(
        tmp_path: Path, state_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yaml_source, "MAX_BYTES", 1000)
    spec = write_spec(tmp_path, HEAD + "# " + "x" * 1000 + "\n")
    with pytest.raises(SpecError) as raised:
        load_spec(spec)
    assert "larger than" in raised.value.message


def test_policy_files_get_the_same_refusals(tmp_path: Path) -> None:
    policy = write_spec(tmp_path, "name: p\nunknown_grace: !custom 5\n", name="p.yaml")
    with pytest.raises(SpecError, match="unknown_grace: YAML tag '!custom' is not allowed"):
        load_policy(str(policy), str(tmp_path))


@pytest.mark.parametrize("name", ["python tag", "deep nesting", "huge integer", "nested gpu type"])
def test_the_cli_exits_3_for_them(name: str, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, HOSTILE[name][0])
    assert_user_error(run_cli("submit", str(spec), "--dry-run", state=tmp_path), 3, str(spec), HOSTILE[name][1])


def test_invalid_yaml_names_the_file_and_line_not_a_string(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "name: x\ncommand: [python3, train.py\n")
    done = run_cli("submit", str(spec), "--dry-run", state=tmp_path)
    assert done.returncode == 3 and f'in "{spec}", line 2, column 10' in done.stderr
    assert "<unicode string>" not in done.stderr
