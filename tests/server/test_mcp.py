"""The memory as MCP tools, through the official SDK's own client: over stdio (``vam-engine mcp``
spawned as a desktop assistant would) and over streamable HTTP (``/mcp`` of the real server on
loopback, with bearer tokens): the tools and their schemas, a search result, a frame as an
image, camera limits through every tool, scopes."""
import asyncio
import base64
import io
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

import httpx  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from PIL import Image  # noqa: E402

from support.server import ServerThread, build_engine  # noqa: E402
from vam_engine.server import ServeOptions, TokenStore, create_app  # noqa: E402

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 300
REPO = Path(__file__).resolve().parents[2]
TOOLS = {"cameras", "search", "ask", "moments", "events", "transcripts", "frame", "entities", "last_seen",
         "monitors", "watch", "unwatch"}


def text_of(result) -> str:
    return "".join(c.text for c in result.content if c.type == "text")


def json_of(result) -> dict:
    import json

    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


def jpeg_of(result) -> Image.Image:
    assert not result.is_error, text_of(result)
    (block,) = [c for c in result.content if c.type == "image"]
    assert block.mime_type == "image/jpeg"
    return Image.open(io.BytesIO(base64.b64decode(block.data)))


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = build_engine(tmp_path_factory.mktemp("mcp") / "store", n=24)
    yield eng
    eng.close()


# -- stdio -------------------------------------------------------------------------------------------
def stdio(store, *extra) -> Client:
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "VAM_TEST_SEED": os.environ.get("VAM_TEST_SEED", "0")}
    return Client(StdioServerParameters(command=sys.executable, env=env, args=[
        "-m", "vam_engine.cli", "mcp", "--store", str(store), "--device", "cpu", "--text-model", "minilm", *extra]))


@pytest.fixture(scope="module")
def closed_store(tmp_path_factory):
    """A store no process holds open: the spawned ``vam-engine mcp`` opens it itself."""
    path = tmp_path_factory.mktemp("mcp_stdio") / "store"
    eng = build_engine(path, n=24)
    front = [m.moment_id for m in eng.moments("front")]
    eng.close()
    return path, front


def test_stdio_lists_the_tools_searches_and_shows_a_frame(closed_store):
    store, front = closed_store

    async def main():
        async with stdio(store) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert set(tools) >= TOOLS
            assert tools["search"].description and "text" in tools["search"].input_schema["properties"]
            assert tools["watch"].annotations.read_only_hint is False
            cams = json_of(await c.call_tool("cameras", {}))["cameras"]
            hits = json_of(await c.call_tool("search", {"text": "a red textured scene seen by the front camera"}))
            image = jpeg_of(await c.call_tool("frame", {"moment_id": front[0], "width": 96}))
            refused = await c.call_tool("watch", {"condition": "a person"})
            bad = await c.call_tool("events", {"t0": 5, "t1": 1})
            return cams, hits, image, refused, bad

    cams, hits, image, refused, bad = asyncio.run(main())
    assert [c["camera_id"] for c in cams] == ["front", "yard"]
    assert hits["evidence"], hits
    assert hits["evidence"][0]["camera_id"] == "front"  # the red scenes are the front camera's documents
    assert image.size[0] == 96
    assert refused.is_error and "'write'" in text_of(refused)  # the command's default scope is read
    assert bad.is_error and "starts after it ends (t0=5 > t1=1)" in text_of(bad)


def test_stdio_with_cameras_sees_only_them(closed_store):
    store, front = closed_store

    async def main():
        async with stdio(store, "--cameras", "yard") as c:
            return (json_of(await c.call_tool("search", {"text": "a red textured scene seen by the front camera"})),
                    await c.call_tool("frame", {"moment_id": front[0]}),
                    await c.call_tool("moments", {"cameras": ["front"]}),
                    json_of(await c.call_tool("cameras", {})))

    hits, frame, named, cams = asyncio.run(main())
    assert hits["evidence"] and {e["camera_id"] for e in hits["evidence"]} == {"yard"}
    assert frame.is_error and "outside this token's limit" in text_of(frame)
    assert named.is_error and "'front' is outside it" in text_of(named)
    assert [c["camera_id"] for c in cams["cameras"]] == ["yard"]


# -- streamable HTTP -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(engine, tmp_path_factory):
    """The real server (uvicorn on loopback) with ``/mcp`` on; tokens by kind."""
    tokens = TokenStore(tmp_path_factory.mktemp("mcp_tokens"))
    made = {"read": tokens.create("read")[1], "yard": tokens.create("read", ["yard"])[1],
            "write": tokens.create("write")[1]}
    app = create_app(engine, ServeOptions(tokens_dir=str(tokens.dir), mcp=True))
    with ServerThread(app) as srv:
        yield srv.url + "/mcp", made


def over_http(url: str, token: str | None):
    import httpx2

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.AsyncClient(headers=headers, timeout=60)


def call_http(url, token, calls):
    """Run ``calls(client)`` over a fresh streamable HTTP client acting with ``token``."""
    async def main():
        async with over_http(url, token) as http, Client(streamable_http_client(url, http_client=http)) as c:
            return await calls(c)
    return asyncio.run(main())


def test_http_needs_a_token_like_the_api(served):
    url, _ = served
    r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                   headers={"Accept": "application/json, text/event-stream"})
    assert r.status_code == 401 and "bearer token" in r.json()["detail"]
    r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                   headers={"Authorization": "Bearer vam_00000000_" + "x" * 40})
    assert r.status_code == 401
    # stateless: no session to end, and no standalone stream a client could hold open for nothing
    assert httpx.get(url, headers={"Accept": "text/event-stream"}, timeout=10).status_code == 405
    assert httpx.delete(url, timeout=10).status_code == 405


def test_http_lists_tools_searches_asks_and_shows_a_frame(served, engine):
    url, tokens = served
    front = [m.moment_id for m in engine.moments("front")]

    async def calls(c):
        names = {t.name for t in (await c.list_tools()).tools}
        hits = json_of(await c.call_tool("search", {"text": "a green textured scene seen by the yard camera",
                                                     "top_k": 5}))
        like = json_of(await c.call_tool("search", {"like_moment": front[3], "sources": ["frame"], "top_k": 3}))
        image = jpeg_of(await c.call_tool("frame", {"moment_id": front[0], "width": None}))
        events = json_of(await c.call_tool("events", {"cameras": ["front"], "limit": 2}))
        answer = json_of(await c.call_tool("ask", {"question": "what did the front camera see?",
                                                    "session": "desk-1"}))
        return names, hits, like, image, events, answer

    names, hits, like, image, events, answer = call_http(url, tokens["read"], calls)
    assert names >= TOOLS
    assert hits["evidence"][0]["camera_id"] == "yard"
    assert like["evidence"][0]["moment_ids"] == [front[3]]  # a stored frame finds itself first
    stored = engine.store.moments.by_id([front[0]])[front[0]]
    assert image.size == (stored.width, stored.height)
    assert len(events["items"]) == 2 and events["next_cursor"] and events["items"][0]["doc"]
    assert answer["text"] == "a red textured scene" and "trace" not in answer


def test_http_a_camera_limited_token_sees_only_its_cameras(served, engine):
    url, tokens = served
    front = [m.moment_id for m in engine.moments("front")]

    async def calls(c):
        return (json_of(await c.call_tool("search", {"text": "a red textured scene seen by the front camera"})),
                await c.call_tool("frame", {"moment_id": front[0]}),
                await c.call_tool("search", {"like_moment": front[0]}),
                await c.call_tool("events", {"cameras": ["front"]}),
                json_of(await c.call_tool("moments", {"limit": 1000})),
                json_of(await c.call_tool("ask", {"question": "what did the cameras see?"})))

    hits, frame, like, events, moments, answer = call_http(url, tokens["yard"], calls)
    assert hits["evidence"] and {e["camera_id"] for e in hits["evidence"]} == {"yard"}
    assert frame.is_error and "outside this token's limit" in text_of(frame)
    assert like.is_error and "outside this token's limit" in text_of(like)
    assert events.is_error and "camera 'front' is outside it" in text_of(events)
    assert moments["items"] and {m["camera_id"] for m in moments["items"]} == {"yard"}
    assert {e["camera_id"] for e in answer["evidence"]} <= {"yard"}


def test_http_a_read_token_cannot_watch_and_a_write_token_can(served):
    url, tokens = served

    async def read_calls(c):
        return await c.call_tool("watch", {"condition": "a white flash"})

    refused = call_http(url, tokens["read"], read_calls)
    assert refused.is_error and "this token's scope is 'read'" in text_of(refused)

    async def write_calls(c):
        m = json_of(await c.call_tool("watch", {"condition": "a white flash", "cameras": ["front"]}))
        listed = json_of(await c.call_tool("monitors", {}))
        gone = json_of(await c.call_tool("unwatch", {"monitor_id": m["monitor_id"]}))
        again = await c.call_tool("unwatch", {"monitor_id": m["monitor_id"]})
        return m, listed, gone, again

    m, listed, gone, again = call_http(url, tokens["write"], write_calls)
    assert m["condition"] == "a white flash" and m["monitor_id"] in {x["monitor_id"] for x in listed["monitors"]}
    assert gone == {"removed": m["monitor_id"]}
    assert again.is_error and "no active monitor" in text_of(again)


def test_http_bad_arguments_are_tool_errors_naming_them(served):
    url, tokens = served

    async def calls(c):
        return (await c.call_tool("search", {}), await c.call_tool("search", {"image": "not base64!"}),
                await c.call_tool("frame", {"moment_id": 10 ** 12}), await c.call_tool("moments", {"limit": 0}),
                await c.call_tool("ask", {"question": "x", "session": "no spaces allowed"}))

    empty, image, missing, limit, session = call_http(url, tokens["read"], calls)
    assert empty.is_error and "give text, image or like_moment" in text_of(empty)
    assert image.is_error and "image: not base64" in text_of(image)
    assert missing.is_error and "no moment 1000000000000" in text_of(missing)
    assert limit.is_error and "limit" in text_of(limit)
    assert session.is_error and "session" in text_of(session)
