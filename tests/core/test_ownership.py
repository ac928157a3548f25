"""Who may act on a campaign (core/governance/ownership.py), and the spec's `share:` key."""

from __future__ import annotations

import pytest

from campaignctl.core.governance.ownership import Identity, Ownership, share_of
from tests.core.test_spec import problems_of, spec_of, with_line

ALICE = Identity("alice", frozenset({"alice", "mlteam"}))
BOB = Identity("bob", frozenset({"bob", "mlteam"}))
CAROL = Identity("carol", frozenset({"carol", "other"}))


@pytest.mark.parametrize(("who", "ownership", "allowed"), [
    (ALICE, Ownership("alice"), True),  # the owner
    (BOB, Ownership("alice"), False),  # not shared: nobody else, whatever their groups
    (BOB, Ownership("alice", "mlteam"), True),  # a member of the share group
    (CAROL, Ownership("alice", "mlteam"), False),  # not a member
    (ALICE, Ownership("alice", "other"), True),  # the owner need not be in the group to act
    (Identity("alice"), Ownership("alice", "mlteam"), True),
    (Identity("mlteam", frozenset()), Ownership("alice", "mlteam"), False),  # a user named like the group is not in it
])
def test_who_may_act(who: Identity, ownership: Ownership, allowed: bool) -> None:
    assert ownership.may_act(who) is allowed
    assert (ownership.refusal(who, "c", "roll back") is None) is allowed


def test_a_refusal_names_the_owner_the_group_and_the_share_key() -> None:
    refused = Ownership("alice", "mlteam").refusal(CAROL, "sweep", "roll back")
    assert refused is not None
    message, hint = refused
    assert message == ("carol may not roll back campaign 'sweep': it belongs to alice and it is shared "
                       "with Unix group 'mlteam', which carol is not in")
    assert "share: {group: GROUP}" in hint and "ask alice" in hint
    unshared, _ = Ownership("alice").refusal(BOB, "sweep", "resume") or ("", "")
    assert "shared with no group" in unshared


def test_share_is_stored_with_the_settings_only_when_given() -> None:
    assert spec_of(with_line("share: {group: mlteam}")).settings()["share"] == {"group": "mlteam"}
    assert "share" not in spec_of(with_line("description: x")).settings()
    assert share_of(spec_of(with_line("share: {group: mlteam}")).settings()) == "mlteam"
    assert share_of({}) is None


@pytest.mark.parametrize(("line", "problem"), [
    ("share: mlteam", "share: must be a mapping of keys, got str"),
    ("share: {groups: mlteam}", "share.groups: unknown key (did you mean group?); allowed: group"),
    ("share: {}", "share.group: is required"),
    ("share: {group: 12}", "share.group: must be a string (quote it), got int"),
    ("share: {group: 'ml team'}", "share.group: 'ml team' is not allowed; use a Unix group name"),
    ("share: {group: '-x'}", "share.group: '-x' is not allowed"),
])
def test_share_is_validated(line: str, problem: str) -> None:
    assert problem in problems_of(with_line(line))
