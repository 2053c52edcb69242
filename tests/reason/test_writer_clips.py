"""Event documents from clips (``writer.clips``): the writer sends each event's MP4 (H.264 + AAC,
cut from the source with its sound) as a ``video_url`` to an OpenAI-compatible server that takes
video, and the keyframes as images to one that refuses video. Both servers are real loopback
HTTP servers; the clips they receive are read back with PyAV."""
import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import av
import pytest

from support.speech import have_espeak, speech_video
from vam_engine.engine import Engine

pytestmark = [pytest.mark.usefixtures("watchdog"), pytest.mark.skipif(not have_espeak(), reason="needs espeak-ng")]
WATCHDOG_S = 300


class ModelServer:
    """``/v1/chat/completions`` that records each request's parts; ``takes_video`` False: a request
    with a video part is refused with a 400 naming video, as vLLM does for a model without it."""

    def __init__(self, takes_video: bool):
        self.takes_video, self.requests, self.refused = takes_video, [], 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not fake.takes_video and "video_url" in json.dumps(body):
                    fake.refused += 1
                    status, out = 400, {"error": {"message": "video input is not supported by this model"}}
                else:
                    fake.requests.append(body)
                    status, out = 200, {"choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": "a person speaks in front of the camera"}}]}
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def event_parts(self) -> list[list[dict]]:
        """The user parts of each event-document request received."""
        out = []
        for body in self.requests:
            user = body["messages"][-1]["content"]
            if isinstance(user, list) and json.loads(user[0]["text"]).get("task") == "event_document":
                out.append(user)
        return out


def documented(tmp_path, server: ModelServer, clips: bool = True) -> Engine:
    eng = Engine(tmp_path / "store", {"ingest": {"fps": 2.0}, "embed": {"text_model": "minilm"},
                                      "commit": {"max_event_s": 6.0}, "writer": {"clips": clips, "retry_base_s": 0.05},
                                      "llm": {"backend": "openai", "url": server.url, "model": "m", "max_retries": 0}},
                 device="cpu")
    eng.index_file(speech_video(scene_s=3.0), camera_id="talk")  # a new scene every 3 s: several events
    assert eng.wait_for_documents(timeout=120)
    return eng


def test_a_model_that_takes_video_gets_each_events_clip_with_its_sound(tmp_path):
    server = ModelServer(takes_video=True)
    try:
        eng = documented(tmp_path, server)
        try:
            events = [e for e in eng.store.events.list("talk") if e.closed]
            parts = server.event_parts()
            assert len(parts) == len(events) >= 2
            for user in parts:
                kinds = [p["type"] for p in user]
                assert kinds == ["text", "video_url"], kinds  # the clip instead of the keyframes
                uri = user[1]["video_url"]["url"]
                assert uri.startswith("data:video/mp4;base64,")
                with av.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))) as clip:
                    assert clip.streams.video[0].codec_context.name == "h264"
                    assert clip.streams.audio and clip.streams.audio[0].codec_context.name == "aac"
                    length = float(clip.duration) / av.time_base
                payload = json.loads(user[0]["text"])
                span = payload["time_range"]["end_s"] - payload["time_range"]["start_s"]
                assert length == pytest.approx(max(span, 1.0), abs=0.3)
            docs = {e.doc for e in eng.store.events.list("talk") if e.closed}
            assert docs == {"a person speaks in front of the camera"}
        finally:
            eng.close()
    finally:
        server.close()


def test_a_server_that_refuses_video_gets_the_keyframes(tmp_path):
    server = ModelServer(takes_video=False)
    try:
        eng = documented(tmp_path, server)
        try:
            parts = server.event_parts()
            events = [e for e in eng.store.events.list("talk") if e.closed]
            # refused at most once per event (requests already in flight when the first refusal
            # came); the body remembers and sends frames from then on
            assert 1 <= server.refused <= len(events)
            assert len(parts) == len(events) >= 2
            kinds = [[p["type"] for p in user] for user in parts]
            assert not any("video_url" in k for k in kinds)
            assert sorted(k.count("image_url") for k in kinds) == sorted(len(e.keyframes) for e in events)
            assert all(e.doc == "a person speaks in front of the camera" for e in events)
        finally:
            eng.close()
    finally:
        server.close()


def test_without_writer_clips_the_keyframes_go_as_before(tmp_path):
    server = ModelServer(takes_video=True)
    try:
        eng = documented(tmp_path, server, clips=False)
        try:
            parts = server.event_parts()
            assert parts and all("video_url" not in [p["type"] for p in user] for user in parts)
        finally:
            eng.close()
    finally:
        server.close()
