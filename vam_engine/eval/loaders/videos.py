"""Finding each stream's videos under ``--videos``: the questions of a stream whose video is
missing are removed and reported (one problem per stream, naming how many questions it takes
with it). MM-Lifelong's stream is every video of the folder in name order, laid end to end on
one axis; where the records say a video starts elsewhere, that is reported."""
from __future__ import annotations

import re
from pathlib import Path

from ..records import KEPT, SKIPPED, EvalVideo, LoadedSuite, RecordProblem, Segment

VIDEO_EXTS = (".mp4", ".mkv", ".webm", ".avi", ".mov", ".ts")
OFFSET_TOLERANCE_S = 1.0


def resolve_video(name: str, videos_dir) -> str | None:
    """A record's video as a file: the path itself, DIR/name, DIR/base name, or either plus a
    video extension."""
    cands = [Path(name)]
    if videos_dir is not None:
        d = Path(videos_dir)
        cands += [d / name, d / Path(name).name] + [d / (name + e) for e in VIDEO_EXTS]
    for c in cands:
        if c.is_file():
            return str(c)
    return None


def attach_videos(suite: LoadedSuite, videos_dir, records_path: str = "") -> None:
    """Fill ``suite.videos`` for the streams that have questions."""
    if suite.benchmark == "mmlifelong":
        _attach_lifelong(suite, videos_dir, records_path)
        return
    missing: dict = {}
    for q in suite.questions:
        if q.video in suite.videos or q.video in missing:
            continue
        name = suite.streams.get(q.video, (q.video,))[0]
        p = resolve_video(name, videos_dir)
        if p is not None:
            suite.videos[q.video] = EvalVideo(q.video, (Segment(p, 0.0),))
        else:
            missing[q.video] = (name, q.record)
    _drop(suite, missing, videos_dir, records_path)


def _drop(suite: LoadedSuite, missing: dict, videos_dir, records_path: str) -> None:
    if not missing:
        return
    counts: dict = {}
    kept = []
    for q in suite.questions:
        if q.video in missing:
            counts[q.video] = counts.get(q.video, 0) + 1
        else:
            kept.append(q)
    suite.questions = kept
    for v, (name, record) in missing.items():
        suite.problems.append(RecordProblem(records_path, record, "video", f"video {name!r} not found (under "
                                            f"{videos_dir}); its stream's {counts[v]} question(s) skipped", SKIPPED))


def _natural(p: Path):
    return [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", p.stem)]


def _attach_lifelong(suite: LoadedSuite, videos_dir, records_path: str) -> None:
    from ..frames import video_duration

    folder = Path(videos_dir) if videos_dir is not None else None
    files = sorted((p for p in folder.iterdir() if p.suffix.lower() in VIDEO_EXTS), key=_natural) \
        if folder is not None and folder.is_dir() else []
    streams = {q.video for q in suite.questions}
    if not files:
        _drop(suite, {s: (f"{s} (the videos of {videos_dir})", next(q.record for q in suite.questions
                                                                        if q.video == s)) for s in streams},
              videos_dir, records_path)
        return
    segs, at = [], 0.0
    for p in files:
        segs.append(Segment(str(p), at))
        at += video_duration(p)
    placed = {Path(s.path).stem: s.offset_s for s in segs}
    for vid, off in sorted(suite.offsets.items()):
        if vid not in placed:
            suite.problems.append(RecordProblem(records_path, "", "clue_interval.video_id", f"video {vid!r} named by "
                                                f"the clue intervals is not in {videos_dir}", KEPT))
        elif abs(placed[vid] - off) > OFFSET_TOLERANCE_S:
            suite.problems.append(RecordProblem(records_path, "", "total_intervals", f"the records place video "
                                                f"{vid!r} at {off:g} s, the folder's videos end to end at "
                                                f"{placed[vid]:g} s: Ref@300 compares on the records' axis", KEPT))
    for s in streams:
        suite.videos[s] = EvalVideo(s, tuple(segs))
