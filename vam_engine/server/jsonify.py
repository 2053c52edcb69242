"""Records as the API hands them out: plain JSON, frames as API URLs (never a path on disk).

The hot endpoints hand ``json_response`` the plain dicts built here: encoded once by the C JSON
encoder on the worker thread. Returning the dict to FastAPI instead walks it through
``jsonable_encoder`` (a Python call per value) on the event loop - for a 100-moment page that
was the largest single cost of a request, and it stalled every other request meanwhile.
"""
from __future__ import annotations

import json
import math

from starlette.responses import Response

from ..ingest import alert_clip_url, clip_url
from ..memory import Event, Evidence, Moment, Summary, Transcript


def json_response(content, status_code: int = 200, headers=None) -> Response:
    """``content`` (plain JSON types only) as an application/json response, encoded as
    Starlette's JSONResponse does (UTF-8, compact, NaN refused)."""
    body = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    return Response(body, status_code=status_code, headers=headers, media_type="application/json")


def frame_url(moment_id: int) -> str:
    return f"/api/frames/{int(moment_id)}"


def _num(x):
    """A float JSON can carry (NaN and infinities are not JSON)."""
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def pose_json(p) -> dict | None:
    """A Pose (ingest/poses.py) as JSON: x, y, z, yaw (radians), frame (the map's name)."""
    return None if p is None else p.to_json()


def moment_json(m: Moment) -> dict:
    g = m.gate
    return {"moment_id": m.moment_id, "camera_id": m.camera_id, "t": m.t, "t_rel": m.t_rel, "t_abs": m.t_abs,
            "width": m.width, "height": m.height, "tier": m.tier, "event_id": m.event_id,
            "frame": frame_url(m.moment_id), "pose": pose_json(m.pose),
            "gate": {"lap_var": _num(g.lap_var), "mad": _num(g.mad), "ssim": _num(g.ssim)}}


def event_json(e: Event) -> dict:
    return {"event_id": e.event_id, "camera_id": e.camera_id, "t_start": e.t_start, "t_end": e.t_end,
            "closed": e.closed, "doc": e.doc, "keyframes": list(e.keyframes),
            "frames": [frame_url(k) for k in e.keyframes], "clip": clip_url(e.camera_id, e.t_start, e.t_end)}


def transcript_json(t: Transcript) -> dict:
    return {"segment_id": t.segment_id, "camera_id": t.camera_id, "t_start": t.t_start, "t_end": t.t_end,
            "text": t.text, "language": t.language, "confidence": _num(t.confidence)}


def evidence_json(ev: Evidence) -> dict:
    return {"camera_id": ev.camera_id, "t_start": ev.t_start, "t_end": ev.t_end, "source": ev.source,
            "score": _num(ev.score), "similarity": _num(ev.similarity), "text": ev.text,
            "moment_ids": list(ev.moment_ids), "frames": [frame_url(i) for i in ev.moment_ids],
            "clip": clip_url(ev.camera_id, ev.t_start, ev.t_end), "pose": pose_json(ev.pose),
            "boxes": [box_json(b.moment_id, b.box, b.label, b.score, b.kind, b.frame_size)
                      for b in getattr(ev, "boxes", ())]}


def box_json(moment_id, box, label, score, kind, frame_size) -> dict:
    """A box on a frame: pixels as indexed, and normalised to [0, 1] when the frame's size is known."""
    w, h = frame_size or (0, 0)
    norm = [box[0] / w, box[1] / h, box[2] / w, box[3] / h] if w and h else None
    return {"moment_id": moment_id, "frame": frame_url(moment_id), "box": [float(v) for v in box],
            "norm": [round(float(v), 5) for v in norm] if norm else None, "label": label, "score": _num(score),
            "kind": kind}


def entity_json(e) -> dict:
    """An EntityRecord: label, colours, text read on it, first/last seen per camera, its crop."""
    return {"entity_id": e.entity_id, "label": e.label, "colours": list(e.colours), "texts": list(e.texts),
            "first_t": e.first_t, "last_t": e.last_t,
            "seen": {cam: {"first_t": a, "last_t": b} for cam, (a, b) in e.seen.items()},
            "crop": f"/api/entities/{int(e.entity_id)}/crop" if e.crop_path else None}


def timeline_json(line) -> dict:
    return {"entity": entity_json(line.entity),
            "sightings": [{"camera_id": s.camera_id, "t": s.t, "track_id": s.track_id, "pose": pose_json(s.pose),
                           **box_json(s.moment_id, s.box, s.label, s.score, "object", s.frame_size)}
                          for s in line.sightings],
            "tracks": [{"track_id": t.track_id, "camera_id": t.camera_id, "label": t.label, "first_t": t.first_t,
                        "last_t": t.last_t, "count": t.count, "texts": list(t.texts)} for t in line.tracks],
            "similar": [{"entity_id": i, "similarity": _num(s)} for i, s in line.similar]}


def last_seen_json(got) -> dict:
    if got is None:
        return {"found": False}
    return {"found": True, "query": got.query, "source": got.source, "camera_id": got.camera_id, "t": got.t,
            "text": got.text, "entity": entity_json(got.entity) if got.entity is not None else None,
            "moment_id": got.moment_id, "frame": frame_url(got.moment_id) if got.moment_id is not None else None,
            "box": list(got.box) if got.box is not None else None, "pose": pose_json(got.pose)}


def perceived_json(m: Moment, detections, lines) -> dict:
    """A moment's detections and OCR lines."""
    return {"moment_id": m.moment_id, "camera_id": m.camera_id, "t": m.t, "frame": frame_url(m.moment_id),
            "detections": [{**box_json(m.moment_id, d.box, d.label, d.score, "object", d.frame_size),
                            "track_id": d.track_id, "entity_id": d.entity_id} for d in detections],
            "ocr": [{**box_json(m.moment_id, ln.box, ln.text, ln.confidence, "text", ln.frame_size),
                     "read": ln.read} for ln in lines]}


def summary_json(s: Summary) -> dict:
    return {"summary_id": s.summary_id, "camera_id": s.camera_id, "t0": s.t0, "t1": s.t1,
            "granularity_s": s.granularity_s, "prompt": s.prompt, "structure": s.structure, "text": s.text,
            "moment_ids": list(s.moment_ids), "frames": [frame_url(i) for i in s.moment_ids]}


def answer_json(a) -> dict:
    return {"text": a.text, "found": a.found, "mode": a.mode, "asked_at": a.asked_at,
            "evidence": [evidence_json(e) for e in a.evidence], "position": pose_json(getattr(a, "position", None)),
            "tool_citations": [c.to_json() for c in getattr(a, "tool_citations", ())], "tokens": dict(a.tokens),
            "timings": {k: _num(v) for k, v in a.timings.items()},
            "trace": [_scrub(t.to_dict()) for t in a.trace], **partial_json(a)}


def _scrub(x):
    """Trace entries are plain data; drop non-finite floats so the reply stays valid JSON."""
    if isinstance(x, dict):
        return {k: _scrub(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_scrub(v) for v in x]
    return _num(x)


def alert_json(alert) -> dict:
    """An Alert (reason/monitor.py) with its frames as API URLs: the moments it cites, and the
    frames of the present it saw (served by alert id and index)."""
    d = alert.to_json() if hasattr(alert, "to_json") else dict(vars(alert))
    d.pop("frame_paths", None)
    n = len(getattr(alert, "frame_paths", ()) or ())
    d["frames"] = [f"/api/alerts/{alert.alert_id}/frames/{k}" for k in range(n)]
    d["moment_frames"] = [frame_url(i) for i in (getattr(alert, "moment_ids", ()) or ())]
    d["clip"] = alert_clip_url(alert.camera_id, getattr(alert, "t", None))
    return d


def gap_json(g) -> dict:
    return {"gap_id": g.gap_id, "camera_id": g.camera_id, "t_start": _num(g.t_start), "t_end": _num(g.t_end),
            "reason": g.reason, "ended_by": g.ended_by, "created_at": g.created_at, "closed_at": g.closed_at}


def partial_json(result) -> dict:
    """What a cluster's result lacks (``missing_cameras``, ``missing_shards``: never silently
    partial); {} for one engine's results, which are always whole."""
    cams = getattr(result, "missing_cameras", None)
    if cams is None:
        return {}
    return {"missing_cameras": list(cams), "missing_shards": list(getattr(result, "missing_shards", ()) or ())}


def status_json(st) -> dict:
    d = st.to_json() if hasattr(st, "to_json") else dict(vars(st))
    return {k: _num(v) for k, v in d.items()}
