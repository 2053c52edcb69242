"""Search, filters, as_of, deletion and vector/store consistency through the Engine."""
import warnings

import numpy as np
import pytest
from PIL import Image

from vam_engine.synthetic.demo import make_demo_clip
from vam_engine.engine import Engine
from vam_engine.errors import StoreError, VamError


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    d = tmp_path_factory.mktemp("demo")
    return make_demo_clip(d / "demo.mp4")


def indexed(tmp_path, demo, **cfg):
    eng = Engine(tmp_path / "store", {"ingest": {"fps": 1.0}, **cfg}, device="cpu")
    eng.index_file(demo["path"], camera_id="a", start_time_abs=1_700_000_000.0)
    eng.index_file(demo["path"], camera_id="b")
    return eng


def test_image_query_finds_its_own_frame_first(tmp_path, demo):
    with indexed(tmp_path, demo) as eng:
        ms = eng.moments("b")
        for m in ms[::3]:
            res = eng.search(image=m.frame_path, cameras=["b"], sources={"frame"}, top_k=5)
            assert res.evidence[0].moment_ids == (m.moment_id,)
            assert res.evidence[0].source == "frame" and res.evidence[0].camera_id == "b"
        one = eng.search(image=ms[0].frame_path, cameras="b", sources={"frame"}, top_k=5)  # one id, not a list
        assert one.evidence and {e.camera_id for e in one.evidence} == {"b"}
        res = eng.search(image=np.asarray(Image.open(ms[0].frame_path)), top_k=20)
        assert {e.source for e in res.evidence} == {"frame", "event"}
        assert {e.camera_id for e in res.evidence} == {"a", "b"}
        scores = [e.score for e in res.evidence]
        assert scores == sorted(scores, reverse=True)


def test_filters_and_as_of_never_return_later_evidence(tmp_path, demo):
    with indexed(tmp_path, demo) as eng:
        q = eng.moments("a")[5].frame_path
        t0 = 1_700_000_000.0
        for as_of in (t0 + 3, t0 + 15, t0 + 30):
            res = eng.search(image=q, top_k=50, cameras=["a"], as_of=as_of)
            assert res.evidence and all(e.t_end <= as_of for e in res.evidence)
        res = eng.search(image=q, top_k=50, cameras=["a"], time_range=(t0 + 10, t0 + 20))
        assert res.evidence and all(e.t_end >= t0 + 10 and e.t_start <= t0 + 20 for e in res.evidence)
        res = eng.search(image=q, top_k=50, cameras=["b"])
        assert res.evidence and {e.camera_id for e in res.evidence} == {"b"}


def test_text_query_without_a_text_side_says_so(tmp_path, demo):
    with indexed(tmp_path, demo) as eng:
        res = eng.search(text="a person walking")
        assert res.evidence == []
        assert any("no text side" in n for n in res.notes)
        with pytest.raises(VamError, match="text=... or image="):
            eng.search()


def test_events_cover_their_moments_and_protect_keyframes(tmp_path, demo):
    with indexed(tmp_path, demo) as eng:
        events = eng.store.events.list("b")
        ms = eng.moments("b")
        assert events and all(m.event_id is not None for m in ms)
        assert sum(1 for e in events if e.keyframes) == len(events)  # every closed event has keyframes
        for e in events:
            members = [m for m in ms if m.event_id == e.event_id]
            assert e.t_start == members[0].t_rel and e.t_end == members[-1].t_rel
            assert set(e.keyframes) <= {m.moment_id for m in members}
        assert eng.info()["vectors"]["event"] == len(eng.store.events.list())


def test_delete_removes_rows_files_and_vectors(tmp_path, demo):
    with indexed(tmp_path, demo) as eng:
        victims = eng.moments("b", t0=10, t1=25)
        assert victims
        q = victims[0].frame_path
        img = np.asarray(Image.open(q))
        out = eng.delete(cameras=["b"], time_range=(10, 25))
        assert out.moments == len(victims)
        assert eng.moments("b", t0=10, t1=25) == []
        assert all(not Path_exists(m.frame_path) for m in victims)
        res = eng.search(image=img, top_k=100, cameras=["b"])
        gone = {m.moment_id for m in victims}
        assert not any(set(e.moment_ids) & gone for e in res.evidence)
        assert not any(e.t_start <= 25 and e.t_end >= 10 and e.source == "event" for e in res.evidence)
        ids = {r[0] for r in eng.store.vector_table.rows("frame")}
        assert ids == {m.moment_id for m in eng.moments()}
        eng.delete(cameras="a")
        assert eng.moments("a") == [] and eng.search(image=img, cameras=["a"]).evidence == []
        with pytest.raises(ValueError, match="refusing"):
            eng.delete()


def Path_exists(p):
    from pathlib import Path

    return Path(p).exists()


def test_vector_memory_survives_reopen_and_a_corrupt_index(tmp_path, demo):
    eng = indexed(tmp_path, demo)
    q = eng.moments("a")[3]
    want = eng.search(image=q.frame_path, top_k=10).evidence
    eng.close()  # writes snapshots
    with Engine(tmp_path / "store", {"ingest": {"fps": 1.0}}, device="cpu") as eng:
        assert eng.search(image=q.frame_path, top_k=10).evidence == want
    (tmp_path / "store" / "vectors" / "frame.index").write_bytes(b"garbage" * 10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Engine(tmp_path / "store", {"ingest": {"fps": 1.0}}, device="cpu") as eng:
            assert eng.search(image=q.frame_path, top_k=10).evidence == want
            assert eng.info()["vector_warnings"]
    assert any("frame.index" in str(w.message) for w in caught)


def test_a_store_refuses_a_different_embedder(tmp_path, demo, monkeypatch):
    indexed(tmp_path, demo).close()
    import vam_engine.engine.core as E  # where the engine looks its image embedder up

    real = E.make_image_embedder

    def other(cfg, device="cpu"):
        emb = real(cfg, device)
        emb.model_id = "something-else-d7"
        return emb

    monkeypatch.setattr(E, "make_image_embedder", other)
    with pytest.raises(StoreError, match="image embedder"):
        Engine(tmp_path / "store", device="cpu")


def test_cli_search(tmp_path, demo):
    import subprocess
    import sys

    indexed(tmp_path, demo).close()
    frame = next((tmp_path / "store" / "frames").rglob("*.jpg"))
    out = subprocess.run([sys.executable, "-m", "vam_engine.cli", "search", "--store", str(tmp_path / "store"),
                          "--image", str(frame), "--top-k", "3", "--device", "cpu"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "frame" in out.stdout and str(frame) in out.stdout


def test_text_search_through_a_clip_text_tower_and_minilm_documents(tmp_path, demo):
    """A (tiny, random-weight) CLIP: text queries reach frames and events; summary documents
    use the configured text embedder's own space (none are written yet: an empty space)."""
    from support.tiny_clip_model import save_tiny_clip

    model = tmp_path / "tiny-clip"
    save_tiny_clip(model)
    cfg = {"embed": {"body": "torch", "model": str(model), "text_model": "minilm"}}
    with indexed(tmp_path, demo, **cfg) as eng:
        assert eng.embedder.has_text
        res = eng.search(text="a textured scene", top_k=5)
        assert res.evidence and {e.source for e in res.evidence} <= {"frame", "event"}
        assert not any("no text side" in n for n in res.notes)
        assert eng.text_embedder() is not None and eng.text_embedder().dim == 384


def test_filter_ids_follow_every_change_of_the_vectors(tmp_path):
    """Filtered searches reuse the allowed ids while the memory is unchanged; a commit, a deletion
    or a pruned log never leaves them stale."""
    from vam_engine.memory import Store
    from vam_engine.memory.records import GateRecord
    from vam_engine.memory.commit import CommitBatch
    from vam_engine.memory.records import PendingMoment

    store = Store(tmp_path / "s")
    gate = GateRecord(100.0, 40.0, 0.2, float("nan"), None)
    src = {cam: store.sources.open(cam, cam, cam, "fps=1").source_id for cam in ("a", "b")}

    def add(cam, t):
        b = CommitBatch()
        ref = store.frames.ref(cam, src[cam], t)
        store.frames.write(ref, np.zeros((8, 8, 3), np.uint8), 80)
        b.moments.append(PendingMoment(cam, src[cam], t, None, None, ref, 8, 8, gate, embedding=np.ones(4, np.float32)))
        store.commit(b)

    try:
        add("a", 1.0)
        add("b", 2.0)
        first = store.vector_table.allowed_ids("frame", ["a"], as_of=5.0)
        assert len(first) == 1 and store.vector_table.allowed_ids("frame", ["a"], as_of=5.0) is first  # reused
        assert store.vector_table.allowed_ids("frame", ["a", "b"]) is None  # every camera: no filter
        assert store.vector_table.allowed_ids("frame", as_of=10.0) is None  # nothing ends after it
        add("a", 3.0)
        assert len(store.vector_table.allowed_ids("frame", ["a"], as_of=5.0)) == 2
        store.vector_table.prune_log(store.vector_table.seq())
        store.delete(["a"], 2.5, 4.0)
        assert len(store.vector_table.allowed_ids("frame", ["a"], as_of=5.0)) == 1
    finally:
        store.close()
