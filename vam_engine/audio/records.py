"""Records the audio path hands across its module boundaries: plain dataclasses.

Times are on the camera's axis (the axis its video frames are on: seconds relative to the
video's first frame, or unix seconds when the source has an absolute start; see decode.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import VamError

SAMPLE_RATE = 16_000  # what the VAD and every ASR body take: 16 kHz mono float32 in [-1, 1]



MAX_PIECE_S = 30.0  # the longest piece of audio an ASR body is given: Whisper's window


class ASRError(VamError):
    """A speech-recognition body failed on a request (after its own retries) or cannot load."""

@dataclass(frozen=True)
class AudioBlock:
    """Consecutive 16 kHz mono samples of one camera starting at ``t`` (camera axis)."""

    camera_id: str
    t: float
    samples: np.ndarray = field(repr=False)  # float32, 1-D

    @property
    def duration(self) -> float:
        return len(self.samples) / SAMPLE_RATE

    @property
    def t_end(self) -> float:
        return self.t + self.duration


@dataclass(frozen=True)
class SpeechChunk:
    """A piece of speech to transcribe: ``samples`` start at ``t_start`` (camera axis).

    A long utterance is cut into chunks that overlap; the overlap is transcribed twice and
    each copy keeps only the words whose middle falls in its own half of it: a chunk keeps
    the words in ``[keep_from, keep_until)``, which tile the utterance without gaps or
    overlaps (transcriber.py). ``seq`` numbers a camera's chunks in order."""

    camera_id: str
    seq: int
    t_start: float
    samples: np.ndarray = field(repr=False)  # float32 16 kHz mono
    keep_from: float
    keep_until: float
    # where the VAD heard voice in it (the padding outside is silence): word times that fall
    # in the padding are pulled in to these (Whisper tends to start a first word at the audio's start)
    voice_start: float | None = None
    voice_end: float | None = None
    utterance: int = 0  # numbers a camera's utterances: the chunks one long utterance was cut into share it

    @property
    def duration(self) -> float:
        return len(self.samples) / SAMPLE_RATE

    @property
    def t_end(self) -> float:
        return self.t_start + self.duration


@dataclass(frozen=True)
class TranscriptSegment:
    """One transcribed stretch of speech: what was said on a camera between two times."""

    camera_id: str
    t_start: float  # camera axis
    t_end: float
    text: str
    language: str | None  # ISO 639-1 code when known ("en")
    confidence: float | None  # in [0, 1]: mean word probability (or exp of the mean token log-probability);
    # None when the body gives no score


@dataclass(frozen=True)
class RecognizedWord:
    """A word as a body returns it, timed in seconds from the start of the audio it was given."""

    start: float
    end: float
    text: str  # with its leading space, as Whisper writes it
    probability: float


@dataclass(frozen=True)
class RecognizedSegment:
    """A segment as a body returns it (same time origin as its words)."""

    start: float
    end: float
    text: str
    confidence: float | None
    words: tuple[RecognizedWord, ...] = ()  # empty when the body gives no word times


@dataclass(frozen=True)
class Recognition:
    """What a body made of one piece of audio."""

    segments: tuple[RecognizedSegment, ...]
    language: str | None
    language_probability: float | None = None


@dataclass
class AudioStatus:
    """One camera's audio path, as ``AudioHub.status`` reports it.

    ``state``: "starting" | "running" | "ended" (its source ended; all speech handed on) |
    "no_audio" (the source has no audio track: not an error) | "error" (the track is broken:
    ``error`` says why; the video is not affected) | "pushed" (fed by ``push``)."""

    camera_id: str
    state: str
    error: str | None = None
    codec: str | None = None  # the track's codec, input rate and channels (decoded sources)
    input_rate: int | None = None
    input_channels: int | None = None
    seconds_in: float = 0.0  # audio received (decoded or pushed)
    last_t: float | None = None  # camera-axis time of the end of the latest audio received
    seconds_quiet: float = 0.0  # below the energy floor: the VAD model never ran on it
    seconds_speech: float = 0.0  # in speech chunks handed to ASR
    chunks: int = 0  # speech chunks made
    pending_s: float = 0.0  # speech waiting for ASR
    chunks_dropped: int = 0  # oldest speech dropped because ASR fell behind
    seconds_dropped: float = 0.0
    seconds_transcribed: float = 0.0
    segments: int = 0  # transcript segments emitted
    transcribed_until: float | None = None  # camera-axis end of the latest chunk transcribed
    asr_errors: int = 0
    last_asr_error: str | None = None
    packets_bad: int = 0  # undecodable audio packets (decoded sources)

    @property
    def behind(self) -> bool:
        """ASR has speech waiting or has dropped some: it is not keeping up (or just busy)."""
        return self.chunks_dropped > 0 or self.pending_s > 0
