"""The speech-recognition contract every body implements, and the one place that picks a body.

A body turns pieces of 16 kHz mono audio (each at most ``MAX_PIECE_S``) into ``Recognition``s,
with times in seconds from the start of each piece:

- ``recognize(pieces, language)``: one Recognition per piece, in order; ``language`` None lets
  the body detect it (per piece). May batch the pieces (CTranslate2 runs them through the
  encoder together) or send them concurrently (HTTP). Raises ASRError when it cannot.
- ``name``: for status and logs; ``max_batch``: pieces per call at most; ``multilingual``:
  whether it can tell languages apart (an English-only Whisper cannot: always "en");
  ``packs``: whether its word times are good enough for the transcriber to put several
  speech chunks in one piece and split the words back (CTranslate2 Whisper with word
  timestamps: yes; an HTTP server that may answer without words: no).
- ``close()``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

import numpy as np

from ..device import section_device
from .records import MAX_PIECE_S, ASRError, Recognition

if TYPE_CHECKING:
    from ..config import AudioConfig



class SpeechRecognizer(Protocol):
    name: str
    max_batch: int
    multilingual: bool
    packs: bool

    def recognize(self, pieces: Sequence[np.ndarray], language: str | None) -> list[Recognition]: ...

    def close(self) -> None: ...


def make_recognizer(cfg: "AudioConfig", device: str = "auto") -> SpeechRecognizer:
    """The body ``cfg`` names (``audio.body``): CTranslate2 Whisper on ``device`` ("auto": CUDA
    when CTranslate2 sees a GPU; in a process of its own with ``audio.isolate``), or an
    OpenAI-compatible transcription server."""
    if not cfg.model:
        raise ASRError("audio.model is not set: a CTranslate2 Whisper directory (body ctranslate2) or the "
                       "server's model name (body openai)")
    if cfg.body == "openai":
        import os

        from .openai_http import OpenAITranscriptions

        if not cfg.url:
            raise ASRError("audio.body 'openai' needs audio.url (e.g. http://127.0.0.1:8000/v1)")
        return OpenAITranscriptions(cfg.url, cfg.model, api_key=os.environ.get(cfg.api_key_env) or None,
                                    timeout_s=cfg.timeout_s, concurrency=cfg.batch_size)
    dev = section_device(cfg.device, device)
    options = dict(model=cfg.model, device=dev, compute_type=cfg.compute_type, cpu_threads=cfg.cpu_threads,
                   beam_size=cfg.beam_size, batch_size=cfg.batch_size)
    if cfg.isolate:  # its own process (isolated.py): its Python work never holds the ingest's interpreter lock
        from .isolated import IsolatedRecognizer

        return IsolatedRecognizer(options)
    from .whisper_ct2 import WhisperCT2

    return WhisperCT2(**options)
