"""Find and read a policy: a name from the packaged `policies/` directory or a YAML path."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from campaignctl.adapters.yaml_source import load_yaml, parse_yaml
from campaignctl.core.errors import NotFoundError
from campaignctl.core.policy import Policy, read_policy
from campaignctl.core.reader import Reader


def builtin_names() -> list[str]:
    folder = resources.files("campaignctl") / "policies"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_policy(reference: str, base_dir: str) -> Policy:
    """`reference` is a packaged policy name (`default`) or a path, relative to `base_dir`."""
    if "/" in reference or reference.endswith((".yaml", ".yml")):
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
