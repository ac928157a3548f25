"""A revision's full text (the spec as submitted and the policy resolved then) and the diff
between two revisions, as `campaignctl revisions` shows them. Pure."""

from __future__ import annotations

import difflib
import hashlib
import json

from campaignctl.core.notify_config import mask_urls
from campaignctl.core.records import RevisionRecord
from campaignctl.core.redact import mask_assignments


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
