"""No query string in any log line of the served service: the real server (uvicorn on loopback,
configured as ``vam-engine serve`` configures it, at the debug level so every line uvicorn can
write is written, its access log on too) takes WebSocket handshakes and HTTP requests with
``?token=`` (accepted, refused, unknown paths); the token appears in no record's text, message
or arguments, while the lines themselves are there."""
import asyncio
import json
import logging
import sys

import pytest

from support.logs import captured_logs
from support.server import ServerThread, config, texture
from vam_engine.engine import Engine
from vam_engine.server import ServeOptions, TokenStore, create_app
from vam_engine.server.logfilter import QueryStringFilter, strip_query

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 180


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = Engine(tmp_path_factory.mktemp("logs") / "store", config() | {"writer": {"enabled": False}}, device="cpu")
    for i in range(4):
        eng.push("front", texture(i, "front"), i * 0.5)
    eng.end_push("front")
    yield eng
    eng.close()


def test_strip_query_keeps_the_path_and_everything_else():
    assert strip_query('127.0.0.1:5 - "WebSocket /api/ws?token=abc" [accepted]') == \
        '127.0.0.1:5 - "WebSocket /api/ws" [accepted]'
    assert strip_query("GET /api/moments?camera=a&token=x HTTP/1.1") == "GET /api/moments HTTP/1.1"
    assert strip_query("fetch http://h:1/p/q?token=x#f failed") == "fetch http://h:1/p/q failed"
    assert strip_query("what? no. /a/b stays") == "what? no. /a/b stays"  # a question is not a query
    r = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                          ("127.0.0.1:5", "GET", "/api/x?token=s3", "1.1", 200), None)
    assert QueryStringFilter().filter(r) and r.args[2] == "/api/x" and len(r.args) == 5  # positions kept
    try:
        raise ValueError("cannot fetch /api/frames/3?token=s3cret")
    except ValueError:
        r = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "Exception in ASGI application", (),
                              sys.exc_info())
    assert QueryStringFilter().filter(r) and "s3cret" not in logging.Formatter().format(r)
    assert "cannot fetch /api/frames/3" in logging.Formatter().format(r)


def _ws_handshakes(url: str, token: str) -> list:
    import websockets

    async def run():
        seen = []
        async with websockets.connect(f"{url}/api/ws?token={token}") as ws:  # a token in the URL
            await ws.send(json.dumps({"type": "auth", "token": token}))
            seen.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
        try:  # an unknown WebSocket path: refused
            async with websockets.connect(f"{url}/api/nowhere?token={token}"):
                pass
        except Exception as e:  # noqa: BLE001 - refused, in whichever way websockets says so
            seen.append(type(e).__name__)
        return seen

    return asyncio.run(run())


def test_no_token_in_a_query_string_reaches_any_log_line(engine, tmp_path):
    import httpx

    tokens = TokenStore(tmp_path / "tokens")
    token = tokens.create("read")[1]
    app = create_app(engine, ServeOptions(tokens_dir=str(tmp_path / "tokens")))
    srv = ServerThread(app)  # uvicorn.Config made: its logging is configured
    srv.server.config.access_log = True  # uvicorn's own access log too, as a deployment may turn it on
    with captured_logs() as logs, srv:
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            logging.getLogger(name).setLevel(5)  # uvicorn's TRACE: every line it can write
        ws_url = srv.url.replace("http://", "ws://")
        seen = _ws_handshakes(ws_url, token)
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            codes = [c.get("/api/moments", params={"token": token, "camera": "front"}).status_code,
                     c.get("/api/moments", params={"token": token},
                           headers={"Authorization": f"Bearer {token}"}).status_code,
                     c.get("/api/nowhere", params={"token": token}).status_code,
                     c.get("/", params={"token": token}).status_code]
    assert seen[0]["type"] == "hello" and seen[1] == "InvalidStatus"  # authenticated by message; refused
    assert codes == [401, 200, 404, 200]  # a query never authenticates
    text = logs.text
    assert token not in text and "token=" not in text, [ln for ln in text.splitlines() if "token=" in ln][:5]
    assert "/api/ws" in text and "WebSocket" in text  # the handshake was logged, without its query
    assert "/api/moments" in text
