"""Role prompts: prefix-stable requests, decoding per role, and the strict anchor verdict."""
import json

import numpy as np
import pytest

from vam_engine.llm import prompts
from vam_engine.llm.base import Image


def test_requests_put_the_fixed_system_prompt_first_and_frames_last_in_time_order():
    frames = [(np.full((8, 8, 3), i, np.uint8), float(i)) for i in range(3)]
    a = prompts.event_document("cam", 0.0, 2.0, frames)
    b = prompts.event_document("other", 5.0, 9.0, frames[:1])
    assert a.messages[0].content == b.messages[0].content == [prompts.EVENT_WRITER]
    assert a.tag == "event_writer" and (a.sampling.temperature, a.sampling.max_tokens) == (0.1, 700)
    user = a.messages[1].content
    assert json.loads(user[0])["time_range"] == {"start_s": 0.0, "end_s": 2.0, "clock": "stream"}
    assert user[1::2] == ["t=0.00s", "t=1.00s", "t=2.00s"] and all(isinstance(p, Image) for p in user[2::2])
    # changing a role's request does not change the shared table of settings
    a.sampling.max_tokens = 5
    assert prompts.SAMPLING["event_writer"].max_tokens == 700
    adj = prompts.anchor("x" * 1000, frames)
    assert adj.sampling.json_object and adj.sampling.temperature == 0.0
    assert len(json.loads(adj.messages[1].content[0])["target_event"]) == 400


def test_anchor_verdict_is_strict():
    ok = prompts.parse_anchor('```json\n{"match": true, "confidence": 0.8, "observed_event": "a door opens",'
                              ' "reason": "frame 2"}\n```')
    assert ok.match is True and ok.confidence == 0.8
    bad = ['{"match": true, "confidence": 0.8, "observed_event": "x", "reason": "y", "extra": 1}',  # extra key
           '{"match": "yes", "confidence": 0.8, "observed_event": "x", "reason": "y"}',  # wrong type
           '{"match": true, "confidence": 1.5, "observed_event": "x", "reason": "y"}',  # out of bounds
           '[1, 2]', 'the frames show a door', '']
    for text in bad:
        with pytest.raises(ValueError):
            prompts.parse_anchor(text)


def test_clean_document_trims_bounds_and_refuses_empty():
    assert prompts.clean_document("  a line \n") == "a line"
    assert len(prompts.clean_document("x" * 10_000)) == prompts.MAX_DOC_CHARS
    with pytest.raises(ValueError, match="empty"):
        prompts.clean_document(" \n ")
