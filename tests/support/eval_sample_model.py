"""A scripted model for the sample suite whose replies are known: the engine answers every
question right but four, the last-4-frames baseline the same real-time answers and nothing
from the past; monitors fire at the first check whose latest frame is at or after the event
(except the rabbit's, which never fires), and the reply to the session says what the check saw."""
import json
import re

from support.scripted import TagScript, verdict
from vam_engine.eval.sample import QUESTIONS

SAMPLE = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
WRONG = {"ev03": "a cat", "bk05": "a cap", "ev07": "B", "bb06": "no"}
NEVER_FIRES = {"bb01"}
SCENE = "a scene of the sample suite"  # the reply to anything else


def _right(rec) -> str:
    return rec["answer"] if rec.get("options") else f"I see: {rec['answer']}."


def reply_for(rec, baseline: bool) -> str:
    if baseline and rec["category"] == "backward":
        return "I cannot tell from these frames."
    return WRONG.get(rec["id"], _right(rec))


def _current(last_text: str):
    at = {r["id"]: last_text.rfind(r["question"]) for r in SAMPLE if r["question"] in last_text}
    return next(r for r in SAMPLE if r["id"] == max(at, key=at.get)) if at else None


def _last_text(req) -> str:
    return "\n".join(p for p in req.messages[-1].content if isinstance(p, str))


def _judge(req) -> dict:  # a judge that accepts a response containing the reference
    d = json.loads(_last_text(req))
    return {"correct": d["reference"].lower() in d["response"].lower()}


def _monitor(req) -> str:
    cond = json.loads(req.messages[-1].content[0])["condition"]
    rec = next(r for r in SAMPLE if r["question"] == cond)
    times = [float(m) for m in re.findall(r"^t=([0-9.]+)s$", _last_text(req), re.MULTILINE)]
    hit = rec["id"] not in NEVER_FIRES and bool(times) and max(times) >= rec["evidence"][0]["t_start"]
    return verdict(hit, 0.9 if hit else 0.05, f"now: {rec['answer']}" if hit else "")


def _reply(req) -> str:  # the reply to a fired request, written from what the check observed
    return f"It happened: {json.loads(req.messages[-1].content[0])['observed']}"


def _coarse(req):
    rec = _current(_last_text(req))
    return {"answer": reply_for(rec, False)} if rec is not None else SCENE


def _baseline(req) -> str:
    rec = _current(_last_text(req))
    return reply_for(rec, True) if rec is not None else SCENE


sample_model = TagScript({"eval_judge": _judge, "monitor": _monitor, "two_phase_coarse": _coarse,
                          "eval_baseline": _baseline, "watch_reply": _reply}, default=SCENE)
