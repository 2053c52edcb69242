"""The audio path's threads run at a lower CPU priority than the video path's: under contention
(a core shared with decoding, the gates and the embedder) the video goes first and the audio
path absorbs the delay (ASR that falls behind drops its oldest speech, counted; video frames are
never dropped for it)."""
from __future__ import annotations

import os
import threading

NICE = 10  # added to the thread's nice value: about a tenth of a normal thread's CPU share under contention


def lower_thread_priority() -> bool:
    """Raise the calling thread's nice value by NICE (Linux: per thread); False where the OS
    cannot (the thread then runs at its normal priority)."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + NICE))
        return True
    except (AttributeError, OSError):
        return False
