"""Audio as memory: each camera's audio track decoded to 16 kHz mono on its own thread, voice
activity first (an energy check, then Silero VAD), speech recognised in chunks with overlap by
one body (CTranslate2 Whisper, or an OpenAI-compatible transcription server) batched across
cameras on its own thread, and timed transcript segments out.

``AudioHub`` is what an engine holds; the rest is what it is made of, for callers that wire
parts themselves (a live camera that demuxes audio beside its video uses ``TrackDecoder``).
faster-whisper (the ``audio`` extra) is imported only by the bodies and the VAD that need it.
"""
from .asr import ASRError, SpeechRecognizer, make_recognizer
from .decode import AudioReader, AudioTrackError, NoAudioTrack, TrackDecoder, axis_origin, read_audio
from .hub import AudioHub
from .push import AudioInputError, PushResampler, to_mono_float
from .records import (SAMPLE_RATE, AudioBlock, AudioStatus, Recognition, RecognizedSegment, RecognizedWord,
                      SpeechChunk, TranscriptSegment)
from .transcriber import Transcriber
from .vad import SpeechChunker, SpeechDetector

__all__ = ["ASRError", "AudioBlock", "AudioHub", "AudioInputError", "AudioReader", "AudioStatus", "AudioTrackError",
           "NoAudioTrack", "PushResampler", "Recognition", "RecognizedSegment", "RecognizedWord", "SAMPLE_RATE",
           "SpeechChunk", "SpeechChunker", "SpeechDetector", "SpeechRecognizer", "Transcriber", "TrackDecoder",
           "TranscriptSegment", "axis_origin", "make_recognizer", "read_audio", "to_mono_float"]
