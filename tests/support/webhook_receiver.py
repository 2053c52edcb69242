"""A loopback HTTP receiver for webhook tests: keeps each POST's headers and body and answers
with the statuses it is told (then 200), optionally holding each answer until released."""
from __future__ import annotations

import http.server
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict
    body: bytes


class Receiver:
    def __init__(self, statuses=(), hold: threading.Event | None = None):
        self.received: list[Received] = []
        self.statuses = list(statuses)
        self.hold = hold
        lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                if outer.hold is not None:
                    outer.hold.wait(30)
                with lock:
                    outer.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    status = outer.statuses.pop(0) if outer.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()
