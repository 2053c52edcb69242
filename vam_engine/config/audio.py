"""Speech in the memory (``audio``)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Section


class AudioConfig(Section):
    """Speech in the memory (vam_engine/audio): each camera's audio track, voice activity first,
    then ASR in chunks with overlap, batched across cameras. Off unless a model is set
    (``active``), so nothing changes for a user without one."""

    enabled: bool = Field(True, description="transcribe audio when a model is set (false: never)")
    model: str | None = Field(None, description="ctranslate2: a CTranslate2 Whisper model directory (model.bin); "
                                                "openai: the server's model name")
    body: Literal["ctranslate2", "openai"] = Field("ctranslate2", description="ASR body: faster-whisper "
                                                   "(int8 on CPU, float16 on CUDA) or an OpenAI-compatible "
                                                   "/v1/audio/transcriptions server")
    url: str | None = Field(None, description="openai: base URL of the server, e.g. http://127.0.0.1:8000/v1")
    api_key_env: str = Field("OPENAI_API_KEY", description="openai: environment variable holding the server's key")
    language: str | None = Field(None, description="ISO 639-1 code of the speech; None: detected per camera")
    chunk_s: float = Field(20.0, gt=1, le=30, description="longest speech chunk sent to ASR (Whisper's window "
                                                         "is 30 s); longer utterances are cut with overlap")
    overlap_s: float = Field(2.0, ge=0, le=5, description="audio two consecutive chunks of one utterance share; "
                                                         "each word of it is kept once (the cut is its middle, "
                                                         "away from the chunk edges where word times are rough)")
    vad_threshold: float = Field(0.5, gt=0, lt=1, description="Silero speech probability at which speech starts")
    vad_energy_floor: float = Field(0.003, ge=0, description="RMS (of full scale 1.0) under which a 32 ms window "
                                                             "is silence without running the VAD model "
                                                             "(0.003: about -50 dBFS)")
    min_silence_s: float = Field(0.8, gt=0, description="silence that ends an utterance")
    speech_pad_s: float = Field(0.4, ge=0, description="audio kept before and after each utterance (Whisper "
                                "mishears a last word cut short: 0.2 s turned 'at noon.' into 'at U.' here)")
    split_pause_s: float = Field(0.8, gt=0, description="a pause this long between words starts a new segment")
    max_backlog_s: float = Field(300.0, ge=30, description="speech waiting for ASR at most (all cameras; 19 MB "
                                                           "at 300 s); beyond it the oldest is dropped (counted in "
                                                           "the camera's status)")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="ASR device; auto: the engine's device")
    compute_type: str = Field("auto", description="CTranslate2 compute type; auto: int8 on CPU, float16 on CUDA")
    cpu_threads: int = Field(0, ge=0, description="CTranslate2 threads on the CPU; 0: its default")
    beam_size: int = Field(1, ge=1, le=10, description="Whisper beam size (1: greedy)")
    batch_size: int = Field(4, ge=1, le=64, description="pieces per ASR call (ctranslate2) or concurrent "
                                                        "requests (openai)")
    isolate: bool = Field(True, description="ctranslate2: run the body in a process of its own at a lower CPU "
                                            "priority (its Python work never holds the ingest's interpreter lock; "
                                            "false: in the engine's process)")
    timeout_s: float = Field(60.0, gt=0, description="openai: one request; sources: opening a URL")

    @model_validator(mode="after")
    def _overlap_fits(self):
        if self.overlap_s >= self.chunk_s / 2:
            raise ValueError(f"audio.overlap_s ({self.overlap_s}) must be under half of audio.chunk_s ({self.chunk_s})")
        if self.speech_pad_s * 2 > self.min_silence_s:
            raise ValueError(f"audio.speech_pad_s ({self.speech_pad_s}) must be at most half of audio.min_silence_s "
                             f"({self.min_silence_s})")
        if self.body == "openai" and self.model and not self.url:
            raise ValueError("audio.body 'openai' needs audio.url")
        return self

    @property
    def active(self) -> bool:
        """Whether the audio path runs: enabled and a model configured."""
        return self.enabled and bool(self.model)
