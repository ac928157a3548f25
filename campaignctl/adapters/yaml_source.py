"""Read YAML safely and strictly into a `RawDoc`.

PyYAML implements YAML 1.1, whose implicit typing silently corrupts campaign specs:
`time: 1:30:00` is the sexagesimal integer 5400, `gpu_type: no` is False, `mode: 0755` is 493,
and a repeated key silently overwrites the first. We compose the node tree with `SafeLoader`
(never `yaml.load`) and reject those forms instead of coercing them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from campaignctl.adapters.job_files import NAMED, open_regular
from campaignctl.core.base.errors import SpecError
from campaignctl.core.base.rawdoc import KeyPath, RawDoc, format_path

_BOOL_TAG = "tag:yaml.org,2002:bool"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_LEADING_ZERO = re.compile(r"^[-+]?0[0-9_]+$")
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]{0,4000})")  # int() takes at most 4,300 digits
# alias expansion bound ("billion laughs"): a list of 1,000,000 tasks of two params each is 3,000,000
_MAX_NODES = 5_000_000
# PyYAML's composer recurses once per nesting level and hits Python's recursion limit near 490
# levels; no spec needs more than a handful.
MAX_DEPTH = 64
# libyaml composes about 5 MB/s here; 1,000,000 explicit tasks (the most a spec may expand to)
# take ~20 MB as `- {seed: 123456}` lines.
MAX_BYTES = 32 * 1024 * 1024
# Only plain data: a tag such as `!custom` or `!!python/name:` has no meaning in a spec, and
# SafeLoader answers one it cannot build with an exception rather than a value.
_PLAIN_TAGS = {"tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "timestamp", "merge")}
_ALLOWED = "plain values only (strings, numbers, true/false, lists, mappings)"


class _Converter:
    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: dict[KeyPath, int] = {}
        self.problems: list[str] = []
        self.visited = 0
        self.loader = yaml.SafeLoader("")

    def problem(self, node: yaml.Node, path: KeyPath, message: str) -> None:
        self.problems.append(f"line {node.start_mark.line + 1}: {format_path(path)}: {message}")

    def convert(self, node: yaml.Node, path: KeyPath) -> object:
        self.visited += 1
        if self.visited > _MAX_NODES:
            raise SpecError([f"more than {_MAX_NODES} YAML nodes (alias bomb?)"], self.source)
        self.lines.setdefault(path, node.start_mark.line + 1)
        if len(path) > MAX_DEPTH:
            raise SpecError([f"line {node.start_mark.line + 1}: {format_path(path[:3])}…: nested more than "
                             f"{MAX_DEPTH} levels deep; a spec needs a few"], self.source)
        if (node.tag == _INT_TAG and isinstance(node, yaml.ScalarNode) and not node.style
                and _DECIMAL.fullmatch(node.value)):
            # a plain decimal integer, no YAML 1.1 trap: what the constructor would make of it (a
            # list of 1,000,000 seeds spent half its reading there)
            return int(node.value)
        if not _plain(node):
            self.problem(node, path, f"YAML tag {node.tag!r} is not allowed; use {_ALLOWED}")
            return node.value if isinstance(node, yaml.ScalarNode) else None
        if isinstance(node, yaml.MappingNode):
            return self.convert_mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.convert(item, (*path, i)) for i, item in enumerate(node.value)]
        assert isinstance(node, yaml.ScalarNode)
        return self.convert_scalar(node, path)

    def convert_mapping(self, node: yaml.MappingNode, path: KeyPath) -> dict[str, object]:
        out: dict[str, object] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                self.problem(key_node, path, "YAML merge keys (<<) are not supported; write the keys out")
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self.problem(key_node, path, "keys must be plain strings")
                continue
            key = str(key_node.value)
            if key in out:
                self.problem(key_node, (*path, key), "duplicate key (YAML would silently keep the last one)")
                continue
            key_path: KeyPath = (*path, key)
            self.lines[key_path] = key_node.start_mark.line + 1
            out[key] = self.convert(value_node, key_path)
        return out

    def convert_scalar(self, node: yaml.ScalarNode, path: KeyPath) -> object:
        if not node.style:  # plain (unquoted) scalars alone get implicit YAML 1.1 types (None; libyaml: "")
            trap = _yaml11_trap(node)
            if trap:
                self.problem(node, path, f"{node.value!r} {trap}; quote it if you mean the text")
                return node.value
        try:
            return self.loader.construct_object(node, deep=True)
        except ValueError:  # int() refuses more than 4,300 digits (CPython's int_max_str_digits)
            self.problem(node, path, f"an integer of {len(node.value)} digits is not a usable number")
        except yaml.YAMLError as exc:
            self.problem(node, path, f"cannot be read: {getattr(exc, 'problem', None) or exc}")
        return node.value  # the text as written: the problem above already refuses the file


def _plain(node: yaml.Node) -> bool:
    if isinstance(node, yaml.MappingNode):
        return node.tag == "tag:yaml.org,2002:map"
    if isinstance(node, yaml.SequenceNode):
        return node.tag == "tag:yaml.org,2002:seq"
    return node.tag in _PLAIN_TAGS


def _yaml11_trap(node: yaml.ScalarNode) -> str:
    value = node.value
    if node.tag == _BOOL_TAG and value.lower() not in ("true", "false"):
        return "is read by YAML 1.1 as a boolean; write true or false"
    if node.tag in (_INT_TAG, _FLOAT_TAG) and ":" in value:
        return "is read by YAML 1.1 as a base-60 number (1:30:00 becomes 5400)"
    if node.tag == _INT_TAG and _LEADING_ZERO.match(value):
        return "is read by YAML 1.1 as an octal number"
    if node.tag == _TIMESTAMP_TAG:
        return "is read by YAML 1.1 as a date"
    return ""


# libyaml, which PyYAML's wheels carry, composes the same nodes (its tags are resolved by the same
# Python resolver) with the same line marks, ~10x faster: PyYAML's Python composer spent 4 s of a
# 100,000-task submit on the matrix's list, and a tick re-reads the stored spec. It refuses more
# than 1,000 levels of nesting itself (libyaml 0.2.5). Its error texts differ, so a text it refuses
# is composed again by the Python loader, whose messages the spec's errors quote.
_LIBYAML = getattr(yaml, "CSafeLoader", None)


def _compose(text: str) -> yaml.Node | None:
    if _LIBYAML is not None:
        try:
            return yaml.compose(text, Loader=_LIBYAML)
        except yaml.YAMLError:
            pass  # said again below, in the Python loader's words
    return yaml.compose(text, Loader=yaml.SafeLoader)


def parse_yaml(text: str, source: str) -> RawDoc:
    """Parse `text` strictly. Syntax errors raise SpecError; YAML 1.1 traps and duplicate keys are
    carried in `problems` so validation reports them together with its own."""
    if len(text) > MAX_BYTES:
        raise SpecError([f"larger than {MAX_BYTES // 1024 // 1024} MiB ({len(text):,} characters); "
                         "a spec that big is not a campaign description"], source)
    try:
        root = _compose(text)
    except yaml.YAMLError as exc:
        # PyYAML names a stream it was given as text "<unicode string>": name the file instead
        raise SpecError([f"not valid YAML: {str(exc).replace('<unicode string>', source)}"], source) from None
    except ValueError:  # the scanner's chr() on a "\U00111111" escape past the last code point
        raise SpecError(["not valid YAML: a \\U escape names no Unicode character (the last is \\U0010FFFF)"],
                        source) from None
    except RecursionError:
        raise SpecError([f"nested more than {MAX_DEPTH} levels deep; a spec needs a few"], source) from None
    if root is None:
        raise SpecError(["the file is empty"], source)
    converter = _Converter(source)
    data = converter.convert(root, ())
    return RawDoc(source=source, data=data, lines=converter.lines, problems=tuple(converter.problems))


def load_yaml(path: Path) -> RawDoc:
    try:
        # never read past the cap, nor wait: /dev/zero has no end and a FIFO no writer (the MCP
        # `simulate` tool took a path from its client: one read of either took the server down)
        with os.fdopen(open_regular(path, NAMED), "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise SpecError([f"larger than {MAX_BYTES // 1024 // 1024} MiB; "
                             "a spec that big is not a campaign description"], str(path))
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise SpecError(["file not found"], str(path),
                        f"check the path (relative to {Path.cwd()}); the templates/ folder of campaignctl "
                        "holds specs to start from") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([f"cannot read: {exc}"], str(path)) from None
    return parse_yaml(text, str(path))
