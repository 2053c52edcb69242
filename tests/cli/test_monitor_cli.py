"""``vam-engine watch``: over sources it indexes, and following a store another engine writes."""
import io
import json
from contextlib import redirect_stdout
from fractions import Fraction

import numpy as np
import pytest

from support.monitors import CFG, judge, push_stream
from vam_engine import Engine
from vam_engine import cli
from vam_engine.cli import watch as cli_watch
from vam_engine.llm.scripted import ScriptedLLM
from vam_engine.synthetic import write_rgb_clip


def _maker(tmp_cfg):
    def make(args, existing=True, documents=True):
        return Engine(args.store, tmp_cfg, device="cpu", llm=ScriptedLLM(judge()))
    return make


def clip_frame(event: bool) -> np.ndarray:
    f = np.random.default_rng(0).integers(20, 40, (144, 192, 3), dtype=np.uint8)
    if event:
        f[:48, :64] = 230  # the top-left ninth: what judge() looks for
    return f


def test_watch_prints_json_lines_for_the_sources_it_indexes(tmp_path, monkeypatch):
    fps = 4
    frames = [clip_frame(k / fps >= 6.0) for k in range(12 * fps)]
    clip = write_rgb_clip(tmp_path / "door.mp4", frames, range(len(frames)), Fraction(1, fps), rate=fps, gop=8)
    args = cli.build_parser().parse_args(["watch", "a bright square", str(clip.path), "--store", str(tmp_path / "s"),
                                          "--json", "--mode", "once", "--camera", "door"])
    out = io.StringIO()
    cfg = {**CFG, "ingest": {"fps": 2.0}}
    monkeypatch.setattr(cli_watch, "make_engine", _maker(cfg))
    with redirect_stdout(out):
        assert cli_watch.cmd_watch(args) == 0
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert len(lines) == 1
    assert lines[0]["camera_id"] == "door" and 6.0 <= lines[0]["t"] <= 8.0 and lines[0]["observed"]
    with Engine(tmp_path / "s", cfg, device="cpu") as eng:
        assert [a.alert_id for a in eng.alerts()] == [lines[0]["alert_id"]]
        assert eng.monitors() == []  # the command's monitor ended with it


def test_watch_follows_a_store_another_engine_writes(tmp_path):
    store = tmp_path / "s"
    with Engine(store, {**CFG, "ingest": {"fps": 2.0}}, device="cpu") as writer:
        push_stream(writer, "cam", 0.0, 4.0, wait=False)
        writer.flush()
        watcher = Engine(store, CFG, device="cpu", llm=ScriptedLLM(judge()))
        try:
            from vam_engine.engine import StoreFollower

            follower = StoreFollower(watcher.store, watcher.working)  # history before it starts is not replayed
            m = watcher.watch("a bright square", cameras=["cam"])
            assert follower.poll() == 0
            push_stream(writer, "cam", 4.0, 10.0, event_spans=[(7.0, 10.0)], wait=False)
            writer.flush()
            assert follower.poll() > 0 and watcher.wait_for_monitors(10)
            (a,) = watcher.alerts(monitor_id=m.monitor_id)
            assert a.camera_id == "cam" and 7.0 <= a.t <= 9.5
            assert not watcher.writing  # it watched without claiming the store
        finally:
            watcher.close()


def test_alert_line_text():
    from vam_engine.memory.records import Alert

    a = Alert(3, "mon_0123456789ab", "door", 12.5, None, 0.83, "a person", (1, 2), ("/s/a.jpg",), 0.0)
    assert cli_watch.alert_line(a, False) == ("ALERT t=12.50s camera=door confidence=0.83 monitor=mon_0123456789ab: "
                                              "a person")
    assert json.loads(cli_watch.alert_line(a, True))["moment_ids"] == [1, 2]


@pytest.mark.parametrize("argv,msg", [(["--every", "0"], "every_s"), (["--frames", "99"], "frames must be")])
def test_watch_bad_options_are_clear_errors(tmp_path, capsys, argv, msg):
    Engine(tmp_path / "s", CFG, device="cpu").close()
    rc = cli.main(["watch", "x", "--store", str(tmp_path / "s"), "--llm", "openai:http://127.0.0.1:9/v1#m", *argv])
    assert rc == 2 and msg in capsys.readouterr().err
