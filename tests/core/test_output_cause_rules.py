"""Rules for causes named by the program's output: policy `causes:`, rule `params:`,
`prices.gpu_memory`, and what decide() makes of them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.base.errors import SpecError
from campaignctl.core.decisions.decision import AttemptView, Decision, TaskView
from campaignctl.core.policy.cause_rules import roomier_gpu_type, step_params
from campaignctl.core.policy.policy import ParamStep, Policy, Rule, policy_from_dict, policy_to_dict
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.spec.spec import Resources, validate_spec
from campaignctl.core.tick.decide import decide
from tests.core.test_decide import NOW, POLICY, at
from tests.core.test_policy import policy_file, spec_problems, spec_with

OOM_LINE = "[PyTorch OutOfMemoryError] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
HALVE = {"batch": ParamStep(0.5, min=1), "grad_accum": ParamStep(2)}


def failed(cause: str | None, number: int = 1, params: dict | None = None, changed: bool = False,
           gpu_type: str | None = None, evidence: str = OOM_LINE) -> AttemptView:
    return AttemptView(token=f"s.{number}", number=number, state="FAILED", job_id=f"1{number}_0",
                       resources=Resources(mem_mb=1000, time_min=60, gpus=1 if gpu_type else 0, gpu_type=gpu_type),
                       exit_code=1, slurm_state="FAILED", nodes="node1", ended_at=at(-5), cause=cause,
                       evidence=evidence if cause else "", params=params or {"batch": 64, "grad_accum": 1},
                       params_changed=changed)


def one(policy: Policy, *attempts: AttemptView, gpu_types: tuple[str, ...] = ()) -> Decision:
    [decision] = decide([TaskView(0, attempts)], policy, NOW, gpu_types)
    return decision


def with_oom_rule(**changes: object) -> Policy:
    return replace(POLICY, rules={**POLICY.rules, "gpu_out_of_memory": Rule("resubmit", max_retries=6, **changes)})  # type: ignore[arg-type]


# --- step_params ------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "step", "expected"), [
    (64, ParamStep(0.5, min=1), 32),
    (3, ParamStep(0.5, min=1), 1),        # floor when shrinking: a step always shrinks
    (1, ParamStep(1.5), 2),               # ceil when growing: a step always grows
    (1, ParamStep(0.5), None),            # an integer never reaches 0
    (2, ParamStep(0.5, min=2), None),     # already at min: give up
    (48, ParamStep(0.5, min=32), 32),     # clamped to min
    (8, ParamStep(2, max=12), 12),        # clamped to max
    (12, ParamStep(2, max=12), None),
    (0.001, ParamStep(0.5), 0.0005),      # floats stay floats
])
def test_step_params(value: float, step: ParamStep, expected: float | None) -> None:
    change = step_params({"x": value}, {"x": step})
    if expected is None:
        assert change.stuck and change.changes == {}
    else:
        assert change.params["x"] == expected and type(change.params["x"]) is type(value)
        assert change.changes == {"x": [value, expected]}


def test_a_missing_or_textual_param_cannot_be_stepped() -> None:
    assert "no parameter 'batch'" in step_params({"lr": 0.1}, HALVE).stuck
    assert "not a number" in step_params({"batch": "64", "grad_accum": 1}, HALVE).stuck


def test_roomier_gpu_type_takes_the_least_memory_above() -> None:
    policy = replace(POLICY, prices=Prices(gpu_memory_mb={"v100": 16384, "a40": 49152, "a100": 81920}))
    assert roomier_gpu_type("v100", ["v100", "a100", "a40"], policy) == "a40"
    assert roomier_gpu_type("a100", ["v100", "a100"], policy) is None
    assert roomier_gpu_type("t4", ["t4", "a100"], policy) is None  # t4's memory unknown
    assert roomier_gpu_type(None, ["a100"], policy) is None


# --- decide -----------------------------------------------------------------------------------

def test_gpu_oom_with_params_halves_the_batch_and_doubles_accumulation() -> None:
    d = one(with_oom_rule(params=HALVE), failed("gpu_out_of_memory"))
    assert (d.rule, d.action) == ("gpu_out_of_memory", "resubmit")
    assert d.params["task_params"] == {"batch": 32, "grad_accum": 2}
    assert d.params["param_changes"] == {"batch": [64, 32], "grad_accum": [1, 2]}
    assert "batch 64 → 32, grad_accum 1 → 2" in d.reason and "gpu out of memory" in d.reason
    assert d.inputs["evidence"] == OOM_LINE


def test_the_next_step_starts_from_the_last_attempts_params() -> None:
    attempts = (failed("gpu_out_of_memory"),
                failed("gpu_out_of_memory", 2, {"batch": 32, "grad_accum": 2}, changed=True))
    d = one(with_oom_rule(params=HALVE), *attempts)
    assert d.params["task_params"] == {"batch": 16, "grad_accum": 4}


def test_at_min_the_rule_gives_up_naming_the_param() -> None:
    d = one(with_oom_rule(params=HALVE), failed("gpu_out_of_memory", params={"batch": 1, "grad_accum": 64}))
    assert d.action == "give_up" and "parameter batch is 1, already at its min 1" in d.reason


def test_default_gpu_oom_moves_to_a_listed_type_with_more_memory() -> None:
    policy = replace(POLICY, prices=Prices(gpu_memory_mb={"v100": 16384, "a100": 81920}))
    d = one(policy, failed("gpu_out_of_memory", gpu_type="v100"), gpu_types=("v100", "a100"))
    assert d.action == "resubmit" and d.resources is not None and d.resources.gpu_type == "a100"
    assert "gpu_type v100 → a100" in d.reason and "task_params" not in d.params


def test_default_gpu_oom_without_params_or_gpu_memory_gives_up_saying_how_to_configure() -> None:
    d = one(POLICY, failed("gpu_out_of_memory", gpu_type="v100"), gpu_types=("v100", "a100"))
    assert d.action == "give_up" and d.rule == "gpu_out_of_memory"
    assert "rules.gpu_out_of_memory.params" in d.reason and "prices.gpu_memory" in d.reason
    assert "CUDA out of memory" in d.reason


def test_a_site_cause_gets_its_own_rule_not_the_failed_one() -> None:
    policy = replace(POLICY, causes={"nccl_timeout": "Watchdog caught"},
                     rules={**POLICY.rules, "nccl_timeout": Rule("resubmit", max_retries=2)})
    d = one(policy, failed("nccl_timeout", evidence="[site pattern] Watchdog caught collective operation timeout"))
    assert (d.rule, d.action) == ("nccl_timeout", "resubmit")  # the failed rule would give up exit 1


def test_a_cause_the_policy_no_longer_knows_is_a_plain_failure() -> None:
    d = one(POLICY, failed("nccl_timeout"))
    assert (d.rule, d.action) == ("failed", "give_up")


def test_setup_failed_gives_up_quoting_the_line_and_its_output() -> None:
    evidence = "setup line 2: module load cuda/12.1\nLmod has detected the following error: unknown module"
    d = one(POLICY, failed("setup_failed", evidence=evidence))
    assert (d.rule, d.action) == ("setup_failed", "give_up")
    assert "module load cuda/12.1 | Lmod has detected" in d.reason


def test_a_retry_for_another_cause_keeps_the_batch_that_fit() -> None:
    timed_out = replace(failed(None, 2, {"batch": 16, "grad_accum": 4}, changed=True), state="TIMEOUT",
                        slurm_state="TIMEOUT")
    d = one(POLICY, failed("gpu_out_of_memory"), timed_out)
    assert d.rule == "timeout" and d.params["task_params"] == {"batch": 16, "grad_accum": 4}


# --- policy ----------------------------------------------------------------------------------

def test_policy_reads_causes_params_and_gpu_memory_and_round_trips() -> None:
    policy = policy_file("""\
name: mine
causes:
  nccl_timeout: {pattern: "Watchdog caught collective operation timeout"}
rules:
  nccl_timeout: {action: resubmit, max_retries: 2}
  gpu_out_of_memory: {params: {batch: {factor: 0.5, min: 1}, grad_accum: {factor: 2}}}
prices: {gpu_memory: {a100: 80G, v100: 16G}}
""")
    assert policy.causes == {"nccl_timeout": "Watchdog caught collective operation timeout"}
    assert policy.rule("gpu_out_of_memory").params == HALVE
    assert policy.rule("gpu_out_of_memory").action == "resubmit"  # the default rule, params added
    assert policy.prices.gpu_memory_mb == {"a100": 81920, "v100": 16384}
    assert policy_from_dict(policy_to_dict(policy)) == policy


def test_policy_json_stored_before_causes_existed_still_loads() -> None:
    data = policy_to_dict(POLICY)
    data.pop("causes")
    for rule in data["rules"].values():
        rule.pop("params")
    data["prices"].pop("gpu_memory_mb")
    assert policy_from_dict(data) == POLICY


@pytest.mark.parametrize(("text", "fragment"), [
    ("causes: {nccl_timeout: {pattern: 'x('}}\nrules: {nccl_timeout: {action: give_up}}", "not a regular expression"),
    ("causes: {nccl_timeout: {pattern: 'Watchdog'}}", "causes.nccl_timeout: has no rule"),
    ("causes: {failed: {pattern: 'x'}}", "a new cause name"),
    ("rules: {nccl_timeout: {action: give_up}}", "nccl_timeout"),
    ("rules: {gpu_out_of_memory: {params: {batch: {factor: 1}}}}", "a multiplier other than 0 and 1"),
    ("rules: {gpu_out_of_memory: {params: {batch: {factor: 0.5, min: 8, max: 4}}}}", "min 8 is above max 4"),
    ("prices: {gpu_memory: {a100: lots}}", "gpu_memory.a100"),
])
def test_bad_cause_settings_name_the_key(text: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        policy_file("name: mine\n" + text)
    assert fragment in info.value.message


def test_spec_refuses_rule_params_the_command_does_not_use() -> None:
    text = ("name: t\ncommand: [python3, train.py]\nenv: {BATCH: '{batch}'}\nmatrix: {batch: [64], accum: [1]}\n"
            "policy: {rules: {gpu_out_of_memory: {params: {batch: {factor: 0.5}, accum: {factor: 2}}}}}\n")
    with pytest.raises(SpecError) as info:
        validate_spec(parse_yaml(text, "spec.yaml"), "/home/u")
    assert len(info.value.problems) == 1
    assert "changes 'accum', which neither command nor env uses (as {accum})" in info.value.message


def test_spec_refuses_rule_params_no_task_has() -> None:
    message = spec_problems("rules: {gpu_out_of_memory: {params: {batch_size: {factor: 0.5}}}}")
    assert "line 6" in message and "'batch_size', which no task has; task parameters: a" in message
    spec = spec_with("rules: {gpu_out_of_memory: {params: {a: {factor: 0.5}}}}")
    assert spec.policy.rule("gpu_out_of_memory").params == {"a": ParamStep(0.5)}
