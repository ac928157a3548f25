"""Policies: per-cause rules with caps and counts, read from YAML (policies/*.yaml) and
overridden key by key from a spec's `policy:` mapping. Pure values; `decide` applies them."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from campaignctl.core.base.rawdoc import KeyPath
from campaignctl.core.base.reader import Reader
from campaignctl.core.base.safety import IDENTIFIER, SLURM_WORD
from campaignctl.core.decisions.answers import ANSWERS
from campaignctl.core.nodes.node_rules import NodeRules, node_rules_from_dict, node_rules_to_dict, read_node_rules
from campaignctl.core.policy.notify_config import Notify, notify_from_dict, read_notify
from campaignctl.core.policy.output_causes import (
    BUILTIN_CAUSES,
    COLLECTIVE_TIMEOUT,
    GPU_HARDWARE,
    GPU_OOM,
    LAUNCH_FAILED,
    SETUP_FAILED,
    check_pattern,
)
from campaignctl.core.policy.placement_section import Placement, placement_from_dict, read_placement
from campaignctl.core.policy.policy_sections import (
    MODES,
    SECTION_RULES,
    Approval,
    EarlyStopping,
    Fallback,
    Prices,
    Utilisation,
    given,
    given_mapping,
    read_approval,
    read_early_stopping,
    read_fallback,
    read_prices,
    read_utilisation,
    sections_from_dict,
)
from campaignctl.core.policy.right_size_section import RightSize, read_right_size, right_size_from_dict

# Domain state → the policy rule that answers it (COMPLETED, PENDING, RUNNING need no decision).
# Rule names are the causes a policy answers, in the words sacct uses (lower case), plus `lost`:
# a job that is in neither sacct nor squeue for longer than `unknown_grace`.
CAUSE_OF_STATE = {"OUT_OF_MEMORY": "out_of_memory", "TIMEOUT": "timeout", "NODE_FAIL": "node_fail",
                  "BOOT_FAIL": "boot_fail", "PREEMPTED": "preempted", "FAILED": "failed",
                  "CANCELLED": "cancelled", "DEADLINE": "deadline", "LOST": "lost"}
CAUSES = tuple(CAUSE_OF_STATE.values())
ACTIONS = ANSWERS  # what a rule may answer an ended attempt with (core/decisions/answers.py)
RULE_KEYS = ("action", "max_retries", "backoff", "backoff_factor", "mem_factor", "mem_cap",
             "time_factor", "time_cap", "exclude_failed_node", "retry_exit_codes",
             "resize_pending", "counts_as_failure", "mode", "params")
POLICY_KEYS = ("name", "version", "description", "max_failures", "unknown_grace",
               "campaign_exclude_after", "slurm_requeue", "rules", "prices", "fallback", "utilisation",
               "mode", "known_good_after", "approval", "early_stopping", "causes", "submit_tries",
               "submit_backoff", "notify", "right_size", "nodes", "placement")
PARAM_STEP_KEYS = ("factor", "min", "max")
CAUSE_KEYS = ("pattern",)
# decision rule name → where its mode lives; every other rule (budget, throttle, rollback, …) enforces
RULE_NAMES = (*CAUSES, *BUILTIN_CAUSES, *SECTION_RULES)
# A spec sets `notify:` at its top level (core/policy/notify_config.py), not inside `policy:`.
OVERRIDE_KEYS = ("use", *(k for k in POLICY_KEYS[3:] if k != "notify"))


@dataclass(frozen=True, slots=True)
class ParamStep:
    """How a rule changes one task parameter for the next attempt: value × factor, kept within
    [min, max]; an integer stays an integer (rounded away from the old value, never to 0)."""

    factor: float
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    action: str = "give_up"
    max_retries: int = 0
    backoff_s: int = 0
    backoff_factor: float = 1.0
    mem_factor: float = 1.0
    mem_cap_mb: int | None = None
    time_factor: float = 1.0
    time_cap_min: int | None = None
    exclude_failed_node: bool = False
    retry_exit_codes: tuple[int, ...] = ()
    resize_pending: bool = False  # also apply the new memory/time to pending siblings in place
    counts_as_failure: bool = True  # preemption does not consume the task's failure budget
    mode: str = "enforce"  # shadow: decisions are logged as proposals, never carried out
    params: dict[str, ParamStep] = field(default_factory=dict)  # task parameters the next attempt changes


# Causes named from the program's output (core/policy/output_causes.py), answered when a policy has no
# rule of its own: a GPU OOM is retried (decide picks smaller params or a GPU type with more
# memory, or gives up saying how to configure either); a failed setup line is a broken
# environment, which a retry would only repeat. A packed task whose step never started (srun
# refused it) is retried: a retry runs alone, unpacked, so what packing caused goes with it.
OUTPUT_CAUSE_DEFAULTS = {GPU_OOM: Rule(action="resubmit", max_retries=6),
                         COLLECTIVE_TIMEOUT: Rule(action="resubmit", max_retries=2, exclude_failed_node=True),
                         SETUP_FAILED: Rule(action="give_up"),
                         LAUNCH_FAILED: Rule(action="resubmit", max_retries=2),
                         GPU_HARDWARE: Rule(action="resubmit", max_retries=3, exclude_failed_node=True)}


@dataclass(frozen=True, slots=True)
class Policy:
    name: str = "give-up"
    version: int = 0
    description: str = ""
    max_failures: int = 0  # failures of any counting cause before a task is given up
    unknown_grace_s: int = 600
    campaign_exclude_after: int = 2  # a node failing this often is excluded campaign-wide
    slurm_requeue: bool = False  # submit with --requeue and let Slurm requeue on preemption
    rules: dict[str, Rule] = field(default_factory=dict)
    prices: Prices = field(default_factory=Prices)
    fallback: Fallback = field(default_factory=Fallback)
    utilisation: Utilisation = field(default_factory=Utilisation)
    mode: str = "enforce"  # shadow: every rule's decisions are proposals only
    known_good_after_s: int = 3600  # a revision whose work ran this long without policy-made failures is known-good
    approval: Approval = field(default_factory=Approval)
    early_stopping: EarlyStopping = field(default_factory=EarlyStopping)
    causes: dict[str, str] = field(default_factory=dict)  # a site's own output causes: name → regex
    # A submission Slurm refuses (sbatch refused or printing no job id, release failing) is tried
    # again by later ticks, waiting submit_backoff, then twice that, …; after submit_tries tries
    # its tasks are given up with Slurm's message.
    submit_tries: int = 4
    submit_backoff_s: int = 120
    notify: Notify = field(default_factory=Notify)  # who is told of alerts, holds, give-ups, …
    right_size: RightSize = field(default_factory=RightSize)  # memory and time from the profile's history
    placement: Placement = field(default_factory=Placement)  # moving pending work between `clusters:`
    nodes: NodeRules = field(default_factory=NodeRules)  # the node ledger and the crash-loop breaker
    base: str = ""  # a policy file's `use:`: the policy it extends ('' for a built-in, complete in itself)

    def submit_retry_in_s(self, tries: int) -> int:
        """How long after its `tries`-th refused try a submission is tried again."""
        return min(self.submit_backoff_s * 2 ** max(0, min(tries, 30) - 1), 86400)

    def rule(self, cause: str) -> Rule:
        return self.rules.get(cause) or OUTPUT_CAUSE_DEFAULTS.get(cause, Rule())

    def is_cause(self, name: str) -> bool:
        """A rule name that answers an ended attempt: a Slurm state, a built-in or a site cause."""
        return name in CAUSES or name in BUILTIN_CAUSES or name in self.causes

    def mode_of(self, rule: str) -> str:
        """The mode a decision of `rule` runs in: the policy's own shadow wins over the rule's.
        Promotion follows the spec's rungs, and a search's asks its `search:`, not the policy: a
        policy in shadow stops neither."""
        if rule in ("promotion", "search"):
            return "enforce"
        if self.mode == "shadow":
            return "shadow"
        if self.is_cause(rule):
            return self.rule(rule).mode
        sections = {"data_starved": self.utilisation.data_starved.mode,
                    "gpu_idle": self.utilisation.gpu_idle.mode, "gpu_fallback": self.fallback.mode,
                    "early_stopping": self.early_stopping.mode,
                    "right_size": self.right_size.mode if self.right_size.enabled else "enforce",
                    "move": self.placement.mode}
        return sections.get(rule, "enforce")

    @property
    def shadow_rules(self) -> list[str]:
        return [r for r in (*RULE_NAMES, *self.causes) if self.mode_of(r) == "shadow"]

    @property
    def digest(self) -> str:
        """Of what the policy does: `base` says where its values came from, not what they are."""
        data = policy_to_dict(self)
        data.pop("base", None)
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        return f"{self.name}@v{self.version}"

    @property
    def described(self) -> str:
        """Its label, and the policy it extends: `mine@v2 (extends default@v1)`."""
        return self.label + (f" (extends {self.base})" if self.base else "")


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    """Without `notify`, `right_size`, `nodes` or `placement` when unset: a policy's digest is what it was
    before they existed."""
    data = asdict(policy)
    data["nodes"] = node_rules_to_dict(policy.nodes)
    if policy.nodes == NodeRules():
        del data["nodes"]
    if policy.notify == Notify():
        del data["notify"]
    if policy.right_size == RightSize():
        del data["right_size"]
    if policy.placement == Placement():
        del data["placement"]
    if not policy.base:
        del data["base"]
    return data


def policy_from_dict(data: dict[str, Any]) -> Policy:
    """Stored policy JSON → Policy; JSON stored before `params`/`causes` existed gets none."""
    rules = {k: Rule(**{**v, "retry_exit_codes": tuple(v["retry_exit_codes"]),
                        "params": {n: ParamStep(**p) for n, p in (v.get("params") or {}).items()}})
             for k, v in data["rules"].items()}
    return Policy(**{**data, "rules": rules, "causes": dict(data.get("causes") or {}), **sections_from_dict(data),
                     "notify": notify_from_dict(data.get("notify")),
                     "right_size": right_size_from_dict(data.get("right_size")),
                     "nodes": node_rules_from_dict(data.get("nodes")),
                     "placement": placement_from_dict(data.get("placement"))})


def read_policy(r: Reader, path: KeyPath = (), base: Policy | None = None) -> Policy:
    """A whole policy file (top level of its own document). `base`: the policy its `use:` names,
    loaded by the caller (adapters/policy_source.py), whose every setting the file's own override;
    None for a built-in, which is complete in itself."""
    r.mapping(path, (*POLICY_KEYS, "use") if base is not None else POLICY_KEYS, required=True)
    name = r.pattern((*path, "name"), SLURM_WORD, "letters, digits, _ . -", required=True) or "invalid"
    version = r.integer((*path, "version"), 0, 1_000_000, default=0) or 0
    start = base or Policy()
    return _read_settings(r, path, replace(start, name=name, version=version,
                                           description=r.string((*path, "description")) or start.description,
                                           notify=read_notify(r, (*path, "notify"), start.notify),
                                           base=base.label if base is not None else ""))


def read_overrides(r: Reader, path: KeyPath, base: Policy) -> Policy:
    """A spec's `policy:` mapping: `use:` names the base, other keys override it."""
    r.mapping(path, OVERRIDE_KEYS)
    policy = _read_settings(r, path, base)
    return policy if policy == base else replace(policy, name=f"{base.name}+spec")


def _read_settings(r: Reader, path: KeyPath, base: Policy) -> Policy:
    rules_path = (*path, "rules")
    causes = _read_causes(r, (*path, "causes"), base.causes)
    names = (*CAUSES, *BUILTIN_CAUSES, *causes)
    rules_doc = r.mapping(rules_path, names) or {}
    rules = dict(base.rules)
    for cause in names:
        if cause in rules_doc:
            base_rule = rules.get(cause) or OUTPUT_CAUSE_DEFAULTS.get(cause, Rule())
            rules[cause] = _read_rule(r, (*rules_path, cause), base_rule)
    for name in causes:
        if name not in rules:
            r.problem((*path, "causes", name), f"has no rule: add rules.{name}, e.g. "
                                               f"{{action: resubmit, max_retries: 2}} or {{action: give_up}}")
    return replace(
        base, rules=rules, causes=causes,
        max_failures=_int(r, (*path, "max_failures"), 0, 1000, base.max_failures),
        unknown_grace_s=r.duration((*path, "unknown_grace"), base.unknown_grace_s),
        campaign_exclude_after=_int(r, (*path, "campaign_exclude_after"), 1, 1000,
                                    base.campaign_exclude_after),
        slurm_requeue=r.boolean((*path, "slurm_requeue"), base.slurm_requeue),
        mode=r.choice((*path, "mode"), MODES) or base.mode,
        known_good_after_s=r.duration((*path, "known_good_after"), base.known_good_after_s),
        approval=read_approval(r, (*path, "approval"), base.approval, (*RULE_NAMES, *causes)),
        prices=read_prices(r, (*path, "prices"), base.prices),
        fallback=read_fallback(r, (*path, "fallback"), base.fallback),
        utilisation=read_utilisation(r, (*path, "utilisation"), base.utilisation),
        early_stopping=read_early_stopping(r, (*path, "early_stopping"), base.early_stopping),
        right_size=read_right_size(r, (*path, "right_size"), base.right_size),
        nodes=read_node_rules(r, (*path, "nodes"), base.nodes),
        placement=read_placement(r, (*path, "placement"), base.placement),
        submit_tries=_int(r, (*path, "submit_tries"), 1, 100, base.submit_tries),
        submit_backoff_s=r.duration((*path, "submit_backoff"), base.submit_backoff_s))


def _read_rule(r: Reader, path: KeyPath, base: Rule) -> Rule:
    r.mapping(path, RULE_KEYS)
    g = r.get
    mem_cap = r.memory((*path, "mem_cap"), "1M") if given(g((*path, "mem_cap"))) else base.mem_cap_mb
    time_cap = r.time((*path, "time_cap"), "1") if given(g((*path, "time_cap"))) else base.time_cap_min
    return Rule(
        action=r.choice((*path, "action"), ACTIONS) or base.action,
        max_retries=_int(r, (*path, "max_retries"), 0, 1000, base.max_retries),
        backoff_s=r.duration((*path, "backoff"), base.backoff_s),
        backoff_factor=_factor(r, (*path, "backoff_factor"), base.backoff_factor),
        mem_factor=_factor(r, (*path, "mem_factor"), base.mem_factor),
        mem_cap_mb=mem_cap,
        time_factor=_factor(r, (*path, "time_factor"), base.time_factor),
        time_cap_min=time_cap,
        exclude_failed_node=r.boolean((*path, "exclude_failed_node"), base.exclude_failed_node),
        retry_exit_codes=_exit_codes(r, (*path, "retry_exit_codes"), base.retry_exit_codes),
        resize_pending=r.boolean((*path, "resize_pending"), base.resize_pending),
        counts_as_failure=r.boolean((*path, "counts_as_failure"), base.counts_as_failure),
        mode=r.choice((*path, "mode"), MODES) or base.mode,
        params=_read_params(r, (*path, "params"), base.params),
    )


def _read_causes(r: Reader, path: KeyPath, base: dict[str, str]) -> dict[str, str]:
    """`causes: {nccl_timeout: {pattern: "Watchdog caught collective operation timeout"}}`."""
    doc = given_mapping(r, path, "cause name: {pattern: REGEX}")
    if doc is None:
        return dict(base)
    causes = dict(base)
    for name in doc:
        where = (*path, name)
        if not (isinstance(name, str) and IDENTIFIER.match(name)) or name in CAUSES or name in BUILTIN_CAUSES:
            r.problem(where, "a new cause name (letters, digits, _), not one of: "
                             + ", ".join((*CAUSES, *BUILTIN_CAUSES)))
            continue
        r.mapping(where, CAUSE_KEYS, required=True)
        pattern = r.string((*where, "pattern"), required=True)
        problem = check_pattern(pattern) if pattern else "is required"
        if problem or not pattern:
            r.problem((*where, "pattern"), problem or "is required")
            continue
        causes[name] = pattern
    return causes


def _read_params(r: Reader, path: KeyPath, base: dict[str, ParamStep]) -> dict[str, ParamStep]:
    """`params: {batch: {factor: 0.5, min: 1}, grad_accum: {factor: 2}}`."""
    doc = given_mapping(r, path, "task parameter: {factor: F, min: N, max: N}")
    if doc is None:
        return dict(base)
    steps = {}
    for name in doc:
        where = (*path, name)
        if not (isinstance(name, str) and IDENTIFIER.match(name)):
            r.problem(where, "a task parameter name (letters, digits, _)")
            continue
        r.mapping(where, PARAM_STEP_KEYS, required=True)
        factor = r.number((*where, "factor"), minimum=0.0)
        if factor is None or factor in (0.0, 1.0):
            r.problem((*where, "factor"), "is required: a multiplier other than 0 and 1, e.g. 0.5 halves, 2 doubles")
            continue
        low, high = r.number((*where, "min"), minimum=0.0), r.number((*where, "max"), minimum=0.0)
        if low is not None and high is not None and low > high:
            r.problem(where, f"min {low:g} is above max {high:g}")
            continue
        steps[name] = ParamStep(factor, low, high)
    return steps


def _int(r: Reader, path: KeyPath, lo: int, hi: int, default: int) -> int:
    value = r.integer(path, lo, hi, default=default)
    return default if value is None else value


def _factor(r: Reader, path: KeyPath, default: float) -> float:
    value = r.number(path, minimum=0.0)
    if value is not None and value < 1.0:
        r.problem(path, f"must be at least 1 (a multiplier), got {value:g}")
        return default
    return default if value is None else value


def _exit_codes(r: Reader, path: KeyPath, default: tuple[int, ...]) -> tuple[int, ...]:
    value = r.get(path)
    if not given(value):
        return default
    if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 255 for v in value):
        r.problem(path, f"must be a list of exit codes from 1 to 255, got {value!r}")
        return default
    return tuple(value)
