"""`notify:` — where a campaign tells people what happened: a webhook (JSON POST) and/or a
command (an argv list, the event as JSON on stdin), and which events it tells.

    notify: {webhook: "https://hooks.example.org/T0/B0/secret", command: [notify-send, campaignctl],
             on: [alert, hold, awaiting_approval, give_up, finish], timeout: 5s, retries: 3}

A policy file may carry it (a team's channel); a spec's top-level `notify:` overrides it key by
key (a user narrows `on:` and keeps the team's webhook). A webhook URL often carries a token in
its path or query: it is never shown whole (`mask_url`).
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

from campaignctl.core.base.rawdoc import KeyPath
from campaignctl.core.base.reader import Reader

EVENTS = ("alert", "hold", "awaiting_approval", "give_up", "finish")
NOTIFY_KEYS = ("webhook", "command", "on", "timeout", "retries")
DEFAULT_TIMEOUT_S = 5
MAX_TIMEOUT_S = 60
MAX_RETRIES = 10
MAX_ARGV = 64
_URL = re.compile(r"https?://[^\s\"'<>]+")


@dataclass(frozen=True, slots=True)
class Notify:
    webhook: str = ""  # http(s) URL; '' for none
    command: tuple[str, ...] = ()  # argv, run without a shell; () for none
    on: tuple[str, ...] = EVENTS
    timeout_s: int = DEFAULT_TIMEOUT_S  # one POST or one command run
    retries: int = 3  # tries after the first, on 5xx, a connection error, a timeout or a failed command

    @property
    def enabled(self) -> bool:
        return bool((self.webhook or self.command) and self.on)

    def describe_channel(self, channel: str) -> str:
        """A channel for messages: the webhook masked, the command by its program."""
        return mask_url(self.webhook) if channel == "webhook" else (self.command[:1] or ("",))[0]


def notify_from_dict(data: dict[str, Any] | None) -> Notify:
    """Stored policy JSON → Notify; a policy stored before `notify` existed has none."""
    if not data:
        return Notify()
    return Notify(**{**data, "command": tuple(data.get("command") or ()), "on": tuple(data.get("on") or ())})


def mask_url(url: str) -> str:
    """`https://hooks.example.org/services/T0/B0/secret?token=x` → `https://hooks.example.org/…`:
    scheme, host and port only; a user:password part goes too."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(a URL)"
    rest = "/…" if (parts.path not in ("", "/") or parts.query or parts.fragment) else ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{port}{rest}"


def mask_urls(text: str) -> str:
    """Every http(s) URL in `text` masked (a spec's text as `campaignctl revisions` shows it)."""
    return _URL.sub(lambda m: mask_url(m.group(0)), text)


def read_notify(r: Reader, path: KeyPath, base: Notify) -> Notify:
    """`notify:` at `path`, each key given overriding `base`'s."""
    doc = r.mapping(path, NOTIFY_KEYS)
    if doc is None:
        return base
    webhook = _webhook(r, (*path, "webhook"), base.webhook)
    command = _command(r, (*path, "command"), base.command)
    on = _events(r, (*path, "on"), base.on)
    timeout = r.duration((*path, "timeout"), base.timeout_s)
    if not 1 <= timeout <= MAX_TIMEOUT_S:
        r.problem((*path, "timeout"), f"must be from 1s to {MAX_TIMEOUT_S}s (one try must not hold a tick), "
                                      f"got {timeout} s")
        timeout = base.timeout_s
    retries = r.integer((*path, "retries"), 0, MAX_RETRIES, default=base.retries)
    notify = Notify(webhook, command, on, timeout, base.retries if retries is None else retries)
    if not (notify.webhook or notify.command or "webhook" in doc or "command" in doc):
        r.problem(path, "names no channel: set webhook (an http or https URL) or command (an argv list)")
    return notify


def _webhook(r: Reader, path: KeyPath, base: str) -> str:
    value = r.string(path)
    if value is None:
        return base
    try:
        parts = urllib.parse.urlsplit(value)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and " " not in value
    except ValueError:
        ok = False
    if not ok:
        scheme = value.split(":", 1)[0] if ":" in value else "none"
        r.problem(path, f"must be an http:// or https:// URL with a host (scheme given: {scheme!r}); "
                        "file:, ftp: and others are refused")
        return base
    return value


def _command(r: Reader, path: KeyPath, base: tuple[str, ...]) -> tuple[str, ...]:
    value = r.get(path)
    if value is Reader.MISSING or value is None:
        return base
    if not isinstance(value, list) or not value or len(value) > MAX_ARGV:
        r.problem(path, "must be an argv list, e.g. [/usr/local/bin/page-me, --team, ml]; it runs "
                        "without a shell (setup: is the one shell field), the event JSON on its stdin")
        return base
    argv = [r.string((*path, i), required=True) for i in range(len(value))]
    if any(a is None for a in argv):
        return base
    if not argv[0]:
        r.problem((*path, 0), "must name the program to run")
        return base
    return tuple(a for a in argv if a is not None)


def _events(r: Reader, path: KeyPath, base: tuple[str, ...]) -> tuple[str, ...]:
    value = r.get(path)
    if value is Reader.MISSING or value is None:
        return base
    if not isinstance(value, list) or not value:
        r.problem(path, f"must be a non-empty list of events from: {', '.join(EVENTS)}")
        return base
    unknown = [v for v in value if v not in EVENTS]
    if unknown:
        r.problem(path, f"{unknown[0]!r} is not an event; use some of: {', '.join(EVENTS)}")
        return base
    return tuple(e for e in EVENTS if e in value)
