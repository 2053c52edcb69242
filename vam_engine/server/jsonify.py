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

from ..memory.records import Event, Evidence, Moment, Summary, Transcript


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
            "frames": [frame_url(k) for k in e.keyframes]}


def transcript_json(t: Transcript) -> dict:
    return {"segment_id": t.segment_id, "camera_id": t.camera_id, "t_start": t.t_start, "t_end": t.t_end,
            "text": t.text, "language": t.language, "confidence": _num(t.confidence)}


def evidence_json(ev: Evidence) -> dict:
    return {"camera_id": ev.camera_id, "t_start": ev.t_start, "t_end": ev.t_end, "source": ev.source,
            "score": _num(ev.score), "similarity": _num(ev.similarity), "text": ev.text,
            "moment_ids": list(ev.moment_ids), "frames": [frame_url(i) for i in ev.moment_ids],
            "pose": pose_json(ev.pose)}


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
