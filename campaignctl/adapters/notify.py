"""Delivering one event to one channel: a webhook (JSON POST with urllib) or a command (argv, no
shell, the event JSON on stdin and as CAMPAIGNCTL_EVENT_* variables). Bounded: each try by the
channel's timeout and by the caller's deadline, so a hung endpoint costs a tick seconds, never
its decisions (they are written and carried out before anything is sent).

A 5xx answer, a refused or reset connection, a timeout and a command's non-zero exit are tried
again; a 4xx answer is not (the URL or its token is wrong: the same request fails the same way),
except 408 and 429. A 3xx is a failure that is not tried again: urllib would follow a 301/302 as a
GET without the body and report success, so the event was silently lost.
One deadline bounds each request whole (connect, TLS, sending, the answer): urllib's timeout
bounds each socket operation, so an endpoint sending one byte every 3 s held a tick for over 300 s.
The request runs in a daemon thread the caller stops waiting for at the deadline.
Messages name the webhook by scheme, host and port only: its path or query often holds a token;
what the endpoint or the command wrote is stripped of control characters before it is shown.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from campaignctl import __version__
from campaignctl.adapters import proc
from campaignctl.core.base.redact import printable
from campaignctl.core.policy.notify_config import mask_url
from campaignctl.core.screens.notify import Event, retry_waits

USER_AGENT = f"campaignctl/{__version__} (notify)"
# The 4xx answers that say "later", not "never" (RFC 9110 408 Request Timeout; RFC 6585 429 Too
# Many Requests: chat webhooks rate-limit bursts, e.g. one message a second per hook).
RETRIED_4XX = (408, 429)
MIN_TRY_S = 0.2  # a try with less time than this left before the deadline is not started
_STDERR_SHOWN = 200  # characters of a failed command's stderr kept in the error


@dataclass(frozen=True, slots=True)
class Delivery:
    ok: bool
    tries: int  # tries made by this call
    error: str = ""  # the last failure, masked
    final: bool = False  # a failure that trying again cannot mend (a 4xx answer)


def deliver(channel: str, target: str | tuple[str, ...], event: Event, timeout_s: float,
            tries: int, deadline: float) -> Delivery:
    """Up to `tries` tries of one event on one channel ("webhook": `target` is the URL;
    "command": the argv), waiting 0.5 s, 1 s, … between them, none started past `deadline`
    (time.monotonic())."""
    body = json.dumps(event.to_dict(), sort_keys=True).encode()
    waits = [0.0, *retry_waits(tries - 1)] if tries > 0 else []
    last = Delivery(False, 0, "no time left in this tick's notify budget")
    for n, wait in enumerate(waits):
        if time.monotonic() + wait + MIN_TRY_S > deadline:
            break
        time.sleep(wait)
        budget = min(timeout_s, deadline - time.monotonic())
        if channel == "webhook":
            ok, error, final = _post(str(target), body, budget)
        else:
            ok, error, final = _run(tuple(target), body, event.env(), budget)
        last = Delivery(ok, n + 1, error, final)
        if ok or final:
            break
    return last


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_args: object, **_kwargs: object) -> None:
        return None  # urllib then raises HTTPError with the 3xx code


_OPENER = urllib.request.build_opener(_NoRedirects)  # proxies from the environment, as urlopen


def _post(url: str, body: bytes, timeout: float) -> tuple[bool, str, bool]:
    """(ok, error, final) of one POST, all of it within `timeout` seconds."""
    answer: list[tuple[bool, str, bool]] = []
    worker = threading.Thread(target=lambda: answer.append(_post_once(url, body, timeout)),
                              name="campaignctl-webhook", daemon=True)
    worker.start()
    worker.join(timeout)
    if not answer:  # still sending or reading: left behind, it ends with the process
        return False, f"{mask_url(url)} did not answer within {timeout:.1f} s", False
    ok, error, final = answer[0]
    return ok, printable(error), final


def _post_once(url: str, body: bytes, timeout: float) -> tuple[bool, str, bool]:
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": USER_AGENT})
    shown = mask_url(url)
    try:
        with _OPENER.open(request, timeout=timeout) as answer:
            answer.read(4096)
            return True, "", False
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            where = mask_url(exc.headers.get("Location", "") or "") if exc.headers else ""
            return False, (f"{shown} answered HTTP {exc.code} (a redirect{f' to {where}' if where else ''}): "
                           "campaignctl does not follow redirects; give notify.webhook the final URL"), True
        return False, f"{shown} answered HTTP {exc.code} {exc.reason}", exc.code < 500 and exc.code not in RETRIED_4XX
    except TimeoutError:
        return False, f"{shown} did not answer within {timeout:.1f} s", False
    except urllib.error.URLError as exc:
        reason = exc.reason if isinstance(exc.reason, str) else type(exc.reason).__name__ + (
            f": {exc.reason.strerror}" if isinstance(exc.reason, OSError) and exc.reason.strerror else "")
        return False, f"{shown}: {reason}", False
    except (OSError, ValueError, http.client.HTTPException) as exc:  # a reset or garbled answer; a bad URL
        return False, f"{shown}: {type(exc).__name__}", False


def _run(argv: tuple[str, ...], body: bytes, env: dict[str, str], timeout: float) -> tuple[bool, str, bool]:
    """The command through adapters/proc.py (its own session, killed as a group on timeout), its
    output discarded but the tail of stderr kept for the error."""
    try:
        result = proc.run_command(argv, body, {**os.environ, **env}, timeout)
    except OSError as exc:
        return False, f"command {argv[0]}: {exc.strerror or type(exc).__name__}", False
    if result == proc.timed_out(argv, timeout):
        return False, f"command {argv[0]} did not finish within {timeout:.1f} s", False
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()
        detail = f": {printable(tail[-1])[:_STDERR_SHOWN]}" if tail else ""
        return False, f"command {argv[0]} exited {result.returncode}{detail}", False
    return True, "", False
