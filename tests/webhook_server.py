"""A real HTTP server on 127.0.0.1 (an ephemeral port) in a thread, standing in for a webhook:
it answers each POST with the next scripted status (the last one repeats), holds the connection
open without answering ("hang") or answers something that is not HTTP ("garbage"), and keeps
every request it answered with a status."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HANG = "hang"
GARBAGE = "garbage"  # a reply that is not HTTP


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, object]


@dataclass
class Webhook:
    url: str
    script: list[int | str]
    received: list[Received] = field(default_factory=list)
    answered: int = 0
    release: threading.Event = field(default_factory=threading.Event)

    def events(self) -> list[str]:
        return [str(r.body["event"]) for r in self.received]


def _handler(hook: Webhook) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            step = hook.script[min(hook.answered, len(hook.script) - 1)]
            hook.answered += 1
            if step == HANG:
                hook.release.wait(30)
                return
            if step == GARBAGE:
                self.wfile.write(b"nonsense\r\n")
                self.close_connection = True
                return
            hook.received.append(Received(self.path, dict(self.headers), body))
            self.send_response(int(step))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def webhook(script: Sequence[int | str] = (200,), path: str = "/hooks/T0/B0/s3cr3t-token") -> Iterator[Webhook]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hook := Webhook("", list(script))))
    server.daemon_threads = True
    hook.url = f"http://127.0.0.1:{server.server_address[1]}{path}?key=tok3n"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        hook.release.set()
        server.shutdown()
        server.server_close()
