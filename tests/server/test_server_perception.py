"""What perception found, over HTTP, with the same scopes as moments: entities (pages, label and
camera filters, ``as_of``), an entity's timeline and crop, last seen, a moment's detections and
OCR lines, search by words and ``labels``; a token limited to one camera never meets the other
camera's sightings, times, frames or crop. The session store of support/perception_store.py."""
import sqlite3

import pytest

from support import perception_store as ps
from vam_engine.engine import Engine
from vam_engine.server import TokenStore


@pytest.fixture
def served(perception_store, client_for, tmp_path):
    eng = Engine(perception_store["store"])
    tokens = TokenStore(tmp_path / "tokens")
    full = tokens.create("read")[1]
    yard = tokens.create("read", ["yard"])[1]
    c = client_for(eng, tokens_dir=str(tmp_path / "tokens"))
    yield c, {"Authorization": f"Bearer {full}"}, {"Authorization": f"Bearer {yard}"}
    eng.close()


def test_entities_pages_filters_and_timeline(served):
    c, full, _ = served
    assert c.get("/api/entities").status_code == 401  # a token is needed once one exists
    page = c.get("/api/entities", params={"limit": 1}, headers=full).json()
    assert len(page["items"]) == 1 and page["next_cursor"]
    rest = c.get("/api/entities", params={"limit": 10, "cursor": page["next_cursor"]}, headers=full).json()
    items = page["items"] + rest["items"]
    assert sorted(e["label"] for e in items) == ["cat", "person"] and rest["next_cursor"] is None
    cat = next(e for e in items if e["label"] == "cat")
    assert set(cat["seen"]) == {"gate", "yard"} and cat["crop"] == f"/api/entities/{cat['entity_id']}/crop"
    only = c.get("/api/entities", params={"label": "person"}, headers=full).json()["items"]
    assert [e["label"] for e in only] == ["person"]
    early = c.get("/api/entities", params={"as_of": 20}, headers=full).json()["items"]
    assert [e["label"] for e in early] == ["cat"] and set(early[0]["seen"]) == {"yard"}
    line = c.get(f"/api/entities/{cat['entity_id']}", headers=full).json()
    assert line["entity"]["entity_id"] == cat["entity_id"] and {s["camera_id"] for s in line["sightings"]} == {
        "gate", "yard"}
    s = line["sightings"][0]
    assert s["frame"].startswith("/api/frames/") and len(s["norm"]) == 4 and all(0 <= v <= 1 for v in s["norm"])
    assert c.get(s["frame"], headers=full).status_code == 200
    crop = c.get(cat["crop"], params={"w": 64}, headers=full)
    assert crop.status_code == 200 and crop.headers["content-type"] == "image/jpeg"
    assert c.get("/api/entities/999999", headers=full).status_code == 404
    assert c.get("/api/entities", params={"cursor": "bogus"}, headers=full).status_code == 422


def test_last_seen_detections_and_search_by_words(served):
    c, full, _ = served
    got = c.get("/api/last_seen", params={"q": "cat"}, headers=full).json()
    assert got["found"] and got["camera_id"] == "gate" and got["entity"]["label"] == "cat" and len(got["box"]) == 4
    det = c.get(f"/api/moments/{got['moment_id']}/detections", headers=full).json()
    assert [d["label"] for d in det["detections"]] == ["cat"] and ps.SIGN in [o["label"] for o in det["ocr"]]
    assert c.get("/api/last_seen", params={"q": "giraffe"}, headers=full).json() == {"found": False}
    hits = c.post("/api/search", json={"text": ps.SIGN, "top_k": 5}, headers=full).json()["evidence"]
    ocr = [h for h in hits if h["source"] == "ocr"]
    assert ocr and ocr[0]["camera_id"] == "gate" and ocr[0]["boxes"][0]["kind"] == "text"
    assert ocr[0]["boxes"][0]["label"] == ps.SIGN
    only = c.post("/api/search", json={"text": ps.SIGN, "labels": ["person"], "sources": ["ocr"]},
                  headers=full).json()
    assert only["evidence"] == []


def test_a_camera_limited_token_sees_its_camera_only(served, perception_store):
    c, full, yard = served
    items = c.get("/api/entities", headers=yard).json()["items"]
    assert {cam for e in items for cam in e["seen"]} == {"yard"}
    cat = next(e for e in items if e["label"] == "cat")
    line = c.get(f"/api/entities/{cat['entity_id']}", headers=yard).json()
    assert {s["camera_id"] for s in line["sightings"]} == {"yard"} and set(line["entity"]["seen"]) == {"yard"}
    assert c.get("/api/entities", params={"camera": "gate"}, headers=yard).status_code == 403
    seen = c.get("/api/last_seen", params={"q": "cat"}, headers=yard).json()
    assert seen["camera_id"] == "yard" and set(seen["entity"]["seen"]) == {"yard"}
    assert c.get("/api/last_seen", params={"q": ps.SIGN}, headers=yard).json() == {"found": False}
    gate_moment = c.get("/api/last_seen", params={"q": "cat"}, headers=full).json()["moment_id"]
    assert c.get(f"/api/moments/{gate_moment}/detections", headers=yard).status_code == 403
    crop_camera = sqlite3.connect(perception_store["store"] / "store.sqlite").execute(
        "SELECT crop_camera FROM entities WHERE entity_id=?", (cat["entity_id"],)).fetchone()[0]
    crop = c.get(f"/api/entities/{cat['entity_id']}/crop", headers=yard)
    assert (crop.status_code, cat["crop"] is not None) == ((200, True) if crop_camera == "yard" else (404, False))
    assert c.get(f"/api/entities/{cat['entity_id']}/crop", headers=full).status_code == 200
    hits = c.post("/api/search", json={"text": "cat gate 4721", "top_k": 10}, headers=yard).json()["evidence"]
    assert hits and {h["camera_id"] for h in hits} == {"yard"}
