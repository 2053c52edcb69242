"""Tool providers against servers on loopback (support/tool_server.py): SearXNG's JSON API and a
plain JSON endpoint, the image endpoint's multipart upload, the documented shape parsed and
cleaned (control characters, cuts, counts), failures as ToolErrors (a hang costs its timeout,
not JSON, the wrong shape, too large, an HTTP error, nobody listening), the cache, the config."""
import time

import pytest

from support.net import free_port
from support.tool_server import HANG, NOT_JSON, WRONG_SHAPE, Reply, ToolServer, huge, results
from vam_engine.config import EngineConfig
from vam_engine.errors import VamError
from vam_engine.tools import HttpImageSearch, JsonSearch, Limits, SearxngSearch, ToolError, Toolbox, clean_text
from vam_engine.tools import make_toolbox

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 60


@pytest.fixture
def srv():
    with ToolServer() as s:
        yield s


def test_searxng_and_json_endpoints_return_the_documented_shape(srv):
    srv.web = lambda q: results(*[(f"title {k} for {q}", f"https://e.org/{k}", f"content {k}") for k in range(9)])
    got = SearxngSearch(srv.url + "/", Limits(max_results=3)).search("who is it?", 10)
    assert [r.title for r in got.results] == ["title 0 for who is it?", "title 1 for who is it?",
                                               "title 2 for who is it?"]
    (seen,) = srv.hits("/search")
    assert seen.query == {"q": "who is it?", "format": "json"}
    got = JsonSearch(srv.url + "/json", Limits(max_results=8)).search("a & b", 2)
    assert len(got.results) == 2 and got.results[1].url == "https://e.org/1"
    assert srv.hits("/json")[0].query == {"q": "a & b", "max_results": "2"}


def test_results_are_cleaned_cut_and_bad_items_skipped(srv):
    evil = "line one\nline\ttwo \x1b[31mred\x1b[0m \u202eesrever\u200b zero\x00width " + "y" * 400
    srv.web = lambda q: Reply(b'{"results": [{"title": "ok", "url": "u", "content": ' + _js(evil) + b'}, 7, '
                                 b'{"title": "", "url": null}, {"title": "t2", "extra": [1, 2]}]}')
    got = SearxngSearch(srv.url, Limits(max_chars=60)).search("q", 5)
    assert [r.title for r in got.results] == ["ok", "t2"]
    text = got.results[0].content
    assert len(text) == 60 and text.endswith("\u2026")
    assert text.startswith("line one line two [31mred[0m esrever zerowidth y")
    assert all(ord(c) >= 32 and c not in "\u202e\u200b" for c in text)
    assert got.notes == ["result 1 is a int, not an object: skipped", "result 2 has no title, url or content: skipped"]
    assert clean_text(None, 10) == "" and clean_text(123, 10) == ""


def _js(text: str) -> bytes:
    import json

    return json.dumps(text).encode()


@pytest.mark.parametrize("reply,what", [(NOT_JSON, "not JSON"), (WRONG_SHAPE, 'no "results" list'),
                                        (Reply(b"[1, 2]"), 'no "results" list'), (huge(5000), "over 4096 bytes"),
                                        (Reply(b"{}", status=500), "HTTP 500"), (Reply(b"[" * 100000), "not JSON")])
def test_garbage_is_a_tool_error_naming_what_was_wrong(srv, reply, what):
    srv.web = lambda q: reply
    with pytest.raises(ToolError, match="web search") as e:
        SearxngSearch(srv.url, Limits(max_response_bytes=4096 if reply.body[:1] != b"[" else 200000)).search("q", 3)
    assert what in str(e.value)


def test_a_hanging_provider_costs_its_timeout_and_nobody_listening_fails_fast(srv):
    srv.web = lambda q: HANG
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="no complete reply within 0.5 s"):
        SearxngSearch(srv.url, Limits(timeout_s=0.5)).search("q", 3)
    assert time.monotonic() - t0 < 0.5 + 1.5  # its timeout and the time to close the socket, no more
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="ConnectionRefused"):
        JsonSearch(f"http://127.0.0.1:{free_port()}/json", Limits(timeout_s=5)).search("q", 3)
    assert time.monotonic() - t0 < 2


def test_image_search_uploads_the_jpeg_and_a_hint(srv):
    jpeg = b"\xff\xd8\xff\xe0" + b"pretend" * 10
    srv.image = lambda data, hint: results(("Eileen Collins", "https://e.org/collins", f"{len(data)} bytes, {hint}"))
    got = HttpImageSearch(srv.url + "/image").search(jpeg, "the astronaut", 3)
    assert got.results[0].content == f"{len(jpeg)} bytes, the astronaut"
    (seen,) = srv.hits("/image")
    assert seen.image == jpeg and seen.fields == {"q": "the astronaut", "max_results": "3"}


def test_the_toolbox_caches_by_query_and_never_caches_failures(srv):
    srv.web = lambda q: results((q, "https://e.org", "c"))
    box = Toolbox(SearxngSearch(srv.url), cache_size=2)
    a = box.web_search("alpha", 3)
    assert not a.cached and box.web_search("alpha", 3).cached and len(srv.hits("/search")) == 1
    box.web_search("beta", 3), box.web_search("gamma", 3)  # alpha is the least recently used: evicted
    assert not box.web_search("alpha", 3).cached and len(srv.hits("/search")) == 4
    srv.web = lambda q: NOT_JSON
    for _ in range(2):
        with pytest.raises(ToolError):
            box.web_search("delta", 3)
    assert len(srv.hits("/search")) == 6  # a failure is asked again
    srv.image = lambda data, hint: results(("x", "u", "c"))
    box = Toolbox(image=HttpImageSearch(srv.url + "/image"), cache_size=8)
    box.image_search(b"one", None, 3), box.image_search(b"one", None, 3), box.image_search(b"two", None, 3)
    assert len(srv.hits("/image")) == 2 and box.actions == ("image_search",)


def test_the_tools_config_and_its_errors():
    assert make_toolbox(EngineConfig().tools) is None  # off by default
    cfg = EngineConfig.load(tools={"web_search": {"url": "http://127.0.0.1:1/", "kind": "json", "max_results": 3},
                                   "image_search": {"url": "https://img.example/search", "max_side": 256},
                                   "max_calls": 2})
    box = make_toolbox(cfg.tools)
    assert box.actions == ("web_search", "image_search") and box.max_calls == 2
    assert isinstance(box.web, JsonSearch) and box.web.limits.max_results == 3 and box.image_max_side == 256
    for bad, what in (({"web_search": {"url": "ftp://x"}}, "tools.web_search.url must be an http"),
                      ({"image_search": {"url": "localhost:8080"}}, "tools.image_search.url"),
                      ({"web_search": {"kind": "bing"}}, "kind"), ({"max_calls": 0}, "max_calls")):
        with pytest.raises(VamError, match="invalid config") as e:
            EngineConfig.load(tools=bad)
        assert what in str(e.value)
