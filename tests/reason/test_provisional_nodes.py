"""Recent history the forest does not hold yet reaches the two-phase coarse stage as provisional
nodes: the open event and closed events waiting for their documents, from their keyframes and
frame embeddings, causal under ``as_of``, scoped by camera, and replaced by the forest leaf once
the document lands (never both)."""
import zlib

import numpy as np
import pytest

from support.scripted import scripted_llm
from vam_engine.config import WriterConfig
from vam_engine.llm import ScriptedLLM
from vam_engine.llm.base import Image
from vam_engine.memory import Store
from vam_engine.memory.commit import CommitBatch
from vam_engine.memory.forest import EventForest, ForestNodeRepository
from vam_engine.memory.records import GateRecord, PendingMoment
from vam_engine.memory.view import MemoryView
from vam_engine.reason.two_phase import TwoPhaseAnswerer
from vam_engine.reason.writer import MemoryWriter, WriterMemory

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 60
DIM = 8
GATE = GateRecord(100.0, 40.0, 0.2, float("nan"), None)
COLOURS = {"red": 0, "green": 1, "blue": 2, "grey": 3}


def _axis(i: int) -> np.ndarray:
    v = np.full(DIM, 0.05, np.float32)
    v[i] = 1.0
    return v / np.linalg.norm(v)


class ImageSpace:
    """An image embedder's text side: a colour word maps to its axis."""

    name, dim, has_text = "fake-clip", DIM, True

    def __init__(self):
        self.texts = []

    def embed_texts(self, texts):
        self.texts += list(texts)
        return np.stack([_axis(next((i for w, i in COLOURS.items() if w in t), 7)) for t in texts])


class TextSpace:
    """A text embedder: a fixed random direction per text."""

    name, dim = "fake-text", DIM

    def embed_texts(self, texts):
        out = np.random.default_rng([zlib.crc32(t.encode()) for t in texts]).normal(size=(len(texts), DIM))
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


# camera a: event 1 (red, 0-10 s), event 2 (green, 12-30 s), event 3 (blue, 40-100 s, open);
# camera b: one open event (grey, 0-20 s)
EVENTS = {"a": [("red", 0.0, 10.0), ("green", 12.0, 30.0), ("blue", 40.0, 100.0)], "b": [("grey", 0.0, 20.0)]}


@pytest.fixture
def mem(tmp_path):
    store = Store(tmp_path / "s")
    for cam, events in EVENTS.items():
        src = store.sources.open(cam, cam, cam, "fps=0.5").source_id
        batch = CommitBatch()
        for colour, t0, t1 in events:
            for j, t in enumerate(np.arange(t0, t1 + 1e-6, 2.0)):
                ref = store.frames.ref(cam, src, float(t))
                store.frames.write(ref, np.full((8, 8, 3), 40 * COLOURS[colour], np.uint8), 80)
                batch.moments.append(PendingMoment(cam, src, float(t), None, None, ref, 8, 8, GATE,
                                                   embedding=_axis(COLOURS[colour]), event_start=j == 0))
        store.commit(batch)
    forest = EventForest(ForestNodeRepository(store.db))
    yield store, forest
    store.close()


def _view(mem, as_of=None, cameras=("a",)):
    store, forest = mem
    return MemoryView(store, None, ImageSpace(), TextSpace(), forest, as_of=as_of,
                      cameras=list(cameras) if cameras else None)


def _events(store, cam):
    return {round(e.t_start): e for e in store.events.list(cam)}


def _write_documents(mem):
    """Run the memory writer until every closed event has its document and forest leaf."""
    store, forest = mem
    llm = ScriptedLLM(lambda req: "a documented scene")
    writer = MemoryWriter(WriterMemory(store.doc_queue, store.events, store.moments, store.summaries),
                          TextSpace(), llm, forest, WriterConfig()).start()
    try:
        assert writer.wait_idle(timeout=30)
    finally:
        writer.close()


def _coarse(view, **kw):
    llm = scripted_llm({"two_phase_coarse*": {"answer": "seen", "sufficient": True}}, default="summary")
    ans = TwoPhaseAnswerer(llm, None, TextSpace(), update_qa=False, use_qa=False, **kw).answer("What happened?", view)
    assert ans.found
    return ans, llm.sent[0]


def _provisional_part(req):
    """The texts and images of the coarse request's provisional section (before the buffer)."""
    frames = req.messages[2].content
    start = next(i for i, p in enumerate(frames) if isinstance(p, str) and "PROVISIONAL" in p)
    end = next(i for i, p in enumerate(frames) if isinstance(p, str) and "recent buffer" in p and i > start)
    return frames[start:end]


def test_open_and_undocumented_events_reach_the_coarse_prompt(mem):
    store, _ = mem
    ev = _events(store, "a")
    assert not ev[40].closed and ev[12].closed and ev[12].doc is None  # nothing documented yet
    ans, req = _coarse(_view(mem))
    part = _provisional_part(req)
    lines = [p for p in part if isinstance(p, str) and p.startswith("- provisional event")]
    assert lines == ["- provisional event, camera a [0.00s, 10.00s]: closed, not described yet; 6 frame(s)",
                     "- provisional event, camera a [12.00s, 30.00s]: closed, not described yet; 10 frame(s)",
                     "- provisional event, camera a [40.00s, 100.00s]: still open; 31 frame(s)"]
    assert req.messages[1].content[0].endswith("(empty)")  # no root: nothing is documented
    assert ans.trace[0].detail["provisional"] == [ev[0].event_id, ev[12].event_id, ev[40].event_id]
    # the open event's keyframes: its committed moments spread evenly over what precedes the
    # present's 32 s buffer (now = 100 s: the buffer shows (68, 100])
    by_path = {m.frame_path: m for m in store.moments.list("a")}
    i = part.index(lines[2])
    shown = [p.data for p in part[i + 1:] if isinstance(p, Image)]
    assert [by_path[p].t for p in shown] == [40.0, 50.0, 58.0, 68.0]
    assert all(by_path[p].event_id == ev[40].event_id for p in shown)
    labels = [p for p in part[i + 1:] if isinstance(p, str)]
    assert labels == [f"t={by_path[p].t:.2f}s" for p in shown]
    # a closed event shows keyframes chosen at its close
    j = part.index(lines[1])
    closed = [p.data for p in part[j + 1:i] if isinstance(p, Image)]
    assert closed and {by_path[p].moment_id for p in closed} <= set(ev[12].keyframes)
    # no image of the provisional section repeats one of the present's buffer
    rest = [p.data for p in req.messages[2].content[len(part):] if isinstance(p, Image)]
    assert rest and not set(rest) & set(shown + closed)


def test_a_landed_document_replaces_the_provisional_node(mem):
    store, forest = mem
    ev = _events(store, "a")
    # a document lands for event 2 while event 1 still waits: the forest takes leaves in time
    # order, so event 2 is no leaf yet and stays provisional, now with its document
    store.doc_queue.set_docs([(ev[12].event_id, "a green scene", TextSpace().embed_texts(["a green scene"])[0])])
    nodes = {n.event_id: n for n in _view(mem).provisional_nodes()}
    assert nodes[ev[12].event_id].document == "a green scene" and nodes[ev[0].event_id].document is None
    _, req = _coarse(_view(mem))
    assert "described, not yet in the event memory: a green scene" in "\n".join(
        p for p in _provisional_part(req) if isinstance(p, str))

    _write_documents(mem)
    assert forest.leaf_for_event(ev[0].event_id) and forest.leaf_for_event(ev[12].event_id)
    memory = _view(mem).event_memory()
    assert [p.event_id for p in memory.provisional] == [ev[40].event_id]  # only the open event
    ans, req = _coarse(_view(mem))
    assert ans.trace[0].detail["provisional"] == [ev[40].event_id]
    roots = req.messages[1].content[0]
    assert "a documented scene" in roots and "camera a [0.00s, 10.00s]" in roots
    texts = "\n".join(p for p in req.messages[2].content if isinstance(p, str))
    assert "[0.00s, 10.00s]" not in texts and "[12.00s, 30.00s]" not in texts and "still open" in texts


def test_a_leaf_landing_while_the_memory_is_read_is_shown_once(mem):
    store, forest = mem
    view = _view(mem)
    read = view.provisional_nodes

    def read_then_document(*a, **kw):  # the writer finishes between the two reads
        out = read(*a, **kw)
        _write_documents(mem)
        return out

    view.provisional_nodes = read_then_document
    memory = view.event_memory()
    leaves = {e.event_id for e in store.events.list("a") if forest.leaf_for_event(e.event_id)}
    covered = {forest.leaf_for_event(e).node_id for e in leaves}
    root_leaves = {n.node_id for r in memory.roots for n in forest.leaves(r.node_id)}
    assert leaves and covered <= root_leaves  # the roots were read again: they hold the new leaves
    assert not {p.event_id for p in memory.provisional} & leaves


def test_as_of_shows_events_as_they_stood_then(mem):
    store, _ = mem
    ev = _events(store, "a")
    assert _view(mem, as_of=-1.0).provisional_nodes() == []  # before every event: nothing
    (n,) = _view(mem, as_of=5.0).provisional_nodes()  # event 1 was open then, with 3 frames
    assert (n.event_id, n.open, n.n_frames, n.t_end, n.document) == (ev[0].event_id, True, 3, 4.0, None)
    assert n.keyframe_times == (0.0, 2.0, 4.0)
    assert np.allclose(n.embedding, _axis(COLOURS["red"]), atol=1e-6)

    _write_documents(mem)
    # at 20 s event 2 was open: its leaf (ending at 30 s) is not in view, its prefix is
    nodes = _view(mem, as_of=20.0).provisional_nodes()
    assert [(p.event_id, p.open, p.n_frames, p.t_end, p.document) for p in nodes] == [
        (ev[12].event_id, True, 5, 20.0, None)]
    _, req = _coarse(_view(mem, as_of=20.0))
    texts = "\n".join(p for m in req.messages for p in m.content if isinstance(p, str))
    assert "camera a [12.00s, 20.00s]: still open; 5 frame(s)" in texts
    assert "[12.00s, 30.00s]" not in texts and "[40.00s" not in texts
    images = [p.data for m in req.messages for p in m.content if isinstance(p, Image)]
    by_path = {m.frame_path: m for m in store.moments.list("a")}
    assert images and max(by_path[p].t for p in images) <= 20.0
    # at 50 s events 1 and 2 are leaves in view; the open event shows its first 6 frames
    nodes = _view(mem, as_of=50.0).provisional_nodes()
    assert [(p.event_id, p.n_frames, p.t_end) for p in nodes] == [(ev[40].event_id, 6, 50.0)]


def test_camera_scope_holds(mem):
    store, _ = mem
    only_a = _view(mem, cameras=["a"]).provisional_nodes()
    only_b = _view(mem, cameras=["b"]).provisional_nodes()
    assert {p.camera_id for p in only_a} == {"a"} and len(only_a) == 3
    assert [(p.camera_id, p.open, p.n_frames) for p in only_b] == [("b", True, 11)]
    both = _view(mem, cameras=None).provisional_nodes()
    assert len(both) == 4
    _, req = _coarse(_view(mem, cameras=["b"]))
    texts = "\n".join(p for m in req.messages for p in m.content if isinstance(p, str))
    assert "camera b [0.00s, 20.00s]: still open; 11 frame(s)" in texts and "camera a" not in texts
    paths = {m.frame_path for m in store.moments.list("a")}
    assert not paths & {p.data for m in req.messages for p in m.content if isinstance(p, Image)}


def test_nodes_left_off_the_coarse_prompt_are_ranked_for_the_fine_stage(mem):
    store, _ = mem
    ev = _events(store, "a")
    llm = scripted_llm({"two_phase_coarse": {"retrieve": "the green scene"},
                        "two_phase_fine": {"answer": "green, from 12 s", "sufficient": True}})
    view = _view(mem)
    ans = TwoPhaseAnswerer(llm, None, TextSpace(), use_qa=False, update_qa=False, provisional_per_camera=1,
                           k_p=1).answer("When was it green?", view)
    coarse, fine = llm.sent
    coarse_text = "\n".join(p for p in coarse.messages[2].content if isinstance(p, str))
    assert "[40.00s, 100.00s]" in coarse_text and "[12.00s, 30.00s]" not in coarse_text  # the newest only
    assert ans.trace[0].detail["provisional_left_off"] == 2
    # the intent is embedded in the image space and picks the green event, not the red one
    assert ans.trace[-1].detail["provisional"][0][0] == ev[12].event_id
    last = fine.messages[-1].content
    node = next(p for p in last if isinstance(p, str) and p.startswith("Node 1"))
    assert "provisional" in node and "[12.00s, 30.00s]" in node
    by_path = {m.frame_path: m for m in store.moments.list("a")}
    imgs = [p.data for p in last if isinstance(p, Image)]
    assert imgs and {by_path[p].event_id for p in imgs} == {ev[12].event_id}
    assert ans.found and ans.text == "green, from 12 s"
    (e,) = ans.evidence
    assert (e.camera_id, e.t_start, e.t_end, e.source) == ("a", 12.0, 30.0, "event")
    assert set(e.moment_ids) <= set(ev[12].keyframes) and len(e.frame_paths) == len(e.moment_ids)


def test_bad_arguments_are_named(mem):
    with pytest.raises(ValueError, match="keyframes"):
        _view(mem).provisional_nodes(keyframes=-1)
    with pytest.raises(ValueError, match="limit"):
        _view(mem).provisional_nodes(limit=0)
    with pytest.raises(ValueError, match="provisional_per_camera"):
        TwoPhaseAnswerer(ScriptedLLM(["x"]), provisional_per_camera=-1)
