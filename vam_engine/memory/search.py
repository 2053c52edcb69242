"""Search over the three vector spaces, fused by rank.

Frames and events are searched in the image embedder's space (by an image, or by text through
the embedder's text tower); event documents and summary documents in the text embedder's space.
Cosines from different spaces are not comparable, so each (query, space) list contributes by
rank only: reciprocal rank fusion, score = sum over lists of 1 / (RRF_K + rank). An event found
both by its frames and by its document counts once, with both ranks summed.
Filters (cameras, time range, ``as_of``) are resolved in SQLite into the ids a space may return,
so a query never sees evidence outside them (``as_of``: nothing that ends after it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from pathlib import Path

import numpy as np

from ..errors import VamError
from .records import Evidence

if TYPE_CHECKING:
    from .store import Store

RRF_K = 60
SOURCES = ("frame", "event", "summary")


@dataclass
class SearchResult:
    evidence: list[Evidence]
    notes: list[str] = field(default_factory=list)  # e.g. which sources a query could not reach


def _load_image(image) -> np.ndarray:
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


def search(store: "Store", vectors, embedder, text_embedder, *, text=None, image=None, top_k=10, time_range=None,
           cameras=None, sources=SOURCES, as_of=None) -> SearchResult:
    if text is None and image is None:
        raise VamError("search needs text=... or image=...")
    if not 1 <= int(top_k) <= 1000:
        raise VamError(f"top_k must be in 1..1000, got {top_k}")
    unknown = set(sources) - set(SOURCES)
    if unknown:
        raise VamError(f"unknown search sources {sorted(unknown)}; use {list(SOURCES)}")
    t0, t1 = time_range if time_range is not None else (None, None)
    notes: list[str] = []
    queries: list[tuple[str, np.ndarray]] = []  # (space, query vector)
    image_spaces = [s for s in ("frame", "event") if s in sources]
    if image is not None:
        q = embedder.embed_images(_load_image(image)[None])[0]
        queries += [(s, q) for s in image_spaces]
    if text is not None:
        if image_spaces:
            if embedder.has_text:
                q = embedder.embed_texts([text])[0]
                queries += [(s, q) for s in image_spaces]
            else:
                notes.append(f"the image embedder ({embedder.name}) has no text side: text searched documents only")
        doc_spaces = [s for s, src in (("event_doc", "event"), ("summary", "summary")) if src in sources]
        if doc_spaces:
            if text_embedder is None:
                notes.append("no text embedder is configured: documents were not searched")
            else:
                q = text_embedder.embed_texts([text])[0]
                queries += [(s, q) for s in doc_spaces]
    fused: dict[tuple[str, int], float] = {}
    cosine: dict[tuple[str, int], float] = {}
    fetch = max(top_k * 3, top_k + 10)
    for space, q in queries:
        allowed = store.vector_table.allowed_ids(space, cameras, t0, t1, as_of)
        sims, ids = vectors.search(space, q, fetch, allowed)
        kind = "event" if space == "event_doc" else space
        for rank, (sim, vid) in enumerate(zip(sims.tolist(), ids.tolist())):
            fused[(kind, vid)] = fused.get((kind, vid), 0.0) + 1.0 / (RRF_K + rank + 1)
            cosine[(kind, vid)] = max(cosine.get((kind, vid), -1.0), float(sim))
    best = sorted(fused.items(), key=lambda kv: -kv[1])[:top_k]
    return SearchResult(_evidence(store, best, cosine), notes)


def _evidence(store, best, cosine) -> list[Evidence]:
    moments = store.moments.by_id([vid for (space, vid), _ in best if space == "frame"])
    events = store.events.by_id([vid for (space, vid), _ in best if space == "event"])
    summaries = store.summaries.by_id([vid for (space, vid), _ in best if space == "summary"])
    key_moments = store.moments.by_id([k for e in events.values() for k in e.keyframes] +
                                      [k for s in summaries.values() for k in s.moment_ids])
    out = []
    for (space, vid), score in best:
        if space == "frame" and vid in moments:
            m = moments[vid]
            out.append(Evidence(m.camera_id, m.t, m.t, (vid,), (m.frame_path,), score, "frame",
                                similarity=cosine[(space, vid)]))
        elif space == "event" and vid in events:
            e = events[vid]
            kms = [key_moments[k] for k in e.keyframes if k in key_moments]
            out.append(Evidence(e.camera_id, e.t_start, e.t_end, tuple(m.moment_id for m in kms),
                                tuple(m.frame_path for m in kms), score, "event", e.doc, cosine[(space, vid)]))
        elif space == "summary" and vid in summaries:
            sm = summaries[vid]
            kms = [key_moments[k] for k in sm.moment_ids if k in key_moments]
            out.append(Evidence(sm.camera_id or "*", sm.t0, sm.t1, tuple(m.moment_id for m in kms),
                                tuple(m.frame_path for m in kms), score, "summary", sm.text, cosine[(space, vid)]))
    return out
