"""The eval driver with sound: each stream's audio track is pushed through ``Engine.push_audio`` in
step with its frames, so a question is answered with what was said up to its time and never
after, a proactive case about something said fires within TimeOK, and ``--no-audio`` (the
ablation) leaves the engine deaf. Real tiny.en and espeak-ng speech."""
import json
import threading

import pytest

from support import speech
from support.scripted import texts
from vam_engine.cli import build_parser, main as cli_main
from vam_engine.cli.eval import _engine_config, driver_config
from vam_engine.eval.driver import Driver, DriverConfig, EngineHost
from vam_engine.eval.records import EvalQuestion, EvalVideo, Segment
from vam_engine.llm import ScriptedLLM

MODEL = speech.whisper_model_dir()
pytestmark = [speech.needs_speech(), pytest.mark.usefixtures("watchdog")]
WATCHDOG_S = 300
SAID = ((1.0, speech.PLANTS), (7.0, speech.TRUCK))


def _config(audio: bool = True) -> dict:
    return {"ingest": {"fps": 1.0}, "embed": {"text_model": "minilm"}, "writer": {"enabled": False},
            "audio": {"model": str(MODEL), "device": "cpu", "enabled": audio}}


class Model:
    """The coarse stage answers with the speech lines it was shown; monitors never match on
    frames (a spoken phrase fires without the model)."""

    def __init__(self):
        self.coarse = {}  # question -> every text part of its coarse request
        self.lock = threading.Lock()

    def __call__(self, req):
        if req.tag == "two_phase_coarse":
            parts = texts(req)
            question = parts[-1].rsplit("Question: ", 1)[-1]
            with self.lock:
                self.coarse[question] = "\n".join(parts)
            return json.dumps({"answer": "heard"})
        if req.tag == "monitor":
            return json.dumps({"match": False, "confidence": 0.1, "observed_event": "", "reason": "frames"})
        return "ok"


def _run(tmp_path, questions, audio: bool):
    clip = speech.speech_video(SAID, 12.0, scene_s=2.0)
    video = EvalVideo("talk", (Segment(str(clip)),))
    model = Model()
    llm = ScriptedLLM(model)
    host = EngineHost(tmp_path / "stores", _config(audio), llm, per_video=False)
    d = Driver(host, llm, DriverConfig(reactive="pause", proactive="drain", audio=audio), tmp_path / "results.jsonl")
    try:
        out = d.run({"talk": video}, {"talk": questions})
        said = host.open("talk", "talk").transcripts()
    finally:
        host.close()
    return out, model, said


def test_the_replay_pushes_each_streams_sound_in_step_with_its_frames(tmp_path):
    end_of_dock = speech.spoken(*SAID[1])[1]
    qs = [EvalQuestion("p", "talk", 0.5, "someone says 'loading dock'", "said", kind="proactive",
                       t_gt=end_of_dock, benchmark="streamarena"),
          EvalQuestion("early", "talk", 6.0, "What was said so far?", "plants"),
          EvalQuestion("late", "talk", 11.5, "What was said by now?", "truck")]
    out, model, said = _run(tmp_path, qs, audio=True)
    assert out.status == "completed"
    assert [s.text for s in said] == [speech.PLANTS, speech.TRUCK]
    early, late = model.coarse["What was said so far?"], model.coarse["What was said by now?"]
    assert speech.PLANTS in early and speech.TRUCK not in early  # never what is said after the question
    assert speech.PLANTS in late and speech.TRUCK in late
    (p,) = [r for r in out.results if r.qid == "p"]
    assert p.t_pred is not None and -0.5 <= p.t_pred - end_of_dock <= 2.0, (p.t_pred, end_of_dock)


def test_no_audio_is_the_ablation(tmp_path):
    qs = [EvalQuestion("late", "talk", 11.5, "What was said by now?", "truck")]
    out, model, said = _run(tmp_path, qs, audio=False)
    assert out.status == "completed" and said == []
    assert "speech heard" not in model.coarse["What was said by now?"]


def test_the_commands_take_the_audio_options(tmp_path, capsys):
    args = build_parser().parse_args(["eval", "sample", "--llm", "openai:http://x#m", "--audio-model", str(MODEL),
                                      "--audio-language", "en", "--no-audio"])
    assert args.audio_model == str(MODEL) and args.audio_language == "en" and args.no_audio
    cfg = _engine_config(args)  # the ablation: no audio path, whatever else is set
    assert cfg.audio.model == str(MODEL) and not cfg.audio.active
    assert driver_config(args, "jsonl").audio is False
    rc = cli_main(["index", str(speech.silent_video()), "--store", str(tmp_path / "s"), "--audio-model", str(tmp_path)])
    assert rc == 2 and "not a CTranslate2 Whisper model directory" in capsys.readouterr().err
