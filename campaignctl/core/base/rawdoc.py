"""A parsed input document: plain Python values plus the source line of every key path.

The YAML adapter builds it; the pure validators read it and name file, line and key in errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

KeyPath = tuple[str | int, ...]


def format_path(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


@dataclass(frozen=True, slots=True)
class RawDoc:
    source: str
    data: object
    lines: Mapping[KeyPath, int] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # found while parsing; reported together with validation's

    def line_of(self, path: KeyPath) -> int | None:
        """The line of `path`, or of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None

    def where(self, path: KeyPath) -> str:
        line = self.line_of(path)
        prefix = f"line {line}: " if line is not None else ""
        return f"{prefix}{format_path(path)}"
