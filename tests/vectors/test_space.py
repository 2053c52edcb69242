"""VectorSpace (vam_engine/vectors/space.py) against numpy brute force."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from support.tolerances import VECTOR_RECALL_AT_10, VECTOR_TOP1_SCORE_ATOL
from support.vectors import unit_rows
from vam_engine.config import VectorConfig
from vam_engine.device import cuda_available
from vam_engine.errors import VamError
from vam_engine.vectors import VectorError, VectorSpace
from vam_engine.vectors import bodies as vector_bodies, space as V

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def data(n, d, rng, nq=40, clusters=0):
    """Random unit vectors (with ``clusters`` > 0: around that many centers), random distinct
    non-contiguous ids, and queries near stored vectors."""
    if clusters:
        c = unit_rows(rng.standard_normal((clusters, d)), np.float32)
        spread = 0.7 * unit_rows(rng.standard_normal((n, d)), np.float32)
        x = unit_rows(c[rng.integers(0, clusters, n)] + spread, np.float32)
    else:
        x = unit_rows(rng.standard_normal((n, d)), np.float32)
    ids = np.sort(rng.choice(10 * n, n, replace=False)).astype(np.int64)
    ids = rng.permutation(ids)
    q = unit_rows(x[rng.integers(0, n, nq)] + 0.2 * rng.standard_normal((nq, d)), np.float32)
    return x, ids, q


def brute(x, ids, q, k, keep=None):
    """Exact (scores, ids) over the rows of x (those in ``keep`` ids only)."""
    if keep is not None:
        m = np.isin(ids, keep)
        x, ids = x[m], ids[m]
    s = q @ x.T
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, order, 1), ids[order]


def recall(found, truth):
    k = truth.shape[1]
    return np.mean([len(set(f[f >= 0]) & set(t[t >= 0])) / k for f, t in zip(found, truth)])


def space(kind="flat", dim=32, device="cpu", ann_min_size=1, **kw):
    kw.setdefault("background_build", False)
    return VectorSpace("frame", dim, VectorConfig(index=kind, ann_min_size=ann_min_size), device=device, **kw)


TIE = 2e-6  # float32 scores this close may come in either order (another summation order)


def check_exact(sp, x, ids, q, k, keep=None, allowed=None):
    s, i = sp.search(q, k, allowed=allowed)
    bs, bi = brute(x, ids, q, k, keep)
    kk = bi.shape[1]
    got = i[:, :kk]
    near_tie = np.zeros(bs.shape, bool)
    close = np.abs(np.diff(bs, axis=1)) < TIE
    near_tie[:, 1:] |= close
    near_tie[:, :-1] |= close
    assert ((got == bi) | near_tie).all(), (got, bi)  # the exact ranking, up to the order of near ties
    row = {int(v): r for r, v in enumerate(ids)}
    true = np.einsum("mkd,md->mk", x[np.vectorize(row.__getitem__)(got)], q)
    np.testing.assert_allclose(true, bs, atol=2e-5)  # each found id scores as the exact one at its rank
    if keep is not None:
        assert np.isin(got, keep).all()
    np.testing.assert_allclose(s[:, :kk], bs, atol=2e-5)
    assert (i[:, kk:] == -1).all() and np.isneginf(s[:, kk:]).all()
    assert s.dtype == np.float32 and i.dtype == np.int64 and s.shape == i.shape == (len(q), k)


# -- exact search ---------------------------------------------------------------------------------

@pytest.mark.parametrize("device", ["cpu", pytest.param("torch-cpu", marks=needs_torch)])
def test_exact_matches_brute_force(device, rng):
    x, ids, q = data(3000, 48, rng)
    sp = space("flat", 48, device)
    sp.add(ids[:1000], x[:1000] * 3.0)  # not normalized: the space normalizes
    sp.add(ids[1000:], x[1000:])
    assert len(sp) == 3000 and sp.index_kind == "flat"
    check_exact(sp, x, ids, q, 10)
    check_exact(sp, x, ids, q[:3], 1)
    # one 1-D query, k larger than the space
    small = space("flat", 48, device)
    small.add(ids[:5], x[:5])
    s, i = small.search(q[0], 8)
    assert s.shape == (1, 8)
    check_exact(small, x[:5], ids[:5], q[:1], 8)
    np.testing.assert_allclose(sp.get(ids[:4]), x[:4], atol=1e-6)


@needs_torch
def test_torch_fp16_body_rescored_in_fp32(rng):
    x, ids, q = data(2000, 32, rng)
    sp = space("flat", 32, "torch-cpu", torch_dtype=torch.float16)
    sp.add(ids, x)
    s, i = sp.search(q, 10)
    bs, bi = brute(x, ids, q, 10)
    assert recall(i, bi) >= 0.98
    # returned scores are the exact fp32 cosines of the returned ids
    rows = {v: r for r, v in enumerate(ids)}
    exact = np.array([[q[m] @ x[rows[v]] for v in i[m]] for m in range(len(q))])
    np.testing.assert_allclose(s, exact, atol=1e-5)
    sp.remove(i[:, 0])
    assert not np.isin(sp.search(q, 10)[1], i[:, 0]).any()


@pytest.mark.parametrize("device", ["cpu", pytest.param("torch-cpu", marks=needs_torch)])
def test_remove_then_search(device, rng):
    x, ids, q = data(2000, 32, rng)
    sp = space("flat", 32, device)
    sp.add(ids, x)
    gone = ids[::3]
    assert sp.remove(np.concatenate([gone, [10**9, 10**9]])) == len(gone)  # absent ids ignored
    assert sp.remove(gone) == 0
    keep = np.setdiff1d(ids, gone)
    assert len(sp) == len(keep)
    check_exact(sp, x, ids, q, 10, keep=keep)
    # the ids a search returns never include removed ones, even as nearest neighbours
    s, i = sp.search(x[np.isin(ids, gone)][:20], 5)
    assert not np.isin(i, gone).any()
    # a removed id can come back
    sp.add(gone[:5], x[np.isin(ids, gone[:5])])
    assert len(sp) == len(keep) + 5
    assert set(gone[:5]) <= set(sp.ids().tolist())
    # remove everything, then search
    assert sp.remove(sp.ids()) == len(keep) + 5
    s, i = sp.search(q, 3)
    assert (i == -1).all() and np.isneginf(s).all()


@pytest.mark.parametrize("device", ["cpu", pytest.param("torch-cpu", marks=needs_torch)])
def test_allowed_filter_exact_paths(device, rng):
    x, ids, q = data(4000, 32, rng)
    sp = space("flat", 32, device)
    sp.add(ids, x)
    for size in (3, 50, 400, 800, 3500):  # gathered (3, 50, 400), masked scans (800, 3500)
        allowed = rng.choice(ids, size, replace=False)
        check_exact(sp, x, ids, q, 10, keep=allowed, allowed=allowed)
    # absent ids in `allowed` are ignored; a list and a set work too
    allowed = list(ids[:7]) + [10**12, 5]
    allowed = [a for a in allowed if a not in set(ids[7:].tolist())]
    check_exact(sp, x, ids, q, 10, keep=ids[:7], allowed=allowed)
    check_exact(sp, x, ids, q, 4, keep=ids[:7], allowed=set(ids[:7].tolist()))
    s, i = sp.search(q, 5, allowed=np.array([], np.int64))
    assert (i == -1).all()
    s, i = sp.search(q, 5, allowed=[10**12])
    assert (i == -1).all()


def test_exact_blocks_merge(monkeypatch, rng):
    """Scans split into many blocks (scores and gathers) give the same exact answer."""
    monkeypatch.setattr(vector_bodies, "SCORE_BLOCK", 1 << 10)
    monkeypatch.setattr(vector_bodies, "GATHER_BLOCK", 1 << 10)
    monkeypatch.setattr(vector_bodies, "MIN_BLOCK", 64)
    monkeypatch.setattr(vector_bodies, "SINGLE_THREAD_MAX", 1 << 12)  # both the einsum and the BLAS branch
    x, ids, q = data(3000, 32, rng)
    sp = space("flat", 32)
    sp.add(ids, x)
    check_exact(sp, x, ids, q, 10)
    check_exact(sp, x, ids, q[:1], 10)
    for size in (5, 300, 600, 2500):  # gathered in blocks (5, 300), masked scans (600, 2500)
        allowed = rng.choice(ids, size, replace=False)
        check_exact(sp, x, ids, q, 7, keep=allowed, allowed=allowed)
        check_exact(sp, x, ids, q[:1], 7, keep=allowed, allowed=np.concatenate([allowed, allowed[:3]]))


# -- ANN --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ann_data():
    # a fixed seed: the ANN recall thresholds are set on this data (exact bodies get fresh seeds)
    return data(20_000, 64, np.random.default_rng(5), nq=100, clusters=200)


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_ann_recall_and_filters(kind, ann_data, monkeypatch):
    x, ids, q = ann_data
    sp = space(kind, 64, ann_min_size=10_000)
    sp.add(ids[:5000], x[:5000])
    assert sp.index_kind == "flat"  # exact below ann_min_size
    sp.add(ids[5000:], x[5000:])
    assert sp.index_kind == kind and sp.stats()["ann_ntotal"] == 20_000
    bs, bi = brute(x, ids, q, 10)
    s, i = sp.search(q, 10)
    assert recall(i, bi) >= 0.9
    # the returned scores are the true cosines of the returned ids
    rows = dict(zip(ids.tolist(), range(len(ids))))
    np.testing.assert_allclose(s[:, 0], np.einsum("md,md->m", q, x[[rows[v] for v in i[:, 0]]]), atol=1e-5)
    # filtered: the small-set path is exact; the large-set path goes through the index
    rng = np.random.default_rng(1)
    small = rng.choice(ids, 300, replace=False)
    check_exact(sp, x, ids, q, 10, keep=small, allowed=small)
    monkeypatch.setattr(V, "SMALL_ALLOWED_MAX", 100)
    big = rng.choice(ids, 6000, replace=False)
    s, i = sp.search(q, 10, allowed=big)
    assert np.isin(i, big).all()
    assert recall(i, brute(x, ids, q, 10, keep=big)[1]) >= 0.9


def test_hnsw_tombstones_and_rebuild(ann_data):
    x, ids, q = ann_data
    sp = space("hnsw", 64)
    sp.add(ids, x)
    rng = np.random.default_rng(2)
    gone = rng.choice(ids, 3000, replace=False)  # 15%: below the rebuild threshold
    assert sp.remove(gone) == 3000
    st = sp.stats()
    assert st["tombstones"] == 3000 and st["ann_ntotal"] == 20_000
    keep = np.setdiff1d(ids, gone)
    s, i = sp.search(q, 10)
    assert not np.isin(i, gone).any()
    assert recall(i, brute(x, ids, q, 10, keep=keep)[1]) >= 0.9
    # the removed vectors themselves as queries: never returned
    s, i = sp.search(x[np.isin(ids, gone)][:50], 10)
    assert not np.isin(i, gone).any() and (i >= 0).all()
    # past 20% the index is rebuilt over the live vectors
    more = rng.choice(keep, 2000, replace=False)
    sp.remove(more)
    st = sp.stats()
    assert st["tombstones"] == 0 and st["ann_ntotal"] == 15_000 and len(sp) == 15_000
    keep = np.setdiff1d(keep, more)
    s, i = sp.search(q, 10)
    assert not np.isin(i, np.concatenate([gone, more])).any()
    assert recall(i, brute(x, ids, q, 10, keep=keep)[1]) >= 0.9
    # re-adding a removed id works (a new label; the old one stays dead)
    sp.add(gone[:10], x[np.isin(ids, gone[:10])])
    s, i = sp.search(x[np.isin(ids, gone[:10])], 1)
    assert set(i[:, 0].tolist()) == set(gone[:10].tolist())


def _check_labels(sp):
    assert sp.index_kind != "flat"
    sp.check()
    st = sp.stats()
    assert st["ann_ntotal"] - st["tombstones"] == st["n"] == len(sp)


def test_check_names_a_label_that_holds_another_id(rng):
    x, ids, _ = data(1500, 16, rng)
    sp = space("hnsw", 16, ann_min_size=1000)
    sp.add(ids, x)
    sp.check()
    sp._label[[0, 1]] = sp._label[[1, 0]]  # deliberately broken from outside: two rows swap labels
    with pytest.raises(AssertionError, match="index labels name other ids"):
        sp.check()


def test_build_reconciles_changes_made_during_it(monkeypatch, rng):
    """Adds and removes that land while the index is being built (between its chunks) are
    matched up at the swap: every live row ends up with the right label, removed ones dead."""
    x, ids, q = data(3000, 32, rng)
    monkeypatch.setattr(V, "BUILD_CHUNK", 500)
    sp = space("hnsw", 32, ann_min_size=2000)
    sp.add(ids[:1900], x[:1900])
    real_add = V.Ann.add
    calls = []

    def add(self, vecs, vids):
        calls.append(len(vecs))
        if len(calls) == 2:  # mid-build: remove from the front (rows move) and add new ones
            sp.remove(ids[:300])
            sp.add(ids[2000:2600], x[2000:2600])
        return real_add(self, vecs, vids)

    monkeypatch.setattr(V.Ann, "add", add)
    sp.add(ids[1900:2000], x[1900:2000])  # crosses ann_min_size: builds (synchronously here)
    assert sp.index_kind == "hnsw"
    assert len(calls) == 5 and calls[-1] > 0  # 4 chunks, then the rows added or moved meanwhile
    _check_labels(sp)
    live = np.concatenate([ids[300:2000], ids[2000:2600]])
    assert set(sp.ids().tolist()) == set(live.tolist())
    xs = x[np.isin(ids, live)]
    s, i = sp.search(xs, 1)
    assert (i[:, 0] == ids[np.isin(ids, live)]).mean() > 0.99
    assert not np.isin(sp.search(q, 10)[1], ids[:300]).any()


def test_background_build_serves_exact_meanwhile(rng):
    x, ids, q = data(4000, 32, rng)
    sp = space("auto", 32, ann_min_size=3000, background_build=True)
    sp.add(ids[:2999], x[:2999])
    sp.add(ids[2999:], x[2999:])  # starts the build in a thread; searches do not wait for it
    check_exact(sp, x, ids, q, 5) if sp.index_kind == "flat" else None
    assert sp.wait_index(timeout=60)
    assert sp.index_kind == "hnsw" and sp.build_error is None
    _check_labels(sp)
    s, i = sp.search(q, 10)
    assert recall(i, brute(x, ids, q, 10)[1]) >= 0.95
    sp.close()


# -- snapshots ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["flat", "ivf", "hnsw"])
def test_save_load_round_trip(tmp_path, kind, rng):
    x, ids, q = data(3000, 32, rng)
    cfg = VectorConfig(index=kind, ann_min_size=1000)
    sp = VectorSpace("event", 32, cfg, model_id="clip-x", background_build=False)
    sp.add(ids, x)
    sp.remove(ids[:200])  # leaves tombstones in an ANN index
    s0, i0 = sp.search(q, 10)
    sa0, ia0 = sp.search(q, 10, allowed=ids[100:600])
    path = tmp_path / "event.index"
    sp.save(path, 1234)
    info = VectorSpace.snapshot_info(path)
    assert info["seq"] == 1234 and info["dim"] == 32 and info["model_id"] == "clip-x"
    assert info["kind"] == kind and info["n"] == 2800 and info["name"] == "event"
    sp2, seq = VectorSpace.load(path, cfg, model_id="clip-x", dim=32, background_build=False)
    assert seq == 1234 and len(sp2) == 2800 and sp2.index_kind == sp.index_kind
    assert sp2.stats()["tombstones"] == sp.stats()["tombstones"]
    s1, i1 = sp2.search(q, 10)
    np.testing.assert_array_equal(i0, i1)
    np.testing.assert_array_equal(s0, s1)
    sa1, ia1 = sp2.search(q, 10, allowed=ids[100:600])
    np.testing.assert_array_equal(ia0, ia1)
    # it keeps working after the load
    sp2.add(ids[:50], x[:50])
    sp2.remove(ids[1000:1100])
    assert len(sp2) == 2750
    assert not np.isin(sp2.search(q, 10)[1], ids[1000:1100]).any()
    # overwrite in place: the newer snapshot wins, no temporary file is left behind
    sp2.save(path, 1300)
    assert VectorSpace.snapshot_info(path)["seq"] == 1300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["event.index"]


def test_load_into_another_index_kind(tmp_path, rng):
    x, ids, q = data(2000, 32, rng)
    sp = space("hnsw", 32)
    sp.add(ids, x)
    sp.save(tmp_path / "s", 5)
    flat, _ = VectorSpace.load(tmp_path / "s", VectorConfig(index="flat"))
    assert flat.index_kind == "flat"
    check_exact(flat, x, ids, q, 10)


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_corrupt_snapshots_raise_vector_error(tmp_path, kind, rng):
    x, ids, q = data(1500, 32, rng)
    sp = space(kind, 32)
    sp.add(ids, x)
    good = tmp_path / "good.index"
    sp.save(good, 9)
    blob = good.read_bytes()
    info = VectorSpace.snapshot_info(good)
    sections = {s["name"]: s for s in info["sections"]}
    cfg = VectorConfig(index=kind, ann_min_size=1)
    bad_files = {
        "empty": b"",
        "garbage": b"not a snapshot at all" * 10,
        "truncated_head": blob[:100],
        "truncated_mid": blob[: len(blob) // 2],
        "truncated_tail": blob[:-3],
        "header_garbled": blob[:-40] + b"x" * 24 + blob[-16:],
    }
    for name in ("vectors", "ids", "faiss"):
        if name in sections:
            b = bytearray(blob)
            b[sections[name]["offset"] + sections[name]["nbytes"] // 2] ^= 0xFF
            bad_files[f"flip_{name}"] = bytes(b)
    for label, content in bad_files.items():
        p = tmp_path / f"{label}.index"
        p.write_bytes(content)
        with pytest.raises(VectorError, match=str(p.name)):
            VectorSpace.load(p, cfg)
    with pytest.raises(VectorError, match="missing.index"):
        VectorSpace.load(tmp_path / "missing.index", cfg)
    with pytest.raises(VectorError, match="good.index.*64"):
        VectorSpace.load(good, cfg, dim=64)
    with pytest.raises(VectorError, match="good.index.*model"):
        VectorSpace.load(good, cfg, model_id="another-model")
    with pytest.raises(VectorError, match="good.index"):
        VectorSpace.load(good, cfg, name="summary")
    assert issubclass(VectorError, VamError)
    sp2, seq = VectorSpace.load(good, cfg)  # the good one still loads
    assert seq == 9 and len(sp2) == 1500


# -- bad input ------------------------------------------------------------------------------------

def test_bad_inputs_leave_the_space_unchanged(rng):
    x, ids, q = data(500, 16, rng)
    sp = space("flat", 16)
    sp.add(ids[:400], x[:400])
    before = sp.search(q, 5)

    def rejects(match, fn):
        with pytest.raises(VectorError, match=match):
            fn()
        assert len(sp) == 400
        after = sp.search(q, 5)
        np.testing.assert_array_equal(before[1], after[1])

    new_ids, new_x = ids[400:410], x[400:410]
    rejects(r"'frame'.*dim mismatch.*expected 16, got 17", lambda: sp.add(new_ids, np.ones((10, 17))))
    nan = new_x.copy()
    nan[3, 2] = np.nan
    nan[7, 0] = np.inf
    rejects(rf"not finite.*\[{new_ids[3]}, {new_ids[7]}\]", lambda: sp.add(new_ids, nan))
    rejects(r"not finite", lambda: sp.add(new_ids[:1], np.full((1, 16), 1e300)))  # float32 overflow
    rejects(rf"zero norm.*\[{new_ids[0]}\]", lambda: sp.add(new_ids, np.vstack([np.zeros(16), new_x[1:]])))
    dup = new_ids.copy()
    dup[5] = dup[2]
    rejects(rf"duplicate ids.*{dup[2]}", lambda: sp.add(dup, new_x))
    clash = new_ids.copy()
    clash[4] = ids[17]
    rejects(rf"already present.*{ids[17]}", lambda: sp.add(clash, new_x))
    rejects(r">= 0", lambda: sp.add(np.array([-1]), new_x[:1]))
    rejects(r"10 ids for 9 vectors", lambda: sp.add(new_ids, new_x[:9]))
    rejects(r"2-D", lambda: sp.add(new_ids[:1], new_x[0]))
    rejects(r"numeric", lambda: sp.add(new_ids[:1], np.array([["a"] * 16])))
    rejects(r"integers", lambda: sp.add(new_ids.astype(float), new_x))
    rejects(r"queries dim mismatch.*expected 16, got 8", lambda: sp.search(np.ones((1, 8)), 3))
    rejects(r"queries not finite", lambda: sp.search(np.full((2, 16), np.nan), 3))
    rejects(r"k must be", lambda: sp.search(q, 0))
    rejects(r"allowed must be integers", lambda: sp.search(q, 3, allowed=np.array([1.5])))
    # and then a valid add still works
    sp.add(new_ids, new_x)
    assert len(sp) == 410


def test_constructor_and_device_errors():
    with pytest.raises(VectorError):
        VectorSpace("frame", 0, VectorConfig())
    with pytest.raises(VectorError, match="unknown vector device"):
        VectorSpace("frame", 8, VectorConfig(), device="tpu")
    if not cuda_available():
        try:
            import faiss
            gpus = faiss.get_num_gpus()
        except (ImportError, AttributeError):
            gpus = 0
        if not gpus:
            with pytest.raises(VectorError, match="cuda"):
                VectorSpace("frame", 8, VectorConfig(), device="cuda")
            assert VectorSpace("frame", 8, VectorConfig(), device="auto").stats()["exact_body"] == "numpy"


def test_id_map_dense_sparse_and_rolling_ids(rng):
    d = 8
    # sparse 62-bit ids: the map becomes a dict
    sp = space("flat", d)
    big = rng.choice(2**62, 300, replace=False).astype(np.int64)
    x = unit_rows(rng.standard_normal((300, d)), np.float32)
    sp.add(big, x)
    assert sp.stats()["idmap"] == "dict"
    check_exact(sp, x, big, x[:5], 3)
    assert sp.remove(big[:100]) == 100
    check_exact(sp, x[100:], big[100:], x[:5], 3)
    # SQLite-like ids: growing, old ones retired: the table stays dense and small
    sp = space("flat", d)
    live_ids, live_x = np.empty(0, np.int64), np.empty((0, d), np.float32)
    next_id = 1
    for _ in range(30):
        new = np.arange(next_id, next_id + 5000, dtype=np.int64)
        next_id += 5000
        nx = unit_rows(rng.standard_normal((5000, d)), np.float32)
        sp.add(new, nx)
        live_ids, live_x = np.concatenate([live_ids, new]), np.concatenate([live_x, nx])
        old = live_ids[:-20_000]
        sp.remove(old)
        live_ids, live_x = live_ids[-20_000:], live_x[-20_000:]
    st = sp.stats()
    assert st["idmap"] == "table" and st["idmap_bytes"] <= 8 * (4 * 20_000 + (1 << 17))
    assert len(sp) == 20_000
    check_exact(sp, live_x, live_ids, live_x[:5], 4)


def test_concurrent_adds_and_searches(rng):
    x, ids, q = data(6000, 32, rng)
    sp = space("hnsw", 32, ann_min_size=2000, background_build=True)
    sp.add(ids[:1000], x[:1000])
    errors, seen = [], set()
    stop = threading.Event()

    def searcher():
        try:
            while not stop.is_set():
                s, i = sp.search(q[:4], 5)
                seen.update(i[i >= 0].tolist())
                s, i = sp.search(q[:2], 5, allowed=ids[:3000])
                assert np.isin(i[i >= 0], ids[:3000]).all()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=searcher) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for a in range(1000, 6000, 250):
            sp.add(ids[a:a + 250], x[a:a + 250])
            sp.remove(ids[a - 1000:a - 900])
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert seen <= set(ids.tolist())
    assert sp.wait_index(timeout=60)
    removed = np.concatenate([ids[a - 1000:a - 900] for a in range(1000, 6000, 250)])
    live = np.setdiff1d(ids, removed)
    assert set(sp.ids().tolist()) == set(live.tolist())
    assert not np.isin(sp.search(q, 10)[1], removed).any()
    if sp.index_kind == "hnsw":
        _check_labels(sp)
    sp.close()


@pytest.mark.gpu
def test_cuda_torch_body_matches_cpu(rng):
    x, ids, q = data(20_000, 128, rng)
    gpu = VectorSpace("frame", 128, VectorConfig(index="auto"), device="cuda")
    assert gpu.index_kind == "flat" and gpu.stats()["exact_body"].startswith("torch-cuda")
    gpu.add(ids, x)
    gpu.remove(ids[:500])
    keep = ids[500:]
    s, i = gpu.search(q, 10)
    bs, bi = brute(x, ids, q, 10, keep=keep)
    assert recall(i, bi) >= VECTOR_RECALL_AT_10
    np.testing.assert_allclose(s[:, 0], bs[:, 0], atol=VECTOR_TOP1_SCORE_ATOL)
    allowed = ids[1000:1500]
    s, i = gpu.search(q, 10, allowed=allowed)
    assert recall(i, brute(x, ids, q, 10, keep=allowed)[1]) >= VECTOR_RECALL_AT_10


@pytest.mark.gpu
def test_cuda_body_recall_at_real_width_against_float32(rng):
    """200k x 512 random unit rows (fp16 on the device, re-scored in fp32) with queries drawn
    independently of the rows: the smallest score gaps, the hardest case for fp16 scores."""
    n, d = 200_000, 512
    x = unit_rows(rng.standard_normal((n, d), dtype=np.float32), np.float32)
    ids = np.arange(n, dtype=np.int64)
    q = unit_rows(rng.standard_normal((100, d), dtype=np.float32), np.float32)
    gpu = VectorSpace("frame", d, VectorConfig(index="flat"), device="cuda", background_build=False)
    assert gpu.stats()["exact_body"].startswith("torch-cuda")
    gpu.add(ids, x)
    s, i = gpu.search(q, 10)
    bs, bi = brute(x, ids, q, 10)
    assert recall(i, bi) >= VECTOR_RECALL_AT_10
    np.testing.assert_allclose(s[:, 0], bs[:, 0], atol=VECTOR_TOP1_SCORE_ATOL)
    gpu.close()
