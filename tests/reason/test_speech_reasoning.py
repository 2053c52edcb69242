"""What was said, where answers and alerts are made (no ASR here: segments are handed to the present
as the audio path hands them): the present's recent transcript, monitors that fire on quoted
words at once and check conditions about speech with the new lines, the monitor prompt's lines
since the last check, and the memory writer holding an event until its speech is stored."""
import json
import time

import numpy as np
import pytest

from support.monitors import CFG, frame
from support.scripted import TagScript, payload, verdict
from vam_engine import Engine
from vam_engine.audio import TranscriptSegment
from vam_engine.engine.lifecycle import writer_memory
from vam_engine.llm import prompts
from vam_engine.llm.scripted import ScriptedLLM
from vam_engine.memory.records import Transcript
from vam_engine.reason.monitor import about_speech, quoted_phrases
from vam_engine.reason.working import WorkingMemory
from vam_engine.reason.writer import MemoryWriter

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 120


def said(cam: str, t0: float, t1: float, text: str, sid: int = 1) -> Transcript:
    return Transcript(sid, cam, t0, t1, text, "en", 0.9)


def test_quoted_phrases_and_conditions_about_speech():
    assert quoted_phrases("someone says 'help me'") == [["help", "me"]]
    assert quoted_phrases('a person shouts "Fire!" or “get out”') == [["fire"], ["get", "out"]]
    assert quoted_phrases("the driver's door is open") == []  # an apostrophe is not a quote
    # Chinese and Japanese: quotes right after a character, corner brackets; each character a word
    assert quoted_phrases("有人说“救命”") == [["救", "命"]]
    assert quoted_phrases("「助けて」と叫ぶ") == [["助", "け", "て"]]
    assert quoted_phrases("有人喊『着火了』") == [["着", "火", "了"]]
    assert about_speech("someone shouts for help") and about_speech("a voice on the intercom")
    assert not about_speech("a red car parks by the door")


def test_the_present_keeps_the_last_seconds_of_transcript_per_camera():
    wm = WorkingMemory(medium_s=32.0)
    heard = []
    wm.add_speech_listener(lambda cam, segs, now: heard.append((cam, [s.text for s in segs], now)))
    wm.hear([said("a", 1.0, 2.0, "one"), said("b", 1.5, 2.5, "other camera")], now=3.0)
    wm.hear([said("a", 30.0, 31.0, "two"), said("a", 40.0, 41.0, "three")])
    assert [s.text for s in wm.heard("a")] == ["two", "three"]  # "one" ended over 32 s before the newest
    assert [s.text for s in wm.heard("a", 31.0, 50.0)] == ["three"] and wm.heard("a", None, 30.5) == []
    assert [s.text for s in wm.heard("b")] == ["other camera"]
    assert heard[:2] == [("a", ["one"], 3.0), ("b", ["other camera"], 3.0)] and heard[2][2] == 41.0
    wm.forget_speech({"a"}, 39.0, 42.0)
    assert [s.text for s in wm.heard("a")] == ["two"] and wm.heard("b")


@pytest.fixture
def engine(tmp_path):
    made = []

    def make(model):
        e = Engine(tmp_path / f"s{len(made)}", CFG, device="cpu", llm=ScriptedLLM(model))
        made.append(e)
        for k in range(4):  # a present to show beside the speech
            e.push("door", frame(k * 0.5, False), k * 0.5)
        assert e.wait_for_monitors(10)
        return e
    yield make
    for e in made:
        e.close()


def test_quoted_words_fire_at_once_when_heard_and_only_then(engine):
    model = TagScript({"monitor": verdict(False, 0.1, "a dark room", "nothing")})
    eng = engine(model)
    m = eng.watch("someone says 'help me'", "door", mode="repeat", every_s=60.0, repeat_gap_s=3.0)
    calls = model.asked_like("monitor")
    eng.working.hear([said("door", 2.0, 3.0, "Hello, is anyone there?")], now=3.5)
    assert eng.alerts(monitor_id=m.monitor_id) == []
    eng.working.hear([said("door", 4.0, 5.2, "Please, help me!", 2)], now=6.0)
    (a,) = eng.alerts(monitor_id=m.monitor_id)
    assert a.t == 6.0 and a.confidence == 1.0 and "Please, help me!" in a.observed and a.camera_id == "door"
    assert model.asked_like("monitor") == calls  # no model call for it
    eng.working.hear([said("door", 6.5, 7.0, "help me", 3)], now=7.5)  # within the repeat gap: no second alert
    eng.working.hear([said("other", 6.5, 7.0, "help me", 4)], now=7.5)  # not the monitor's camera
    assert len(eng.alerts()) == 1
    eng.working.hear([said("door", 12.0, 13.0, "help me again", 5)], now=13.5)
    assert len(eng.alerts(monitor_id=m.monitor_id)) == 2


def test_quoted_chinese_words_fire_when_heard_inside_a_sentence(engine):
    model = TagScript({"monitor": verdict(False, 0.1, "a dark room", "nothing")})
    eng = engine(model)
    m = eng.watch("有人说“救命”", "door", mode="repeat", every_s=60.0, repeat_gap_s=3.0)  # "someone says 'help'"
    eng.working.hear([said("door", 2.0, 3.0, "我们明天见。")], now=3.5)
    eng.working.hear([said("door", 3.6, 3.9, "命救")], now=4.0)  # the characters, not in order
    assert eng.alerts(monitor_id=m.monitor_id) == []
    eng.working.hear([said("door", 4.0, 5.2, "救命啊！快来人！", 2)], now=6.0)  # no space around the words
    (a,) = eng.alerts(monitor_id=m.monitor_id)
    assert a.confidence == 1.0 and "救命啊" in a.observed and 'says "救命"' in a.observed


def test_a_condition_about_speech_is_checked_with_the_new_lines(engine):
    shown = []

    def judge(req):
        lines = payload(req).get("speech", [])
        shown.append([x["text"] for x in lines])
        hit = any("fire" in x["text"].lower() for x in lines)
        return verdict(hit, 0.9 if hit else 0.1, "someone shouting about a fire" if hit else "", "the speech")
    eng = engine(TagScript({"monitor": judge}))
    m = eng.watch("someone shouts about a fire", "door", mode="once", every_s=60.0)
    eng.working.hear([said("door", 2.0, 3.0, "Nice weather today.")], now=3.2)
    assert eng.wait_for_monitors(10) and eng.alerts() == []
    eng.working.hear([said("door", 4.0, 5.0, "There is a fire in the garage!", 2)], now=5.5)
    assert eng.wait_for_monitors(10)
    (a,) = eng.alerts(monitor_id=m.monitor_id)
    assert a.t == 5.5 and "fire" in a.observed
    assert shown == [["Nice weather today."], ["There is a fire in the garage!"]]  # each line shown once


def test_frame_checks_show_the_speech_heard_since_the_last_check(engine):
    seen = []

    def judge(req):
        seen.append([x["text"] for x in payload(req).get("speech", [])])
        return verdict(False, 0.1, "a dark room", "nothing")
    eng = engine(TagScript({"monitor": judge}))
    eng.watch("a bright square appears", "door", every_s=1.0)  # about frames: speech alone starts no check
    eng.working.hear([said("door", 2.0, 2.5, "first words")], now=2.6)
    assert eng.wait_for_monitors(10) and seen == []
    rng = np.random.default_rng(1)
    for k in range(4, 12):  # frames that differ (vigilance would skip an unchanged scene)
        eng.push("door", rng.integers(0, 255, (48, 64, 3), dtype=np.uint8), k * 0.5)
        assert eng.wait_for_monitors(10)
        if k == 7:
            eng.working.hear([said("door", 3.0, 3.4, "more words", 2)], now=3.5)
    with_speech = [s for s in seen if s]
    assert with_speech == [["first words"], ["more words"]]  # each shown once, at the next check after it


def test_monitor_prompt_carries_speech_lines_bounded():
    long = [(float(i), i + 0.5, "word " * 200) for i in range(20)]
    req = prompts.monitor_check("someone says 'x'", [], speech=long)
    lines = json.loads(req.messages[1].content[0])["speech"]
    assert 1 <= len(lines) < 20 and lines[-1]["start_s"] == 19.0  # the newest kept, the oldest dropped
    assert sum(len(x["text"]) for x in lines) <= prompts.MAX_SPEECH_CHARS
    assert "speech" not in json.loads(prompts.monitor_check("c", []).messages[1].content[0])


def test_the_writer_documents_an_event_once_its_speech_is_stored(tmp_path):
    cfg = {"ingest": {"fps": 2.0}, "embed": {"text_model": "minilm"}, "commit": {"max_event_s": 2.0},
           "writer": {"enabled": False}}
    with Engine(tmp_path / "s", cfg, device="cpu") as eng:
        rng = np.random.default_rng(0)
        for k in range(12):
            eng.push("door", rng.integers(0, 255, (48, 64, 3), dtype=np.uint8), k * 0.5)
        eng.end_push("door")
        events = eng.store.events.list("door")
        assert len(events) >= 2
        first = events[0]
        settled = {"ok": False}
        requests = []

        def document(req):
            requests.append(payload(req))
            return "a document"
        writer = MemoryWriter(writer_memory(eng.store, lambda cam, t: settled["ok"]), eng.text_embedder(),
                              ScriptedLLM(TagScript({"event_writer": document})), None, eng.config.writer).start()
        try:
            time.sleep(1.0)
            assert requests == []  # held: the camera's speech up to the events' ends is not stored yet
            eng.store.transcripts.append([TranscriptSegment("door", first.t_start, first.t_end, "Open the door.", "en", 0.9)])
            settled["ok"] = True
            assert writer.wait_idle(30)
        finally:
            writer.close()
        got = {p["time_range"]["start_s"]: p.get("speech") for p in requests}
        assert got[round(first.t_start, 3)] == [{"start_s": round(first.t_start, 3), "end_s": round(first.t_end, 3),
                                                 "text": "Open the door."}]
        assert len(got) == len(events)
