"""Chinese and Japanese text as recognisers give it (signs read by OCR, sentences transcribed
by speech recognition), written into a store through the engine's own write paths: OCR lines
through a perception stage and an ingest transaction (spans of text: full-text kind "ocr"),
transcript segments through the store's transcripts (kind "speech").

Also what wrote tests/data/store_v11_cjk.tar.gz with the release of schema 11 (``python -m
support.cjk DEST`` from tests/, that release's vam_engine on the path).
"""
from __future__ import annotations

import numpy as np

from vam_engine.audio import TranscriptSegment
from vam_engine.gate.records import GateRecord
from vam_engine.memory.commit import CommitBatch
from vam_engine.memory.records import PendingMoment
from vam_engine.memory.sightings import PerceptionCommit
from vam_engine.perception import OcrLine, PerceptionFrame, PerceptionStage, TextChangeGate

# what the signs show on each frame (one a second from SIGNS_T0): strings as OCR reads them,
# full-width digits and letters included (East Asian signs often use them)
SIGN_FRAMES = (("出口在左边", "Exit 出口 Ｂ２"),
               ("出口在左边", "禁止吸烟"),
               ("禁止吸烟",),
               ("東京駅 ３番線",))
SIGNS_T0 = 30.0
# (t_start, t_end, text, language): what was said
SAID = ((40.0, 42.5, "東京駅はどこですか", "ja"),
        (44.0, 46.0, "请问洗手间在哪里？", "zh"),
        (47.0, 49.5, "电梯在大厅的右边。", "zh"),
        (50.0, 52.0, "The exit is on the left, next to the lift.", "en"))


class ScriptedOcr:
    """Reads, on each frame, the strings of SIGN_FRAMES its first pixel's blue value names."""

    name = "scripted-ocr"

    def read(self, frames):
        return [[OcrLine((10.0, 4.0 + 20 * i, 60.0, 18.0 + 20 * i), s, 0.97)
                 for i, s in enumerate(SIGN_FRAMES[int(f[0, 0, 2])])] for f in frames]


class EveryFrame(TextChangeGate):
    """Reads every frame whole (the scripted reader knows frames, not parts of them)."""

    def should_read(self, camera_id, sig, ignore=()):
        return True

    def region(self, camera_id, sig, ignore=()):
        return None

    def regions(self, camera_id, sig, ignore=()):
        return None


def commit_signs(store, camera: str) -> None:
    """The signs' frames as moments of ``camera`` (a source of their own), with what OCR read."""
    source_id = store.sources.open(camera, "signs.mp4", "signs", "fps=1").source_id
    frames = []
    for i in range(len(SIGN_FRAMES)):
        f = np.full((64, 64, 3), 90 + 30 * i, np.uint8)
        f[0, 0, 2] = i
        frames.append((SIGNS_T0 + i, f))
    stage = PerceptionStage(ocr=ScriptedOcr(), text_gate=EveryFrame())
    got = stage.process([PerceptionFrame(camera, t, f, key=(source_id, t)) for t, f in frames], snapshot=True)
    batch = CommitBatch()
    for t, f in frames:
        ref = store.frames.ref(camera, source_id, t)
        store.frames.write(ref, f, 80)
        batch.moments.append(PendingMoment(camera, source_id, t, None, None, ref, 64, 64,
                                           GateRecord(100.0, None, None, None, None)))
    batch.perception = PerceptionCommit(list(got.frames), got.state, ocr=True)
    store.commit(batch)


def segments(camera: str) -> list[TranscriptSegment]:
    return [TranscriptSegment(camera, a, b, text, lang, 0.9) for a, b, text, lang in SAID]


def write_store(root) -> None:
    """A store holding the signs and the sentences on camera "hall"."""
    from vam_engine.memory.store import Store

    store = Store(root)
    try:
        commit_signs(store, "hall")
        store.transcripts.append(segments("hall"))
    finally:
        store.close()


if __name__ == "__main__":
    import sys

    write_store(sys.argv[1])
