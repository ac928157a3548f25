"""Find and read a policy: a name from the packaged `policies/` directory or a YAML path."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from campaignctl.adapters.yaml_source import load_yaml, parse_yaml
from campaignctl.core.errors import NotFoundError, SpecError
from campaignctl.core.policy import Policy, read_policy
from campaignctl.core.rawdoc import RawDoc
from campaignctl.core.reader import Reader
from campaignctl.core.spec import names_policy_file, policy_reference


def builtin_names() -> list[str]:
    folder = resources.files("campaignctl") / "policies"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_policy(reference: str, base_dir: str) -> Policy:
    """`reference` is a packaged policy name (`default`) or a path, relative to `base_dir`."""
    if names_policy_file(reference):
        path = Path(reference) if reference.startswith("/") else Path(base_dir) / reference
        if not path.is_file():
            raise NotFoundError(f"policy file {str(path)!r} not found",
                                f"built-in policies: {', '.join(builtin_names())}")
        doc = load_yaml(path)
    else:
        resource = resources.files("campaignctl") / "policies" / f"{reference}.yaml"
        if not resource.is_file():
            raise NotFoundError(f"no built-in policy named {reference!r}",
                                f"built-in policies: {', '.join(builtin_names())}; or give a path "
                                "to a policy YAML file")
        doc = parse_yaml(resource.read_text(encoding="utf-8"), f"policies/{reference}.yaml")
    reader = Reader(doc)
    policy = read_policy(reader)
    reader.raise_if_problems()
    return policy


def spec_policy(doc: RawDoc, spec_dir: str) -> Policy:
    """The policy a spec names: an unknown name or a missing file is a problem of the spec (exit 3)."""
    try:
        return load_policy(policy_reference(doc), spec_dir)
    except NotFoundError as exc:
        nested = isinstance(doc.data, dict) and isinstance(doc.data.get("policy"), dict)
        key = ("policy", "use") if nested else ("policy",)
        raise SpecError([f"{doc.where(key)}: {exc.message}", *doc.problems], doc.source, exc.hint) from None
