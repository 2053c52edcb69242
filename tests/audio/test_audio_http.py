"""The OpenAI-compatible transcription body against a loopback server started by the test: what
it sends (multipart WAV at 16 kHz, model, language, verbose_json), how it reads replies (segments,
words, plain text), retries, errors, and the whole hub path with it."""
import email.parser
import email.policy
import io
import json
import threading
import wave
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from support import speech
from vam_engine.audio import ASRError, AudioHub, make_recognizer
from vam_engine.audio.openai_http import OpenAITranscriptions
from vam_engine.config import AudioConfig


class FakeTranscriptionServer:
    """``/v1/audio/transcriptions`` on 127.0.0.1. By default it answers verbose_json describing
    the audio it got: one segment "N samples at R Hz" over the part louder than -40 dBFS, its
    words spread evenly over it. ``replies`` (a list) overrides the next answers: (status, body)."""

    def __init__(self):
        self.requests: list[dict] = []
        self.replies: list[tuple[int, str | dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                    b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + body)
                fields, audio = {}, None
                for part in msg.iter_parts():
                    name = part.get_param("name", header="content-disposition")
                    if name == "file":
                        audio = part.get_payload(decode=True)
                    else:
                        fields.setdefault(name, []).append(part.get_content())
                req = {"path": self.path, "auth": self.headers.get("Authorization"), "fields": fields}
                with wave.open(io.BytesIO(audio)) as w:
                    req.update(rate=w.getframerate(), channels=w.getnchannels(), width=w.getsampwidth())
                    pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
                req["samples"] = pcm
                outer.requests.append(req)
                status, reply = outer.replies.pop(0) if outer.replies else (200, outer.describe(pcm, req["rate"]))
                data = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @staticmethod
    def describe(pcm: np.ndarray, rate: int) -> dict:
        loud = np.flatnonzero(np.abs(pcm) > 0.01)
        a, b = (loud[0] / rate, loud[-1] / rate) if len(loud) else (0.0, len(pcm) / rate)
        text = f" {len(pcm)} samples at {rate} Hz"
        edges = np.linspace(a, b, len(text.split()) + 1)  # the words spread over the loud part
        return {"text": text, "language": "english", "duration": len(pcm) / rate,
                "segments": [{"start": a, "end": b, "text": text, "avg_logprob": -0.1}],
                "words": [{"word": w, "start": edges[i], "end": edges[i + 1]} for i, w in enumerate(text.split())]}

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server():
    s = FakeTranscriptionServer()
    yield s
    s.close()


def test_a_piece_goes_out_as_16k_wav_with_the_request_fields(server):
    body = OpenAITranscriptions(server.url, "whisper-1", api_key="sk-test", concurrency=2)
    x = np.zeros(16000 * 3, np.float32)
    x[16000:32000] = 0.2 * np.sin(np.arange(16000) * 0.3)
    (rec,) = body.recognize([x], "de")
    body.close()
    (req,) = server.requests
    assert req["path"] == "/v1/audio/transcriptions" and req["auth"] == "Bearer sk-test"
    assert req["rate"] == 16000 and req["channels"] == 1 and req["width"] == 2 and len(req["samples"]) == 48000
    assert np.abs(req["samples"] - x).max() < 1e-3  # the audio as it was, in 16-bit PCM
    f = req["fields"]
    assert f["model"] == ["whisper-1"] and f["language"] == ["de"] and f["response_format"] == ["verbose_json"]
    assert sorted(f["timestamp_granularities[]"]) == ["segment", "word"]
    (seg,) = rec.segments
    assert rec.language == "en"  # the server's "english", as a code
    assert seg.start == pytest.approx(1.0, abs=0.01) and seg.end == pytest.approx(2.0, abs=0.01)
    assert seg.text == " 48000 samples at 16000 Hz" and seg.confidence == pytest.approx(np.exp(-0.1))
    assert [w.text for w in seg.words] == [" 48000", " samples", " at", " 16000", " Hz"]


def test_pieces_of_a_batch_go_out_concurrently_and_come_back_in_order(server):
    body = OpenAITranscriptions(server.url, "m", concurrency=4)
    pieces = [np.full(1600 * (k + 1), 0.1, np.float32) for k in range(6)]
    recs = body.recognize(pieces, None)
    body.close()
    assert [r.segments[0].text for r in recs] == [f" {1600 * (k + 1)} samples at 16000 Hz" for k in range(6)]
    assert all("language" not in r["fields"] for r in server.requests)  # None: the server detects it


def test_replies_are_untrusted_and_failures_are_clear(server):
    body = OpenAITranscriptions(server.url, "m", max_retries=1, backoff_base_s=0.01)
    x = np.full(16000, 0.1, np.float32)
    server.replies = [(503, "busy"), (200, {"text": " plain text only"})]  # retried once, then plain json
    (rec,) = body.recognize([x], "en")
    (seg,) = rec.segments
    assert seg.text == " plain text only" and (seg.start, seg.end) == (0.0, 1.0) and seg.confidence is None
    server.replies = [(200, {"text": "x", "segments": [{"start": -5, "end": 1e9, "text": "clamped"},
                                                          {"start": "a", "text": 3}, "junk"]})]
    (seg,) = body.recognize([x], "en")[0].segments
    assert (seg.start, seg.end, seg.text) == (0.0, 1.0, "clamped")  # times clamped to the piece, junk skipped
    server.replies = [(401, '{"error": "bad key"}')]
    with pytest.raises(ASRError, match="HTTP 401.*bad key"):
        body.recognize([x], "en")
    server.replies = [(500, "boom"), (500, "boom again")]
    with pytest.raises(ASRError, match="HTTP 500.*boom again"):
        body.recognize([x], "en")
    server.replies = [(200, "<html>not json</html>")]
    with pytest.raises(ASRError, match="not a transcription"):
        body.recognize([x], "en")
    body.close()
    with pytest.raises(ASRError, match="http:// or https://"):
        OpenAITranscriptions("ftp://x", "m")


def test_an_unreachable_server_is_an_error_naming_it():
    body = OpenAITranscriptions("http://127.0.0.1:9/v1", "m", max_retries=0, timeout_s=2)
    with pytest.raises(ASRError, match="127.0.0.1:9.*no answer"):
        body.recognize([np.zeros(1600, np.float32)], "en")
    body.close()


@pytest.mark.skipif(not speech.have_espeak(), reason="espeak-ng is not installed")
def test_the_hub_transcribes_a_video_through_the_server(server):
    cfg = AudioConfig(body="openai", model="whisper-1", url=server.url)
    said = ((1.0, speech.PLANTS), (8.0, speech.TRUCK))
    got = []
    hub = AudioHub(cfg, got.extend, recognizer=make_recognizer(cfg))
    try:
        hub.open_source("door", str(speech.speech_video(said, 13.0, audio_start_s=0.7)))
        assert hub.flush(60)
        st = hub.status("door")
    finally:
        hub.close()
    assert len(server.requests) == 2 and st.segments == 2 and st.asr_errors == 0  # one request per utterance
    for seg, req, (t, text) in zip(got, server.requests, said):
        voice = speech.speak(text)
        loud = np.flatnonzero(np.abs(voice) > 0.02) / speech.ESPEAK_RATE
        onset = 0.7 + t + loud[0]
        assert seg.camera_id == "door" and seg.language == "en"
        assert seg.text == f"{len(req['samples'])} samples at 16000 Hz"
        # the server's times (from the audio it was sent) land on the video's axis
        assert seg.t_start == pytest.approx(onset, abs=0.06)
