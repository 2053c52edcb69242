"""Search over the vector spaces and the full-text index, fused by rank, with a relevance
calibrated per space.

Frames and events are searched in the image embedder's space (by an image, or by text through
the embedder's text tower); event documents and summary documents in the text embedder's space.
Cosines from different spaces are not comparable, so each (query, space) list contributes by
rank only: reciprocal rank fusion, score = sum over lists of 1 / (RRF_K + rank). An event found
both by its frames and by its document counts once, with both ranks summed.
Filters (cameras, time range, ``as_of``) are resolved in SQLite into the ids a space may return,
so a query never sees evidence outside them (``as_of``: nothing that ends after it).

Words (memory/keyword.py): a text query also runs in the full-text index (bm25), one ranked
list per kind fused like the vector lists: "ocr" (text shown on screen), "object" (detected
things by label, colour names and text read on them), and event and summary documents (also
found by their vectors: found both ways, a document counts once with both ranks summed).
``labels`` keeps only hits showing a detected thing of those classes.

Speech (source "speech", asked for explicitly: not in the default ``SOURCES``). Transcript
segments are found two ways, each one ranked list in the fusion: by meaning, in the "speech"
space of the text embedder (as event documents are), and by words, in the full-text index
(memory/fulltext.py: quoted parts of the query are phrases that must occur; else any of its
words, ranked by bm25). A segment found both ways counts once with both ranks summed. A
segment found by words only is still given its cosine and relevance from its vector, so one
threshold cuts speech hits as it cuts the others. Evidence of a segment carries its text and
the camera's moments during it (at most ``SPEECH_FRAMES``).

Relevance (``Evidence.relevance``, what a retrieval threshold cuts on). A raw cosine means
different things in different spaces (CLIP text-to-image cosines sit near 0.2-0.35, sentence
embeddings of related documents near 0.6-0.8), so each hit's cosine c is compared with the
query's background in the space that found it: the query's cosines against a random sample of
up to ``BACKGROUND_SAMPLE`` of the vectors the query may see there (its cameras and ``as_of``;
not its time range, which picks hits without changing what "typical" means). With the sample's
mean m and standard deviation s (ddof 1), relevance = Phi((c - m) / s), the normal CDF: the share
of the space's vectors the hit is estimated to outscore. 0.5 is a typical vector, 0.65 is about
0.39 s above typical (the seed's default threshold), 0.84 one s, 0.98 two. An evidence found in
several spaces keeps the highest. The rule is the same in every space, so one threshold means
the same thing everywhere. Being relative, it cannot tell "everything matches" from "nothing
does": the best of a few unrelated documents still stands out from the rest, and hits of a
space whose every vector shows the queried thing sit near 0.5.
- Fewer than ``MIN_BACKGROUND`` (2) vectors in scope: no spread to compare with, relevance None
  (the agent keeps such a hit: there is nothing to cut it against).
- A scope no larger than the sample is its own background, hits included, so z <= (n-1)/sqrt(n)
  with n vectors in scope: the best of 2 is at most 0.76, of 4 at most 0.93.
- A spread under ``SPREAD_FLOOR`` (duplicates, a space of one repeated view) is taken as that
  floor: a hit at the background's level is 0.5, one clearly off it is near 0 or 1.
- Cost: the unfiltered sample's vectors are cached per space (redrawn when the space's size
  changed by ``REFRESH_GROWTH``, on any change while it is smaller than the sample, and after
  ``REFRESH_AGE_S`` once it changed at all); a query then costs one (sample x dim) product per
  space. A scoped query (cameras, ``as_of``) scores a fresh sample of its scope's ids through the
  space's exact path. Either is well under a millisecond per space at 512-d.
"""
from __future__ import annotations

import math
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import VamError, VectorError
from . import keyword, places
from .fusion import MIN_BACKGROUND, RRF_K, SPREAD_FLOOR, FusedHit, RankedList, fuse, spread_of  # noqa: F401
from .records import Evidence, last_pose

if TYPE_CHECKING:
    from .store import Store
    from ..vectors import VectorSpace

VECTOR_SOURCES = ("frame", "event", "summary")  # found in the vector spaces (and, for documents, by words)
SOURCES = VECTOR_SOURCES + ("ocr", "object")  # the default
SPEECH = "speech"
KNOWN_SOURCES = SOURCES + (SPEECH,)
SPEECH_FRAMES = 4  # moments cited with a speech hit, spread over it

# relevance calibration (see the module doc)
BACKGROUND_SAMPLE = 256  # vectors a query's background is estimated from: the mean and spread to ~5%
REFRESH_GROWTH = 0.1     # redraw the cached sample when the space's size changed by this fraction
REFRESH_AGE_S = 60.0     # ... or when it is this old and the space changed at all (a retention steady state)


@dataclass
class SearchResult:
    evidence: list[Evidence]
    notes: list[str] = field(default_factory=list)  # e.g. which sources a query could not reach


def load_query_image(image) -> np.ndarray:
    if isinstance(image, (str, Path)):
        from PIL import Image, UnidentifiedImageError

        try:
            return np.asarray(Image.open(image).convert("RGB"))
        except (OSError, UnidentifiedImageError) as e:
            raise VamError(f"{image}: cannot read the query image ({e})") from None
    arr = np.asarray(image)
    if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype != np.uint8:
        raise VamError(f"query image must be H x W x 3 uint8 or a file path, got {arr.dtype} {arr.shape}")
    return arr


def space_queries(embedder, text_embedder, text, image, sources) -> tuple[list[tuple[str, np.ndarray]], list[str]]:
    """The (space, query vector) pairs a query runs, in the order fusion ranks them, and notes on
    what could not be searched (the cluster's router builds the same list: cluster/fanout.py)."""
    notes: list[str] = []
    queries: list[tuple[str, np.ndarray]] = []
    image_spaces = [s for s in ("frame", "event") if s in sources]
    if image is not None:
        q = embedder.embed_images(load_query_image(image)[None])[0]
        queries += [(s, q) for s in image_spaces]
    if text is not None:
        if image_spaces:
            if embedder.has_text:
                q = embedder.embed_texts([text])[0]
                queries += [(s, q) for s in image_spaces]
            else:
                notes.append(f"the image embedder ({embedder.name}) has no text side: text searched documents only")
        doc_spaces = [s for s, src in (("event_doc", "event"), ("summary", "summary"), (SPEECH, SPEECH))
                      if src in sources]
        if doc_spaces:
            if text_embedder is None:
                notes.append("no text embedder is configured: documents were searched by their words only")
            else:
                q = text_embedder.embed_texts([text])[0]
                queries += [(s, q) for s in doc_spaces]
    return queries, notes


def check_search(text, image, top_k, sources) -> None:
    """A query's arguments (the cluster's router checks them too, before fanning out)."""
    if text is None and image is None:
        raise VamError("search needs text=... or image=...")
    if not 1 <= int(top_k) <= 1000:
        raise VamError(f"top_k must be in 1..1000, got {top_k}")
    unknown = set(sources) - set(KNOWN_SOURCES)
    if unknown:
        raise VamError(f"unknown search sources {sorted(unknown)}; use {list(KNOWN_SOURCES)}")


def search(store: Store, vectors, embedder, text_embedder, *, text=None, image=None, top_k=10, time_range=None,
           cameras=None, sources=SOURCES, as_of=None, place=None, labels=None) -> SearchResult:
    """``place``: only hits whose moments were taken there (memory/places.py), filtered with
    the other filters before ranking; ``labels``: only hits showing a detected thing of those
    classes (memory/keyword.py). The ranked lists (``search_lists``), fused by the rank rule
    (memory/fusion.py), as evidence (``search_evidence``): a cluster's router runs the same three
    steps over its shards."""
    labels = check_labels(labels)
    lists, notes = search_lists(store, vectors, embedder, text_embedder, text=text, image=image, top_k=top_k,
                                time_range=time_range, cameras=cameras, sources=sources, as_of=as_of, place=place,
                                labels=labels)
    best = fuse({"": lists}, fetch_size(top_k), keep_size(top_k, labels))
    return SearchResult(search_evidence(store, best, labels)[:top_k], notes)


def fetch_size(top_k: int) -> int:
    """How long each ranked list is."""
    return max(int(top_k) * 3, int(top_k) + 10)


def keep_size(top_k: int, labels) -> int:
    """How many fused hits become evidence: with labels, hits of the spaces not filtered before
    the search are checked afterwards (``search_evidence``), so take enough."""
    return max(fetch_size(top_k), int(top_k) * 4) if labels else int(top_k)


def search_lists(store: Store, vectors, embedder, text_embedder, *, text=None, image=None, top_k=10,
                 time_range=None, cameras=None, sources=SOURCES, as_of=None, place=None,
                 labels=None) -> tuple[list[RankedList], list[str]]:
    """A search's ranked lists on this store, in the fixed order ``fuse`` pairs them by (every
    store with the same embedders builds the same sequence), and notes on what it could not
    search."""
    check_search(text, image, top_k, sources)
    labels = check_labels(labels)
    t0, t1 = time_range if time_range is not None else (None, None)
    queries, notes = space_queries(embedder, text_embedder, text, image, sources)
    fetch = fetch_size(top_k)
    lists: list[RankedList] = []
    for space, q in queries:
        allowed = keyword.label_ids(store, space, labels,
                                    store.vector_table.allowed_ids(space, cameras, t0, t1, as_of))
        if place is not None:
            allowed = _in_place(store, space, place, allowed)
        sims, ids = vectors.search(space, q, fetch, allowed)
        # the background is what the query may see (cameras, as_of), whatever its time range
        # (and whatever its place)
        whole = t0 is None and t1 is None and place is None
        scope = allowed if whole else store.vector_table.allowed_ids(space, cameras, None, None, as_of)
        sims = [float(x) for x in sims.tolist()]
        # even with no hit here: over shards the pooled background holds every shard's sample
        bg = background_cosines(space_of(vectors, space), q, scope)
        lists.append(RankedList("event" if space == "event_doc" else space, tuple(map(int, ids.tolist())),
                                tuple((-c,) for c in sims), tuple(sims), bg))
    if text is not None:
        words = keyword.word_lists(store, text, [k for k in keyword.WORD_KINDS if k in sources],
                                   (cameras, t0, t1, as_of), fetch, labels)
        for kind, refs in words.items():
            if place is not None:
                there = set(_in_place(store, kind, place, None).tolist())
                refs = [r for r in refs if r[0] in there]
            lists.append(RankedList(kind, tuple(r for r, _ in refs), tuple(k for _, k in refs), by_vector=False))
    if text is not None and SPEECH in sources:
        speech_q = next((q for space, q in queries if space == SPEECH), None)
        lists.append(_speech_words(store, vectors, text, speech_q, (cameras, t0, t1, as_of, place), fetch))
    return lists, notes


def search_evidence(store: Store, best: list[FusedHit], labels=None) -> list[Evidence]:
    """The evidence of fused hits of this store, in their order; with ``labels``, hits of the
    spaces not filtered before the search are kept when they show one of them."""
    return [ev for _, ev in keyed_evidence(store, best, labels)]


def keyed_evidence(store: Store, best: list[FusedHit], labels=None) -> list[tuple[tuple[str, int], Evidence]]:
    """``search_evidence`` with each hit's (kind, id) beside it (a shard's answer to its router)."""
    keyed = [((h.kind, h.ref), h.score) for h in best]
    cosine = {(h.kind, h.ref): h.cosine for h in best if h.cosine is not None}
    zscore = {(h.kind, h.ref): h.z for h in best if h.z is not None}
    labels = check_labels(labels)
    pairs = _evidence(store, keyed, cosine, zscore)
    if not labels:
        return pairs
    kept = {id(ev) for ev in keyword.post_filter(store, [ev for _, ev in pairs], labels)}
    return [(key, ev) for key, ev in pairs if id(ev) in kept]


def check_labels(labels) -> list[str] | None:
    """A search's ``labels`` filter: class names (None or empty: no filter)."""
    if labels is None:
        return None
    labels = [labels] if isinstance(labels, str) else list(labels)
    if not all(isinstance(x, str) and x.strip() for x in labels) or len(labels) > 100:
        raise VamError(f"labels must be up to 100 non-empty class names, got {labels!r}"[:300])
    return [x.strip() for x in labels] or None


def _speech_words(store, vectors, text, q, scope, fetch) -> RankedList:
    """The full-text list of transcript segments, each with its own cosine (NaN: no vector) and
    the speech space's background in scope, so a segment no speech vector list ranked is still
    calibrated (module doc)."""
    cameras, t0, t1, as_of, place = scope
    hits = store.fulltext.search(text, kinds=(SPEECH,), cameras=cameras, t0=t0, t1=t1, as_of=as_of, limit=fetch)
    if place is not None:
        there = set(_in_place(store, SPEECH, place, None).tolist())
        hits = [h for h in hits if h.ref_id in there]
    ids = tuple(h.ref_id for h in hits)
    order = tuple((0, -h.score, h.t_start) for h in hits)
    if q is None or not ids:
        return RankedList(SPEECH, ids, order, by_vector=False)
    sims, got = vectors.search(SPEECH, q, len(ids), np.array(ids, np.int64))
    own = dict(zip(got.tolist(), sims.tolist()))
    background = store.vector_table.allowed_ids(SPEECH, cameras, None, None, as_of)
    return RankedList(SPEECH, ids, order, tuple(float(own.get(i, math.nan)) for i in ids),
                      background_cosines(space_of(vectors, SPEECH), q, background), by_vector=False)


def _in_place(store, space: str, place, allowed):
    """``allowed`` (None: every id) narrowed to the ids of ``space`` taken in ``place``."""
    there = places.allowed_ids(store.db.conn(), space, place)
    return there if allowed is None else np.intersect1d(allowed, there, assume_unique=True)


# -- relevance calibration ---------------------------------------------------------------------
@dataclass(frozen=True)
class _Sample:
    size: int          # the space's size when drawn
    rows: np.ndarray   # (m, dim) float32, normalized: the space's own copies
    drawn_at: float    # time.monotonic()


_samples: weakref.WeakKeyDictionary[VectorSpace, _Sample] = weakref.WeakKeyDictionary()
_samples_lock = threading.Lock()


def space_of(vectors, name: str):
    """The VectorSpace behind a name of the store's vector memory, or None (also for a stand-in
    vector memory without spaces)."""
    get = getattr(vectors, "space", None)
    return None if get is None else get(name)


def relevance(z: float | None) -> float | None:
    """The calibrated relevance of a background z-score: the normal CDF, in [0, 1]."""
    return None if z is None else 0.5 * math.erfc(-z / math.sqrt(2.0))


def background_cosines(space: VectorSpace | None, query: np.ndarray, scope: np.ndarray | None = None) -> np.ndarray:
    """The query's cosines (float64) with the calibration sample of ``space``: its cached whole
    space sample, or a sample of the ids in ``scope`` (absent ones ignored). Empty when nothing
    can be compared: no space, a query that cannot be normalised or is another space's."""
    if space is None:
        return np.zeros(0)
    q = np.asarray(query, np.float32).reshape(-1)
    norm = float(np.linalg.norm(q))
    if q.shape[0] != space.dim or not math.isfinite(norm) or norm == 0.0:
        return np.zeros(0)  # the search itself names a bad query; there is nothing to calibrate
    q = q / norm
    if scope is None:
        rows = whole_space_sample(space)
        if rows is None:  # one vector (or none): a cluster's pooled background may still have enough
            ids = space.ids()
            rows = space.get(ids) if len(ids) else None
        return np.zeros(0) if rows is None else (rows @ q).astype(np.float64)
    bg = _scoped_scores(space, q, scope)
    return np.zeros(0) if bg is None else bg.astype(np.float64)


def background_z(space: VectorSpace | None, query: np.ndarray, sims: np.ndarray,
                 scope: np.ndarray | None = None) -> np.ndarray | None:
    """z-scores of the cosines ``sims`` (of ``query`` against hits of ``space``) against the
    query's background there (``background_cosines``). None when fewer than MIN_BACKGROUND
    vectors are in scope."""
    stats = spread_of(background_cosines(space, query, scope))
    if stats is None:
        return None
    return (np.asarray(sims, np.float64) - stats[0]) / stats[1]


def whole_space_sample(space: VectorSpace) -> np.ndarray | None:
    n = len(space)
    if n < MIN_BACKGROUND:
        return None
    now = time.monotonic()
    with _samples_lock:
        s = _samples.get(space)
    if s is not None and s.rows.shape[1] == space.dim and not _stale(s, n, now):
        return s.rows
    for _ in range(3):  # a removal between listing the ids and reading them: list them again
        ids = space.ids()
        if len(ids) < MIN_BACKGROUND:
            return None
        if len(ids) > BACKGROUND_SAMPLE:  # seeded by the size: the same space draws the same sample
            ids = ids[np.sort(np.random.default_rng(len(ids)).choice(len(ids), BACKGROUND_SAMPLE, replace=False))]
        try:
            rows = space.get(ids)
        except VectorError:
            continue
        with _samples_lock:
            _samples[space] = _Sample(n, rows, now)
        return rows
    return None


def _stale(s: _Sample, n: int, now: float) -> bool:
    if n == s.size:
        return False  # nothing added or removed on balance (a replaced vector waits for a size change)
    small = min(n, s.size) <= BACKGROUND_SAMPLE  # the sample is the whole space
    return small or abs(n - s.size) > REFRESH_GROWTH * s.size or now - s.drawn_at > REFRESH_AGE_S


def _scoped_scores(space: VectorSpace, q: np.ndarray, scope: np.ndarray) -> np.ndarray | None:
    """The query's cosines with a sample of the scope's ids (absent ones ignored: the scope
    comes from SQLite, the index may lag it by a transaction)."""
    ids = np.asarray(scope, np.int64)
    if len(ids) > BACKGROUND_SAMPLE:
        ids = ids[np.random.default_rng(len(ids)).choice(len(ids), BACKGROUND_SAMPLE, replace=False)]
    if not len(ids):
        return None
    try:
        return space.get(ids) @ q  # a gather: a quarter of the cost of a filtered search over them
    except VectorError:  # some not in the index (yet or any more): the search path skips them
        scores, got = space.search(q[None, :], len(ids), allowed=ids)
        return scores[0][got[0] >= 0]


def _evidence(store, best, cosine, zscore) -> list[tuple[tuple[str, int], Evidence]]:
    """(key, evidence) of each hit of ``best`` still in the store, in its order."""
    moments = store.moments.by_id([vid for (space, vid), _ in best if space == "frame"])
    events = store.events.by_id([vid for (space, vid), _ in best if space == "event"])
    summaries = store.summaries.by_id([vid for (space, vid), _ in best if space == "summary"])
    said = store.transcripts.by_id([vid for (space, vid), _ in best if space == SPEECH])
    scored = {key: (score, cosine.get(key), relevance(zscore.get(key))) for key, score in best}
    perceived = {keyword.OCR: keyword.span_evidence(store, [v for (s, v), _ in best if s == keyword.OCR],
                                                    {v: scored[(s, v)] for (s, v), _ in best if s == keyword.OCR}),
                 keyword.OBJECT: keyword.object_evidence(store, [v for (s, v), _ in best if s == keyword.OBJECT],
                                                         {v: scored[(s, v)] for (s, v), _ in best
                                                          if s == keyword.OBJECT})}
    boxes = keyword.frame_boxes(store, list(moments))
    key_moments = store.moments.by_id([k for e in events.values() for k in e.keyframes] +
                                      [k for s in summaries.values() for k in s.moment_ids])
    out = []
    for (space, vid), score in best:
        if space in perceived:
            if vid in perceived[space]:
                out.append(((space, vid), perceived[space][vid]))
            continue
        if space == SPEECH and vid in said:
            seg = said[vid]
            ms = store.moments.on_axis(seg.camera_id, seg.t_start, seg.t_end + 1e-6)
            if len(ms) > SPEECH_FRAMES:  # spread over the segment
                ms = [ms[round(i * (len(ms) - 1) / (SPEECH_FRAMES - 1))] for i in range(SPEECH_FRAMES)]
            ev = Evidence(seg.camera_id, seg.t_start, seg.t_end, tuple(m.moment_id for m in ms),
                          tuple(m.frame_path for m in ms), score, SPEECH, seg.text, cosine.get((space, vid)),
                          relevance(zscore.get((space, vid))), last_pose(ms))
            out.append(((space, vid), ev))
            continue
        if space == "frame" and vid in moments:
            m = moments[vid]
            ev = Evidence(m.camera_id, m.t, m.t, (vid,), (m.frame_path,), score, "frame",
                          similarity=cosine.get((space, vid)), relevance=relevance(zscore.get((space, vid))),
                          pose=m.pose, boxes=boxes.get(vid, ()))
            out.append(((space, vid), ev))
        elif space == "event" and vid in events:
            e = events[vid]
            kms = [key_moments[k] for k in e.keyframes if k in key_moments]
            ev = Evidence(e.camera_id, e.t_start, e.t_end, tuple(m.moment_id for m in kms),
                          tuple(m.frame_path for m in kms), score, "event", e.doc, cosine.get((space, vid)),
                          relevance(zscore.get((space, vid))), last_pose(kms))
            out.append(((space, vid), ev))
        elif space == "summary" and vid in summaries:
            sm = summaries[vid]
            kms = [key_moments[k] for k in sm.moment_ids if k in key_moments]
            ev = Evidence(sm.camera_id or "*", sm.t0, sm.t1, tuple(m.moment_id for m in kms),
                          tuple(m.frame_path for m in kms), score, "summary", sm.text, cosine.get((space, vid)),
                          relevance(zscore.get((space, vid))), last_pose(kms))
            out.append(((space, vid), ev))
    return out
