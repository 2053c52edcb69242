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
    def __init__(self, statuses=(), hold: threading.Event | None = None, tls: tuple | None = None):
        """``tls``: (certificate, key) files: an https receiver."""
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
        if tls:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(tls[0]), str(tls[1]))
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()
