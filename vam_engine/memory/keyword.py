"""Search's full-text lists and what perception adds to evidence (memory/search.py fuses them).

Sources found by their words in the store's full-text index (memory/fulltext.py, bm25):

- "ocr": spans of text shown on screen (memory/sightings.py), found by the words read;
- "object": tracks of detected things, found by their label, colour names and the strings read
  on them ("red car", "person", "K 482");
- "event" and "summary": event and summary documents, also found by their vectors: a document
  found both ways counts once in the fusion, with both ranks summed;
- "speech" has its own list in search.py (it backfills cosines from the speech vectors).

A full-text hit has no cosine: its ``similarity`` and ``relevance`` are None unless a vector
list found it too (the agent keeps hits without a relevance: nothing to cut them against).

``labels`` (a search's filter on detected classes): frames keep the moments with a detection of
one of the labels, events the events holding such a moment, objects the tracks of those labels;
other hits (summaries, speech, text spans) keep those whose camera shows such a detection
during their interval.

Evidence of "ocr" and "object" hits, and of frames, carries the boxes on the cited frames
(``Evidence.boxes``): the lines of the span's text, the thing's detections, a frame's detections.
"""
from __future__ import annotations

import numpy as np

from ..numerics import spread_evenly
from .db import placeholders, select_in
from .fulltext import phrases as fulltext_phrases
from .records import BoxRef, Evidence, last_pose

OCR, OBJECT = "ocr", "object"
WORD_KINDS = (OCR, OBJECT, "event", "summary")  # full-text lists fused by search (speech: its own)
HIT_FRAMES = 4  # moments cited with a span of text or a thing, spread over it


def word_lists(store, text: str, kinds, scope, fetch: int, labels) -> dict[str, list[tuple[int, tuple]]]:
    """Per kind, its documents matching ``text`` in scope (cameras, t0, t1, as_of), best first
    (at most ``fetch``), filtered by ``labels``, each as (ref id, order key): the key
    (tier, -bm25 score, start) ranks them as this list does (memory/fusion.py merges shards'
    lists by it). One full-text query for every kind: quoted parts of the text are phrases that
    must occur; otherwise documents holding every word rank first (tier 0: a cheap, selective
    query), and when those are fewer than ``fetch``, documents holding any word follow (tier 1:
    ranking many weak matches costs more)."""
    cameras, t0, t1, as_of = scope
    kinds = list(kinds)
    if not kinds:
        return {}
    limit = fetch * len(kinds) * (4 if labels else 1)
    search = lambda mode: store.fulltext.search(text, mode=mode, kinds=kinds, cameras=cameras, t0=t0,  # noqa: E731
                                                t1=t1, as_of=as_of, limit=limit)
    phrased = bool(fulltext_phrases(text))
    hits = [(0, h) for h in (search(None) if phrased else search("all"))]
    if not phrased and len(hits) < fetch:
        seen = {(h.kind, h.ref_id) for _, h in hits}
        hits += [(1, h) for h in search("any") if (h.kind, h.ref_id) not in seen]
    out: dict[str, list] = {k: [] for k in kinds}
    for tier, h in hits:
        out[h.kind].append((tier, h))
    return {k: [(h.ref_id, (tier, -h.score, h.t_start)) for tier, h in _label_filter(store, k, v, labels)][:fetch]
            for k, v in out.items()}


def _label_filter(store, kind: str, hits, labels) -> list:
    """The (tier, hit) pairs of ``hits`` whose documents show one of ``labels``."""
    if not labels:
        return hits
    if kind == OBJECT:
        ids = [h.ref_id for _, h in hits]
        keep = {r[0] for r in select_in(store.db.conn(), f"SELECT track_id FROM tracks WHERE label IN "
                                                         f"({placeholders(labels)}) AND track_id IN ({{ids}})",
                                        ids, *labels)}
        return [(t, h) for t, h in hits if h.ref_id in keep]
    return [(t, h) for t, h in hits if shows_label(store, h.camera_id, h.t_start, h.t_end, labels)]


def label_ids(store, space: str, labels, allowed: np.ndarray | None) -> np.ndarray | None:
    """The ids of a vector space a ``labels`` filter lets through (intersected with
    ``allowed``); ``allowed`` unchanged for spaces filtered after the search."""
    if not labels:
        return allowed
    conn = store.db.conn()
    where = f"label IN ({placeholders(labels)})"
    if space == "frame":
        sql = f"SELECT DISTINCT moment_id FROM detections WHERE {where}"
    elif space in ("event", "event_doc"):
        sql = (f"SELECT DISTINCT m.event_id FROM detections d JOIN moments m ON m.moment_id = d.moment_id "
               f"WHERE d.{where} AND m.event_id IS NOT NULL")
    else:
        return allowed
    ids = np.fromiter((r[0] for r in conn.execute(sql, list(labels))), np.int64)
    return ids if allowed is None else np.intersect1d(allowed, ids)


def shows_label(store, camera_id: str, t0: float, t1: float, labels) -> bool:
    """Whether a detection of one of ``labels`` lies on ``camera_id`` in [t0, t1] (every camera
    for '*')."""
    cam_sql, args = ("", []) if camera_id == "*" else (" AND camera_id = ?", [camera_id])
    return store.db.conn().execute(
        f"SELECT 1 FROM detections WHERE label IN ({placeholders(labels)}){cam_sql} AND t >= ? AND t <= ? LIMIT 1",
        [*labels, *args, float(t0), float(t1)]).fetchone() is not None


def post_filter(store, evidence: list[Evidence], labels) -> list[Evidence]:
    """Hits of spaces ``label_ids`` does not prefilter, kept when they show a label."""
    if not labels:
        return evidence
    return [ev for ev in evidence if ev.source in ("frame", "event", OBJECT)
            or shows_label(store, ev.camera_id, ev.t_start, ev.t_end, labels)]


# -- evidence ----------------------------------------------------------------------------------
def _spread(items: list, k: int = HIT_FRAMES) -> list:
    return [items[i] for i in spread_evenly(len(items), k)]


def span_evidence(store, span_ids, scored: dict) -> dict[int, Evidence]:
    """Evidence per text span: its interval, moments during it, and the boxes of its lines."""
    conn = store.db.conn()
    out = {}
    for sid, cam, text, norm, a, b in select_in(conn, "SELECT span_id, camera_id, text, norm, t_start, t_end FROM "
                                                      "text_spans WHERE span_id IN ({ids})", span_ids):
        ms = _spread(store.moments.on_axis(cam, a, b + 1e-6))
        lines = store.entities.ocr_lines([m.moment_id for m in ms])
        boxes = tuple(BoxRef(m.moment_id, ln.box, ln.text, ln.confidence, "text", ln.frame_size) for m in ms
                      for ln in lines.get(m.moment_id, ()) if " ".join(ln.text.split()).casefold() == norm)
        score, cos, rel = scored[sid]
        out[sid] = Evidence(cam, a, b, tuple(m.moment_id for m in ms), tuple(m.frame_path for m in ms), score, OCR,
                            text, cos, rel, last_pose(ms), boxes)
    return out


def object_evidence(store, track_ids, scored: dict) -> dict[int, Evidence]:
    """Evidence per track: its interval, the frames it was detected on (spread), its boxes."""
    conn = store.db.conn()
    out = {}
    for tid, cam, a, b in select_in(conn, "SELECT track_id, camera_id, first_t, last_t FROM tracks WHERE track_id "
                                          "IN ({ids})", track_ids):
        dets = _spread(conn.execute("SELECT moment_id, x0, y0, x1, y1, label, score, w, h FROM detections WHERE "
                                    "track_id=? AND t >= ? AND t <= ? ORDER BY t", (tid, a, b)).fetchall())
        moments = store.moments.by_id([d[0] for d in dets])
        dets = [d for d in dets if d[0] in moments]
        score, cos, rel = scored[tid]
        out[tid] = Evidence(cam, a, b, tuple(d[0] for d in dets), tuple(moments[d[0]].frame_path for d in dets),
                            score, OBJECT, store.fulltext.text(OBJECT, tid), cos, rel, last_pose(moments.values()),
                            tuple(BoxRef(d[0], tuple(d[1:5]), d[5], d[6], "object", (d[7], d[8])) for d in dets))
    return out


def frame_boxes(store, moment_ids) -> dict[int, tuple[BoxRef, ...]]:
    """The detections on frames, as boxes."""
    got = store.entities.detections(moment_ids)
    return {mid: tuple(BoxRef(mid, d.box, d.label, d.score, "object", d.frame_size) for d in ds)
            for mid, ds in got.items()}
