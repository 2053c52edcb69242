"""Tool providers on loopback for the tools tests: one tiny HTTP server answering a SearXNG
instance's JSON API (``GET /search?q=...&format=json``), a plain JSON search endpoint
(``GET /json?q=...``) and an image-search endpoint (``POST /image``, multipart with ``image``).

What each route replies is set per test: ``server.web`` / ``server.image`` are callables
(query text, or the uploaded JPEG bytes and the hint) returning a ``Reply``; the helpers below
build the usual ones (results, a hang, garbage). Every request is recorded in ``requests``."""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from support.live import HttpServer


@dataclass
class Reply:
    body: bytes
    status: int = 200
    content_type: str = "application/json"
    hang: bool = False  # send nothing until the server stops


@dataclass
class Seen:
    """One request as the server read it."""
    path: str
    query: dict
    fields: dict = field(default_factory=dict)   # multipart text fields
    image: bytes | None = None                   # the uploaded file's bytes


def results(*items) -> Reply:
    """A reply in the documented shape: ``items`` are (title, url, content) triples."""
    return Reply(json.dumps({"query": "x", "results": [{"title": t, "url": u, "content": c, "engine": "test"}
                                                       for t, u, c in items]}).encode())


HANG = Reply(b"", hang=True)
NOT_JSON = Reply(b"<html>502 Bad Gateway</html>", content_type="text/html")
WRONG_SHAPE = Reply(json.dumps({"answers": ["42"], "results": "none"}).encode())


def huge(nbytes: int) -> Reply:
    return Reply(b'{"results": [{"title": "' + b"x" * nbytes + b'"}]}')


class ToolServer(HttpServer):
    """``with ToolServer() as srv:`` ... ``srv.url``; ``srv.web``, ``srv.image`` set the replies."""

    def __init__(self):
        self.web = lambda q: results()
        self.image = lambda jpeg, hint: results()
        self.requests: list[Seen] = []
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                parts = urlsplit(self.path)
                q = {k: v[0] for k, v in parse_qs(parts.query).items()}
                outer.requests.append(Seen(parts.path, q))
                if parts.path == "/search" and q.get("format") != "json":
                    return self._send(Reply(b"format must be json", 403, "text/plain"))
                if parts.path not in ("/search", "/json"):
                    return self._send(Reply(b"no such route", 404, "text/plain"))
                self._send(outer.web(q.get("q", "")))

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                msg = BytesParser(policy=HTTP).parsebytes(
                    f"Content-Type: {self.headers.get('Content-Type')}\r\n\r\n".encode() + raw)
                fields, image = {}, None
                for part in msg.iter_parts():
                    name = part.get_param("name", header="content-disposition")
                    data = part.get_payload(decode=True)
                    if name == "image":
                        image = data
                    else:
                        fields[name] = data.decode()
                outer.requests.append(Seen(urlsplit(self.path).path, {}, fields, image))
                self._send(outer.image(image, fields.get("q") or None))

            def _send(self, reply: Reply):
                if reply.hang:
                    outer.stopping.wait(60)
                    return
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

        super().__init__(handler=Handler)
        self.url = self.base

    def __exit__(self, *exc):
        self.stopping.set()  # a hanging reply ends first
        super().__exit__(*exc)

    def hits(self, path: str) -> list[Seen]:
        return [r for r in self.requests if r.path == path]
