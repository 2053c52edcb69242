"""The memory writer: event documents, forest summaries, summary windows, retries, restarts and
backpressure, with a scripted model (tests/llm/ covers the real bodies)."""
import threading
import time

import numpy as np
import pytest

from support.scripted import TagScript, event_of, images, joined_parts, payload
from vam_engine.synthetic.demo import make_demo_clip
from vam_engine.engine import Engine
from vam_engine.errors import VamError
from vam_engine.llm import LLMError, ScriptedLLM

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 240
TEXT = {"embed": {"text_model": "minilm"}, "writer": {"retry_base_s": 0.05, "retry_max_s": 0.2}}


def _document(req) -> str:
    cam, t0, t1 = event_of(req)
    return f"camera {cam} from {t0} to {t1}: {len(images(req))} frames of a textured scene"


def _window(req) -> str:
    p = payload(req)
    return f"window {p['window']['start_s']}..{p['window']['end_s']} with {len(p['event_documents'])} documents"


# replies that name what each request was about, so tests can check where they went
describe = TagScript({"event_writer": _document, "node_merger": lambda req: "merged: " + joined_parts(req, 60),
                      "summary_writer": _window})


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return make_demo_clip(tmp_path_factory.mktemp("clip") / "demo.mp4")


def _engine(store_dir, llm, **over):
    cfg = {"ingest": {"fps": 2.0}, **TEXT}
    for k, v in over.items():
        cfg[k] = {**cfg.get(k, {}), **v}
    return Engine(store_dir, cfg, device="cpu", llm=llm)


def _tree_ok(eng):
    eng.forest.check()
    leaves = {n.event_id for cam in eng.forest.cameras() for r in eng.forest.roots(cam)
              for n in eng.forest.leaves(r.node_id)}
    return leaves


def test_every_event_gets_a_document_a_vector_and_a_forest_leaf(clip, tmp_path):
    llm = ScriptedLLM(describe)
    with _engine(tmp_path / "s", llm) as eng:
        eng.index_file(clip["path"], camera_id="cam")
        assert eng.wait_for_documents(timeout=120)
        events = eng.store.events.list()
        assert len(events) >= 3 and all(e.doc for e in events)
        for e in events:  # each document is the reply to its own event's request
            assert e.doc.startswith(f"camera cam from {round(e.t_start, 3)} to {round(e.t_end, 3)}")
        assert eng.store.info()["vectors"]["event_doc"] == len(events)
        assert _tree_ok(eng) == {e.event_id for e in events}
        assert len(eng.forest.roots("cam")) <= 4
        assert all(n.written_version == n.summary_version for n in map(eng.forest.node, _all_nodes(eng)))
        sent = [r for r in llm.sent if r.tag == "event_writer"]
        assert len(sent) == len(events)
        for r in sent:
            times = [float(x[2:-1]) for x in r.messages[1].content if isinstance(x, str) and x.startswith("t=")]
            assert 1 <= len(times) <= 8 and times == sorted(times)
        # documents are searchable: the event comes back by its document's words
        hit = eng.search("textured scene", top_k=3, sources=("event",)).evidence
        assert hit and hit[0].source == "event" and hit[0].text.startswith("camera cam")


def _all_nodes(eng):
    out = []
    for cam in eng.forest.cameras():
        stack = [r.node_id for r in eng.forest.roots(cam)]
        while stack:
            n = stack.pop()
            out.append(n)
            stack += [c.node_id for c in eng.forest.children(n)]
    return out


def test_merges_are_written_by_the_model_bottom_up(tmp_path):
    """Many short events: the forest merges, and every internal summary is a model reply built
    from its children's final summaries."""
    llm = ScriptedLLM(describe)
    with _engine(tmp_path / "s", llm, commit={"max_event_s": 1.0}) as eng:
        _push_textures(eng, "cam", 40)
        eng.end_push("cam")
        assert eng.wait_for_documents(timeout=120)
        nodes = [eng.forest.node(i) for i in _all_nodes(eng)]
        inner = [n for n in nodes if n.children]
        assert len(eng.forest.roots("cam")) <= 4 and inner
        for n in inner:
            assert n.summary.startswith("merged: ")
            for c in eng.forest.children(n.node_id):
                assert c.summary[:60].strip() in n.summary
        assert eng.writer.stats().merges >= len(inner)


def _texture(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    small = rng.integers(30, 226, (6, 8, 3), dtype=np.uint8)
    return np.repeat(np.repeat(small, 30, 0), 30, 1)


def _push_textures(eng, cam, n, t0=0.0):
    for i in range(n):
        eng.push(cam, _texture(i + int(t0 * 10)), t0 + i * 0.5)


class Gate:
    """A scripted model whose calls block until the test opens the gate."""

    def __init__(self, reply=describe):
        self.open = threading.Event()
        self.calls = 0
        self.reply = reply

    def __call__(self, req):
        self.calls += 1
        if not self.open.wait(120):
            raise LLMError("gate", "never opened")
        return self.reply(req)


def test_ingest_never_waits_for_the_model(clip, tmp_path):
    gate = Gate()
    with _engine(tmp_path / "s", ScriptedLLM(gate)) as eng:
        rep = eng.index_file(clip["path"], camera_id="cam")  # would hang if ingest waited for the model
        assert rep.failed is None and rep.kept > 0
        deadline = time.monotonic() + 30
        while gate.calls == 0 and time.monotonic() < deadline:  # the writer picks the events up on its own thread
            time.sleep(0.01)
        s = eng.writer.stats()
        assert s.pending_events >= 3 and s.documents == 0 and gate.calls >= 1
        gate.open.set()
        assert eng.wait_for_documents(timeout=120)
        assert eng.writer.stats().pending_events == 0


def test_backpressure_holds_ingest_until_the_writer_catches_up(tmp_path):
    gate = Gate()
    queue_events, commit_every = 2, 2
    with _engine(tmp_path / "s", ScriptedLLM(gate), commit={"max_event_s": 1.0},
                 writer={"queue_events": queue_events}, store={"commit_every": commit_every},
                 ingest={"queue_frames": 2, "batch_size": 1}) as eng:
        done = threading.Event()

        def pusher():
            _push_textures(eng, "cam", 120)
            eng.end_push("cam")
            done.set()

        th = threading.Thread(target=pusher, daemon=True)
        th.start()
        deadline = time.monotonic() + 60
        while eng.store.doc_queue.backlog().pending <= queue_events and time.monotonic() < deadline:
            time.sleep(0.02)
        assert eng.store.doc_queue.backlog().pending > queue_events
        time.sleep(1.0)
        # held: the pusher cannot finish and the backlog stays near its bound
        assert not done.is_set()
        assert eng.store.doc_queue.backlog().pending <= queue_events + commit_every + 1
        gate.open.set()
        assert done.wait(120)
        assert eng.wait_for_documents(timeout=120)
        assert all(e.doc for e in eng.store.events.list())


def test_a_failed_write_is_retried_and_never_loses_the_event(clip, tmp_path):
    fails = {"n": 3}

    def flaky(req):
        if fails["n"] > 0:
            fails["n"] -= 1
            raise LLMError("flaky", "HTTP 503", retryable=True)
        return describe(req)

    with _engine(tmp_path / "s", ScriptedLLM(flaky)) as eng:
        eng.index_file(clip["path"], camera_id="cam")
        assert eng.wait_for_documents(timeout=120)
        assert all(e.doc.startswith("camera cam") for e in eng.store.events.list())
        assert fails["n"] == 0 and eng.writer.stats().failures >= 2  # a failed batch is retried item by item
        eng.forest.check()


def test_an_event_the_model_keeps_failing_gets_a_placeholder_and_the_forest_goes_on(clip, tmp_path):
    first = {}

    def fails_first_event(req):
        p = payload(req)
        if p["task"] == "event_document":
            key = p["time_range"]["start_s"]
            first.setdefault("t", key)
            if key == first["t"]:
                raise LLMError("scripted", "the model refuses this one")
        return describe(req)

    with _engine(tmp_path / "s", ScriptedLLM(fails_first_event), writer={"max_attempts": 2}) as eng:
        eng.index_file(clip["path"], camera_id="cam")
        assert eng.wait_for_documents(timeout=120)
        events = eng.store.events.list()
        bad = [e for e in events if e.t_start == first["t"]]
        assert len(bad) == 1 and bad[0].doc.startswith("[no document: the model failed 2 times")
        assert eng.store.info()["vectors"]["event_doc"] == len(events) - 1  # a placeholder is not searchable
        assert _tree_ok(eng) == {e.event_id for e in events}


def test_a_restart_loses_no_document(clip, tmp_path):
    down = ScriptedLLM(lambda req: (_ for _ in ()).throw(LLMError("down", "connection refused", retryable=True)))
    with _engine(tmp_path / "s", down, writer={"max_attempts": 1000}) as eng:
        eng.index_file(clip["path"], camera_id="cam")
        n_events = len(eng.store.events.list())
        deadline = time.monotonic() + 30
        while not down.sent and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(e.doc is None for e in eng.store.events.list())
    with _engine(tmp_path / "s", ScriptedLLM(describe)) as eng:
        assert eng.wait_for_documents(timeout=120)
        events = eng.store.events.list()
        assert len(events) == n_events and all(e.doc.startswith("camera cam") for e in events)
        assert _tree_ok(eng) == {e.event_id for e in events}


def test_forest_is_persisted_and_resumed_across_engines(tmp_path):
    with _engine(tmp_path / "s", ScriptedLLM(describe), commit={"max_event_s": 1.0}) as eng:
        _push_textures(eng, "cam", 20)
        eng.end_push("cam")
        assert eng.wait_for_documents(timeout=120)
        before = {i: eng.forest.node(i) for i in _all_nodes(eng)}
    with _engine(tmp_path / "s", ScriptedLLM(describe), commit={"max_event_s": 1.0}) as eng:
        assert {i: eng.forest.node(i) for i in _all_nodes(eng)}.keys() == before.keys()
        _push_textures(eng, "cam", 20, t0=10.0)
        eng.end_push("cam")
        assert eng.wait_for_documents(timeout=120)
        assert _tree_ok(eng) == {e.event_id for e in eng.store.events.list()}


def test_summarize_writes_searchable_window_documents(clip, tmp_path):
    llm = ScriptedLLM(describe)
    with _engine(tmp_path / "s", llm) as eng:
        eng.index_file(clip["path"], camera_id="cam")
        assert eng.wait_for_documents(timeout=120)
        docs = eng.summarize((0, 40), 10, "what changes in the scene")
        assert [(d.t0, d.t1) for d in docs] == [(a, a + 10) for a in (0, 10, 20, 30)
                                                      if eng.store.moments.on_axis("cam", a, a + 10)]
        for d in docs:
            assert d.text.startswith(f"window {d.t0}") and d.moment_ids
        reqs = [r for r in llm.sent if r.tag == "summary_writer"]
        assert payload(reqs[0])["focus"] == "what changes in the scene"
        # the event documents that overlap a window go with it
        assert all(len(payload(r)["event_documents"]) >= 1 for r in reqs)
        hit = eng.search("window with documents", sources=("summary",), top_k=2).evidence
        assert hit and hit[0].source == "summary" and hit[0].frame_paths
        # written again: replaced, not duplicated
        eng.summarize((0, 40), 10, "what changes in the scene")
        assert len(eng.store.summaries.list("cam")) == len(docs)
        with pytest.raises(VamError, match="granularity_s"):
            eng.summarize((0, 40), 0, "x")
        with pytest.raises(VamError, match="prompt"):
            eng.summarize((0, 40), 10, "  ")


def test_delete_rebuilds_the_forest_and_drops_overlapping_summaries(tmp_path):
    with _engine(tmp_path / "s", ScriptedLLM(describe), commit={"max_event_s": 1.0}) as eng:
        _push_textures(eng, "cam", 40)
        eng.end_push("cam")
        assert eng.wait_for_documents(timeout=120)
        eng.summarize((0, 20), 10, "focus")
        out = eng.delete(time_range=(0.0, 9.0))
        assert out.events > 0 and out.summaries == 1
        assert eng.wait_for_documents(timeout=120)
        left = {e.event_id for e in eng.store.events.list()}
        assert _tree_ok(eng) == left
        for i in _all_nodes(eng):  # no summary was built from deleted events
            assert eng.forest.node(i).t_start > 9.0


def test_writer_needs_a_text_embedder(tmp_path):
    with pytest.raises(VamError, match="text embedder"):
        Engine(tmp_path / "s", {}, device="cpu", llm=ScriptedLLM(describe))
