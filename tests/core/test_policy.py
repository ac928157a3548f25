"""Policies: the packaged YAML files, a spec's `policy:` overrides, and their error messages.

Every bad value must come back as a SpecError naming the file, the line and the key path, the
way a user sees it from `campaignctl validate`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from campaignctl.adapters.policy_source import builtin_names, load_policy
from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.base.errors import NotFoundError, SpecError
from campaignctl.core.base.reader import Reader
from campaignctl.core.policy.output_causes import BUILTIN_CAUSES
from campaignctl.core.policy.policy import (
    CAUSES,
    Policy,
    Rule,
    policy_from_dict,
    policy_to_dict,
    read_policy,
)
from campaignctl.core.policy.policy_sections import EarlyStopping
from campaignctl.core.spec.spec import CampaignSpec, validate_spec

DEFAULT = load_policy("default", "/nowhere")

SPEC_HEAD = """\
name: t
command: [echo, "{a}"]
tasks: [{a: 1}]
policy:
  use: default
"""  # a `policy:` override line added below lands on line 6


def spec_with(*policy_lines: str, base: Policy = DEFAULT) -> CampaignSpec:
    text = SPEC_HEAD + "".join(f"  {line}\n" for line in policy_lines)
    return validate_spec(parse_yaml(text, "spec.yaml"), "/home/u/proj", base)


def spec_problems(*policy_lines: str) -> str:
    with pytest.raises(SpecError) as info:
        spec_with(*policy_lines)
    return info.value.message


def policy_file(text: str, source: str = "policies/mine.yaml") -> Policy:
    reader = Reader(parse_yaml(text, source))
    policy = read_policy(reader)
    reader.raise_if_problems()
    return policy


# --- the packaged policies ----------------------------------------------------------------------

def test_the_three_builtins_are_packaged() -> None:
    assert builtin_names() == ["conservative", "default", "persistent"]


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_loads_and_answers_every_cause(name: str) -> None:
    policy = load_policy(name, "/nowhere")
    assert policy.name == name and policy.version >= 1 and policy.label == f"{name}@v{policy.version}"
    assert set(CAUSES) <= set(policy.rules) <= {*CAUSES, *BUILTIN_CAUSES}
    assert policy.rule("gpu_out_of_memory").action == "resubmit"  # its own rule, or the built-in default
    assert policy.rule("setup_failed").action == "give_up"
    for rule in policy.rules.values():
        assert min(rule.mem_factor, rule.time_factor, rule.backoff_factor) >= 1
        assert rule.action in ("resubmit", "give_up")
    assert not policy.rule("preempted").counts_as_failure
    assert policy.rule("cancelled").action == "give_up"


# The design's "Causes and default policy" table, as the built-ins spell it.
@pytest.mark.parametrize(("name", "cause", "field", "value"), [
    ("default", "out_of_memory", "mem_factor", 1.5),
    ("default", "out_of_memory", "mem_cap_mb", 64 * 1024),
    ("default", "out_of_memory", "max_retries", 3),
    ("default", "out_of_memory", "resize_pending", True),
    ("default", "timeout", "time_factor", 1.5),
    ("default", "timeout", "time_cap_min", 2 * 24 * 60),
    ("default", "timeout", "max_retries", 3),
    ("default", "node_fail", "max_retries", 5),
    ("default", "node_fail", "exclude_failed_node", True),
    ("default", "boot_fail", "exclude_failed_node", True),
    ("default", "preempted", "max_retries", 10),
    ("default", "failed", "retry_exit_codes", (75,)),
    ("default", "failed", "max_retries", 2),
    ("default", "failed", "backoff_s", 60),
    ("default", "failed", "backoff_factor", 2.0),
    ("default", "lost", "max_retries", 1),
    ("conservative", "out_of_memory", "mem_cap_mb", 16 * 1024),
    ("conservative", "out_of_memory", "resize_pending", False),
    ("conservative", "timeout", "time_cap_min", 12 * 60),
    ("conservative", "failed", "action", "give_up"),
    ("conservative", "lost", "action", "give_up"),
    ("persistent", "out_of_memory", "mem_factor", 2.0),
    ("persistent", "out_of_memory", "mem_cap_mb", 256 * 1024),
    ("persistent", "timeout", "time_cap_min", 7 * 24 * 60),
    ("persistent", "failed", "retry_exit_codes", (75, 143)),
    ("persistent", "failed", "backoff_s", 120),
])
def test_builtin_rule_values(name: str, cause: str, field: str, value: object) -> None:
    assert getattr(load_policy(name, "/nowhere").rule(cause), field) == value


@pytest.mark.parametrize(("name", "field", "value"), [
    ("default", "max_failures", 6),
    ("default", "unknown_grace_s", 600),
    ("default", "campaign_exclude_after", 2),
    ("default", "slurm_requeue", False),
    ("conservative", "max_failures", 2),
    ("conservative", "unknown_grace_s", 1800),
    ("conservative", "campaign_exclude_after", 1),
    ("persistent", "max_failures", 12),
    ("persistent", "slurm_requeue", True),
])
def test_builtin_policy_values(name: str, field: str, value: object) -> None:
    assert getattr(load_policy(name, "/nowhere"), field) == value


def test_unknown_builtin_name_lists_the_builtins() -> None:
    with pytest.raises(NotFoundError) as info:
        load_policy("agressive", "/nowhere")
    assert "no built-in policy named 'agressive'" in info.value.message
    assert "conservative, default, persistent" in info.value.hint


def test_a_policy_path_not_named_as_yaml_is_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$hash-nobody-should-see:19000:0:99999:7:::\n")
    for reference in (str(secret), "../" + secret.name):
        with pytest.raises(NotFoundError) as info:
            load_policy(reference, str(tmp_path / "project"))
        assert "is not named *.yaml or *.yml" in info.value.message and "hash-nobody" not in str(info.value)


def test_a_rule_the_policy_does_not_name_gives_up() -> None:
    assert Policy().rule("timeout") == Rule(action="give_up", max_retries=0)


# --- spec overrides -----------------------------------------------------------------------------

def test_spec_naming_a_policy_gets_it_unchanged() -> None:
    text = SPEC_HEAD.replace("policy:\n  use: default\n", "policy: default\n")
    spec = validate_spec(parse_yaml(text, "spec.yaml"), "/p", DEFAULT)
    assert spec.policy == DEFAULT and spec.policy_ref == "default"


def test_override_changes_only_that_field_and_renames() -> None:
    spec = spec_with("rules: {out_of_memory: {max_retries: 5}}")
    policy = spec.policy
    assert policy.name == "default+spec" and policy.version == DEFAULT.version
    assert policy.rules["out_of_memory"] == replace(DEFAULT.rules["out_of_memory"], max_retries=5)
    assert {c: r for c, r in policy.rules.items() if c != "out_of_memory"} == \
        {c: r for c, r in DEFAULT.rules.items() if c != "out_of_memory"}
    assert replace(policy, name="default", rules=DEFAULT.rules) == DEFAULT
    assert spec.policy_ref == "default"


@pytest.mark.parametrize(("lines", "expected"), [
    pytest.param([], DEFAULT, id="use-only keeps the name"),
    pytest.param(["rules: {out_of_memory: {max_retries: 3}}"], DEFAULT, id="same value keeps the name"),
    pytest.param(["max_failures: 9"], replace(DEFAULT, name="default+spec", max_failures=9), id="max_failures"),
    pytest.param(["slurm_requeue: true"], replace(DEFAULT, name="default+spec", slurm_requeue=True),
                 id="slurm_requeue"),
    pytest.param(["campaign_exclude_after: 1"], replace(DEFAULT, name="default+spec", campaign_exclude_after=1),
                 id="campaign_exclude_after"),
    pytest.param(["rules: {failed: {retry_exit_codes: [75, 143], backoff: 5m}}"],
                 replace(DEFAULT, name="default+spec", rules={
                     **DEFAULT.rules,
                     "failed": replace(DEFAULT.rules["failed"], retry_exit_codes=(75, 143), backoff_s=300)}),
                 id="failed rule, two fields"),
    pytest.param(["rules: {out_of_memory: {mem_cap: 128G, mem_factor: 2}}"],
                 replace(DEFAULT, name="default+spec", rules={
                     **DEFAULT.rules,
                     "out_of_memory": replace(DEFAULT.rules["out_of_memory"], mem_cap_mb=131072, mem_factor=2.0)}),
                 id="memory cap and factor"),
    pytest.param(["rules: {timeout: {time_cap: \"3-00:00:00\"}}"],
                 replace(DEFAULT, name="default+spec", rules={
                     **DEFAULT.rules, "timeout": replace(DEFAULT.rules["timeout"], time_cap_min=4320)}),
                 id="time cap"),
])
def test_overrides(lines: list[str], expected: Policy) -> None:
    assert spec_with(*lines).policy == expected


def test_override_of_a_rule_the_base_lacks_starts_from_give_up() -> None:
    policy = spec_with("rules: {lost: {max_retries: 2}}", base=Policy(name="bare")).policy
    assert policy.name == "bare+spec"
    assert policy.rules == {"lost": Rule(action="give_up", max_retries=2)}


@pytest.mark.parametrize(("value", "seconds"), [
    ("90", 90), ('"90s"', 90), ("10m", 600), ("1h", 3600), ("2d", 172_800),
    ('"00:10:00"', 600), ('"1-00:00:00"', 86_400), ("0", 0),
])
def test_durations(value: str, seconds: int) -> None:
    assert spec_with(f"unknown_grace: {value}").policy.unknown_grace_s == seconds


# Each override line is line 6 of the spec; the message names the line and the full key path.
@pytest.mark.parametrize(("line", "fragment"), [
    ("rules: {out_of_memory: {mem_factor: 0.5}}",
     "policy.rules.out_of_memory.mem_factor: must be at least 1 (a multiplier), got 0.5"),
    ("rules: {out_of_memory: {mem_factor: 0}}",
     "policy.rules.out_of_memory.mem_factor: must be a number above 0, got 0"),
    ("rules: {timeout: {time_factor: fast}}",
     "policy.rules.timeout.time_factor: must be a number above 0, got 'fast'"),
    ("rules: {failed: {backoff_factor: 0.9}}",
     "policy.rules.failed.backoff_factor: must be at least 1 (a multiplier), got 0.9"),
    ("rules: {out_of_memory: {memory_factor: 2}}",
     "policy.rules.out_of_memory.memory_factor: unknown key (did you mean mem_factor?); allowed: action"),
    ("rules: {oom: {max_retries: 1}}",
     "policy.rules.oom: unknown key; allowed: out_of_memory, timeout, node_fail"),
    ("rules: {failed: {backoff: soon}}",
     "policy.rules.failed.backoff: 'soon' is not a duration; use seconds or e.g. \"90s\""),
    ("rules: {failed: {backoff: -5}}", "policy.rules.failed.backoff: -5 is not a duration"),
    ("unknown_grace: 10 minutes", "policy.unknown_grace: '10 minutes' is not a duration"),
    ("rules: {failed: {retry_exit_codes: [0, 75]}}",
     "policy.rules.failed.retry_exit_codes: must be a list of exit codes from 1 to 255, got [0, 75]"),
    ("rules: {failed: {retry_exit_codes: [256]}}",
     "policy.rules.failed.retry_exit_codes: must be a list of exit codes from 1 to 255, got [256]"),
    ("rules: {failed: {retry_exit_codes: 75}}",
     "policy.rules.failed.retry_exit_codes: must be a list of exit codes from 1 to 255, got 75"),
    ("rules: {failed: {action: maybe}}",
     "policy.rules.failed.action: 'maybe' is not allowed; use one of: resubmit, give_up"),
    ("rules: {failed: {max_retries: -1}}",
     "policy.rules.failed.max_retries: must be a whole number from 0 to 1000, got -1"),
    ("rules: {out_of_memory: {mem_cap: lots}}", "policy.rules.out_of_memory.mem_cap: 'lots' is not a memory size"),
    ("rules: {timeout: {time_cap: forever}}", "policy.rules.timeout.time_cap: 'forever' is not a time limit"),
    ("rules: {out_of_memory: {resize_pending: 1}}",
     "policy.rules.out_of_memory.resize_pending: must be true or false, got 1"),
    ("rules: {out_of_memory: 3}", "policy.rules.out_of_memory: must be a mapping of keys, got int"),
    ("rules: [out_of_memory]", "policy.rules: must be a mapping of keys, got list"),
    ("max_failures: many", "policy.max_failures: must be a whole number from 0 to 1000, got 'many'"),
    ("campaign_exclude_after: 0", "policy.campaign_exclude_after: must be a whole number from 1 to 1000, got 0"),
    ('slurm_requeue: "yes"', "policy.slurm_requeue: must be true or false, got 'yes'"),
    ("name: mine", "policy.name: unknown key; allowed: use, max_failures, unknown_grace"),
])
def test_bad_override_names_file_line_and_key(line: str, fragment: str) -> None:
    message = spec_problems(line)
    assert message.startswith("spec.yaml: 1 problem(s):")
    assert f"line 6: {fragment}" in message


def test_every_bad_override_is_reported_at_once_on_its_own_line() -> None:
    message = spec_problems("rules:", "  out_of_memory:", "    mem_factor: 0.5",
                            "  failed:", "    action: maybe", "    retry_exit_codes: [300]")
    assert message.startswith("spec.yaml: 3 problem(s):")
    assert "line 8: policy.rules.out_of_memory.mem_factor: must be at least 1" in message
    assert "line 10: policy.rules.failed.action: 'maybe' is not allowed" in message
    assert "line 11: policy.rules.failed.retry_exit_codes: must be a list of exit codes" in message


GOOD_FILE = """\
name: mine
version: 2
description: a copy of default with a gentler memory growth
max_failures: 4
unknown_grace: 15m
rules:
  out_of_memory: {action: resubmit, max_retries: 2, mem_factor: 1.25, mem_cap: 32G}
  failed:
    action: resubmit
    retry_exit_codes: [75]
    backoff: 30s
"""


def test_policy_file_reads_every_setting() -> None:
    policy = policy_file(GOOD_FILE)
    assert (policy.name, policy.version, policy.max_failures, policy.unknown_grace_s) == ("mine", 2, 4, 900)
    assert policy.rules == {
        "out_of_memory": Rule(action="resubmit", max_retries=2, mem_factor=1.25, mem_cap_mb=32768),
        "failed": Rule(action="resubmit", retry_exit_codes=(75,), backoff_s=30),
    }
    assert policy.campaign_exclude_after == 2 and policy.slurm_requeue is False  # unset: the defaults


@pytest.mark.parametrize(("old", "new", "fragment"), [
    ("name: mine\n", "", "line 1: name: is required"),
    ("name: mine\n", "name: my policy\n", "line 1: name: 'my policy' is not allowed"),
    ("version: 2\n", "version: two\n", "line 2: version: must be a whole number"),
    ("max_failures: 4\n", "max_failure: 4\n",
     "line 4: max_failure: unknown key (did you mean max_failures?); allowed: name"),
    ("retry_exit_codes: [75]", "retry_exit_codes: [75, 999]",
     "line 10: rules.failed.retry_exit_codes: must be a list of exit codes from 1 to 255"),
    ("backoff: 30s", "backoff: 30 s", "line 11: rules.failed.backoff: '30 s' is not a duration"),
    ("mem_factor: 1.25", "mem_factor: 0.8", "line 7: rules.out_of_memory.mem_factor: must be at least 1"),
])
def test_bad_policy_file_names_file_line_and_key(old: str, new: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        policy_file(GOOD_FILE.replace(old, new))
    assert info.value.message.startswith("policies/mine.yaml: 1 problem(s):")
    assert fragment in info.value.message


# --- digest and persistence ---------------------------------------------------------------------

def test_digest_is_stable_and_changes_with_any_rule() -> None:
    again = load_policy("default", "/elsewhere")
    assert DEFAULT.digest == again.digest and len(DEFAULT.digest) == 16
    assert spec_with("rules: {out_of_memory: {max_retries: 5}}").policy.digest != DEFAULT.digest
    assert spec_with("rules: {failed: {retry_exit_codes: [75, 76]}}").policy.digest != DEFAULT.digest
    assert load_policy("conservative", "/").digest != DEFAULT.digest


def test_spec_hash_changes_with_the_policy_behind_the_same_text() -> None:
    text = SPEC_HEAD
    with_default = validate_spec(parse_yaml(text, "spec.yaml"), "/p", DEFAULT)
    with_tighter = validate_spec(parse_yaml(text, "spec.yaml"), "/p",
                                 replace(DEFAULT, max_failures=DEFAULT.max_failures - 1))
    assert with_default.spec_hash != with_tighter.spec_hash


@pytest.mark.parametrize("name", builtin_names())
def test_policy_round_trips_through_the_stored_json(name: str) -> None:
    policy = load_policy(name, "/nowhere")
    stored = json.dumps(policy_to_dict(policy), sort_keys=True)  # as the store writes it
    back = policy_from_dict(json.loads(stored))
    assert back == policy and back.digest == policy.digest


def test_round_trip_keeps_overrides_and_empty_rules() -> None:
    for policy in (spec_with("rules: {failed: {retry_exit_codes: [75, 143]}}").policy, Policy()):
        assert policy_from_dict(json.loads(json.dumps(policy_to_dict(policy)))) == policy


@pytest.mark.parametrize(("line", "fragment"), [
    ("prices: {gpu_hour: {a100: -1}}",
     "line 6: policy.prices.gpu_hour.a100: must be a price per hour, 0 or more, got -1"),
    ("prices: {gpu_hour: {'a 100': 1}}", "policy.prices.gpu_hour.a 100: a GPU type name such as a100, or `default`"),
    ("prices: {gpu_hour: 3}", "policy.prices.gpu_hour: must be a mapping of GPU type: price per GPU-hour"),
    ("prices: {cpu_hour: cheap}", "policy.prices.cpu_hour: must be a price per hour, 0 or more, got 'cheap'"),
    ("fallback: {after: soon}", "policy.fallback.after: 'soon' is not a duration"),
    ("fallback: {max_moves: 0}", "policy.fallback.max_moves: must be a whole number from 1 to 100, got 0"),
    ("utilisation: {gpu_low_pct: 120}", "policy.utilisation.gpu_low_pct: must be a percentage from 0 to 100, got 120"),
    ("utilisation: {window: 0}", "policy.utilisation.window: must be longer than 0"),
    ("utilisation: {data_starved: {action: more_gpus}}",
     "policy.utilisation.data_starved.action: 'more_gpus' is not allowed; use one of: none, more_cpus"),
    ("utilisation: {gpu_idle: {gpu_factor: 1.5}}",
     "policy.utilisation.gpu_idle.gpu_factor: must be a fraction from 0.01 to 0.99 (0.5 halves the GPUs), got 1.5"),
    ("utilisation: {gpu_idle: {cancel_running: yes}}", "policy.utilisation.gpu_idle.cancel_running"),
    ("utilisation: {windw: 5m}", "policy.utilisation.windw: unknown key (did you mean window?); allowed: window"),
    ("early_stopping: {metric: val loss}",
     "policy.early_stopping.metric: 'val loss' is not allowed; use a metric name tasks report, e.g. val_loss"),
    ("early_stopping: {metric: step}", "policy.early_stopping.metric: 'step' is not a metric (reserved"),
    ("early_stopping: {metric: acc, goal: maximize}",
     "policy.early_stopping.goal: 'maximize' is not allowed; use one of: min, max"),
    ("early_stopping: {metric: acc, rule: asha}",
     "policy.early_stopping.rule: 'asha' is not allowed; use one of: none, median"),
    ("early_stopping: {metric: acc, grace_steps: -1}",
     "policy.early_stopping.grace_steps: must be a whole number from 0 to 1000000000, got -1"),
    ("early_stopping: {metric: acc, min_peers: 0}",
     "policy.early_stopping.min_peers: must be a whole number from 1 to 100000, got 0"),
    ("early_stopping: {metric: acc, mode: dry}",
     "policy.early_stopping.mode: 'dry' is not allowed; use one of: enforce, shadow"),
    ("early_stopping: {metric: acc, direction: max}",
     "policy.early_stopping.direction: unknown key; allowed: rule, metric, goal, grace_steps, min_peers, mode"),
    ("early_stopping: {grace_steps: 5}",
     "policy.early_stopping: names no metric, so rule median cannot run; add e.g. `metric: val_loss`"),
])
def test_new_sections_refuse_bad_values_with_file_line_and_key(line: str, fragment: str) -> None:
    assert fragment in spec_problems(line)


def test_new_sections_override_the_named_policy_key_by_key() -> None:
    policy = spec_with("prices: {gpu_hour: {a100: 3.5}, cpu_hour: 0.02}",
                       "utilisation: {window: 5m, data_starved: {action: more_cpus}}",
                       "fallback: {after: 15m}").policy
    assert policy.name == "default+spec"
    assert (policy.prices.gpu("a100"), policy.prices.gpu("h100"), policy.prices.cpu_hour) == (3.5, 0.0, 0.02)
    assert (policy.utilisation.window_s, policy.utilisation.data_starved.action) == (300, "more_cpus")
    assert policy.utilisation.gpu_idle.action == "none" and policy.utilisation.gpu_low_pct == 20.0
    assert (policy.fallback.after_s, policy.fallback.max_moves) == (900, 2)
    assert policy_from_dict(json.loads(json.dumps(policy_to_dict(policy)))) == policy


@pytest.mark.parametrize(("resources", "fragment"), [
    ("{gpus: 1, gpu_type: [a100, a100]}", "resources.gpu_type: lists a GPU type twice"),
    ("{gpus: 1, gpu_type: []}", "resources.gpu_type: must list at least one GPU type"),
    ("{gpus: 1, gpu_type: [a100, 'v 100']}", "line 3: resources.gpu_type[1]: 'v 100' is not allowed"),
    ("{gpus: 1, min_gpus: 2}", "resources.min_gpus: is 2, more than resources.gpus (1)"),
    ("{gpu_type: [a100]}", "resources.gpu_type: is set but gpus is 0"),
])
def test_gpu_type_preference_lists_are_checked(resources: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        validate_spec(parse_yaml(f"name: t\ncommand: [echo]\nresources: {resources}\n", "s.yaml"), "/p")
    assert fragment in info.value.message


def test_a_preference_list_asks_for_the_first_type_and_keeps_the_rest() -> None:
    spec = validate_spec(parse_yaml("name: t\ncommand: [echo]\nresources: {gpus: 2, gpu_type: [a100, v100]}\n"
                                    "budget: {money: 50, warn_at: 0.9}\n", "s.yaml"), "/p")
    assert (spec.resources.gres, spec.gpu_types, spec.min_gpus) == ("gpu:a100:2", ("a100", "v100"), 1)
    assert spec.settings()["budget"] == {"gpu_hours": None, "cpu_hours": None, "money": 50.0, "energy_kwh": None,
                                                 "warn_at": 0.9}


def test_early_stopping_is_off_until_a_metric_is_named_and_overrides_key_by_key() -> None:
    assert not DEFAULT.early_stopping.enabled and spec_with().policy.early_stopping == EarlyStopping()
    policy = spec_with("early_stopping: {metric: val_loss, grace_steps: 5, min_peers: 4}").policy
    assert policy.name == "default+spec" and policy.digest != DEFAULT.digest
    assert policy.early_stopping == EarlyStopping(rule="median", metric="val_loss", goal="min", grace_steps=5,
                                                  min_peers=4, mode="enforce")
    assert policy.early_stopping.enabled and policy.mode_of("early_stopping") == "enforce"
    assert policy_from_dict(json.loads(json.dumps(policy_to_dict(policy)))) == policy
    off = spec_with("early_stopping: {metric: val_loss, rule: none}").policy.early_stopping
    assert off.metric == "val_loss" and not off.enabled


def test_early_stopping_in_a_policy_file_in_shadow_and_a_stored_policy_without_it() -> None:
    policy = policy_file(GOOD_FILE + "early_stopping: {metric: acc, goal: max, mode: shadow}\n")
    assert (policy.early_stopping.metric, policy.early_stopping.goal) == ("acc", "max")
    assert policy.mode_of("early_stopping") == "shadow" and "early_stopping" in policy.shadow_rules
    assert policy.mode_of("gpu_fallback") == "enforce"
    stored = policy_to_dict(policy)
    del stored["early_stopping"]  # written by a campaignctl before the section existed
    assert policy_from_dict(stored).early_stopping == EarlyStopping()
