"""One bounded HTTP exchange with a tool provider: a total deadline (connect to last byte, a
provider that trickles or hangs costs at most ``timeout_s``), a size limit on the reply, no
redirects followed (a provider is asked at the address configured, nowhere else), and
multipart encoding for an uploaded image.
"""
from __future__ import annotations

import http.client
import socket
import threading
import uuid
from urllib.parse import urlsplit

from .results import ToolError

USER_AGENT = "vam-engine-tools/1"


def multipart(fields: dict[str, str], files: dict[str, tuple[str, str, bytes]]) -> tuple[bytes, str]:
    """(body, content type) of a multipart/form-data request: ``fields`` name -> text,
    ``files`` name -> (filename, content type, bytes)."""
    boundary = f"vam-{uuid.uuid4().hex}"
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
                     + value.encode("utf-8") + b"\r\n")
    for name, (filename, ctype, data) in files.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                     f"Content-Type: {ctype}\r\n\r\n".encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def fetch(method: str, url: str, *, timeout_s: float, max_bytes: int, body: bytes | None = None,
          content_type: str | None = None, what: str = "tool") -> bytes:
    """The body of a 200 reply to ``method url``, at most ``max_bytes``; ToolError naming
    ``what`` for anything else (unreachable, a status other than 200, too large, too slow)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError(f"{what}: {url[:100]!r} is not an http(s) URL")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=timeout_s)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    box: dict = {}

    def exchange():
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                raise ToolError(f"{what}: HTTP {resp.status} {resp.reason[:60]}")
            data = resp.read(max_bytes + 1)
            if len(data) > max_bytes:
                raise ToolError(f"{what}: the reply is over {max_bytes} bytes")
            box["data"] = data
        except ToolError as e:
            box["error"] = e
        except TimeoutError:  # a socket operation ran out of time: the deadline, seen from inside
            box["error"] = ToolError(f"{what}: no complete reply within {timeout_s:g} s")
        except (OSError, http.client.HTTPException) as e:
            box["error"] = ToolError(f"{what}: {type(e).__name__}: {str(e)[:120]}")

    worker = threading.Thread(target=exchange, name="vam-tool-http", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():  # a provider that hangs or trickles: cut it off at the deadline
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        conn.close()
        raise ToolError(f"{what}: no complete reply within {timeout_s:g} s")
    conn.close()
    if "error" in box:
        raise box["error"]
    return box["data"]
