"""The present (working memory) fed from decode at its own rates (OASIS: 8 s at 2 fps, 32 s at
1 fps), beside the index's 0.5 fps sampling and the gates, only when a model reads it."""
from __future__ import annotations

import functools
import http.server
import math
import threading

import numpy as np
import pytest

from support.clips import read_code, write_clip
from vam_engine.engine import Engine
from vam_engine.ingest import PyAVDecoder
from vam_engine.ingest.frame import PresentFrame
from vam_engine.llm import ScriptedLLM
from vam_engine.reason.working import DEFAULT_SIDE, WorkingMemory

FPS = 10  # the clips' frame rate: frame i is at i / FPS s and shows its index (read_code)
T0 = 1_700_000_000.0  # the camera axis: unix seconds of the clip's first frame
NO_WRITER = {"writer": {"enabled": False}}  # a model, but no event documents (no text embedder needed)


def _model():
    return ScriptedLLM(lambda req: "{}")


@pytest.fixture(scope="module")
def clip40(tmp_path_factory):
    """40 s at 10 fps, 2 s GOP with B-frames (the index skips them: sparse samples)."""
    path = tmp_path_factory.mktemp("clips") / "clip40.mp4"
    write_clip(path, [i * 100 for i in range(40 * FPS)], gop=2 * FPS, bframes=2)
    return path


def _cells(ts, fps):
    return [math.floor((t - T0) * fps + 1e-6) for t in ts]


def _check_frames(frames, now, fps):
    """Each frame is the clip's frame at its time, on the camera axis, never after ``now``, one
    per 1/fps cell in a row, taken within a few frames of its cell's start."""
    ts = [t for _, t in frames]
    assert ts == sorted(ts) and all(t <= now for t in ts)
    for arr, t in frames:
        assert read_code(arr) == round((t - T0) * FPS) % 256, "the pixels are the frame at that time"
    cells = _cells(ts, fps)
    assert cells == list(range(cells[0], cells[0] + len(cells))), "one frame per cell, none missing"
    assert all((t - T0) - c / fps < 0.35 for t, c in zip(ts, cells)), "the first decoded frame of each cell"


def test_the_present_holds_16_frames_at_2fps_and_32_at_1fps_after_40s_of_a_file(tmp_path, clip40):
    with Engine(tmp_path / "s", NO_WRITER, device="cpu", llm=_model()) as eng:
        rep = eng.index_file(clip40, "cam", start_time_abs=T0)
        assert rep.sampled == 20  # the index's 0.5 fps sampling is unchanged
        now = eng.working.latest("cam")
        assert T0 + 39.5 - 1e-6 <= now <= T0 + 39.9  # the first frame of the last 0.5 s cell
        short, medium = eng.working.window("cam", now)
        assert len(short) == 16 and len(medium) == 32
        _check_frames(short, now, 2.0)
        _check_frames(medium, now, 1.0)
        assert short[0][1] > now - 8.0 and medium[0][1] > now - 32.0
        assert max(max(a.shape[:2]) for a, _ in short + medium) <= DEFAULT_SIDE
        assert eng.working.covers("cam", now)
        # an earlier moment: nothing after it; its span's start is gone (the store answers it)
        s2, m2 = eng.working.window("cam", T0 + 35.25)
        assert [t for _, t in s2] == [t for _, t in short if t <= T0 + 35.25] and all(t <= T0 + 35.25 for _, t in m2)
        assert not eng.working.covers("cam", T0 + 35.25)


def test_without_a_model_nothing_extra_is_decoded_and_the_present_has_only_gated_frames(tmp_path, clip40):
    with PyAVDecoder(str(clip40), "cam", fps=0.5) as dec:
        plain = [f.t_rel for f in dec]
        decoded_plain = dec.stats.decoded
    with Engine(tmp_path / "s", NO_WRITER, device="cpu") as eng:
        assert eng._life.pipe().present.fps is None
        rep = eng.index_file(clip40, "cam", start_time_abs=T0)
        assert rep.decoded == decoded_plain and rep.sampled == len(plain) == 20
        short, medium = eng.working.window("cam", eng.working.latest("cam"))
        assert len(short) <= 4 and len(medium) <= 16  # the gated 0.5 fps frames only, as before


@pytest.mark.parametrize("keyframes_only", [False, True])
def test_the_present_feed_leaves_the_index_samples_as_they_were(clip40, keyframes_only):
    with PyAVDecoder(str(clip40), "cam", fps=0.5, keyframes_only=keyframes_only) as dec:
        plain = [(f.t_rel, read_code(f.rgb())) for f in dec]
        decoded_plain = dec.stats.decoded
    with PyAVDecoder(str(clip40), "cam", fps=0.5, keyframes_only=keyframes_only) as dec:
        dec.want_present(2.0)
        fed, present = [], []
        for f in dec:
            if isinstance(f, PresentFrame):
                present.append(f.t_rel)
                assert read_code(f.rgb(DEFAULT_SIDE)) == round(f.t_rel * FPS) % 256
            else:
                fed.append((f.t_rel, read_code(f.rgb())))
        assert dec.stats.sampled == len(fed) and dec.stats.present == len(present)
        assert dec.stats.decoded > decoded_plain  # the present's frames cost decoding
    assert fed == plain
    assert len(present) == 80 and _cells([T0 + t for t in present], 2.0) == list(range(80))


def test_gop_planning_against_both_rates_keeps_every_index_sample(tmp_path):
    """Short GOPs (0.3 s) without B-frames: GOP skipping still skips GOPs between the
    present's ticks, and the samples of either rate are the first frame at or after its tick."""
    path = tmp_path / "short_gops.mp4"
    write_clip(path, [i * 100 for i in range(12 * FPS)], gop=3, bframes=0)
    with PyAVDecoder(str(path), "cam", fps=0.5) as dec:
        plain = [f.t_rel for f in dec]
    with PyAVDecoder(str(path), "cam", fps=0.5) as dec:
        dec.want_present(2.0)
        out = list(dec)
        assert dec.stats.skipped_packets > 0 and dec.stats.decoded < 12 * FPS
    assert [f.t_rel for f in out if not isinstance(f, PresentFrame)] == plain == [2.0 * k for k in range(6)]
    assert [f.t_rel for f in out if isinstance(f, PresentFrame)] == pytest.approx([0.5 * k for k in range(24)])


def _moments(eng):
    return [(m.t_rel, m.t_abs, m.width, m.height) for m in eng.store.moments.list("cam")]


def _gate_log(eng):
    return [(s.t_rel, s.gate.dropped_by) for s in eng.store.moments.gate_log("cam")]


def test_the_same_moments_are_committed_with_and_without_the_present_feed(tmp_path):
    from vam_engine.synthetic import write_scene_clip

    clip = write_scene_clip(tmp_path / "scenes.mp4", width=160, height=120, fps=FPS, seconds=30.0,
                            gop_s=2.0, bframes=2, seed=3).path
    out = {}
    for name, llm in (("plain", None), ("present", _model())):
        with Engine(tmp_path / name, NO_WRITER, device="cpu", llm=llm) as eng:
            rep = eng.index_file(clip, "cam", start_time_abs=T0)
            out[name] = (_moments(eng), _gate_log(eng), rep.sampled, rep.kept, dict(rep.dropped),
                         len(eng.working.window("cam", eng.working.latest("cam"))[0]))
    plain, present = out["plain"], out["present"]
    assert plain[0] and plain[:5] == present[:5]
    assert plain[5] <= 4 and present[5] == 16


def test_present_frames_follow_the_configured_model_image_side(tmp_path, clip40):
    cfg = {**NO_WRITER, "llm": {"max_image_side": 64}}
    with Engine(tmp_path / "s", cfg, device="cpu", llm=_model()) as eng:
        assert eng.working.max_side == 64
        eng.index_file(clip40, "cam")
        short, medium = eng.working.window("cam", eng.working.latest("cam"))
        assert len(short) == 16 and {a.shape for a, _ in short + medium} == {(48, 64, 3)}
    with Engine(tmp_path / "t", NO_WRITER, device="cpu") as eng:
        assert eng.working.max_side == DEFAULT_SIDE


def test_pushed_frames_still_feed_every_frame_with_a_model(tmp_path):
    with Engine(tmp_path / "s", NO_WRITER, device="cpu", llm=_model()) as eng:
        from support.clips import code_frame

        for i in range(20 * FPS):  # 20 s at 10 fps; the index samples 0.5 fps of it
            eng.push("robot", code_frame(i), i / FPS, t_abs=T0 + i / FPS)
        eng.end_push("robot")
        now = eng.working.latest("robot")
        short, medium = eng.working.window("robot", now)
        assert len(short) == 16 and len(medium) == 20
        for arr, t in short + medium:
            assert read_code(arr) == round((t - T0) * FPS) % 256


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_a_url_source_feeds_the_present_too(tmp_path):
    write_clip(tmp_path / "live.ts", [i * 100 for i in range(40 * FPS)], container="mpegts", gop=2 * FPS,
               bframes=2)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/live.ts"
        with Engine(tmp_path / "s", NO_WRITER, device="cpu", llm=_model()) as eng:
            rep = eng.index_file(url, "cam", start_time_abs=T0)
            assert rep.sampled == 20 and not rep.failed
            now = eng.working.latest("cam")
            short, medium = eng.working.window("cam", now)
            assert len(short) == 16 and len(medium) == 32
            _check_frames(short, now, 2.0)
    finally:
        server.shutdown()
        server.server_close()


def test_the_working_memory_keeps_one_frame_per_cell_of_a_jittered_feed():
    """Frames late after their tick (the first reference frame after it) still fill every cell."""
    wm = WorkingMemory()
    ts = [0.0]
    while ts[-1] < 40:
        ts.append(ts[-1] + (0.6 if len(ts) % 2 else 0.3))  # 0, 0.6, 0.9, 1.5, 1.8, ...: 0.3 s to 0.6 s apart
    for t in ts:
        wm.observe("cam", t, np.zeros((8, 8, 3), np.uint8))
    now = ts[-1]
    short, medium = wm.window("cam", now)
    cells = [math.floor(t * 2 + 1e-6) for _, t in short]
    # every 0.5 s cell that holds a frame keeps one: at most 16 over the last 8 s
    have = sorted({math.floor(t * 2 + 1e-6) for t in ts if math.floor(t * 2 + 1e-6) > math.floor(now * 2) - 16})
    assert cells == have and len(short) <= 16
    assert len(medium) == 32


def _array_body(n, fps, *, keyframes_only=False, tensor=False):
    """A decoder body the way the GPU bodies are built (``_timed`` of every decoded frame, a
    ``hold`` that copies, ``make`` through ``_frame``), over numpy frames: the generic present
    path (``DecoderBody._show`` and ``fit_rgb``) without a GPU."""
    from vam_engine.ingest.frame import StreamInfo
    from vam_engine.ingest.source import DecoderBody

    class Body(DecoderBody):
        name = "arrays"

        def __init__(self):
            self._setup("arrays://", "cam", fps, keyframes_only, None)
            self.info = StreamInfo("arrays://", "raw", 1000, 600, FPS, n / FPS, None, None)
            self.held = 0

        def _hold(self, payload):
            self.held += 1
            return payload.copy()

        def _make(self, t, held):
            out = held
            if tensor:
                import torch

                out = torch.from_numpy(held)
            return self._frame(t, None, held[..., 0], lambda: out)

        def __iter__(self):
            timed = ((i / FPS, np.full((600, 1000, 3), i % 256, np.uint8)) for i in range(n))
            if keyframes_only:  # every 10th frame is a keyframe; the others only the present may take
                from vam_engine.ingest.sampler import PresentOnly

                timed = ((t, a if round(t * FPS) % 10 == 0 else PresentOnly(a)) for t, a in timed)
            yield from self._sample(timed, self._make, self._hold)

    return Body()


@pytest.mark.parametrize("keyframes_only,tensor", [(False, False), (True, False), (False, True)])
def test_the_generic_present_path_of_the_other_decoder_bodies(keyframes_only, tensor):
    if tensor:
        pytest.importorskip("torch")
    plain = [f.t_rel for f in _array_body(100, 0.5, keyframes_only=keyframes_only)]
    body = _array_body(100, 0.5, keyframes_only=keyframes_only, tensor=tensor)
    body.want_present(2.0)
    samples, present = [], []
    for f in body:
        if isinstance(f, PresentFrame):
            arr = f.rgb(448)
            assert isinstance(arr, np.ndarray) and arr.shape == (200, 334, 3)  # strided by 3 to fit 448
            assert int(arr[0, 0, 0]) == round(f.t_rel * FPS) % 256
            present.append(f.t_rel)
        else:
            samples.append(f.t_rel)
    assert samples == plain and present == pytest.approx([0.5 * k for k in range(20)])
    # every sample (and every keyframe) here is also a present frame: each was held (copied) once
    assert set(samples) <= set(present) and body.held == len(present)
