"""The baselines every report shows the engine beside, on the same model: uniform frames of
the causal prefix (StreamArena's offline protocol: min(k, ceil(t_q)) frames of [0, t_q]) and
the last four frames before the question (which StreamArena shows to be a strong baseline)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

BASELINES = ("uniform", "last4")

SYSTEM = ("You are watching a video stream. You are shown frames of it, each after its time in "
          "seconds; the last frame is the present. Answer the question about the video as briefly "
          "as you can, from what the frames show.")


@dataclass
class BaselineReply:
    text: str
    latency_s: float
    prefill_s: float
    prompt_tokens: int
    completion_tokens: int
    shown: tuple  # the frame times sent (video axis)


def uniform_times(t_query: float, k: int, fps: float) -> list[float]:
    """min(k, ceil(t_q)) times spread evenly over [0, t_q] (both ends included when more than one)."""
    n = max(1, min(k, math.ceil(t_query)))
    if n == 1:
        return [t_query]
    return [t_query * i / (n - 1) for i in range(n)]


def ask_frames(llm, text: str, frames, history) -> BaselineReply:
    """One request to ``llm``: the frames (t, RGB) with their times, the earlier turns of this
    stream ((question, answer) pairs), then the question ``text`` (its benchmark form, as the
    engine is asked it); temperature 0."""
    from ..llm import Image, LLMRequest, Message, Sampling

    msgs = [Message("system", [SYSTEM])]
    for hq, ha in history:
        msgs += [Message("user", [hq]), Message("assistant", [ha or ""])]
    content: list = []
    for t, rgb in frames:
        content += [f"t={t:.1f}s", Image(rgb)]
    content.append(text)
    msgs.append(Message("user", content))
    req = LLMRequest(msgs, Sampling(temperature=0.0, max_tokens=256), tag="eval_baseline")
    t0 = time.perf_counter()
    r = llm.generate([req])[0]
    return BaselineReply(r.text.strip(), time.perf_counter() - t0, r.prefill_s, r.prompt_tokens,
                         r.completion_tokens, tuple(t for t, _ in frames))
