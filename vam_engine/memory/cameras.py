"""Per-camera signals a question's budget ranks cameras by (reason/budget.py): how well each
camera's recent words (event and summary documents, transcripts, text read on screen, detected
things: the one full-text index) match the question, its newest alert, its newest moment and its
newest documented event. The text side of the memory only: a few indexed queries however many
cameras there are, no vector search and no model."""
from __future__ import annotations

import math

from .db import placeholders
from .fulltext import terms
from .records import CameraSignal

MAX_WORDS = 8          # of the question's words matched (one indexed query each)
DOCUMENT_CHARS = 240   # of a camera's newest event document kept for its one-line summary
# the words of a question that say nothing about what to look for (every document holds some)
STOP_WORDS = frozenset("""a an the and or of to in on at by for from with is are was were be been being has have had
do does did it its this that these those there here what which who whom whose when where why how any anyone anybody
anything someone something somebody see seen saw show shown shows camera cameras video frame frames now just ago
last first recently recent time times today did you me my we our i can could would should will please tell happen
happened happening going go went come came appear appeared right currently still ever""".split())


def camera_signals(store, text: str, cameras, *, as_of: float | None, since: float | None) -> list[CameraSignal]:
    """One ``CameraSignal`` per camera of ``cameras`` (in that order): which of ``text``'s words
    (less the STOP_WORDS) its documents ending in [since, as_of] hold (``since`` None: all
    history), each weighted by how few cameras hold it (log(1 + cameras / cameras holding it)),
    and the newest alert, moment and documented event by ``as_of``."""
    cameras = list(dict.fromkeys(cameras))
    if not cameras:
        return []
    conn = store.db.conn()
    score: dict[str, float] = {}
    count: dict[str, int] = {}
    words = [w for w in dict.fromkeys(terms(text or "")) if w not in STOP_WORDS and len(w) > 1][:MAX_WORDS]
    for w in words:
        per_camera = store.fulltext.camera_counts(w, cameras=cameras, t0=since, as_of=as_of)
        if not per_camera:
            continue
        # a word on few cameras says more about where to look than one on every camera
        weight = math.log(1.0 + len(cameras) / len(per_camera))
        for cam in per_camera:
            score[cam] = score.get(cam, 0.0) + weight
            count[cam] = count.get(cam, 0) + 1
    cut = "" if as_of is None else " AND t <= ?"
    tail = [] if as_of is None else [float(as_of)]
    alerts = dict(conn.execute(f"SELECT camera_id, MAX(t) FROM alerts WHERE camera_id IN ({placeholders(cameras)})"
                               f"{cut} GROUP BY camera_id", [*cameras, *tail]).fetchall())
    moments = dict(conn.execute(f"SELECT camera_id, MAX(t) FROM moments WHERE camera_id IN ({placeholders(cameras)})"
                                f"{cut} GROUP BY camera_id", [*cameras, *tail]).fetchall())
    ev_cut = "" if as_of is None else " AND t_end <= ?"
    docs = {}
    for cam, t_end, doc in conn.execute(
            "SELECT e.camera_id, e.t_end, e.doc FROM events e JOIN (SELECT camera_id, MAX(t_end) AS t FROM events "
            f"WHERE doc IS NOT NULL AND camera_id IN ({placeholders(cameras)}){ev_cut} GROUP BY camera_id) n "
            "ON e.camera_id = n.camera_id AND e.t_end = n.t WHERE e.doc IS NOT NULL", [*cameras, *tail]):
        docs.setdefault(cam, (t_end, " ".join(doc.split())[:DOCUMENT_CHARS]))
    return [CameraSignal(c, count.get(c, 0), score.get(c, 0.0), alerts.get(c), moments.get(c),
                         docs.get(c, (None, None))[0], docs.get(c, (None, None))[1]) for c in cameras]
