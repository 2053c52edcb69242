"""A body that sends each piece to an OpenAI-compatible ``/v1/audio/transcriptions`` endpoint
(OpenAI, vLLM, whisper.cpp's server, speaches, LocalAI...), as 16-bit PCM WAV.

It asks for ``verbose_json`` with segment and word timestamps; a server that answers with
plain ``json`` (text only) gives one segment over the whole piece with no confidence. Pieces of
a batch go out concurrently (``concurrency`` connections). 429, 5xx, timeouts and dropped
connections are retried with exponential backoff (``max_retries``); other 4xx and a body that
is not this API's JSON fail at once. Everything in a reply is untrusted: times are clamped to
the piece, texts must be strings, numbers finite.
"""
from __future__ import annotations

import io
import math
import random
import time
import wave
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import httpx
import numpy as np

from .records import SAMPLE_RATE, ASRError, Recognition, RecognizedSegment, RecognizedWord

_EXCERPT = 200
# what servers write for the language (OpenAI: the English name) -> ISO 639-1
_LANGUAGE_NAMES = {"english": "en", "german": "de", "french": "fr", "spanish": "es", "italian": "it",
                   "portuguese": "pt", "dutch": "nl", "russian": "ru", "chinese": "zh", "japanese": "ja",
                   "korean": "ko", "arabic": "ar", "hindi": "hi", "turkish": "tr", "polish": "pl",
                   "ukrainian": "uk", "swedish": "sv", "czech": "cs", "greek": "el", "hebrew": "he"}


def wav_bytes(samples: np.ndarray) -> bytes:
    """16 kHz mono float32 -> a 16-bit PCM WAV file's bytes."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def _number(v, default: float | None = None) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return default
    return float(v)


def _language(v) -> str | None:
    if not isinstance(v, str) or not v.strip():
        return None
    v = v.strip().lower()
    return _LANGUAGE_NAMES.get(v, v[:16])


class OpenAITranscriptions:
    packs = False
    multilingual = True

    def __init__(self, url: str, model: str, *, api_key: str | None = None, timeout_s: float = 60.0,
                 max_retries: int = 2, concurrency: int = 4, backoff_base_s: float = 0.5, backoff_max_s: float = 10.0):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ASRError(f"audio.url must start with http:// or https://, got {url!r}")
        if not model:
            raise ASRError(f"a model name is required for {url} (the server routes by it), got {model!r}")
        if concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ASRError(f"concurrency >= 1, max_retries >= 0 and timeout_s > 0 are required, got "
                           f"{concurrency}, {max_retries}, {timeout_s}")
        base = url.rstrip("/")
        self.endpoint = base if base.endswith("/audio/transcriptions") else base + "/audio/transcriptions"
        self.model = model
        self.name = f"openai:{base}#{model}"
        self.max_batch = int(concurrency)
        self.max_retries = int(max_retries)
        self.backoff_base_s, self.backoff_max_s = backoff_base_s, backoff_max_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout_s),
                                    limits=httpx.Limits(max_connections=concurrency))
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="vam-asr-http")

    def recognize(self, pieces: Sequence[np.ndarray], language: str | None) -> list[Recognition]:
        futures = [self._pool.submit(self._one, np.asarray(p, np.float32).reshape(-1), language) for p in pieces]
        return [f.result() for f in futures]

    def _one(self, piece: np.ndarray, language: str | None) -> Recognition:
        data = {"model": self.model, "response_format": "verbose_json",
                "timestamp_granularities[]": ["segment", "word"]}
        if language:
            data["language"] = language
        files = {"file": ("audio.wav", wav_bytes(piece), "audio/wav")}
        body = self._post(data, files)
        return self._parse(body, len(piece) / SAMPLE_RATE)

    def _post(self, data: dict, files: dict) -> dict:
        attempt = 0
        while True:
            try:
                resp = self._client.post(self.endpoint, data=data, files=files)
            except (httpx.TimeoutException, httpx.TransportError) as e:
                if attempt >= self.max_retries:
                    raise ASRError(f"{self.endpoint}: no answer after {attempt + 1} tries "
                                   f"({type(e).__name__}: {e})") from None
            else:
                if resp.status_code == 200:
                    try:
                        body = resp.json()
                    except ValueError:
                        body = None
                    if not isinstance(body, dict) or not isinstance(body.get("text"), str):
                        raise ASRError(f"{self.endpoint}: the reply is not a transcription (expected JSON with "
                                       f"'text'): {' '.join(resp.text.split())[:_EXCERPT]!r}")
                    return body
                if resp.status_code != 429 and resp.status_code < 500 or attempt >= self.max_retries:
                    raise ASRError(f"{self.endpoint}: HTTP {resp.status_code}: "
                                   f"{' '.join(resp.text.split())[:_EXCERPT]!r}")
            attempt += 1
            delay = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
            time.sleep(delay * random.uniform(0.5, 1.0))

    @staticmethod
    def _parse(body: dict, duration: float) -> Recognition:
        def clamp(v, default):
            x = _number(v, default)
            return min(max(x, 0.0), duration)

        words = []
        for w in body.get("words") or []:
            if isinstance(w, dict) and isinstance(w.get("word"), str):
                text = w["word"] if w["word"][:1].isspace() else " " + w["word"]
                words.append(RecognizedWord(clamp(w.get("start"), 0.0), clamp(w.get("end"), duration), text,
                                            min(max(_number(w.get("probability"), 1.0), 0.0), 1.0)))
        probs_given = any(isinstance(w, dict) and _number(w.get("probability")) is not None
                          for w in body.get("words") or [])
        segments = []
        for s in body.get("segments") or []:
            if not isinstance(s, dict) or not isinstance(s.get("text"), str) or not s["text"].strip():
                continue
            a, b = clamp(s.get("start"), 0.0), clamp(s.get("end"), duration)
            logprob = _number(s.get("avg_logprob"))
            inside = tuple(w for w in words if a <= (w.start + w.end) / 2 <= b)
            conf = (float(np.mean([w.probability for w in inside])) if inside and probs_given
                    else (math.exp(min(logprob, 0.0)) if logprob is not None else None))
            segments.append(RecognizedSegment(a, max(a, b), s["text"], conf, inside))
        if not segments and body["text"].strip():  # plain json: the text, over the whole piece
            segments.append(RecognizedSegment(0.0, duration, body["text"], None, tuple(words)))
        return Recognition(tuple(segments), _language(body.get("language")), None)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()
