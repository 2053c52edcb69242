"""Speech as memory through the engine (issue 21): a generated video with two sentences spoken at
known times (espeak-ng) is indexed by ``Engine.index_file`` with the real tiny.en model; each
sentence is found by its words at its time and by a paraphrase's meaning, the event documents
carry what was said, answers cite it, ``as_of`` before a sentence hides it everywhere, deletion
removes it everywhere, a second run adds nothing, sources without audio (or with a broken
track) index normally with a clear status, a robot's pushed audio is transcribed, and a monitor
fires on a spoken phrase within TimeOK."""
import json
import math

import numpy as np
import pytest

from support import speech
from support.scripted import TagScript, payload, texts, verdict
from vam_engine.engine import Engine
from vam_engine.llm import ScriptedLLM

MODEL = speech.whisper_model_dir()
pytestmark = [speech.needs_speech(), pytest.mark.usefixtures("watchdog")]
WATCHDOG_S = 300
SAID = ((1.0, speech.PLANTS), (8.0, speech.TRUCK))
AUDIO_START = 0.7  # the audio track starts 0.7 s into the video: both must land on the video's axis
PLANTS_AT = speech.spoken(*SAID[0], AUDIO_START)
TRUCK_AT = speech.spoken(*SAID[1], AUDIO_START)
TOL = 0.6  # segment edges against the audible speech (VAD windows and Whisper's word times)


def config(**extra) -> dict:
    return {"audio": {"model": str(MODEL), "device": "cpu", "cpu_threads": 2}, "embed": {"text_model": "minilm"},
            "ingest": {"fps": 2.0}, "commit": {"max_event_s": 3.0}, **extra}


def _document(req) -> str:
    said = [x["text"] for x in payload(req).get("speech", [])]
    return "a striped wall with a moving line" + (". Someone says: " + " ".join(said) if said else "")


def _answer_from_speech(req) -> str:
    """The planner: search speech for the question's words, then answer citing the first hit."""
    state = texts(req)[-1]
    if "Turn 1 (" not in state:
        return json.dumps({"action": "search", "sources": ["speech"],
                           "queries": [{"q": "water the plants", "top_k": 5, "inspect_k": 0, "threshold": 0.0}]})
    return json.dumps({"action": "answer", "response": "someone asked to water the plants",
                       "best_ref": {"turn_idx": 1, "result_idx": 0}})


def script() -> TagScript:
    return TagScript({"event_writer": _document, "node_merger": "a striped wall",
                      "router": json.dumps({"type": "tool", "name": "retrieve",
                                            "args": {"question": "what was said about the plants?"}}),
                      "planner": _answer_from_speech,
                      "two_phase_coarse": {"answer": "they talked about plants"},
                      "qa_summarizer": "asked about plants", "monitor": verdict(False, 0.1, "a wall", "nothing")},
                     default="ok")


def two_phase_answer(eng, as_of: float):
    """A two-phase answer at ``as_of`` and the text of its coarse request."""
    coarse = []
    model = script()

    def keep(req):
        if req.tag == "two_phase_coarse":
            coarse.append("\n".join(texts(req)))
        return model(req)
    eng.wrap_model(lambda llm: ScriptedLLM(keep))
    try:
        return eng.ask("what did they say?", mode="two_phase", as_of=as_of), coarse[-1]
    finally:
        eng.wrap_model(lambda llm: ScriptedLLM(script()))


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """One engine that indexed the two-sentence video; the event writer's requests are kept."""
    seen = []
    model = script()

    def keep(req):
        if req.tag == "event_writer":
            seen.append(req)
        return model(req)
    eng = Engine(tmp_path_factory.mktemp("audio") / "store", config(), device="cpu", llm=ScriptedLLM(keep))
    path = speech.speech_video(SAID, 13.0, audio_start_s=AUDIO_START, scene_s=2.0)
    report = eng.index_file(path, "door")
    assert eng.wait_for_documents(timeout=120)
    yield eng, report, path, seen
    eng.close()


def _near(seg, at) -> bool:
    return abs(seg.t_start - at[0]) <= TOL and abs(seg.t_end - at[1]) <= TOL


def test_index_file_transcribes_the_audio_track_on_the_video_axis(indexed):
    eng, report, _, _ = indexed
    assert report.audio["state"] == "ended" and report.audio["segments"] == 2 and report.audio["seconds_dropped"] == 0
    segs = eng.transcripts("door")
    assert [s.text for s in segs] == [speech.PLANTS, speech.TRUCK]
    assert _near(segs[0], PLANTS_AT) and _near(segs[1], TRUCK_AT), [(s.t_start, s.t_end) for s in segs]
    assert eng.transcripts("door", t0=6.0) == segs[1:]
    assert eng.info()["transcripts_by_camera"] == {"door": 2}


def test_a_phrase_finds_each_sentence_at_its_time(indexed):
    eng = indexed[0]
    for phrase, at in (('"water the plants"', PLANTS_AT), ('"loading dock"', TRUCK_AT)):
        res = eng.search(phrase, top_k=5)  # speech is searched by default once the store heard some
        hit = [e for e in res.evidence if e.source == "speech"][0]
        assert abs(hit.t_start - at[0]) <= TOL and abs(hit.t_end - at[1]) <= TOL
        assert phrase.strip('"') in hit.text.lower()
        moments = eng.store.moments.by_id(hit.moment_ids).values()  # its frames, when it has any, are its own
        assert all(hit.t_start <= m.t <= hit.t_end for m in moments)
        words = eng.store.fulltext.search(phrase, kinds=("speech",))  # the quoted words: one sentence has them
        assert [(w.t_start, w.t_end) for w in words] == [(hit.t_start, hit.t_end)]
    assert not [e for e in eng.search("water the plants", sources=("frame", "event")).evidence
                if e.source == "speech"]


def test_a_paraphrase_finds_the_sentence_by_meaning(indexed):
    eng = indexed[0]
    # no word in common with either sentence: only the speech vectors can find it
    res = eng.search("lorry reached unloading bay midday", sources=("speech",), top_k=2)
    assert [e.text for e in res.evidence][0] == speech.TRUCK
    res = eng.search("irrigate houseplants", sources=("speech",), top_k=2)
    assert res.evidence[0].text == speech.PLANTS


def test_event_documents_carry_what_was_said_during_them(indexed):
    eng, _, _, seen = indexed
    carried = [payload(r) for r in seen if payload(r).get("speech")]
    assert carried, "no event document request carried speech"
    for p in carried:  # only the lines of its own interval
        t0, t1 = p["time_range"]["start_s"], p["time_range"]["end_s"]
        assert all(x["end_s"] >= t0 and x["start_s"] <= t1 for x in p["speech"])
    plants = [p for p in carried if any("plants" in x["text"] for x in p["speech"])]
    assert plants and all(p["time_range"]["end_s"] >= PLANTS_AT[0] - TOL for p in plants)
    docs = [e.doc for e in eng.store.events.list("door") if e.doc and "water the plants" in e.doc]
    assert docs  # the writer waited for the speech of its events before documenting them


def test_answers_cite_the_transcript(indexed):
    eng = indexed[0]
    ans = eng.ask("what was said about the plants?", mode="agentic")
    assert ans.found and ans.text == "someone asked to water the plants"
    best = ans.evidence[0]
    assert best.source == "speech" and best.camera_id == "door" and best.text == speech.PLANTS
    assert abs(best.t_start - PLANTS_AT[0]) <= TOL
    ans, coarse = two_phase_answer(eng, 13.0)
    assert "speech heard" in coarse and speech.TRUCK in coarse and speech.PLANTS in coarse
    said = [e for e in ans.evidence if e.source == "speech"]
    assert [e.text for e in said] == [speech.PLANTS, speech.TRUCK]


def test_as_of_before_a_sentence_hides_it(indexed):
    eng = indexed[0]
    before_truck = TRUCK_AT[0] - 1.0
    assert [s.text for s in eng.transcripts(as_of=before_truck)] == [speech.PLANTS]
    assert eng.transcripts(as_of=PLANTS_AT[0] + 1.0) == []  # a sentence still being said is not there yet
    res = eng.search('"loading dock"', as_of=before_truck)
    assert speech.TRUCK not in [e.text for e in res.evidence]
    assert speech.TRUCK in [e.text for e in eng.search('"loading dock"', as_of=TRUCK_AT[1] + 1.0).evidence]
    assert [e.text for e in eng.search('"water the plants"', as_of=before_truck).evidence
            if e.source == "speech"] == [speech.PLANTS]
    ans, coarse = two_phase_answer(eng, before_truck)
    assert speech.PLANTS in coarse and speech.TRUCK not in coarse
    assert speech.TRUCK not in [e.text for e in ans.evidence]


def test_indexing_the_file_again_adds_nothing(indexed):
    eng, _, path, _ = indexed
    before = eng.transcripts()
    report = eng.index_file(path, "door")
    assert report.already_done and report.audio is None  # its audio is done too: nothing re-read
    assert eng.transcripts() == before


def test_sources_without_audio_or_with_a_broken_track_index_normally(tmp_path):
    with Engine(tmp_path / "store", config(), device="cpu") as eng:
        silent, broken = speech.silent_video(), speech.corrupt_audio_video()
        reports = eng.index_files([silent, broken], ["mute", "bad"])
        mute, bad = reports
        assert mute.audio["state"] == "no_audio" and mute.audio["error"] is None
        assert bad.audio["state"] == "error" and "audio track" in bad.audio["error"] and str(broken) in bad.audio["error"]
        for r in reports:  # the video is unaffected
            assert r.failed is None and r.kept > 0 and r.sampled >= 10
        assert eng.moments("bad") and eng.transcripts() == []
        for cam in ("mute", "bad"):  # recorded: a second run does not try again
            src = [s for s in eng.store.sources.all() if s["camera_id"] == cam][0]
            assert eng.store.sources.info(src["source_id"])["audio_done"] is True


def _broken_model_config(tmp_path):
    """A config whose audio.model directory holds a model.bin that is not a model."""
    broken = tmp_path / "model"
    broken.mkdir()
    (broken / "model.bin").write_bytes(b"not a model")
    cfg = config()
    cfg["audio"]["model"] = str(broken)
    return cfg, broken


def test_files_whose_audio_cannot_start_index_their_video_and_say_why(tmp_path):
    path = speech.speech_video(((0.5, speech.TRUCK),), 5.0, scene_s=1.0)
    cfg, _ = _broken_model_config(tmp_path)
    with Engine(tmp_path / "store", cfg, device="cpu") as eng:
        reports = eng.index_files([path, path], ["door", "hall"])  # neither stops at the other's failure
        for r in reports:
            assert r.failed is None and r.kept > 0
            assert r.audio["state"] == "error" and "cannot be loaded" in r.audio["error"], r.audio
        assert eng.moments("door") and eng.moments("hall") and eng.transcripts() == []


def test_delete_removes_speech_everywhere(tmp_path):
    path = speech.speech_video(((1.0, speech.TRUCK), (6.0, speech.PLANTS)), 10.0)
    with Engine(tmp_path / "store", config(), device="cpu") as eng:
        eng.index_file(path, "hall")
        truck, plants = eng.transcripts("hall")
        assert truck.text == speech.TRUCK and plants.text == speech.PLANTS
        store = eng.store
        assert store.fulltext.count("speech") == 2 and store.vector_table.counts()["speech"] == 2
        out = eng.delete("hall", (truck.t_start, truck.t_end))
        assert out.transcripts == 1
        assert eng.transcripts() == [plants]
        assert store.fulltext.count("speech") == 1 and store.vector_table.counts()["speech"] == 1
        assert store.fulltext.search('"loading dock"') == []
        assert speech.TRUCK not in [e.text for e in eng.search('"loading dock"').evidence]
        hits = eng.search(speech.TRUCK, sources=("speech",)).evidence
        assert [e.text for e in hits] == [speech.PLANTS]  # its vector is gone from the index too


def _track_blocks(track: np.ndarray, block_s: float):
    n = int(block_s * speech.ESPEAK_RATE)
    for a in range(0, len(track), n):
        yield a / speech.ESPEAK_RATE, track[a:a + n]


def test_speech_after_a_deletion_is_kept_even_when_the_camera_clock_restarts(tmp_path):
    """A deletion drops only the speech in flight when it happened: a robot that speaks again
    after its camera was deleted is heard again, later on its clock or from t = 0 again."""
    track = speech.speech_track(((0.5, speech.TRUCK),), 5.0)
    with Engine(tmp_path / "store", config(), device="cpu") as eng:
        for t, block in _track_blocks(track, 0.5):
            eng.push_audio("robot", block, speech.ESPEAK_RATE, t)
        eng.end_push("robot")
        assert eng.wait_for_transcripts(60) and len(eng.transcripts("robot")) == 1
        eng.delete(cameras=["robot"])
        assert eng.transcripts("robot") == []
        for shift in (10.0, 0.0):  # later, then the clock restarted (the chunker keeps nothing of before)
            for t, block in _track_blocks(track, 0.5):
                eng.push_audio("robot", block, speech.ESPEAK_RATE, t + shift)
            eng.end_push("robot")
            assert eng.wait_for_transcripts(60)
        late, again = sorted(eng.transcripts("robot"), key=lambda x: -x.t_start)
        assert late.t_start > 10.0 and again.t_start < 1.0
        assert all(speech.word_error_rate(speech.TRUCK, x.text) <= 0.2 for x in (late, again))


def test_a_robot_pushes_audio_and_a_monitor_fires_on_a_spoken_phrase_within_timeok(tmp_path):
    """A robot loop pushes 2 fps frames and its microphone's audio (22.05 kHz int16, 0.5 s
    blocks), the stream clock paused after each step until what was heard is transcribed and
    every due check judged (the eval driver's drain protocol). The phrase's alert must come
    -0.5..+2 s from the end of the phrase (StreamMind's TimeOK)."""
    said_at, text = 3.0, "Please call for help."
    track = speech.speech_track(((said_at, text), (7.0, speech.TRUCK)), 11.0)
    end_of_phrase = speech.spoken(said_at, text)[1]
    pcm = (track * 32767).astype(np.int16)
    model = TagScript({"monitor": verdict(False, 0.1, "a wall", "nothing")}, default="ok")
    cfg = config(writer={"enabled": False})
    with Engine(tmp_path / "store", cfg, device="cpu", llm=ScriptedLLM(model)) as eng:
        mon = eng.watch("someone says 'call for help'", cameras="robot", mode="once", every_s=1.0)
        wall = np.random.default_rng(0).integers(30, 200, (48, 64, 3), dtype=np.uint8)
        for t, block in _track_blocks(pcm, 0.5):
            eng.push_audio("robot", block, speech.ESPEAK_RATE, t)
            eng.push("robot", wall, t)
            assert eng.wait_for_transcripts(60) and eng.wait_for_monitors(30)
        eng.end_push("robot")
        assert eng.wait_for_transcripts(60)
        alerts = eng.alerts(monitor_id=mon.monitor_id)
        assert len(alerts) == 1, alerts
        a = alerts[0]
        assert -0.5 <= a.t - end_of_phrase <= 2.0, (a.t, end_of_phrase)
        assert a.confidence == 1.0 and "call for help" in a.observed.lower()
        assert model.asked_like("monitor") > 0  # the frame checks ran too, and matched nothing
        segs = eng.transcripts("robot")
        assert len(segs) == 2 and segs[0].text == text
        assert speech.word_error_rate(speech.TRUCK, segs[1].text) <= 0.2
        assert math.isclose(segs[0].t_start, speech.spoken(said_at, text)[0], abs_tol=TOL)


def test_a_live_camera_transcribes_its_audio_track_and_names_a_model_that_cannot_load(tmp_path):
    from support.waiting import wait_for

    path = speech.speech_video(((0.5, speech.TRUCK),), 5.0, scene_s=1.0)
    with Engine(tmp_path / "store", config(), device="cpu") as eng:
        eng.add_camera("door", str(path))  # a file read as a live source: its audio from the same demuxer
        wait_for("the camera's end", lambda: eng.status("door")[0].state == "offline", 60)
        assert eng.wait_for_transcripts(60)
        (seg,) = eng.transcripts("door")
        assert speech.word_error_rate(speech.TRUCK, seg.text) <= 0.2
        st = eng.status("door")[0]
        assert st.audio["state"] in ("running", "ended") and st.audio["segments"] == 1 and st.error is None
    cfg, broken = _broken_model_config(tmp_path)
    with Engine(tmp_path / "store2", cfg, device="cpu") as eng:
        eng.add_camera("door", str(path))
        wait_for("the camera's end", lambda: eng.status("door")[0].state == "offline", 60)
        st = eng.status("door")[0]
        assert st.audio["state"] == "error" and "cannot start" in st.audio["error"] and str(broken) in st.audio["error"]
        eng.flush()  # what the camera queued before it went offline is committed
        assert st.error is None and eng.moments("door")  # the video went on
