"""Policy files extend a base (`use:`, `default` when they name none): what a file leaves out is
the base's, never 0 — a one-rule file used to give up every OOM and TIMEOUT."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.adapters.policy_source import load_policy
from campaignctl.core.base.errors import SpecError


def policy_file(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_file_without_use_extends_default_and_says_so(tmp_path: Path) -> None:
    mine = load_policy(str(policy_file(tmp_path, "name: mine\nrules: {out_of_memory: {mem_factor: 2}}\n")), "/")
    default = load_policy("default", "/")
    assert mine.max_failures == default.max_failures == 6
    assert mine.rule("timeout") == default.rule("timeout")
    assert mine.rule("out_of_memory").mem_factor == 2
    assert mine.rule("out_of_memory").max_retries == default.rule("out_of_memory").max_retries == 3
    assert mine.described == "mine@v0 (extends default@v1)"


def test_use_names_a_builtin_or_a_file_relative_to_this_one(tmp_path: Path) -> None:
    conservative = load_policy("conservative", "/")
    strict = load_policy(str(policy_file(tmp_path, "name: strict\nuse: conservative\n")), "/")
    assert strict.max_failures == conservative.max_failures and strict.base == conservative.label
    (tmp_path / "team").mkdir()
    policy_file(tmp_path / "team", "name: team\nversion: 3\nmax_failures: 9\n", "team.yaml")
    mine = load_policy(str(policy_file(tmp_path, "name: mine\nuse: team/team.yaml\nsubmit_tries: 2\n")), "/")
    assert (mine.max_failures, mine.submit_tries, mine.base) == (9, 2, "team@v3")


def test_the_packaged_file_named_by_path_is_the_builtin(tmp_path: Path) -> None:
    import campaignctl
    path = Path(campaignctl.__file__).parent / "policies" / "default.yaml"
    assert load_policy(str(path), "/") == load_policy("default", "/")


@pytest.mark.parametrize(("text", "fragment"), [
    ("name: x\nuse: nosuch\n", "use: no built-in policy named 'nosuch'"),
    ("name: x\nuse: loop.yaml\n", "goes 8 files deep"),
    ("name: x\nuse: [default]\n", "must name the policy this file extends"),
])
def test_a_bad_use_is_a_spec_error_naming_the_line(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        load_policy(str(policy_file(tmp_path, text, "loop.yaml")), "/")
    assert fragment in info.value.message and "line 2" in info.value.message
