"""The parity suite: the same recorded cameras (the perception store's: a sign and a counter on
"gate", a cat crossing both cameras, a person on "yard"; real detector and OCR weights) indexed
by one engine and by a two-shard local Ray cluster, each camera's file indexed by its own shard.
Every read gives the same answer: moments, events, search over frames, text on screen and
detected things with labels, entities (the cat seen on both shards' cameras is one entity), its
timeline and crop, last seen, a moment's detections; through the Python API and over HTTP."""
import shutil
import sys

import pytest

ray = pytest.importorskip("ray", reason="the cluster tests need ray (pip install vam-engine[cluster])")

from vam_engine import Engine  # noqa: E402
from vam_engine.cluster import connect  # noqa: E402

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 900


@pytest.fixture(scope="module")
def parity(perception_store, tmp_path_factory):
    from support.perception_store import perception_config

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, namespace="vam_engine", object_store_memory=80 << 20,
             log_to_driver=False, _node_ip_address="127.0.0.1")
    root = tmp_path_factory.mktemp("parity")
    cfg = perception_config()
    shutil.copytree(perception_store["store"], root / "one", ignore=shutil.ignore_patterns("writer.lock"))
    one = Engine(root / "one", cfg, device="cpu")
    router = connect(None, root=root / "cluster", shards=2, config=cfg, device="cpu")
    clips = perception_store["clips"]
    reports = router.index_files([clips["gate"], clips["yard"]], ["gate", "yard"])
    assert all(not r.failed for r in reports)
    assert router.catalogue.cameras() == {"gate": "shard-0", "yard": "shard-1"}
    yield router, one
    router.close()
    one.close()
    router.shutdown_shards()
    ray.shutdown()


def ev_key(e):
    return (e.camera_id, round(e.t_start, 6), round(e.t_end, 6), e.source, e.text, len(e.moment_ids))


def test_moments_events_and_searches_equal_one_engine(parity):
    router, one = parity
    assert [(m.camera_id, m.t) for m in router.moments()] == [(m.camera_id, m.t) for m in one.moments()]
    for text, kw in (("GATE 4721", {"sources": ("ocr",)}), ("cat", {"sources": ("object",)}),
                     ("cat", {"labels": ["cat"]}), ("a person standing", {"labels": ["person"]})):
        got, want = router.search(text, top_k=20, **kw), one.search(text, top_k=20, **kw)
        assert want.evidence and sorted(map(ev_key, got.evidence)) == sorted(map(ev_key, want.evidence)), (text, kw)
        assert not got.missing_cameras
    sign = router.search("GATE 4721", top_k=5, sources=("ocr",)).evidence[0]
    assert sign.camera_id == "gate" and sign.boxes and sign.boxes[0].kind == "text"


def test_the_cat_on_both_shards_is_one_entity_with_one_timeline(parity):
    router, one = parity
    kinds = lambda ents: sorted((e.label, tuple(sorted(e.seen))) for e in ents)  # noqa: E731
    assert kinds(router.entities()) == kinds(one.entities())
    cat = next(e for e in router.entities(label="cat"))
    want = next(e for e in one.entities(label="cat"))
    assert set(cat.seen) == {"gate", "yard"} and cat.crop_path is not None
    got_line, want_line = router.entity(cat.entity_id), one.entity(want.entity_id)
    assert [(s.camera_id, s.t) for s in got_line.sightings] == [(s.camera_id, s.t) for s in want_line.sightings]
    seen_got, seen_want = router.last_seen("cat"), one.last_seen("cat")
    assert (seen_got.camera_id, seen_got.t, seen_got.source) == (seen_want.camera_id, seen_want.t, seen_want.source)
    assert set(seen_got.entity.seen) == {"gate", "yard"}  # the thing, not one shard's half of it
    assert router.entities(camera="gate", label="cat")[0].seen.keys() == {"gate"}


def test_the_same_reads_over_http(parity):
    import httpx

    from support.server import ServerThread
    from vam_engine.cluster import create_cluster_app
    from vam_engine.server import create_app

    router, one = parity
    with ServerThread(create_app(one)) as a_srv, ServerThread(create_cluster_app(router)) as b_srv, \
            httpx.Client(base_url=a_srv.url, timeout=60) as a, httpx.Client(base_url=b_srv.url, timeout=60) as b:
        ents = lambda c: sorted((e["label"], tuple(sorted(e["seen"]))) for e in c.get("/api/entities").json()["items"])  # noqa: E731
        assert ents(b) == ents(a) and ("cat", ("gate", "yard")) in ents(b)
        cat = next(e for e in b.get("/api/entities", params={"label": "cat"}).json()["items"])
        crop = b.get(cat["crop"])
        assert crop.status_code == 200 and crop.content[:2] == b"\xff\xd8"
        line = b.get(f"/api/entities/{cat['entity_id']}").json()
        assert {s["camera_id"] for s in line["sightings"]} == {"gate", "yard"}
        seen = {c: x.get("/api/last_seen", params={"q": "cat"}).json() for c, x in (("a", a), ("b", b))}
        assert (seen["b"]["camera_id"], seen["b"]["t"]) == (seen["a"]["camera_id"], seen["a"]["t"])
        body = {"text": "cat", "labels": ["cat"], "top_k": 20}
        key = lambda e: (e["camera_id"], e["t_start"], e["t_end"], e["source"])  # noqa: E731
        got, want = b.post("/api/search", json=body).json(), a.post("/api/search", json=body).json()
        assert want["evidence"] and sorted(map(key, got["evidence"])) == sorted(map(key, want["evidence"]))
        moment = seen["b"]["moment_id"]
        dets = b.get(f"/api/moments/{moment}/detections")
        assert dets.status_code == 200 and any(d["label"] == "cat" for d in dets.json()["detections"])
