"""``Engine.push`` from a camera driver that reuses one buffer: what is stored is what was
pushed, and frames the sampler rejects cost no copy and no conversion."""
import numpy as np
import pytest
from PIL import Image

from support.clips import code_frame, read_code
from vam_engine.engine import pushed as pushed_cameras_module
from vam_engine.ingest import pushed as pushed_module
from vam_engine.engine import Engine

CFG = {"ingest": {"fps": 2.0}}
N = 8


def pushed(i: int) -> np.ndarray:
    """Frame i: its index in code blocks over a texture, tinted with a colour of its own (so the
    semantic dedup keeps most of them)."""
    img = code_frame(i, seed=7).astype(np.int16)
    tint = np.array([(i * 97) % 160 - 80, (i * 53) % 160 - 80, (i * 31) % 160 - 80], np.int16)
    img[img.shape[0] // 3:] += tint
    return np.clip(img, 0, 255).astype(np.uint8)


def push_through_one_buffer(eng, camera, buffer, write):
    """Push N sampled frames (t = 0, 0.5, ...) and between them N frames the 2 fps sampler
    rejects, all through ``buffer``, overwritten with white right after each push."""
    sampled = []
    for i in range(N):
        for t, frame in ((i * 0.5, pushed(i)), (i * 0.5 + 0.25, pushed(100 + i))):
            write(buffer, frame)
            sampled.append(eng.push(camera, buffer, t))
            write(buffer, np.full_like(frame, 255))
    eng.end_push(camera)  # decides the held frame: every kept frame is stored
    return sampled


def small(img: np.ndarray) -> np.ndarray:
    """8 x 8 pixel block means, flattened: JPEG keeps these, not the pixel noise."""
    h, w = img.shape[0] // 8 * 8, img.shape[1] // 8 * 8
    return img[:h, :w].reshape(h // 8, 8, w // 8, 8, -1).mean(axis=(1, 3)).ravel()


def check_stored(eng, camera):
    ms = eng.moments(camera)
    assert len(ms) >= N // 2, "the tinted frames should mostly be kept"
    for m in ms:
        i = round(m.t_rel / 0.5)
        assert m.t_rel == i * 0.5
        with Image.open(m.frame_path) as im:
            got = np.asarray(im.convert("RGB"), np.float32)
        want = pushed(i).astype(np.float32)
        assert read_code(got) == i, f"t={m.t_rel}: the JPEG shows another frame"
        assert np.abs(got.mean(axis=(0, 1)) - want.mean(axis=(0, 1))).max() < 4, f"t={m.t_rel}: colour differs"
        assert np.corrcoef(small(got), small(want))[0, 1] > 0.95, f"t={m.t_rel}: the picture differs"


def count_gray_conversions(monkeypatch):
    calls = []
    real = pushed_module.rgb_to_gray
    monkeypatch.setattr(pushed_module, "rgb_to_gray", lambda rgb: calls.append(1) or real(rgb))
    return calls


def test_a_reused_numpy_buffer_stores_the_frames_pushed(tmp_path, monkeypatch):
    conversions = count_gray_conversions(monkeypatch)
    buffer = np.empty_like(pushed(0))
    with Engine(tmp_path / "store", CFG, device="cpu") as eng:
        sampled = push_through_one_buffer(eng, "robot", buffer, np.copyto)
        assert sampled == [True, False] * N
        assert len(conversions) == N, "only sampled frames are converted to gray"
        check_stored(eng, "robot")
        # the present (working memory) copied what it kept before the buffer was overwritten
        short, medium = eng.working.window("robot", N * 0.5)
        assert short and medium
        for arr, t in short + medium:
            assert arr.mean() < 250 and read_code(arr) == (round(t / 0.5) if t * 4 % 2 == 0 else 100 + int(t / 0.5))


def test_a_reused_torch_buffer_stores_the_frames_pushed(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    conversions = count_gray_conversions(monkeypatch)
    buffer = torch.empty(pushed(0).shape, dtype=torch.uint8)
    with Engine(tmp_path / "store", CFG, device="cpu") as eng:
        sampled = push_through_one_buffer(eng, "robot", buffer, lambda b, f: b.copy_(torch.from_numpy(f)))
        assert sampled == [True, False] * N
        assert len(conversions) == N
        check_stored(eng, "robot")


def test_a_non_contiguous_view_is_accepted_and_copied(tmp_path):
    big = np.ascontiguousarray(np.concatenate([pushed(0), pushed(1)], axis=1))
    view = big[:, : pushed(0).shape[1]]  # the left half: strided rows
    assert not view.flags.c_contiguous
    with Engine(tmp_path / "store", CFG, device="cpu") as eng:
        assert eng.push("cam", view, 0.0)
        big[:] = 255
        eng.end_push("cam")
        (m,) = eng.moments("cam")
        with Image.open(m.frame_path) as im:
            assert read_code(np.asarray(im.convert("RGB"))) == 0


def test_frames_not_taken_are_neither_copied_nor_converted(tmp_path, monkeypatch):
    """A frame neither the sampler nor the present takes costs no copy and no conversion; a
    taken frame is copied on the caller's thread and converted to gray on another one."""
    import threading

    conversions = []
    real_gray = pushed_module.rgb_to_gray
    monkeypatch.setattr(pushed_module, "rgb_to_gray",
                        lambda rgb: conversions.append(threading.current_thread()) or real_gray(rgb))
    copies = []
    real_copy = pushed_cameras_module.own_copy
    monkeypatch.setattr(pushed_cameras_module, "own_copy", lambda *a: copies.append(1) or real_copy(*a))
    with Engine(tmp_path / "store", {"ingest": {"fps": 0.5}}, device="cpu") as eng:
        frame = pushed(0)
        taken = [eng.push("cam", frame, i / 30) for i in range(90)]  # 3 s at 30 fps
        assert taken == [i % 60 == 0 for i in range(90)]  # 0.5 fps: t = 0 and t = 2
        short, _ = eng.working.window("cam", 3.0)
        assert [t for _, t in short] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]  # the present takes 2 fps
        assert len(copies) == 2, "only the sampled frames are copied"
        eng.flush()
        assert len(conversions) == 2, "only the sampled frames are converted"
        assert all(th is not threading.main_thread() for th in conversions), "converted on the caller's thread"


@pytest.mark.parametrize("layout", ["c", "cropped", "strided", "transposed", "fortran"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_present_keeps_a_private_downscaled_copy(layout, k):
    from vam_engine.reason.working import _strided_copy

    base = np.random.default_rng(k).integers(0, 256, (61, 83, 3), dtype=np.uint8)
    arr = {"c": base, "cropped": base[:, 5:70], "strided": base[3:, ::2], "transposed": base.transpose(1, 0, 2),
           "fortran": np.asfortranarray(base)}[layout]
    out = _strided_copy(arr, k)
    assert np.array_equal(out, arr[::k, ::k]) and out.flags.c_contiguous
    assert not np.shares_memory(out, arr)


def test_pooled_copies_are_reused_only_once_nothing_references_them():
    from vam_engine.ingest.buffers import BufferPool

    pool = BufferPool(per_shape=2)
    frame = pushed(0)
    a = pool.copy(frame)
    view = a[1:, ::2]  # a batch or payload holding a view keeps the buffer busy
    del a
    b = pool.copy(pushed(1))
    assert not np.shares_memory(b, view) and np.array_equal(view, frame[1:, ::2])
    c = pool.copy(pushed(2))  # over per_shape: a fresh array
    assert not np.shares_memory(c, b) and not np.shares_memory(c, view)
    addr = view.base.__array_interface__["data"][0]
    del view
    d = pool.copy(pushed(3))  # the first buffer is free again
    assert d.__array_interface__["data"][0] == addr and np.array_equal(d, pushed(3))
    assert np.array_equal(b, pushed(1))


def test_a_cameras_first_push_readies_the_buffer_of_its_first_sampled_frame(tmp_path, monkeypatch):
    """The camera's first push (which opens its source) faults in a pool buffer of the frame's
    shape, so its first sampled push copies into it instead of paying a fresh 2.7 MB array's
    page faults on the caller's thread."""
    from vam_engine.ingest.buffers import BufferPool

    made, taken = [], []

    class Recording(BufferPool):
        def reserve(self, shape, dtype):
            before = {id(b) for bufs in self._buffers.values() for b in bufs}
            super().reserve(shape, dtype)
            made.extend(id(b) for bufs in self._buffers.values() for b in bufs if id(b) not in before)

        def take(self, shape, dtype):
            out = super().take(shape, dtype)
            taken.append(id(out))
            return out

    monkeypatch.setattr(pushed_cameras_module, "BufferPool", Recording)
    frame = pushed(0)
    with Engine(tmp_path / "store", {"ingest": {"fps": 0.5}}, device="cpu") as eng:
        assert not eng.push("cam", frame, -1.0)  # before the first tick: not sampled
        assert len(made) == 1 and not taken, "the first push readies one buffer and copies nothing"
        assert eng.push("cam", frame, 0.0)
        assert taken == made, "the first sampled push copies into the readied buffer"
        eng.end_push("cam")
        (m,) = eng.moments("cam")
        with Image.open(m.frame_path) as im:
            assert read_code(np.asarray(im.convert("RGB"))) == 0
