"""A real HTTP server on 127.0.0.1 (an ephemeral port) in a thread, standing in for a webhook:
it answers each POST with the next scripted status (the last one repeats), holds the connection
open without answering ("hang"), answers something that is not HTTP ("garbage"), sends its
answer one byte every 3 s ("trickle", what once held a tick for over 300 s), or a status with a
reason phrase holding terminal escape sequences ("escape"); 301/302/307 come with a Location.
It keeps every request it answered with a status."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HANG = "hang"
GARBAGE = "garbage"  # a reply that is not HTTP
TRICKLE = "trickle"  # "HTTP/1.1 200 OK…", one byte every TRICKLE_S
TRICKLE_S = 3.0
ESCAPE = "escape"  # 500 with "\x1b]0;pwned\x07\x1b[2J" in its reason phrase


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
            if step == TRICKLE:
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                    if hook.release.wait(TRICKLE_S):
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                return
            if step == ESCAPE:
                self.wfile.write(b"HTTP/1.1 500 Oops \x1b]0;pwned\x07\x1b[2J\r\nContent-Length: 0\r\n\r\n")
                self.close_connection = True
                return
            if step == GARBAGE:
                self.wfile.write(b"nonsense\r\n")
                self.close_connection = True
                return
            hook.received.append(Received(self.path, dict(self.headers), body))
            self.send_response(int(step))
            if int(step) in (301, 302, 303, 307, 308):
                self.send_header("Location", "https://new.example.org/hooks/moved?key=tok3n")
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
