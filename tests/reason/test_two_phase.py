"""Two-phase reasoning: the working memory's ring buffers, the QA history, the coarse/fine
answerer with a scripted model (direct answers, retrieval, repairs, failures, causality), and
end to end with a tiny random Qwen2-VL (the fine stage continues from the coarse KV cache, the
next question from the system prompt, roots and frames it shares)."""
import threading

import numpy as np
import pytest

from support.scripted import TagScript, event_of, joined_parts, scripted_llm, texts
from vam_engine.synthetic.tiny_qwen import build_tiny_qwen2_vl
from vam_engine.synthetic.demo import make_demo_clip
from vam_engine.engine import Engine
from vam_engine.llm import LLMError, ScriptedLLM
from vam_engine.llm import prompts
from vam_engine.llm.base import Image, Message, Sampling
from vam_engine.memory import Store
from vam_engine.reason.two_phase import TwoPhaseAnswerer
from vam_engine.memory.view import MemoryView
from vam_engine.memory.qa import QAHistory
from vam_engine.reason.working import WorkingMemory

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 120


# ---------------------------------------------------------------------------------------------
# working memory

def _frame(h=600, w=1000, value=0):
    return np.full((h, w, 3), value, np.uint8)


def test_ring_buffers_keep_their_rates_spans_and_a_downscaled_copy():
    wm = WorkingMemory()
    buf = _frame()
    for i in range(601):  # 60 s at 10 fps, one reused buffer
        buf[:] = i % 256
        wm.observe("cam", i * 0.1, buf)
    short, medium = wm.window("cam", 60.0)
    ts, tm = [t for _, t in short], [t for _, t in medium]
    assert len(short) == 16 and len(medium) == 32  # 8 s at 2 fps, 32 s at 1 fps
    assert min(np.diff(ts)) >= 0.5 - 1e-6 and min(np.diff(tm)) >= 1.0 - 1e-6
    assert ts[-1] == pytest.approx(60.0) and ts[0] > 52.0 and tm[0] > 28.0
    a, t = short[-1]
    assert a.shape == (200, 334, 3)  # stride 3: at most 448 on a side, no resampling
    assert int(a[0, 0, 0]) == round(t * 10) % 256  # a copy of that frame, not of the reused buffer
    assert not a.flags.writeable
    assert wm.latest("cam") == pytest.approx(60.0) and wm.cameras() == ["cam"]
    assert wm.window("other", 60.0) == ([], [])


def test_window_is_causal_and_covers_only_the_present():
    wm = WorkingMemory()
    for i in range(41):
        wm.observe("cam", i * 0.5, _frame(40, 40, i))
    short, medium = wm.window("cam", 18.2)
    assert short[-1][1] == 18.0 and medium[-1][1] == 18.0 and short[0][1] == 12.5  # (18.2 - 8, 18.2]
    assert all(t <= 18.2 for _, t in short + medium)
    assert wm.covers("cam", 20.0)  # nothing of (20 - 32, 20] was dropped
    for i in range(41, 200):
        wm.observe("cam", i * 0.5, _frame(40, 40, i))
    assert wm.covers("cam", 99.5)
    assert not wm.covers("cam", 50.0)  # its span was dropped: read the store instead
    assert not wm.covers("nope", 10.0)


def test_a_sparse_stream_gives_a_sparse_window_and_late_frames_are_dropped():
    wm = WorkingMemory()
    for i in range(30):  # 0.5 fps base rate
        wm.observe("cam", i * 2.0, _frame(20, 20))
    short, medium = wm.window("cam", 58.0)
    assert len(short) == 4 and len(medium) == 16
    wm.observe("cam", 0.0, _frame(20, 20, 9))  # late (a second feeder far behind): dropped
    after = wm.window("cam", 58.0)
    assert [t for _, t in after[0] + after[1]] == [t for _, t in short + medium] and wm.latest("cam") == 58.0
    wm.reset("cam")  # a new source on its own relative clock
    wm.observe("cam", 0.0, _frame(20, 20))
    assert [t for _, t in wm.window("cam", 0.0)[0]] == [0.0] and wm.latest("cam") == 0.0
    with pytest.raises(ValueError, match="H x W x 3 uint8"):
        wm.observe("cam", 1.0, np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="positive"):
        WorkingMemory(short_fps=0)


def test_observe_is_thread_safe():
    wm = WorkingMemory(max_side=16)
    errors = []

    def feed(cam):
        try:
            for i in range(400):
                wm.observe(cam, i * 0.25, _frame(32, 32, i % 256))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def read():
        try:
            for _ in range(300):
                for cam in ("a", "b"):
                    s, m = wm.window(cam, 1e9)
                    assert all(x.shape == (16, 16, 3) for x, _ in s + m)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=feed, args=(c,)) for c in ("a", "b", "a")] + [threading.Thread(target=read)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    for cam in ("a", "b"):
        s, m = wm.window(cam, 99.75)
        assert len(s) == 16 and len(m) == 32
        assert min(np.diff([t for _, t in s])) >= 0.5 - 1e-6


# ---------------------------------------------------------------------------------------------
# QA history

def _vec(i, d=8):
    v = np.zeros(d, np.float32)
    v[i] = 1.0
    return v


def test_qa_history_persists_and_reads_as_of(tmp_path):
    qa = QAHistory(Store(tmp_path / "s").db)
    qa.add(10.0, "q1", "a1", _vec(0))
    qa.add(20.0, "q2", "a2", _vec(1) + 0.5 * _vec(0), cameras=["b", "a"])
    qa.add(30.0, "q3", "a3", _vec(0))
    qa.update_summary(10.0, "after q1")
    qa.update_summary(30.0, "after q3")

    qa = QAHistory(Store(tmp_path / "s").db)  # reopened: everything is in SQLite
    got = qa.retrieve(_vec(0), k=2)
    assert [r.question for r in got] == ["q1", "q3"] and got[0].score == pytest.approx(1.0)
    # each scope (its exact cameras, its session) is a history of its own
    got = qa.retrieve(_vec(0), k=3, as_of=25.0)
    assert [r.question for r in got] == ["q1"]
    got = qa.retrieve(_vec(0), k=3, as_of=25.0, cameras=["a", "b"])
    assert [r.question for r in got] == ["q2"] and got[0].cameras == ("a", "b")
    assert qa.retrieve(_vec(0), k=3, cameras=["a"]) == [] and qa.retrieve(_vec(0), k=3, session="s1") == []
    assert [r.question for r in qa.recent(5)] == ["q1", "q3"] and qa.recent(5, cameras=["b", "a"])[0].question == "q2"
    assert qa.summary(cameras=["a", "b"]) == ""
    assert qa.retrieve(_vec(1), k=1, as_of=5.0) == []
    assert [r.t for r in qa.records(as_of=20.0)] == [10.0, 20.0]
    assert qa.summary() == "after q3" and qa.summary(as_of=29.0) == "after q1" and qa.summary(as_of=9.0) == ""
    with pytest.raises(ValueError, match="zero vector"):
        qa.retrieve(np.zeros(8), k=1)


# ---------------------------------------------------------------------------------------------
# the answerer with a scripted model, over a real engine's memory

def _document(req) -> str:
    cam, t0, t1 = event_of(req)
    return f"camera {cam} from {t0} to {t1}: a textured scene"


# the memory writer's replies: event documents and merged summaries
describe = TagScript({"event_writer": _document, "node_merger": lambda req: "merged: " + joined_parts(req, 60)})


@pytest.fixture(scope="module")
def mem(tmp_path_factory):
    d = tmp_path_factory.mktemp("two_phase")
    clip = make_demo_clip(d / "demo.mp4")
    cfg = {"ingest": {"fps": 2.0}, "embed": {"text_model": "minilm"}, "commit": {"max_event_s": 4.0}}
    eng = Engine(d / "s", cfg, device="cpu", llm=ScriptedLLM(describe))
    eng.index_file(clip["path"], camera_id="cam")
    assert eng.wait_for_documents(timeout=100)
    assert len(eng.forest) >= 5
    yield eng
    eng.close()


def _view(eng, as_of=None):
    return MemoryView(eng.store, eng.vectors, eng.embedder, eng.text_embedder(), eng.forest,
                      eng.writer.summarize if eng.writer else None, as_of=as_of, cameras=["cam"])


def _same(a: Message, b: Message) -> bool:
    """Message equality that compares images by identity or content (arrays cannot use ==)."""
    if a.role != b.role or len(a.content) != len(b.content):
        return False
    for x, y in zip(a.content, b.content):
        if isinstance(x, Image) and isinstance(y, Image):
            if x.data is not y.data and x.digest() != y.digest():
                return False
        elif x != y:
            return False
    return True


def _scripted(coarse, fine='{"answer": "from memory", "sufficient": true}', summary="rolling summary",
              intent='{"retrieve": "the textured scene at the start"}'):
    """A model whose reply depends on the request's role: coarse (and its repair), the retrieval
    intent, fine (and its repair), the QA summarizer. A list gives the replies in order."""
    return scripted_llm({"two_phase_coarse*": coarse, "two_phase_intent": intent, "two_phase_fine*": fine,
                         "qa_summarizer": summary})


def n_plus(req) -> int:
    return len(req.messages)


def _stage(ans, stage):
    return [e for e in ans.trace if e.stage == stage]


def _tags(llm):
    return [r.tag for r in llm.sent]


def test_coarse_answers_directly_from_the_present(mem):
    llm = _scripted('{"answer": "a textured scene pans"}')
    qa = mem.store.qa
    before = len(qa.records())
    ans = TwoPhaseAnswerer(llm, mem.working, mem.text_embedder()).answer("What is on screen now?", _view(mem))
    assert ans.found and ans.text == "a textured scene pans" and ans.mode == "two_phase"
    assert _tags(llm) == ["two_phase_coarse", "qa_summarizer"]  # no retrieval, no fine call
    coarse = llm.sent[0]
    assert coarse.messages[0].role == "system" and coarse.messages[0].content == [prompts.TWO_PHASE_SYSTEM]
    # [system, roots, frames, QA summary + time + question]: what changes least first, each its
    # own message (a prefix cache resumes at message boundaries)
    assert [m.role for m in coarse.messages] == ["system", "user", "user", "user"]
    memory = coarse.messages[1].content
    assert len(memory) == 1 and memory[0].startswith("Event memory") and "camera cam [" in memory[0]
    frames = coarse.messages[2].content
    assert frames[0].startswith("Camera cam, recent buffer")
    times = [float(p[2:-1]) for p in frames if isinstance(p, str) and p.startswith("t=")]
    assert times and sum(isinstance(p, Image) for p in frames) == len(times)
    last = coarse.messages[3].content
    assert last[0].startswith("Earlier questions and answers") and last[-1].endswith("Question: What is on screen now?")
    assert not any(isinstance(p, Image) for p in memory + last)
    assert _stage(ans, "coarse")[0].detail["frames"]["cam"]["from"] == "buffer"  # the ring buffers cover the present
    ev = ans.evidence[0]
    assert ev.camera_id == "cam" and ev.source == "frame" and ev.t_end == max(times) and ev.moment_ids == ()
    # the pair went into the QA history at the question's present, and the summary was rewritten
    recs = qa.records()
    assert len(recs) == before + 1 and recs[-1].answer == "a textured scene pans"
    # (the present, fed from decode, may reach past the newest stored moment)
    assert recs[-1].t == pytest.approx(max(_view(mem).now(), mem.working.latest("cam")))
    assert qa.summary(cameras=["cam"]) == "rolling summary"
    assert ans.timings["coarse"] > 0 and "coarse_prefill" in ans.timings and ans.tokens["prompt"] > 0


def test_retrieval_continues_the_coarse_request(mem):
    qa = mem.store.qa
    emb = mem.text_embedder().embed_texts(["what was the textured scene\nit panned"])[0]
    qa.add(5.0, "what was the textured scene", "it panned", emb)
    llm = _scripted('{"retrieve": "textured scene panning"}')
    ans = TwoPhaseAnswerer(llm, mem.working, mem.text_embedder(), k_f=2, k_q=1,
                           update_qa=False).answer("What happened at the start?", _view(mem))
    assert _tags(llm) == ["two_phase_coarse", "two_phase_fine"]
    coarse, fine = llm.sent
    n = len(coarse.messages)
    # the fine request is the coarse messages and reply unchanged, plus one user message
    assert len(fine.messages) == n + 2
    assert all(_same(a, b) for a, b in zip(fine.messages[:n], coarse.messages))
    assert fine.messages[n].role == "assistant"
    assert fine.messages[n].content == ['{"retrieve": "textured scene panning"}']
    last = fine.messages[n + 1]
    assert last.role == "user" and last.content[-1] == prompts.TWO_PHASE_FINE
    assert last.content[0] == "Memory retrieved for: textured scene panning"
    nodes = [p for p in last.content if isinstance(p, str) and p.startswith("Node ")]
    assert len(nodes) == 2
    assert sum(isinstance(p, str) and p.startswith("Earlier question at") for p in last.content) == 1
    # each node's keyframes (up to 16: the forest's keyframe budget), within the fine budget of 32
    assert 0 < sum(isinstance(p, Image) for p in last.content) <= 32
    counts = []  # images after each node's line
    for p in last.content:
        if isinstance(p, str) and p.startswith("Node "):
            counts.append(0)
        elif isinstance(p, Image):
            counts[-1] += 1
    assert counts == [min(16, len(mem.forest.node(nid).keyframes)) for nid, _ in ans.trace[-1].detail["nodes"]]
    # the two nodes share no lineage (greedy pruning), and they are the evidence
    assert ans.found and ans.text == "from memory" and len(ans.evidence) == 2
    ids = [nid for nid, _ in ans.trace[-1].detail["nodes"]]
    for a in ids:
        related = {x.node_id for x in mem.forest.ancestors(a)} | {x.node_id for x in mem.forest.leaves(a)}
        assert not (related - {a}) & set(ids)
    for ev, nid in zip(ans.evidence, ids):
        node = mem.forest.node(nid)
        assert (ev.t_start, ev.t_end, ev.text) == (node.t_start, node.t_end, node.summary)
        assert ev.source == ("event" if node.is_leaf else "summary") and ev.moment_ids
        assert len(ev.frame_paths) == len(ev.moment_ids)
    assert _stage(ans, "coarse")[0].action == "retrieve"
    assert _stage(ans, "coarse")[0].intent == "textured scene panning"


def test_invalid_replies_get_one_repair_then_fall_back(mem):
    llm = _scripted(["not json", '{"answer": "x", "extra": 1}'], fine=["still not json", "nope"], intent="no idea")
    ans = TwoPhaseAnswerer(llm, mem.working, mem.text_embedder(), use_qa=False,
                           update_qa=False).answer("Where did the camera pan?", _view(mem))
    assert _tags(llm) == ["two_phase_coarse", "two_phase_coarse_repair", "two_phase_intent", "two_phase_fine",
                          "two_phase_fine_repair"]
    coarse, repair, intent, fine, fine_repair = llm.sent
    # the intent request continues the repair (no image added), and its unusable reply gets no repair
    assert all(_same(a, b) for a, b in zip(intent.messages[:n_plus(repair)], repair.messages))
    assert intent.messages[-1].content == [prompts.TWO_PHASE_INTENT]
    assert sum(isinstance(p, Image) for m in intent.messages for p in m.content) == \
        sum(isinstance(p, Image) for m in coarse.messages for p in m.content)
    assert _stage(ans, "intent")[0].fallback == "retrieve with the question"
    n = len(coarse.messages)
    assert all(_same(a, b) for a, b in zip(repair.messages[:n], coarse.messages))
    assert repair.messages[n].content == ["not json"] and "could not be used" in repair.messages[n + 1].content[0]
    assert 'e.g. {"answer": "...", "sufficient": true} or {"retrieve": "..."}' in repair.messages[n + 1].content[0]
    # fallback: the question itself is the retrieval intent, and fine continues the repair request
    assert fine.messages[-1].content[0] == "Memory retrieved for: Where did the camera pan?"
    assert all(_same(a, b) for a, b in zip(fine.messages[:n + 2], repair.messages))
    assert fine.messages[n + 2].content == ['{"answer": "x", "extra": 1}']
    assert len(fine_repair.messages) == len(fine.messages) + 2
    # nodes were found, so the raw reply's words are kept; with no verdict it is not "found"
    assert not ans.found and ans.text == "nope" and ans.evidence
    (turn,) = _stage(ans, "coarse")  # one entry per turn: the reply and its repair
    assert [c.tag for c in turn.calls] == ["two_phase_coarse", "two_phase_coarse_repair"]
    assert turn.reply == "not json" and "not valid JSON" in turn.error
    assert turn.repair_reply == '{"answer": "x", "extra": 1}' and "extra" in turn.repair_error
    assert not turn.repaired and turn.action == "fallback_retrieve"
    assert ans.trace[-1].action == "raw_answer" and ans.trace[-1].repair_reply == "nope"

    # no node (k_f = 0) and no usable answer: a clear "not found"
    llm = _scripted('{"retrieve": "a giraffe"}', fine="???")
    ans = TwoPhaseAnswerer(llm, None, None, k_f=0, use_qa=False, update_qa=False).answer("Any giraffe?", _view(mem))
    assert not ans.found and ans.text.startswith("Not found:") and ans.evidence == []


def test_found_needs_the_models_explicit_verdict(mem):
    # a fine answer without "sufficient": the words are kept, found is False
    llm = _scripted('{"retrieve": "textured scene"}', fine='{"answer": "maybe a scene"}')
    ans = TwoPhaseAnswerer(llm, mem.working, mem.text_embedder(), use_qa=False, update_qa=False).answer(
        "What was shown?", _view(mem))
    assert not ans.found and ans.text == "maybe a scene" and ans.trace[-1].action == "insufficient"
    # an explicit "not sufficient" verdict
    llm = _scripted('{"retrieve": "textured scene"}', fine='{"answer": "cannot tell", "sufficient": false}')
    ans = TwoPhaseAnswerer(llm, mem.working, mem.text_embedder(), use_qa=False, update_qa=False).answer(
        "What was shown?", _view(mem))
    assert not ans.found and ans.text == "cannot tell"
    # a coarse answer the model says the present does not settle goes on to the fine stage
    # (OASIS: the retrieval runs on an intent written for it, not on the question: one short
    # request continuing the coarse one asks for it, and the fine request continues that)
    llm = _scripted('{"answer": "a guess", "sufficient": false}')
    ans = TwoPhaseAnswerer(llm, mem.working, mem.text_embedder(), use_qa=False, update_qa=False).answer(
        "What was shown first?", _view(mem))
    assert _tags(llm) == ["two_phase_coarse", "two_phase_intent", "two_phase_fine"]
    assert _stage(ans, "coarse")[0].action == "insufficient_retrieve"
    assert _stage(ans, "coarse")[0].intent == "the textured scene at the start"
    coarse, intent, fine = llm.sent
    assert all(_same(a, b) for a, b in zip(intent.messages, coarse.messages))
    assert intent.messages[len(coarse.messages)].content == ['{"answer": "a guess", "sufficient": false}']
    assert all(_same(a, b) for a, b in zip(fine.messages, intent.messages))
    assert fine.messages[len(intent.messages)].content == ['{"retrieve": "the textured scene at the start"}']
    assert fine.messages[-1].content[0] == "Memory retrieved for: the textured scene at the start"
    assert ans.found and ans.text == "from memory"
    # an insufficient answer that says what to look for needs no intent request
    llm = _scripted('{"think": "the first frames are gone", "answer": "a guess", "sufficient": false, '
                    '"retrieve": "scene at the start of the clip"}')
    ans = TwoPhaseAnswerer(llm, mem.working, mem.text_embedder(), use_qa=False, update_qa=False).answer(
        "What was shown first?", _view(mem))
    assert _tags(llm) == ["two_phase_coarse", "two_phase_fine"]
    assert llm.sent[1].messages[-1].content[0] == "Memory retrieved for: scene at the start of the clip"
    assert _stage(ans, "coarse")[0].detail["think"] == "the first frames are gone"


def test_the_think_step_is_kept_in_the_trace(mem):
    # a reply in the protocol's form (think first) and a reasoning model's <think> block both parse
    for reply, think in (('{"think": "one scene, panning", "answer": "a textured scene", "sufficient": true}',
                          "one scene, panning"),
                         ('<think>\nthe frames show a scene\n</think>\n{"answer": "a textured scene"}', None)):
        llm = _scripted(reply)
        ans = TwoPhaseAnswerer(llm, mem.working, mem.text_embedder(), use_qa=False, update_qa=False).answer(
            "What is on screen?", _view(mem))
        (turn,) = _stage(ans, "coarse")
        assert ans.found and ans.text == "a textured scene" and turn.error is None
        assert turn.detail.get("think") == think and turn.reply.startswith(reply[:10])


def test_the_coarse_request_shows_the_recent_dialogue_in_view(mem):
    qa = mem.store.qa
    qa.add(21.0, "what colour was the door?", "blue, at 21 s", None, cameras=["cam"])
    qa.add(22.0, "what is on the other camera?", "OTHER CAMERA ANSWER", None, cameras=["other"])
    qa.add(1e6, "a later question", "FUTURE DIALOGUE", None)
    llm = _scripted('{"answer": "before that, the hallway", "sufficient": true}')
    TwoPhaseAnswerer(llm, mem.working, mem.text_embedder(), update_qa=False).answer(
        "and before that?", _view(mem, as_of=30.0))
    last = "\n".join(p for p in llm.sent[0].messages[3].content if isinstance(p, str))
    assert "what colour was the door?" in last and "blue, at 21 s" in last
    assert last.index("blue, at 21 s") < last.index("Question: and before that?")
    assert "OTHER CAMERA" not in last and "FUTURE DIALOGUE" not in last  # scoped by camera, causal


def test_model_errors_end_in_not_found(mem):
    qa = mem.store.qa
    before = len(qa.records())
    llm = ScriptedLLM(lambda r: "unused", fail=lambda r: LLMError("scripted", "server unreachable", retryable=True))
    ans = TwoPhaseAnswerer(llm, mem.working, mem.text_embedder()).answer("Anything?", _view(mem))
    assert not ans.found and ans.text.startswith("Not found: the model failed:") and "unreachable" in ans.text
    assert any("server unreachable" in (e.error or "") for e in ans.trace)
    assert len(qa.records()) == before  # a failure is not remembered

    # a failing QA summarizer does not change a good answer
    def fail_summary(req):
        return LLMError("scripted", "summarizer down") if req.tag == "qa_summarizer" else None
    llm = ScriptedLLM(lambda r: '{"answer": "fine"}', fail=fail_summary)
    ans = TwoPhaseAnswerer(llm, mem.working, mem.text_embedder()).answer("Anything else?", _view(mem))
    assert ans.found and ans.text == "fine" and "summarizer down" in ans.trace[-1].error


def test_as_of_hides_everything_later_from_every_request(mem):
    as_of = 20.0
    qa = mem.store.qa
    emb = mem.text_embedder().embed_texts(["textured scene panning\nfuture answer"])[0]
    qa.add(1e6, "textured scene panning", "FUTURE ANSWER", emb, cameras=["cam"])
    qa.add(15.0, "textured scene earlier", "PAST ANSWER", emb, cameras=["cam"])
    qa.update_summary(1e6, "FUTURE SUMMARY", cameras=["cam"])
    qa.update_summary(12.0, "PAST SUMMARY", cameras=["cam"])
    llm = _scripted('{"retrieve": "textured scene panning"}')
    ans = TwoPhaseAnswerer(llm, mem.working, mem.text_embedder(), k_f=2, k_q=2).answer(
        "What did the scene look like?", _view(mem, as_of=as_of))
    coarse, fine = llm.sent[:2]
    assert _stage(ans, "coarse")[0].detail["frames"]["cam"]["from"] == "store"  # the ring buffers no longer cover t=20
    text = "\n".join(texts(fine))
    assert "FUTURE" not in text and "PAST SUMMARY" in text and "PAST ANSWER" in text
    times = [float(p[2:-1]) for p in texts(fine) if p.startswith("t=")]
    assert times and max(times) <= as_of
    # every image is a stored frame no later than as_of
    paths = [p.data for m in fine.messages for p in m.content if isinstance(p, Image)]
    by_path = {m.frame_path: m for m in mem.store.moments.list()}
    assert paths and all(by_path[p].t_rel <= as_of for p in paths)
    for n in mem.forest.roots("cam"):  # roots ending later are not shown
        if n.t_end > as_of:
            assert f"[{n.t_start:.2f}s, {n.t_end:.2f}s]" not in coarse.messages[1].content[0]
    assert all(e.t_end <= as_of for e in ans.evidence) and ans.evidence
    # the pair is remembered at as_of, the summary rewritten from the one known then
    mine = qa.records(as_of=as_of)[-1]
    assert (mine.question, mine.t) == ("What did the scene look like?", as_of)
    summarizer = [r for r in llm.sent if r.tag == "qa_summarizer"][0]
    assert "PAST SUMMARY" in summarizer.messages[1].content[0] and "FUTURE" not in summarizer.messages[1].content[0]
    assert qa.summary(as_of=as_of, cameras=["cam"]) == "rolling summary"
    assert qa.summary(cameras=["cam"]) == "FUTURE SUMMARY"


# ---------------------------------------------------------------------------------------------
# end to end with a tiny random Qwen2-VL

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model gains nothing from threads on a shared machine
    yield build_tiny_qwen2_vl(tmp_path_factory.mktemp("tiny_qwen2_vl"))
    torch.set_num_threads(before)


class Recording:
    """Passes requests to a body and keeps (request, response) pairs."""

    def __init__(self, llm):
        self.llm, self.name, self.calls = llm, llm.name, []

    def generate(self, requests):
        out = self.llm.generate(requests)
        self.calls += list(zip(requests, out))
        return out

    def close(self):
        self.llm.close()


def test_tiny_model_fine_stage_reuses_the_coarse_kv_cache(mem, tiny, monkeypatch):
    from vam_engine.llm.local_qwen import LocalQwenVL

    # short replies keep the test fast; a random model rarely stops by itself
    for role in ("two_phase_coarse", "two_phase_fine", "qa_summarizer"):
        monkeypatch.setitem(prompts.SAMPLING, role, Sampling(temperature=0.0, max_tokens=12))
    llm = Recording(LocalQwenVL(tiny))
    answerer = TwoPhaseAnswerer(llm, mem.working, mem.text_embedder())
    ans = answerer.answer("What is happening?", _view(mem))
    # random weights emit no valid JSON: repair, fallback retrieval, fine (+ repair), an answer anyway
    assert isinstance(ans.text, str) and ans.text and ans.mode == "two_phase"
    tags = [r.tag for r, _ in llm.calls]
    assert tags[:2] == ["two_phase_coarse", "two_phase_coarse_repair"] and "two_phase_fine" in tags
    (coarse_req, coarse), (repair_req, repair) = llm.calls[:2]
    assert coarse.cached_tokens == 0  # a fresh cache
    fine_req, fine = next((r, s) for r, s in llm.calls if r.tag == "two_phase_fine")
    assert repair.cached_tokens >= coarse.prompt_tokens
    assert fine.cached_tokens >= repair.prompt_tokens > coarse.prompt_tokens  # the coarse prefix is not prefilled again
    assert any(c.cached_tokens == fine.cached_tokens for e in _stage(ans, "fine") for c in e.calls)

    # the next question: the QA summary changed (it is in the last message), the memory did not,
    # so system + roots + frames come from the cache and only the last message is prefilled
    n = len(llm.calls)
    answerer.answer("And now?", _view(mem))
    coarse2_req, coarse2 = llm.calls[n]
    assert coarse2_req.tag == "two_phase_coarse"
    assert all(_same(a, b) for a, b in zip(coarse2_req.messages[:3], coarse_req.messages[:3]))
    assert not _same(coarse2_req.messages[3], coarse_req.messages[3])
    body = llm.llm
    shared = len(body.tokenize(coarse_req.messages[:3])) - len(body.tokenize([]))
    assert shared > len(body.tokenize(coarse_req.messages[:2])) - len(body.tokenize([])) > 0
    assert coarse2.cached_tokens == shared
    assert coarse2.prompt_tokens - coarse2.cached_tokens == len(body.tokenize([coarse2_req.messages[3]]))

    # reuse changes nothing but the work: greedy outputs equal uncached runs
    cold = LocalQwenVL(tiny, kv_cache_bytes=0)
    try:
        for req, got in ((fine_req, fine), (coarse2_req, coarse2)):
            ref = cold.generate([req])[0]
            assert ref.cached_tokens == 0 and ref.prompt_tokens == got.prompt_tokens
            assert ref.token_ids == got.token_ids
    finally:
        cold.close()
    llm.close()
