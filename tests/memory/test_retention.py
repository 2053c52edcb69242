"""Hierarchical retention (vam_engine.memory.retention) against a small in-memory store that
satisfies the RetentionStore protocol and keeps real JPEG files under tmp_path."""
from __future__ import annotations

import io
import random
import shutil
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vam_engine.config import RetentionConfig
from vam_engine.memory.retention import (
    DEFAULT_TIERS, RetentionPass, RetentionRow, RetentionStore, RetentionWorker, Tier, band_of, check_tiers,
    plan_camera, reencode_jpeg, thin)

HOUR, DAY = 3600.0, 86400.0
T0 = 1.7e9  # unix seconds of the first moment


def _jpeg(w: int, h: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([(xx * 255 // max(1, w - 1)), (yy * 255 // max(1, h - 1)), (xx + yy) % 256], -1)
    img = np.clip(img + rng.integers(-20, 20, img.shape), 0, 255).astype(np.uint8)
    b = io.BytesIO()
    Image.fromarray(img).save(b, format="JPEG", quality=90)
    return b.getvalue()


_SMALL = [_jpeg(64, 48, s) for s in range(4)]


class FakeStore:
    """Rows in a dict, frame files on disk (paths relative to root), like Store."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.rows: dict[int, dict] = {}
        self._next = 1
        self._lock = threading.Lock()
        self.fail_set_tier = 0  # make the next n set_tier calls raise (a crash after the rename)

    def add(self, camera: str, t: float, *, protected: bool = False, jpeg: bytes | None = None) -> int:
        with self._lock:
            mid = self._next
            self._next += 1
        rel = Path("frames") / camera / f"{mid:08d}.jpg"
        (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.root / rel).write_bytes(jpeg if jpeg is not None else _SMALL[mid % len(_SMALL)])
        with self._lock:
            self.rows[mid] = dict(camera=camera, t=float(t), tier="recent", protected=protected, path=rel)
        return mid

    # RetentionStore
    def cameras(self) -> list[str]:
        with self._lock:
            return sorted({r["camera"] for r in self.rows.values()})

    def retention_rows(self, camera_id: str) -> list[RetentionRow]:
        with self._lock:
            items = [(i, dict(r)) for i, r in self.rows.items() if r["camera"] == camera_id]
        items.sort(key=lambda x: (x[1]["t"], x[0]))
        return [RetentionRow(i, r["t"], r["tier"], r["protected"], r["path"], self._size(r["path"]))
                for i, r in items]

    def _size(self, rel: Path) -> int:
        try:
            return (self.root / rel).stat().st_size
        except FileNotFoundError:
            return 0

    def delete_moments(self, ids: list[int]) -> None:
        with self._lock:
            for i in ids:
                r = self.rows.get(i)
                if r is None or r["protected"]:
                    continue
                (self.root / r["path"]).unlink(missing_ok=True)
                del self.rows[i]

    def set_tier(self, ids_and_tiers: list[tuple[int, str]]) -> None:
        if self.fail_set_tier:
            self.fail_set_tier -= 1
            raise OSError("simulated crash before the tiers were recorded")
        with self._lock:
            for i, tier in ids_and_tiers:
                self.rows[i]["tier"] = tier

    def frame_bytes(self) -> int:
        with self._lock:
            paths = [r["path"] for r in self.rows.values()]
        return sum(self._size(p) for p in paths)

    # helpers for the tests
    def times(self, camera: str) -> list[float]:
        return [r.t for r in self.retention_rows(camera)]

    def snapshot(self) -> dict:
        with self._lock:
            rows = {i: dict(r) for i, r in self.rows.items()}
        return {i: (r["t"], r["tier"], (self.root / r["path"]).read_bytes()) for i, r in rows.items()}


class CountingEncoder:
    """The real encoder, recording (moment file, tier) per call."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []

    def __call__(self, path: Path, tier: Tier) -> int:
        self.calls.append((Path(path).name, tier.name))
        return reencode_jpeg(path, tier)


def gap_violations(store: FakeStore, camera: str, tiers=DEFAULT_TIERS, gaps=None) -> list:
    """Consecutive kept pairs closer than the later one's tier gap where the later one is not
    protected (first/last/keyframe)."""
    rows = store.retention_rows(camera)
    gaps = gaps or [t.min_gap_s for t in tiers]
    now = rows[-1].t
    bad = []
    for k in range(1, len(rows)):
        a, b = rows[k - 1], rows[k]
        if b.protected or k == len(rows) - 1:
            continue
        g = gaps[band_of(now - b.t, tiers)]
        if b.t - a.t < g - 1e-6:
            bad.append((a.t, b.t, g))
    return bad


# -- tiers and the pure thinning ------------------------------------------------------------------
def test_default_tiers_are_vam_table_5():
    # VAM's tiers, but the recent one keeps whatever the camera's own sampling kept (no gap)
    assert [(t.name, t.max_age_s, t.min_gap_s, t.max_side, t.quality) for t in DEFAULT_TIERS] == [
        ("recent", 3600.0, 0.0, None, None), ("mid", 86400.0, 20.0, 768, 70), ("long", None, 120.0, 512, 45)]
    assert not DEFAULT_TIERS[0].recompresses and DEFAULT_TIERS[1].recompresses
    assert [band_of(a, DEFAULT_TIERS) for a in (0, 3600, 3600.5, 86400, 86401, 1e9)] == [0, 0, 1, 1, 2, 2]
    with pytest.raises(ValueError):
        check_tiers([Tier("a", 10, 1), Tier("b", 5, 2), Tier("c", None, 3)])
    with pytest.raises(ValueError):
        check_tiers([Tier("a", 10, 1)])  # last tier must be unbounded
    with pytest.raises(ValueError):
        check_tiers([Tier("a", 10, 1), Tier("a", None, 1)])


def test_greedy_thinning_is_a_fixed_point():
    rng = random.Random(7)
    for trial in range(300):
        n = rng.randint(1, 60)
        times = sorted(rng.uniform(0, 400) for _ in range(n))
        bands = sorted(rng.randint(0, 2) for _ in range(n))[::-1]  # older first: higher band first
        prot = [rng.random() < 0.1 for _ in range(n)]
        gaps = [1.0, 20.0, 120.0]
        keep = thin(times, bands, prot, gaps)
        sub = [i for i in range(n) if keep[i]]
        again = thin([times[i] for i in sub], [bands[i] for i in sub], [prot[i] for i in sub], gaps)
        assert all(again), trial
        # and it is the greedy rule: every kept unprotected moment is >= its gap after the previous kept
        for a, b in zip(sub, sub[1:]):
            assert prot[b] or b == n - 1 or times[b] - times[a] >= gaps[bands[b]] - 1e-6


def test_plans_are_stable_as_time_advances():
    """Pure planning on random streams appended in random chunks: a survivor is deleted later
    only when its band changed (or it was the previous last moment), each moment moves to a tier
    at most once, and re-planning the result changes nothing."""
    rng = random.Random(1)
    tiers = (Tier("a", 50.0, 1.0), Tier("b", 400.0, 7.0, 64, 70), Tier("c", None, 30.0, 32, 40))
    for trial in range(40):
        rows: dict[int, list] = {}  # id -> [t, tier, protected]
        t, nid = 0.0, 0
        prev_band: dict[int, int] = {}
        prev_last = None
        moves: Counter = Counter()
        for step in range(30):
            for _ in range(rng.randint(0, 25)):
                t += rng.choice([0.3, 0.5, 1.0, 2.0, 5.0]) if rng.random() > 0.05 else rng.uniform(50, 500)
                rows[nid] = [t, "a", rng.random() < 0.05]
                nid += 1
            rr = [RetentionRow(i, r[0], r[1], r[2], Path("x"), 1) for i, r in sorted(rows.items())]
            plan = plan_camera(rr, tiers)
            band = {r.moment_id: b for r, b in zip(rr, plan.bands)}
            for i in plan.delete_ids:
                assert i not in prev_band or band[i] != prev_band[i] or i == prev_last, (trial, step, i)
                del rows[i]
            for r, b in plan.reencode:
                moves[(r.moment_id, b)] += 1
                rows[r.moment_id][1] = tiers[b].name
            rr = [RetentionRow(i, r[0], r[1], r[2], Path("x"), 1) for i, r in sorted(rows.items())]
            again = plan_camera(rr, tiers)
            assert again.delete_ids == [] and again.reencode == []
            prev_band = {i: band[i] for i in rows}
            prev_last = max(rows) if rows else None
        assert not moves or max(moves.values()) == 1


# -- a long simulated stream ----------------------------------------------------------------------
def _session(store: FakeStore, cam: str, start: float, minutes: float, rng: random.Random, every: int = 37):
    t = start
    k = 0
    while t < start + minutes * 60:
        store.add(cam, t, protected=(k % every == every - 1))
        k += 1
        t += rng.choice([0.4, 0.7, 1.0, 1.5, 2.0, 3.0]) if rng.random() > 0.02 else 90.0  # rare holes


def test_long_stream_thins_recompresses_once_and_is_stable(tmp_path):
    """3 days of one camera: a 5-minute session every 4 hours, a pass after each session (so
    moments cross recent -> mid -> long between passes)."""
    store = FakeStore(tmp_path)
    enc = CountingEncoder()
    rp = RetentionPass(store, encoder=enc, chunk=16)
    rng = random.Random(3)
    cam = "cam0"
    first_id = None
    protected_ids: set[int] = set()
    prev_bands: dict[int, int] = {}
    prev_last = None
    tier_index = {t.name: i for i, t in enumerate(DEFAULT_TIERS)}
    n_sessions = 18
    for s in range(n_sessions):
        _session(store, cam, T0 + s * 4 * HOUR, 5, rng)
        if first_id is None:
            first_id = min(store.rows)
        protected_ids |= {i for i, r in store.rows.items() if r["protected"]}
        before = set(store.rows)
        rows = store.retention_rows(cam)
        plan = plan_camera(rows, DEFAULT_TIERS)
        bands = {r.moment_id: b for r, b in zip(rows, plan.bands)}
        rep = rp.run()
        assert rep.complete and not rep.errors, rep
        deleted = before - set(store.rows)
        assert rep.deleted == len(deleted)
        # stability: a moment that survived a pass is deleted later only when its band changed
        # (or it was the camera's last moment, protected only by that position)
        for i in deleted:
            if i in prev_bands:
                assert bands[i] != prev_bands[i] or i == prev_last, (s, i)
        kept_rows = store.retention_rows(cam)
        prev_bands = {r.moment_id: bands[r.moment_id] for r in kept_rows}
        prev_last = kept_rows[-1].moment_id
        # invariants after every pass
        assert first_id in store.rows and protected_ids <= set(store.rows)
        assert kept_rows[-1].moment_id == max(before)
        assert gap_violations(store, cam) == []
        for r in kept_rows:
            assert r.tier == DEFAULT_TIERS[bands[r.moment_id]].name  # every file at its band's quality
        # idempotent: a second run changes nothing
        snap = store.snapshot()
        n_enc = len(enc.calls)
        rep2 = rp.run()
        assert (rep2.deleted, rep2.reencoded, rep2.retiered) == (0, 0, 0)
        assert len(enc.calls) == n_enc and store.snapshot() == snap
    # encodes: at most once per (moment, tier), and only for tiers that recompress
    counts = Counter(enc.calls)
    assert counts and max(counts.values()) == 1
    per_moment = Counter(name for name, _ in enc.calls)
    final_tier = {f"{i:08d}.jpg": tier_index[r["tier"]] for i, r in store.rows.items()}
    for name, n in per_moment.items():
        if name in final_tier:
            assert n == final_tier[name]  # mid: 1 encode, long: 2 (recent -> mid -> long), none for recent
    tiers_now = Counter(r["tier"] for r in store.rows.values())
    assert tiers_now["long"] > 0 and tiers_now["mid"] > 0 and tiers_now["recent"] > 0
    # thinning did happen: of ~18 x 190 moments, the last session (recent) and ~20-25 per older one
    assert len(store.rows) < 0.35 * (max(store.rows))
    for i, r in store.rows.items():
        with Image.open(store.root / r["path"]) as im:
            assert im.format == "JPEG"


def test_recompression_downscales_once_per_transition(tmp_path):
    store = FakeStore(tmp_path)
    enc = CountingEncoder()
    rp = RetentionPass(store, encoder=enc)
    big = _jpeg(1000, 700, 1)
    a = store.add("c", T0, jpeg=big)
    b = store.add("c", T0 + 60, jpeg=big, protected=True)
    c = store.add("c", T0 + 70, jpeg=big)
    rp.run()
    assert enc.calls == [] and c in store.rows  # all recent: never recompressed
    d = store.add("c", T0 + 2 * HOUR)  # a, b, c -> mid
    rp.run()
    assert sorted(n for n, t in enc.calls) == [f"{a:08d}.jpg", f"{b:08d}.jpg"]  # c is 10 s after b: thinned
    assert c not in store.rows
    for i in (a, b):
        with Image.open(store.root / store.rows[i]["path"]) as im:
            assert max(im.size) <= 768 and abs(im.size[0] / im.size[1] - 1000 / 700) < 0.01
    mid_bytes = (store.root / store.rows[a]["path"]).stat().st_size
    rp.run()
    assert len(enc.calls) == 2
    store.add("c", T0 + 2 * DAY)  # -> long
    rp.run()
    # a, b: mid -> long; d (recent, the last before) -> long directly
    assert Counter(enc.calls[2:]) == {(f"{i:08d}.jpg", "long"): 1 for i in (a, b, d)}
    for i in (a, b):
        assert store.rows[i]["tier"] == "long"
        with Image.open(store.root / store.rows[i]["path"]) as im:
            assert max(im.size) <= 512
    assert (store.root / store.rows[a]["path"]).stat().st_size < mid_bytes
    rp.run()
    assert len(enc.calls) == 5


def test_recent_to_long_after_a_pause_encodes_once_from_the_original(tmp_path):
    store = FakeStore(tmp_path)
    enc = CountingEncoder()
    rp = RetentionPass(store, encoder=enc)
    big = _jpeg(900, 600, 2)
    ids = [store.add("c", T0 + k * 200.0, jpeg=big) for k in range(4)]
    rp.run()
    store.add("c", T0 + 9 * DAY)  # the camera was off for a week
    rp.run()
    assert sorted(enc.calls) == sorted((f"{i:08d}.jpg", "long") for i in ids)
    for i in ids:
        assert store.rows[i]["tier"] == "long"
        with Image.open(store.root / store.rows[i]["path"]) as im:
            assert im.size == (512, 341)


def test_age_is_measured_on_each_cameras_own_axis(tmp_path):
    store = FakeStore(tmp_path)
    rp = RetentionPass(store, encoder=CountingEncoder())
    # cam_new ends now-ish, cam_old stopped a week before (absolute times), cam_rel has only
    # relative times (seconds since its source started): each has 30 minutes of 1 moment / 2 s.
    for cam, base in (("cam_new", T0 + 7 * DAY), ("cam_old", T0), ("cam_rel", 0.0)):
        for k in range(900):
            store.add(cam, base + 2.0 * k)
    rep = rp.run()
    assert rep.deleted == 0 and rep.reencoded == 0
    assert rep.kept_per_tier == {"recent": 2700, "mid": 0, "long": 0}
    # cam_old records again two hours later on its axis: its old moments are now mid (the
    # others did not age: nothing new on their axes)
    store.add("cam_old", T0 + 1798 + 2 * HOUR)
    rep = rp.run()
    assert {r["tier"] for r in store.rows.values() if r["camera"] != "cam_old"} == {"recent"}
    old = store.retention_rows("cam_old")
    assert [r.tier for r in old[:-1]] == ["mid"] * (len(old) - 1) and old[-1].tier == "recent"
    assert 90 <= len(old) <= 92  # 30 min at a 20 s gap, + first and last
    assert gap_violations(store, "cam_old") == []


def test_disk_budget_thins_the_oldest_tier_first(tmp_path):
    store = FakeStore(tmp_path)
    rng = random.Random(5)
    for s in range(4):  # sessions two days apart: three in long, the last one recent
        _session(store, "c", T0 + s * 2 * DAY, 40, rng, every=400)
    RetentionPass(store, encoder=CountingEncoder()).run()
    total = store.frame_bytes()
    long_bytes = sum(r.nbytes for r in store.retention_rows("c") if r.tier == "long")
    prot = {i for i, r in store.rows.items() if r["protected"]}
    budget = total - long_bytes // 2
    rp = RetentionPass(store, cfg=RetentionConfig(disk_budget_bytes=budget), encoder=CountingEncoder())
    rep = rp.run()
    assert rep.budget_met and store.frame_bytes() <= budget, rep
    assert rep.gaps_s["long"] > 120 and rep.gaps_s["mid"] == 20 and rep.gaps_s["recent"] == 0
    assert prot <= set(store.rows)
    assert gap_violations(store, "c", gaps=[rp.gaps[0], rp.gaps[1], rp.gaps[2]]) == []
    snap = store.snapshot()
    rep2 = rp.run()  # idempotent under the raised gaps
    assert rep2.deleted == 0 and store.snapshot() == snap and rep2.budget_met
    # a budget that cannot be met: only protected moments (and first/last) remain, and it says so
    rp = RetentionPass(store, cfg=RetentionConfig(disk_budget_bytes=1), encoder=CountingEncoder())
    rep = rp.run()
    rows = store.retention_rows("c")
    assert rep.budget_met is False and any("cannot be met" in e for e in rep.errors)
    assert all(r.protected for r in rows[1:-1]) and prot <= {r.moment_id for r in rows}


def test_bounded_runs_resume_and_reach_the_same_state(tmp_path):
    a, b = FakeStore(tmp_path / "a"), FakeStore(tmp_path / "b")
    for st in (a, b):
        r = random.Random(11)
        for cam in ("x", "y"):
            for s in range(3):
                _session(st, cam, T0 + s * 10 * HOUR, 10, r)
    RetentionPass(a, encoder=CountingEncoder()).run()
    rp = RetentionPass(b, encoder=CountingEncoder(), chunk=7)
    runs = 0
    while True:
        rep = rp.run(max_moments=25)
        runs += 1
        assert rep.deleted + rep.retiered <= 25
        if rep.complete:
            break
        assert runs < 500
    assert runs > 3
    strip = lambda s: {k: (t, tier) for k, (t, tier, _) in s.snapshot().items()}  # noqa: E731
    assert strip(a) == strip(b)
    assert rp.run(budget_s=0.0).complete is False  # a zero time budget stops before any work


def test_crash_after_rename_does_not_encode_twice(tmp_path):
    store = FakeStore(tmp_path)
    big = _jpeg(800, 600, 3)
    i = store.add("c", T0, jpeg=big)
    store.add("c", T0 + 2 * HOUR)
    store.fail_set_tier = 1
    rep = RetentionPass(store).run()
    assert any("OSError" in e for e in rep.errors) and store.rows[i]["tier"] == "recent"
    once = (store.root / store.rows[i]["path"]).read_bytes()
    rep = RetentionPass(store).run()
    assert not rep.errors and store.rows[i]["tier"] == "mid"
    assert (store.root / store.rows[i]["path"]).read_bytes() == once  # recognised by its comment


def test_missing_file_is_reported_not_raised(tmp_path):
    store = FakeStore(tmp_path)
    i = store.add("c", T0)
    store.add("c", T0 + 2 * HOUR)
    (store.root / store.rows[i]["path"]).unlink()
    rep = RetentionPass(store).run()
    assert rep.reencoded == 0 and any(f"moment {i}" in e for e in rep.errors)
    assert store.rows[i]["tier"] == "recent"


def test_fake_store_satisfies_the_protocol(tmp_path):
    assert isinstance(FakeStore(tmp_path), RetentionStore)


# -- the worker -----------------------------------------------------------------------------------
def test_worker_runs_passes_and_stops_cleanly(tmp_path):
    store = FakeStore(tmp_path)
    for k in range(50):
        store.add("c", T0 + 0.5 * k)
    store.add("c", T0 + 2 * HOUR)  # the first 50 are mid-tier now: 20 s apart at most
    reports = []
    w = RetentionWorker(store, cfg=RetentionConfig(interval_s=0.05), on_report=reports.append)
    assert w.interval_s == 0.05
    assert w.start()
    deadline = time.monotonic() + 10
    while w.passes < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    store.add("c", T0 + 3 * HOUR)  # ingest goes on while the worker runs
    w.trigger()
    time.sleep(0.1)
    w.stop()
    assert not w.running and w.passes >= 3 and not w.errors
    assert len(store.rows) < 50 and reports[0].deleted > 0
    assert not any(t.name == "vam-retention" for t in threading.enumerate())


def test_worker_never_raises_and_respects_enabled(tmp_path):
    class Broken(FakeStore):
        def cameras(self):
            raise RuntimeError("store is gone")

    w = RetentionWorker(Broken(tmp_path), cfg=RetentionConfig(interval_s=0.02))
    w.start()
    deadline = time.monotonic() + 10
    while len(w.errors) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    w.stop()
    assert not w.running and any("store is gone" in e for e in w.errors)
    off = RetentionWorker(FakeStore(tmp_path / "o"), cfg=RetentionConfig(enabled=False))
    assert off.start() is False and not off.running
    off.stop()
    shutil.rmtree(tmp_path / "o", ignore_errors=True)


def test_a_pass_over_the_real_moment_store(tmp_path):
    """The Store implements the retention interface: rows, files and vectors go together,
    first/last and event keyframes stay, old frames are re-encoded once."""
    from PIL import Image as _Image

    from support.clips import code_frame
    from vam_engine.engine import Engine
    from vam_engine.memory.retention import RetentionPass

    t0 = 1_700_000_000.0
    # every frame passes the gates and the committer (no dedup); events only by the 300 s cap, so
    # each of the three sessions is one event with 8 protected keyframes
    commit = {"dedup_fallback_sim": 1.0, "event_fallback_sim": -1.0, "min_history": 100_000}
    with Engine(tmp_path / "store", {"ingest": {"fps": 10.0}, "gate": {"diff_min_mad": 0.0, "ssim_max": 1.0},
                                      "commit": commit}, device="cpu") as eng:
        times = [i * 0.5 for i in range(40)] + [3 * 3600 + i * 0.5 for i in range(20)] + [2 * 86400 + i for i in range(5)]
        for i, t in enumerate(times):
            eng.push("cam", code_frame(i, 320, 240, seed=3), t, t_abs=t0 + t)
        eng.end_push("cam")
        before = eng.moments("cam")
        protected = {r.moment_id for r in eng.store.moments.retention_rows("cam") if r.protected}
        report = RetentionPass(eng.store.moments).run()
        after = eng.moments("cam")
        ids = {m.moment_id for m in after}
        assert not report.errors and report.deleted == len(before) - len(after) > 0
        assert protected <= ids and before[0].moment_id in ids and before[-1].moment_id in ids
        assert {r[0] for r in eng.store.vector_table.rows("frame")} == ids  # thinned frames left the index
        gone = [m for m in before if m.moment_id not in ids]
        assert all(not Path(m.frame_path).exists() for m in gone)
        old = [m for m in after if m.t_abs is not None and m.t_abs < t0 + 2 * 86400 - 86400]
        assert old and all(m.tier == "long" and max(_Image.open(m.frame_path).size) <= 512 for m in old)
        assert RetentionPass(eng.store.moments).run().deleted == 0  # a second pass changes nothing
        assert RetentionPass(eng.store.moments).run().reencoded == 0
