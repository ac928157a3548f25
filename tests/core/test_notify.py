"""notify: the spec/policy key, URL masking, and the events a campaign's log and state yield."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.base.clock import UTC
from campaignctl.core.base.errors import SpecError
from campaignctl.core.base.reader import Reader
from campaignctl.core.governance.revisions import revision_diff
from campaignctl.core.model.records import RevisionRecord
from campaignctl.core.policy.notify_config import EVENTS, Notify, mask_url, mask_urls
from campaignctl.core.policy.policy import Policy, policy_from_dict, policy_to_dict, read_policy
from campaignctl.core.screens.notify import CampaignFacts, LoggedFact, derive_events, event_from_dict
from campaignctl.core.spec.spec import CampaignSpec, validate_spec

SPEC = 'name: n\ncommand: [python3, t.py]\n'
HOOK = "https://hooks.example.org/services/T0/B0/s3cr3t"


def spec_of(text: str, base: Policy | None = None) -> CampaignSpec:
    return validate_spec(parse_yaml(SPEC + text, "spec.yaml"), "/p", base)


def problems_of(text: str) -> str:
    with pytest.raises(SpecError) as info:
        spec_of(text)
    return info.value.message


def test_defaults_every_event_a_5s_timeout_and_3_retries() -> None:
    notify = spec_of(f"notify: {{webhook: '{HOOK}'}}\n").policy.notify
    assert notify == Notify(webhook=HOOK, on=EVENTS, timeout_s=5, retries=3) and notify.enabled
    assert not spec_of("").policy.notify.enabled


def test_every_key_read() -> None:
    notify = spec_of("notify: {command: [page-me, --team, ml], on: [finish, give_up], timeout: 20s, retries: 0}\n"
                     ).policy.notify
    assert notify == Notify("", ("page-me", "--team", "ml"), ("give_up", "finish"), 20, 0)


@pytest.mark.parametrize(("line", "fragment"), [
    ("notify: {webhook: 'file:///etc/passwd'}", "notify.webhook: must be an http:// or https:// URL with a host "
                                                "(scheme given: 'file')"),
    ("notify: {webhook: 'https://'}", "must be an http:// or https:// URL with a host"),
    ("notify: {command: 'curl -d @- https://x'}", "notify.command: must be an argv list"),
    ("notify: {command: []}", "notify.command: must be an argv list"),
    ("notify: {command: [notify, 3]}", "notify.command[1]: must be a string (quote it), got int"),
    ("notify: {command: [true]}", "notify.command[0]: must be a string (quote it), got bool"),  # YAML 1.1
    ('notify: {command: ["a\\nb"]}', "must not contain newline"),
    ("notify: {webhook: 'http://h/x', on: [give_up, done]}", "notify.on: 'done' is not an event; use some of: "
                                                             "alert, hold, awaiting_approval, give_up, finish"),
    ("notify: {webhook: 'http://h/x', on: []}", "notify.on: must be a non-empty list"),
    ("notify: {webhook: 'http://h/x', timeout: 5m}", "notify.timeout: must be from 1s to 60s"),
    ("notify: {webhook: 'http://h/x', retries: 11}", "notify.retries: must be a whole number from 0 to 10"),
    ("notify: {webhook: 'http://h/x', url: 'http://h/y'}", "notify.url: unknown key; allowed: webhook, command"),
    ("notify: {on: [finish]}", "notify: names no channel: set webhook"),
    ("policy: {use: default, notify: {webhook: 'http://h/x'}}", "policy.notify: unknown key"),
])
def test_bad_values_name_the_key_and_what_is_allowed(line: str, fragment: str) -> None:
    message = problems_of(line + "\n")
    assert fragment in message and "spec.yaml" in message and "1 problem(s)" in message


def policy_with_notify() -> Policy:
    doc = parse_yaml(f"name: team\nnotify: {{webhook: '{HOOK}', on: [alert, finish], retries: 5}}\n", "team.yaml")
    return read_policy(Reader(doc))


def test_the_spec_overrides_the_policys_notify_key_by_key() -> None:
    team = policy_with_notify()
    assert team.notify == Notify(webhook=HOOK, on=("alert", "finish"), retries=5)
    assert spec_of("policy: team\n", team).policy.notify == team.notify
    mine = spec_of("policy: team\nnotify: {on: [give_up]}\n", team).policy.notify
    assert mine == Notify(webhook=HOOK, on=("give_up",), retries=5)


def test_stored_policy_round_trips_and_an_unset_notify_leaves_the_digest_as_before() -> None:
    team = policy_with_notify()
    assert policy_from_dict(json.loads(json.dumps(policy_to_dict(team)))) == team
    assert "notify" not in policy_to_dict(Policy()) and policy_from_dict(policy_to_dict(Policy())) == Policy()


@pytest.mark.parametrize(("url", "shown"), [
    ("https://hooks.slack.com/services/T0/B0/XXXX", "https://hooks.slack.com/…"),
    ("http://127.0.0.1:8080/hook?token=abc", "http://127.0.0.1:8080/…"),
    ("https://user:pw@example.org/", "https://example.org"),
    ("https://example.org", "https://example.org"),
    ("http://[::1]:9000/x", "http://[::1]:9000/…"),
])
def test_mask_url_keeps_scheme_host_and_port_only(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_the_revision_diff_never_shows_a_webhook_token() -> None:
    old = RevisionRecord(1, 1, "name: n\n", "h", "s.yaml", "t")
    new = RevisionRecord(1, 2, f"name: n\nnotify: {{webhook: '{HOOK}'}}\n", "h", "s.yaml", "t",
                         policy_json=json.dumps({"notify": {"webhook": HOOK}}))
    diff = revision_diff(old, new)
    assert "s3cr3t" not in diff and "https://hooks.example.org/…" in diff
    assert mask_urls(f"a {HOOK} b") == "a https://hooks.example.org/… b"


def test_the_revision_diff_never_shows_an_env_secret_to_the_team() -> None:
    old = RevisionRecord(1, 1, "name: n\nenv: {HF_TOKEN: hf_abc123, LR: '0.1'}\n", "h", "s.yaml", "t")
    new = RevisionRecord(1, 2, "name: n\nenv:\n  HF_TOKEN: hf_new456\n  DB_PASSWORD: 'p w'\n  LR: '0.2'\n",
                         "h", "s.yaml", "t")
    diff = revision_diff(old, new)
    assert not {"hf_abc123", "hf_new456", "p w"} & set(diff.replace("\n", " ").split("'"))
    assert "hf_" not in diff and "HF_TOKEN: ***" in diff and "DB_PASSWORD: '***'" in diff and "LR: '0.2'" in diff


NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)
CAMPAIGN = CampaignFacts(7, "lr", "active", 2, "2026-11-24T05:00:00+00:00", 4, 0)


def fact(id: int, action: str, status: str = "applied", task: int = 1, mode: str = "enforce",
         at: str = "2026-11-24T05:30:00+00:00", tick: int | None = None) -> LoggedFact:
    return LoggedFact(id, id if tick is None else tick, task, action, f"why {id}", mode, status, at, 2)


@pytest.mark.parametrize(("facts", "keys"), [
    ([fact(1, "give_up", tick=9)], ["7/give_up/tick9"]),
    ([fact(1, "give_up", tick=9), fact(2, "give_up", tick=9, task=2), fact(3, "give_up", tick=10)],
     ["7/give_up/tick9", "7/give_up/tick10"]),  # one event per tick
    ([fact(1, "alert", task=-1)], ["7/alert/1"]),
    ([fact(1, "hold", "applied", -1), fact(2, "hold", "failed", -1)], ["7/hold/1", "7/hold/2"]),
    ([fact(1, "hold", "pending", -1)], []),  # not carried out yet: told once Slurm answered
    ([fact(1, "resubmit", "awaiting-approval", tick=4), fact(2, "resize", "awaiting-approval", tick=4)],
     ["7/awaiting_approval/tick4"]),
    ([fact(1, "resubmit", "applied")], []),  # approved and done before anyone was told: nothing waits
    ([fact(1, "resubmit"), fact(2, "resize"), fact(3, "throttle")], []),
    ([fact(1, "give_up", "proposed", mode="shadow")], []),  # a shadow proposal changes nothing
    ([fact(1, "give_up", at="2026-11-24T04:59:59+00:00")], []),  # before this revision: no replay of the past
])
def test_which_logged_decisions_become_events(facts: list[LoggedFact], keys: list[str]) -> None:
    assert [e.key for e in derive_events(CAMPAIGN, facts, EVENTS, set(), NOW)] == keys


def test_an_event_carries_what_a_reader_needs() -> None:
    (event,) = derive_events(CAMPAIGN, [fact(5, "give_up", task=3)], EVENTS, set(), NOW)
    assert event.to_dict() == {
        "key": "7/give_up/tick5", "campaign": "lr", "event": "give_up", "task": 3, "tasks": [3],
        "reason": "why 5", "decision_id": 5, "decision_ids": [5], "time": "2026-11-24T05:30:00+00:00",
        "revision": 2, "status": "applied", "hint": "campaignctl log show lr --task 3", "version": 1}
    assert event.env()["CAMPAIGNCTL_EVENT_TASK"] == "3" and event_from_dict(event.to_dict()) == event
    (alert,) = derive_events(CAMPAIGN, [fact(6, "alert", task=-1)], EVENTS, set(), NOW)
    assert alert.task is None and alert.env()["CAMPAIGNCTL_EVENT_TASK"] == ""
    assert alert.hint == "campaignctl log show lr"
    (waiting,) = derive_events(CAMPAIGN, [fact(8, "resubmit", "awaiting-approval")], EVENTS, set(), NOW)
    assert waiting.hint == "campaignctl approve 8"


def test_a_ticks_give_ups_are_one_event_naming_every_task() -> None:
    facts = [fact(i, "give_up", task=i, tick=4) for i in (3, 1, 2)]
    (event,) = derive_events(CAMPAIGN, facts, EVENTS, set(), NOW)
    assert (event.task, event.tasks, event.decision_id, event.decision_ids) == (None, (1, 2, 3), None, (3, 1, 2))
    assert event.reason == "3 decisions, tasks 1, 2, 3; task 3: why 3" and event.hint == "campaignctl log show lr"
    assert event.env()["CAMPAIGNCTL_EVENT_TASKS"] == "1,2,3" and event.env()["CAMPAIGNCTL_EVENT_TASK"] == ""
    many = [fact(i, "resubmit", "awaiting-approval", task=i, tick=4) for i in range(1, 31)]
    (waiting,) = derive_events(CAMPAIGN, many, EVENTS, set(), NOW)
    assert waiting.reason.startswith("30 decisions, tasks 1, 2, 3, ") and "20 and 10 more;" in waiting.reason
    assert waiting.hint == "campaignctl approvals lr"


def test_finish_is_one_event_per_campaign_and_known_keys_are_not_derived_again() -> None:
    finished = CampaignFacts(7, "lr", "finished", 2, "2026-11-24T05:00:00+00:00", 4, 1)
    facts = [fact(1, "give_up")]
    first = derive_events(finished, facts, EVENTS, set(), NOW)
    assert [e.key for e in first] == ["7/give_up/tick1", "7/finish"]
    assert first[1].reason == "every task settled: 4 task(s), 1 given up" and first[1].status == "finished"
    assert derive_events(finished, facts, EVENTS, {e.key for e in first}, NOW) == []
    assert [e.key for e in derive_events(finished, facts, EVENTS, {"7/give_up/tick1"}, NOW)] == ["7/finish"]


def test_only_the_events_asked_for() -> None:
    finished = CampaignFacts(7, "lr", "finished", 2, "2026-11-24T05:00:00+00:00", 4, 0)
    facts = [fact(1, "give_up"), fact(2, "alert", task=-1)]
    assert [e.event for e in derive_events(finished, facts, ("finish",), set(), NOW)] == ["finish"]
    assert [e.event for e in derive_events(finished, facts, ("alert", "give_up"), set(), NOW)] == ["give_up", "alert"]
