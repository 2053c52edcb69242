"""A speech-recognition body in its own process (``audio.isolate``): the CTranslate2 Whisper body
runs in a child Python (``python -m vam_engine.audio.isolated``) at a lower CPU priority, so its
Python work (feature extraction, decoding loops, word alignment) never holds the ingest's
interpreter lock, and under contention the OS gives the video path the CPU first.

The child is started with ``subprocess`` (not multiprocessing: the caller's ``__main__`` is never
imported again) and spoken to over its stdin and a private copy of its stdout: length-prefixed
pickles, one request and one reply at a time. Its own stdout goes to stderr, so a library that
prints cannot corrupt the channel. The child ends when the parent closes it or dies (its stdin
reaches EOF). A child that dies is an ASRError for the batch in flight and is started again at
the next call.
"""
from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import threading
from typing import Sequence

import numpy as np

from .priority import NICE
from .records import ASRError, Recognition

_HEADER = struct.Struct("<Q")


def _send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream):
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the other side closed the channel")
    n = _HEADER.unpack(head)[0]
    data = stream.read(n)
    if len(data) < n:
        raise EOFError("the other side closed the channel mid-message")
    return pickle.loads(data)


class IsolatedRecognizer:
    """``WhisperCT2(**options)`` in a child process; the same contract (asr.py)."""

    def __init__(self, options: dict, *, start_timeout_s: float = 120.0):
        self.options = dict(options)
        self.start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        info = self._start()
        self.name = f"{info['name']} (own process)"
        self.max_batch, self.multilingual, self.packs = info["max_batch"], info["multilingual"], info["packs"]

    def _start(self) -> dict:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [_package_root(), os.environ.get("PYTHONPATH")]
                                                          if p))
        self._proc = subprocess.Popen([sys.executable, "-m", "vam_engine.audio.isolated"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=None, env=env)
        _send(self._proc.stdin, self.options)
        ready, _, _ = select.select([self._proc.stdout], [], [], self.start_timeout_s)
        if not ready:  # a model that hangs while loading must not hold its first caller forever
            self.close()
            raise ASRError(f"the ASR process did not start within {self.start_timeout_s:g} s")
        reply = self._reply()
        if isinstance(reply, Exception):
            self.close()
            raise reply
        return reply

    def _reply(self):
        try:
            return _receive(self._proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError) as e:
            code = self._proc.poll()
            raise ASRError(f"the ASR process ended ({'exit code ' + str(code) if code is not None else e})") from None

    def recognize(self, pieces: Sequence[np.ndarray], language: str | None) -> list[Recognition]:
        pieces = [np.ascontiguousarray(p, np.float32).reshape(-1) for p in pieces]
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()  # died since the last call: a new one
            try:
                _send(self._proc.stdin, (pieces, language))
            except (BrokenPipeError, OSError) as e:
                raise ASRError(f"the ASR process cannot be reached: {e}") from None
            reply = self._reply()
        if isinstance(reply, Exception):
            raise reply
        return reply

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()  # EOF: the child returns
            proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait(10)
        finally:
            if proc.stdout is not None:
                proc.stdout.close()


def _package_root() -> str:
    """The directory holding the vam_engine package (the child imports the same copy)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _serve() -> None:
    """The child: take the channel's stdout, send stdout's prints to stderr, lower its priority,
    build the body, then answer requests until stdin ends."""
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    requests = sys.stdin.buffer
    try:
        os.nice(NICE)
    except OSError:
        pass
    options = _receive(requests)
    try:
        from .whisper_ct2 import WhisperCT2

        body = WhisperCT2(**options)
    except Exception as e:  # noqa: BLE001 - sent back: the parent raises it
        _send(channel, e if isinstance(e, ASRError) else ASRError(f"{type(e).__name__}: {e}"))
        return
    _send(channel, {"name": body.name, "max_batch": body.max_batch, "multilingual": body.multilingual,
                    "packs": body.packs})
    while True:
        try:
            pieces, language = _receive(requests)
        except EOFError:
            break
        try:
            _send(channel, body.recognize(pieces, language))
        except Exception as e:  # noqa: BLE001 - the body's failure goes back as its error
            _send(channel, e if isinstance(e, ASRError) else ASRError(f"{type(e).__name__}: {e}"))
    body.close()


if __name__ == "__main__":
    _serve()
