"""Find and read a policy: a name from the packaged `policies/` directory or a YAML path."""

from __future__ import annotations

from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from campaignctl.adapters.yaml_source import load_yaml, parse_yaml
from campaignctl.core.base.errors import NotFoundError, SpecError
from campaignctl.core.base.rawdoc import RawDoc
from campaignctl.core.base.reader import Reader
from campaignctl.core.policy.policy import Policy, read_policy
from campaignctl.core.spec.spec import names_policy_file, policy_reference


def builtin_names() -> list[str]:
    folder = resources.files("campaignctl") / "policies"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


DEFAULT_BASE = "default"
MAX_BASES = 8  # `use:` chains deeper than this are refused (a file naming itself, or a loop)


def load_policy(reference: str, base_dir: str, _depth: int = 0) -> Policy:
    """`reference` is a packaged policy name (`default`) or a path, relative to `base_dir`.

    A policy file extends the policy its `use:` names (a built-in name, or a path relative to the
    file), `default` when it names none: what the file leaves out is the base's, never 0. A file
    without `use:` used to start from nothing, so a file of one rule had a failure budget of 0 and
    gave up every OOM and TIMEOUT. The built-ins are complete in themselves."""
    if not names_policy_file(reference):
        resource = resources.files("campaignctl") / "policies" / f"{reference}.yaml"
        if not _is_file(resource):
            raise NotFoundError(f"no built-in policy named {_shown(reference)}",
                                f"built-in policies: {', '.join(builtin_names())}; or give a path "
                                "to a policy YAML file")
        return _read(parse_yaml(resource.read_text(encoding="utf-8"), f"policies/{reference}.yaml"), None)
    path = Path(reference) if reference.startswith("/") else Path(base_dir) / reference
    if not path.name.endswith((".yaml", ".yml")):
        # never read: a parse error quotes the file's lines, and `use: /etc/shadow` (or the same
        # through the MCP server's simulate) would print what the caller may read but never asked for
        raise NotFoundError(f"policy file {_shown(str(path))} is not named *.yaml or *.yml",
                            f"a policy file is YAML named so; built-in policies: {', '.join(builtin_names())}")
    if not _is_file(path):
        raise NotFoundError(f"policy file {_shown(str(path))} not found",
                            f"built-in policies: {', '.join(builtin_names())}")
    doc = load_yaml(path)
    if path.resolve().parent == Path(str(resources.files("campaignctl") / "policies")).resolve():
        return _read(doc, None)  # the packaged file itself (`campaignctl/policies/default.yaml`): a built-in
    use = doc.data.get("use", DEFAULT_BASE) if isinstance(doc.data, dict) else DEFAULT_BASE
    if not isinstance(use, str) or not use:
        raise SpecError([f"{doc.where(('use',))}: must name the policy this file extends: a built-in "
                         f"({', '.join(builtin_names())}) or a path"], doc.source)
    if _depth >= MAX_BASES:
        raise SpecError([f"{doc.where(('use',))}: `use:` goes {MAX_BASES} files deep; does it name "
                         "itself, or a file that names it?"], doc.source)
    try:
        base = load_policy(use, str(path.parent), _depth + 1)
    except NotFoundError as exc:
        raise SpecError([f"{doc.where(('use',))}: {exc.message}"], doc.source, exc.hint) from None
    return _read(doc, base)


def _is_file(path: Traversable) -> bool:
    """A name longer than the system allows (ENAMETOOLONG: a 70 KB `use:`) is no file either;
    pathlib's is_file raises for it."""
    try:
        return path.is_file()
    except OSError:
        return False


def _shown(name: str) -> str:
    return repr(name) if len(name) <= 200 else repr(name[:200]) + f"… ({len(name):,} characters)"


def _read(doc: RawDoc, base: Policy | None) -> Policy:
    reader = Reader(doc)
    policy = read_policy(reader, base=base)
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
