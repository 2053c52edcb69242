"""The LLM bodies that need no model: OpenAIChat against a real loopback HTTP server whose
behaviour each test scripts, ScriptedLLM, the image/clip encoders, and the factory."""
import base64
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import av
import numpy as np
import pytest
from PIL import Image as PILImage

from support.net import free_port
from vam_engine.config import EngineConfig, LLMConfig
from vam_engine.errors import VamError
from vam_engine.llm import (Clip, Image, LLMError, LLMRequest, Message, OpenAIChat, Sampling, ScriptedLLM,
                            make_llm, parse_llm_spec)
from vam_engine.llm.images import clip_to_mp4_data_uri, to_jpeg_data_uri

WATCHDOG_S = 120  # a hang detector: the CLI tests index the demo clip, ~30 s on a loaded machine
pytestmark = pytest.mark.usefixtures("watchdog")

FAST = dict(backoff_base_s=0.01, backoff_max_s=0.05)  # retries in milliseconds, not seconds


# -- the scripted server ------------------------------------------------------------------

def reply(text="ok", usage=None, finish="stop", status=200, headers=None):
    body = {"id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return status, headers or {}, json.dumps(body).encode()


def raw(status, payload, headers=None):
    return status, headers or {}, payload.encode() if isinstance(payload, str) else payload


class FakeServer:
    """Records every call; ``script(n, body)`` (n = 0-based call number) returns
    (status, headers, payload) and may wait on ``stop`` to play a slow server."""

    def __init__(self):
        self.calls = []  # (path, headers, parsed JSON body)
        self.script = lambda n, body: reply()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.stop = threading.Event()
        self.url = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so the client's connection pool is exercised

    def do_POST(self):
        fake = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with fake.lock:
            n = len(fake.calls)
            fake.calls.append((self.path, dict(self.headers), body))
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            status, headers, payload = fake.script(n, body)
        finally:
            with fake.lock:
                fake.in_flight -= 1
        try:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up (a timeout test)
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.fake = FakeServer()
    httpd.fake.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    # a short poll interval: shutdown() waits for one poll, 0.5 s by default
    t = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    t.start()
    try:
        yield httpd.fake
    finally:
        httpd.fake.stop.set()
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def client_for(server):
    made = []

    def make(**kw):
        c = OpenAIChat(server.url, "test-model", **{**FAST, **kw})
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def ask(text="hi", **sampling):
    return LLMRequest([Message("user", [text])], Sampling(**sampling))


def parts_of(body, i=-1):
    return body["messages"][i]["content"]


def decode_data_uri(uri, mime):
    prefix = f"data:{mime};base64,"
    assert uri.startswith(prefix), uri[:40]
    return base64.b64decode(uri[len(prefix):])


def rgb(h, w, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


# -- normal replies -----------------------------------------------------------------------

def test_body_structure_order_and_images(server, client_for, tmp_path):
    path = tmp_path / "frame.png"
    PILImage.fromarray(rgb(300, 400, 1)).save(path)
    server.script = lambda n, body: reply("a cat on a mat")
    llm = client_for(api_key="sk-test")
    req = LLMRequest([Message("system", ["You describe frames."]),
                      Message("user", ["first", Image(rgb(480, 640)), "second", Image(str(path)), "end"])],
                     Sampling(temperature=0.2, top_p=0.9, max_tokens=64, seed=7))
    (out,) = llm.generate([req])
    assert out.text == "a cat on a mat"
    assert out.total_s > 0
    assert llm.name == f"openai:{server.url}#test-model"

    (path_sent, headers, body) = server.calls[0]
    assert path_sent == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.2 and body["top_p"] == 0.9
    assert body["max_tokens"] == 64 and body["seed"] == 7
    assert "response_format" not in body
    assert body["messages"][0] == {"role": "system", "content": "You describe frames."}
    user = body["messages"][1]
    assert user["role"] == "user"
    assert [p["type"] for p in user["content"]] == ["text", "image_url", "text", "image_url", "text"]
    assert [p["text"] for p in user["content"] if p["type"] == "text"] == ["first", "second", "end"]
    sizes = []
    for p in user["content"]:
        if p["type"] == "image_url":
            data = decode_data_uri(p["image_url"]["url"], "image/jpeg")
            with PILImage.open(io.BytesIO(data)) as im:
                assert im.format == "JPEG"
                sizes.append(im.size)
    assert sizes == [(640, 480), (400, 300)]


def test_json_object_and_no_seed(server, client_for):
    llm = client_for()
    llm.generate([ask(json_object=True)])
    body = server.calls[0][2]
    assert body["response_format"] == {"type": "json_object"}
    assert "seed" not in body
    assert "Authorization" not in server.calls[0][1]


def test_usage_cached_tokens_and_finish_reason(server, client_for):
    usage = {"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127,
             "prompt_tokens_details": {"cached_tokens": 96}}
    server.script = lambda n, body: reply("x", usage=usage, finish="length") if n == 0 else reply("y")
    llm = client_for()
    (a,) = llm.generate([ask()])
    assert (a.prompt_tokens, a.completion_tokens, a.cached_tokens) == (120, 7, 96)
    assert a.finish_reason == "length"
    (b,) = llm.generate([ask()])  # no usage at all: zeros, not an error
    assert (b.text, b.prompt_tokens, b.completion_tokens, b.cached_tokens) == ("y", 0, 0, 0)
    assert b.finish_reason == "stop"


def test_oversized_image_is_downsized_under_limits(server, client_for):
    llm = client_for(max_image_bytes=200_000)
    llm.generate([LLMRequest([Message("user", ["look", Image(rgb(3000, 4000, 2))])])])
    part = parts_of(server.calls[0][2])[1]
    data = decode_data_uri(part["image_url"]["url"], "image/jpeg")
    assert len(data) <= 200_000
    with PILImage.open(io.BytesIO(data)) as im:
        assert max(im.size) <= 1280
        # the aspect ratio survives the shrinking
        assert abs(im.size[0] / im.size[1] - 4 / 3) < 0.02


def test_batch_order_and_concurrency_bound(server, client_for):
    def slow_echo(n, body):
        server.stop.wait(0.1)
        return reply("echo " + parts_of(body))

    server.script = slow_echo
    llm = client_for(concurrency=2)
    outs = llm.generate([ask(f"req {i}") for i in range(8)])
    assert [o.text for o in outs] == [f"echo req {i}" for i in range(8)]
    assert len(server.calls) == 8
    assert server.max_in_flight == 2  # the bound held, and the batch did run in parallel


# -- failures -----------------------------------------------------------------------------

def test_malformed_body_retried_once_then_error(server, client_for):
    server.script = lambda n, body: raw(200, "<html>gateway</html>")
    llm = client_for(max_retries=4)
    with pytest.raises(LLMError, match="malformed") as e:
        llm.generate([ask()])
    assert e.value.retryable is False
    assert len(server.calls) == 2


def test_missing_content_is_malformed_but_a_retry_can_succeed(server, client_for):
    server.script = lambda n, body: raw(200, '{"choices": []}') if n == 0 else reply("fine")
    llm = client_for()
    assert llm.generate([ask()])[0].text == "fine"
    assert len(server.calls) == 2
    server.script = lambda n, body: raw(200, '{"choices": [{"message": {"content": null}}]}')
    with pytest.raises(LLMError, match="malformed"):
        llm.generate([ask()])


def test_429_retry_after_zero_then_success(server, client_for):
    server.script = lambda n, body: (raw(429, '{"error": "slow down"}', {"Retry-After": "0"}) if n == 0
                                     else reply("after"))
    # A long backoff: only honouring Retry-After keeps this fast.
    llm = client_for(backoff_base_s=10, backoff_max_s=10)
    t0 = time.perf_counter()
    assert llm.generate([ask()])[0].text == "after"
    assert time.perf_counter() - t0 < 3
    assert len(server.calls) == 2


def test_retry_after_is_capped(server, client_for):
    server.script = lambda n, body: raw(503, "busy", {"Retry-After": "100"}) if n == 0 else reply("ok")
    llm = client_for(backoff_max_s=0.05)
    t0 = time.perf_counter()
    assert llm.generate([ask()])[0].text == "ok"
    assert time.perf_counter() - t0 < 3


def test_500_until_retries_run_out(server, client_for):
    server.script = lambda n, body: raw(500, "internal boom")
    llm = client_for(max_retries=2)
    with pytest.raises(LLMError) as e:
        llm.generate([ask()])
    assert e.value.retryable is True
    assert "HTTP 500" in str(e.value) and "internal boom" in str(e.value)
    assert len(server.calls) == 3


def _refused_once(server, client_for, status: int, reply: str, match: str, **client) -> LLMError:
    """The error of a request the server refuses with ``status``: not retryable, sent once."""
    server.script = lambda n, body: raw(status, reply)
    llm = client_for(max_retries=3, **client)
    with pytest.raises(LLMError, match=match) as e:
        llm.generate([ask()])
    assert e.value.retryable is False
    assert len(server.calls) == 1
    return e.value


def test_401_is_not_retried(server, client_for):
    err = _refused_once(server, client_for, 401, '{"error": "bad key"}', "authentication failed", api_key="wrong",
                        api_key_env="VAM_TEST_KEY")
    assert "$VAM_TEST_KEY" in str(err)


def test_other_4xx_names_status_and_body(server, client_for):
    err = _refused_once(server, client_for, 404, '{"error": "model test-model does not exist"}', "HTTP 404")
    assert "does not exist" in str(err)


def test_timeout_is_retried_then_error(server, client_for):
    def hang(n, body):
        server.stop.wait(1.0)
        return reply("too late")

    server.script = hang
    llm = client_for(timeout_s=0.3, max_retries=1)
    with pytest.raises(LLMError, match="no reply within") as e:
        llm.generate([ask()])
    assert e.value.retryable is True
    assert len(server.calls) == 2


def test_connection_refused_is_retryable():
    llm = OpenAIChat(f"http://127.0.0.1:{free_port()}/v1", "m", max_retries=1, **FAST)
    try:
        with pytest.raises(LLMError, match="cannot reach") as e:
            llm.generate([ask()])
        assert e.value.retryable is True
    finally:
        llm.close()


def test_a_fatal_error_in_a_batch_wins(server, client_for):
    def script(n, body):
        if parts_of(body) == "busy":
            return raw(500, "overloaded")
        if parts_of(body) == "bad":
            server.stop.wait(0.05)  # fails after the retryable one: order alone would pick the 500
            return raw(403, "forbidden")
        return reply("ok")

    server.script = script
    llm = client_for(concurrency=4, max_retries=0)
    with pytest.raises(LLMError, match="HTTP 403") as e:
        llm.generate([ask("busy"), ask("bad"), ask("fine")])
    assert e.value.retryable is False


def test_unencodable_image_is_a_clear_error(client_for, tmp_path):
    llm = client_for()
    with pytest.raises(LLMError, match="missing.png"):
        llm.generate([LLMRequest([Message("user", ["x", Image(str(tmp_path / "missing.png"))])])])


def test_generate_after_close(server):
    llm = OpenAIChat(server.url, "m", **FAST)
    llm.close()
    with pytest.raises(LLMError, match="after close"):
        llm.generate([ask()])


# -- video --------------------------------------------------------------------------------

def _clip(times=(10.0, 12.5, 15.0)):
    return Clip(tuple(Image(rgb(48, 64, i)) for i in range(len(times))), tuple(times))


def test_video_sent_as_mp4(server, client_for):
    llm = client_for()
    llm.generate([LLMRequest([Message("user", ["what happens?", _clip()])])])
    parts = parts_of(server.calls[0][2])
    assert [p["type"] for p in parts] == ["text", "video_url"]
    data = decode_data_uri(parts[1]["video_url"]["url"], "video/mp4")
    with av.open(io.BytesIO(data)) as f:
        frames = list(f.decode(video=0))
    assert len(frames) == 3
    assert (frames[0].width, frames[0].height) == (64, 48)


def test_video_rejected_falls_back_to_frames_with_times(server, client_for):
    def no_video(n, body):
        if "video_url" in json.dumps(body):
            return raw(400, '{"error": {"message": "Video input is not supported by this model"}}')
        return reply("frames seen")

    server.script = no_video
    llm = client_for()
    req = LLMRequest([Message("user", ["what happens?", _clip(), "answer briefly"])])
    assert llm.generate([req])[0].text == "frames seen"
    assert len(server.calls) == 2
    parts = parts_of(server.calls[1][2])
    kinds = [p["type"] if p["type"] != "text" else p["text"] for p in parts]
    assert kinds == ["what happens?", "t=10.0s", "image_url", "t=12.5s", "image_url",
                     "t=15.0s", "image_url", "answer briefly"]
    # remembered: the next clip goes as frames straight away
    llm.generate([req])
    assert len(server.calls) == 3
    assert "video_url" not in json.dumps(server.calls[2][2])


def test_400_about_something_else_is_not_a_video_fallback(server, client_for):
    server.script = lambda n, body: raw(400, "max_tokens too large")
    llm = client_for()
    with pytest.raises(LLMError, match="HTTP 400"):
        llm.generate([LLMRequest([Message("user", ["x", _clip()])])])
    assert len(server.calls) == 1


# -- encoders -----------------------------------------------------------------------------

def test_jpeg_encoder_limits_and_errors():
    uri = to_jpeg_data_uri(Image(rgb(100, 2000)), max_side=500)
    with PILImage.open(io.BytesIO(decode_data_uri(uri, "image/jpeg"))) as im:
        assert im.size == (500, 25)
    with pytest.raises(ValueError, match="cannot be JPEG-encoded under 100 bytes"):
        to_jpeg_data_uri(Image(rgb(64, 64)), max_bytes=100)
    with pytest.raises(ValueError, match=r"H x W x 3.*\(4, 4, 4\)"):
        to_jpeg_data_uri(Image(np.zeros((4, 4, 4), np.uint8)))
    with pytest.raises(ValueError, match="uint8"):
        to_jpeg_data_uri(Image(np.zeros((4, 4, 3), np.float32)))


def test_clip_encoder_odd_sizes_and_times():
    clip = Clip(tuple(Image(rgb(49, 65, i)) for i in range(4)), (0.0, 0.5, 1.0, 3.0))
    data = decode_data_uri(clip_to_mp4_data_uri(clip), "video/mp4")
    with av.open(io.BytesIO(data)) as f:
        frames = list(f.decode(video=0))
    assert [(fr.width, fr.height) for fr in frames] == [(64, 48)] * 4
    assert [round(float(fr.time), 3) for fr in frames] == [0.0, 0.5, 1.0, 3.0]
    with pytest.raises(ValueError, match="increase"):
        clip_to_mp4_data_uri(Clip(clip.frames[:2], (1.0, 1.0)))


# -- ScriptedLLM --------------------------------------------------------------------------

def test_scripted_replays_in_order_and_records():
    llm = ScriptedLLM(["one two three", "four"])
    reqs = [ask("a b c d"), ask("e")]
    outs = llm.generate(reqs)
    assert [o.text for o in outs] == ["one two three", "four"]
    assert [(o.prompt_tokens, o.completion_tokens, o.cached_tokens) for o in outs] == [(4, 3, 0), (1, 1, 0)]
    assert llm.sent == reqs
    with pytest.raises(LLMError, match="no scripted reply left"):
        llm.generate([ask()])


def test_scripted_callable_fail_and_delay():
    def boom(req):
        return LLMError("scripted", "injected", retryable=True) if req.tag == "bad" else None

    llm = ScriptedLLM(lambda r: r.messages[-1].content[0].upper(), delay_s=0.05, fail=boom)
    t0 = time.perf_counter()
    (out,) = llm.generate([ask("shout")])
    assert out.text == "SHOUT"
    assert time.perf_counter() - t0 >= 0.05 and out.total_s >= 0.05
    bad = LLMRequest([Message("user", ["x"])], tag="bad")
    with pytest.raises(LLMError, match="injected") as e:
        llm.generate([bad])
    assert e.value.retryable is True
    assert llm.sent[-1] is bad


def test_scripted_is_thread_safe():
    llm = ScriptedLLM([str(i) for i in range(200)])
    got = []
    lock = threading.Lock()

    def worker():
        for _ in range(25):
            outs = llm.generate([ask(), ask()])
            with lock:
                got.extend(o.text for o in outs)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got, key=int) == [str(i) for i in range(200)]
    assert len(llm.sent) == 200


def test_scripted_rejects_bad_replies():
    with pytest.raises(TypeError, match="replies"):
        ScriptedLLM("just one string")
    with pytest.raises(TypeError, match="must be a str"):
        ScriptedLLM(lambda r: 42).generate([ask()])


# -- spec and factory ---------------------------------------------------------------------

def test_parse_llm_spec_forms():
    assert parse_llm_spec("none") == {"backend": "none"}
    assert parse_llm_spec("openai:http://127.0.0.1:8000/v1#Qwen/Qwen2-VL-7B-Instruct") == {
        "backend": "openai", "url": "http://127.0.0.1:8000/v1", "model": "Qwen/Qwen2-VL-7B-Instruct"}
    assert parse_llm_spec("local:/models/qwen2-vl-2b") == {"backend": "local", "model": "/models/qwen2-vl-2b"}


@pytest.mark.parametrize("spec", ["", "openai", "openai:http://host/v1", "openai:host:8000/v1#m",
                                  "openai:http://host/v1#", "local:", "qwen", "ollama:x"])
def test_parse_llm_spec_rejects(spec):
    with pytest.raises(ValueError, match="spec") as e:
        parse_llm_spec(spec)
    assert repr(spec) in str(e.value)


def test_make_llm(server, monkeypatch):
    assert make_llm(LLMConfig()) is None
    with pytest.raises(VamError, match=r"llm\.url"):
        make_llm(LLMConfig(backend="openai", model="m"))
    with pytest.raises(VamError, match=r"llm\.model"):
        make_llm(LLMConfig(backend="openai", url=server.url))
    monkeypatch.setenv("VAM_TEST_LLM_KEY", "sk-from-env")
    llm = make_llm(LLMConfig(backend="openai", url=server.url, model="m", api_key_env="VAM_TEST_LLM_KEY",
                             max_retries=0))
    try:
        # the body behind the two-tier scheduler (test_llm_scheduler.py)
        assert isinstance(llm.body, OpenAIChat) and llm.name == f"openai:{server.url}#m"
        llm.generate([ask()])
        assert server.calls[0][1]["Authorization"] == "Bearer sk-from-env"
        server.script = lambda n, body: raw(401, "no")
        with pytest.raises(LLMError, match=r"\$VAM_TEST_LLM_KEY"):
            llm.generate([ask()])
    finally:
        llm.close()


@pytest.mark.parametrize("server_kind, urgent, other", [("vllm", 0, 1), ("sglang", 100, 0)])
def test_server_priority_sends_each_requests_class_in_the_servers_field(server, server_kind, urgent, other):
    """Shards sharing one server: the server orders their requests by the body's ``priority``
    field (vLLM: lower first; SGLang: higher first), through make_llm's scheduler and a role's body."""
    llm = make_llm(LLMConfig(backend="openai", url=server.url, model="m", server_priority=server_kind,
                             roles={"router": f"openai:{server.url}#light"}, max_retries=0))
    reqs = {"monitor": LLMRequest([Message("user", ["monitor"])], tag="monitor"),
            "planner": LLMRequest([Message("user", ["planner"])], tag="planner"),
            "router": LLMRequest([Message("user", ["router"])], tag="router"),
            "event_writer": LLMRequest([Message("user", ["event_writer"])], tag="event_writer"),
            "summary_writer_repair": LLMRequest([Message("user", ["summary_writer_repair"])],
                                                tag="summary_writer_repair"),
            "explicit": LLMRequest([Message("user", ["explicit"])], tag="planner", priority="backend")}
    try:
        for r in reqs.values():
            llm.generate([r])
    finally:
        llm.close()
    sent = {b["messages"][0]["content"]: (b["model"], b["priority"]) for _, _, b in server.calls}
    assert sent == {"monitor": ("m", urgent), "planner": ("m", urgent), "router": ("light", urgent),
                    "event_writer": ("m", other), "summary_writer_repair": ("m", other), "explicit": ("m", other)}
    # which is more urgent, in the server's own order
    first = min if server_kind == "vllm" else max
    assert first(urgent, other) == urgent


def test_server_priority_off_by_default_and_a_refusal_says_what_to_change(server, client_for):
    client_for().generate([ask()])
    assert "priority" not in server.calls[0][2]  # servers that reject unknown fields keep working
    with pytest.raises(ValueError, match="server_priority must be one of"):
        client_for(server_priority="triton")
    with pytest.raises(VamError, match="server_priority"):
        EngineConfig.load(llm={"backend": "openai", "url": server.url, "model": "m", "server_priority": "vLLM"})
    # vLLM without --scheduling-policy priority refuses a non-zero priority with a 400
    server.script = lambda n, body: raw(400, '{"object": "error", "message": "Got priority 1 but Priority '
                                             'scheduling is not enabled."}')
    llm = client_for(server_priority="vllm", max_retries=3)
    with pytest.raises(LLMError, match="--scheduling-policy priority") as e:
        llm.generate([LLMRequest([Message("user", ["doc"])], tag="event_writer")])
    assert e.value.retryable is False and "not enabled" in str(e.value)
    assert len(server.calls) == 2  # not retried


def test_cli_index_with_a_server_documents_every_event_then_summarizes(server, tmp_path, capsys):
    """End to end: `vam-engine index --llm openai:URL#model` against the loopback server; every
    event gets the server's document, and `summarize` writes window documents."""
    from vam_engine.cli import main
    from vam_engine.synthetic.demo import make_demo_clip
    from vam_engine.memory import Store

    def script(n, body):
        content = body["messages"][1]["content"]  # a lone text part goes as a plain string
        payload = json.loads(content if isinstance(content, str) else content[0]["text"])
        return reply(f"document {n} for task {payload['task']}")

    server.script = script
    clip = make_demo_clip(tmp_path / "demo.mp4")["path"]
    spec = f"openai:{server.url}#test-model"
    store = str(tmp_path / "store")
    common = ["--store", store, "--text-model", "minilm", "--llm", spec, "--device", "cpu"]
    assert main(["index", clip, "--camera", "cam", "-q", *common]) == 0
    out = capsys.readouterr().out
    assert "event documents" in out
    s = Store(store, create=False)
    try:
        events = s.events.list()
        assert events and all(e.doc.startswith("document ") and "event_document" in e.doc for e in events)
    finally:
        s.close()
    assert {b["model"] for _, _, b in server.calls} == {"test-model"}
    assert main(["summarize", "what happens", "--t0", "0", "--t1", "40", "--granularity", "20", *common]) == 0
    out = capsys.readouterr().out
    assert "summary documents written" in out and "window_summary" in out


def test_cli_ask_against_a_server_prints_the_answer_with_citations_and_timings(server, tmp_path, capsys):
    from vam_engine.cli import main
    from vam_engine.synthetic.demo import make_demo_clip
    from vam_engine.llm import prompts

    def text_of(content):
        return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)

    def script(n, body):
        system = text_of(body["messages"][0]["content"])
        if system == prompts.TWO_PHASE_SYSTEM:
            return reply(json.dumps({"answer": "a textured scene that pans"}))
        return reply("a textured scene")  # documents, merges, the QA summary

    server.script = script
    clip = make_demo_clip(tmp_path / "demo.mp4")["path"]
    common = ["--store", str(tmp_path / "store"), "--text-model", "minilm", "--llm",
              f"openai:{server.url}#test-model", "--device", "cpu"]
    assert main(["index", clip, "--camera", "cam", "-q", *common]) == 0
    capsys.readouterr()
    assert main(["ask", "what is on the camera?", *common]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "a textured scene that pans"
    assert any(line.strip().startswith("[1] cam") for line in out)
    assert any(line.startswith("two_phase:") and "total" in line for line in out)
    assert main(["ask", "what is on the camera?", "--as-of", "5", "--json", *common]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["found"] and all(e["t_end"] <= 5 for e in got["evidence"])
    coarse = got["trace"][0]  # the typed trace, as plain JSON
    assert coarse["stage"] == "coarse" and coarse["action"] == "answer" and coarse["calls"][0]["tag"] == "two_phase_coarse"
