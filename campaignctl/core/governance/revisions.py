"""A revision's full text (the spec as submitted and the policy resolved then) and the diff
between two revisions, as `campaignctl revisions` shows them. Pure."""

from __future__ import annotations

import difflib
import hashlib
import json

from campaignctl.core.base.redact import mask_assignments
from campaignctl.core.model.records import RevisionRecord
from campaignctl.core.policy.notify_config import mask_urls


def revision_text(rev: RevisionRecord) -> str:
    """Everything that decides how the campaign runs: a policy file or a spec override changes
    the resolved policy, so it is part of the text a diff compares."""
    parts = [rev.spec_text.rstrip("\n"), "", "# --- policy in force (resolved) ---",
             json.dumps(json.loads(rev.policy_json), indent=2, sort_keys=True)]
    if rev.shadow_policy_json:
        parts += ["# --- candidate policy in shadow (proposes, never acts) ---",
                  json.dumps(json.loads(rev.shadow_policy_json), indent=2, sort_keys=True)]
    return "\n".join(parts) + "\n"


def content_hash(rev: RevisionRecord) -> str:
    """Two revisions with the same hash run the campaign the same way (a rollback's target)."""
    return hashlib.sha256(revision_text(rev).encode()).hexdigest()


def revision_diff(old: RevisionRecord | None, new: RevisionRecord) -> str:
    """The diff as shown to the whole team: URLs masked, since a `notify:` webhook's path or query
    holds a token, and the values of variables named like secrets (`env: {API_TOKEN: …}`)."""
    before = _shown(revision_text(old)).splitlines(keepends=True) if old else []
    return "".join(difflib.unified_diff(before, _shown(revision_text(new)).splitlines(keepends=True),
                                        f"revision {old.number}" if old else "(nothing)",
                                        f"revision {new.number}", n=2))


def _shown(text: str) -> str:
    return mask_assignments(mask_urls(text))


SUMMARY_LIMIT = 12  # changed settings listed per part; the rest counted (`--full` shows the diff)


def change_summary(old: RevisionRecord | None, new: RevisionRecord) -> list[str]:
    """What a revision changed, in a few lines: the spec lines, the enforced policy's settings
    that changed, and how a candidate in shadow differs from the policy it runs next to. (The
    full diff of a new candidate is every line of it: 260 lines for the default policy.)"""
    lines = []
    before_spec = _shown(old.spec_text).splitlines() if old else []
    spec = [d for d in difflib.ndiff(before_spec, _shown(new.spec_text).splitlines()) if d[:2] in ("+ ", "- ")]
    if spec:
        lines.append(f"spec: {sum(d[0] == '+' for d in spec)} line(s) added, {sum(d[0] == '-' for d in spec)} removed")
    policy = json.loads(new.policy_json)
    if old is not None:
        lines += _listed("policy", setting_changes(json.loads(old.policy_json), policy))
    if new.shadow_policy_json:
        lines += _listed("candidate in shadow, against the enforced policy",
                         setting_changes(policy, json.loads(new.shadow_policy_json)))
    elif old is not None and old.shadow_policy_json:
        lines.append("candidate in shadow: removed")
    return lines


def setting_changes(old: dict[str, object], new: dict[str, object]) -> list[str]:
    """`rules.out_of_memory.mem_factor: 1.5 → 2.0` for each setting that differs (secrets masked)."""
    a, b = _flat(old), _flat(new)
    missing = object()
    return [mask_assignments(mask_urls(f"{k}: {_value(a.get(k, missing))} → {_value(b.get(k, missing))}"))
            for k in sorted(set(a) | set(b)) if a.get(k, missing) != b.get(k, missing)]


def _listed(title: str, changes: list[str]) -> list[str]:
    if not changes:
        return []
    more = len(changes) - SUMMARY_LIMIT
    return ([f"{title}: {len(changes)} setting(s) differ"] + [f"  {c}" for c in changes[:SUMMARY_LIMIT]]
            + ([f"  … and {more} more (--full shows the whole diff)"] if more > 0 else []))


def _flat(value: object, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value}


def _value(value: object) -> str:
    return "(none)" if not isinstance(value, (str, int, float, bool, list, type(None))) else json.dumps(value)
