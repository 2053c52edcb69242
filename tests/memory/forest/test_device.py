"""The event forest's node index on a torch device (vam_engine/memory/forest/device.py) against
the host one (numpy), which defines correct: the same operations on a forest of each body give
the same retrieved nodes and scores; ties go to the smaller node id on both; the device part of
a retrieval runs on fake CUDA tensors (FakeTensorMode) without reading anything back.

Without a GPU the torch body runs on CPU tensors ("torch-cpu"); the gpu-marked test runs it on
CUDA with torch's sync debug mode set to raise.
"""
from __future__ import annotations

import numpy as np
import pytest

from vam_engine.config import ForestConfig
from vam_engine.errors import VectorError
from vam_engine.memory import Store
from vam_engine.memory.forest import EventForest, ForestNodeRepository

torch = pytest.importorskip("torch")

import torch.utils._python_dispatch  # noqa: E402 - TorchDispatchMode

from vam_engine.memory.forest.device import NodeTensors, device_picks  # noqa: E402 - needs torch

SCORE_ATOL = 1e-5     # float32 scores of unit vectors, summed in different orders: ~1e-7 apart


# -- helpers -----------------------------------------------------------------------------------
class Twins:
    """The same operations applied to forests of several bodies (node ids come out equal)."""

    def __init__(self, devices=("cpu", "torch-cpu"), cfg: ForestConfig | None = None, repos=None):
        repos = repos or [None] * len(devices)
        self.forests = [EventForest(r, cfg, device=d) for r, d in zip(repos, devices)]
        self.next_event = 1
        self.last_end: dict[str, float] = {}
        self.events: dict[str, list[tuple]] = {}

    def insert(self, cam: str, emb: np.ndarray) -> None:
        t0 = self.last_end.get(cam, 0.0) + 1.0
        ev = self.next_event
        self.next_event += 1
        leaf = (ev, t0, t0 + 2.0, [(ev, t0 + 1.0)], f"event {ev}", emb)
        for f in self.forests:
            f.insert_event(cam, *leaf)
        self.last_end[cam] = t0 + 2.0
        self.events.setdefault(cam, []).append(leaf)

    def write_summaries(self, limit: int, make_emb) -> None:
        """The writer's summaries for up to ``limit`` ready nodes (same embeddings on every body)."""
        for n in self.forests[0].stale_nodes(limit):
            emb = make_emb()
            for f in self.forests:
                assert f.set_summary(n.node_id, n.summary_version, f"summary {n.node_id}", emb)

    def rebuild(self, cam: str, keep: np.ndarray) -> None:
        self.events[cam] = [leaf for leaf, k in zip(self.events[cam], keep) if k]
        for f in self.forests:
            f.rebuild(cam, self.events[cam])

    def remove(self, cam: str) -> None:
        for f in self.forests:
            f.remove_camera(cam)
        self.events.pop(cam, None)

    def retrieve(self, q, k, cam=None, as_of=None) -> list[list[tuple[int, float]]]:
        return [[(n.node_id, s) for n, s in f.retrieve(q, k=k, camera_id=cam, as_of=as_of)] for f in self.forests]

    def check(self) -> None:
        for f in self.forests:
            f.check()   # on a mirrored forest, also: the device rows equal the host rows


def assert_same_picks(want: list[tuple[int, float]], got: list[tuple[int, float]]) -> bool:
    """The host's picks against the device's: equal nodes, scores within float error. Two nodes
    whose scores are closer than that may come in either order; from such a near tie on, the
    rest of the picks depend on it, so the comparison stops there. Returns whether it did."""
    for (iw, sw), (ig, sg) in zip(want, got):
        assert abs(sw - sg) <= SCORE_ATOL, (want, got)
        if iw != ig:
            return True
    assert len(want) == len(got), (want, got)
    return False


def unit_rows(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def random_queries(tw: Twins, rng, n: int, dim: int) -> int:
    """``n`` random retrievals (k, camera, as_of drawn too) compared across the bodies; returns
    how many stopped at a near tie."""
    near = 0
    cams = sorted(tw.events)
    for _ in range(n):
        q = rng.standard_normal(dim).astype(np.float32)
        k = int(rng.integers(1, 9))
        cam = None if rng.random() < 0.5 or not cams else cams[int(rng.integers(len(cams)))]
        as_of = None if rng.random() < 0.6 else float(rng.uniform(0, max(tw.last_end.values(), default=1.0)))
        want, got = tw.retrieve(q, k, cam, as_of)
        near += assert_same_picks(want, got)
    return near


# -- the torch body against numpy ------------------------------------------------------------------
def test_torch_body_retrieves_what_numpy_does_through_appends_writes_and_rebuilds(rng):
    dim = 24
    tw = Twins(cfg=ForestConfig(root_cap=int(rng.integers(1, 5))))
    assert [f.index_device for f in tw.forests] == ["numpy", "torch-cpu"]
    centers = unit_rows(rng.standard_normal((6, dim)))
    cams = ["a", "b", "c", "d"]

    def event_emb():
        c = centers[int(rng.integers(len(centers)))]
        return unit_rows(c + 0.4 * rng.standard_normal(dim).astype(np.float32) / np.sqrt(dim))

    near = 0
    queries = 0
    for phase in range(6):
        # appends between retrievals: the mirror catches up at the next retrieval
        for _ in range(int(rng.integers(20, 80))):
            tw.insert(cams[int(rng.integers(len(cams)))], event_emb())
            if rng.random() < 0.1:
                near += random_queries(tw, rng, 2, dim)
                queries += 2
        tw.write_summaries(int(rng.integers(0, 40)), event_emb)
        if phase == 2:
            cam = max(tw.events, key=lambda c: len(tw.events[c]))
            tw.rebuild(cam, rng.random(len(tw.events[cam])) < 0.6)
        if phase == 4:
            tw.remove(sorted(tw.events)[0])
        tw.check()
        near += random_queries(tw, rng, 40, dim)
        queries += 40
    # a near tie of two float32 scores is rare: the comparison stopped early only a few times
    assert near <= queries // 20, f"{near} of {queries} retrievals stopped at a near tie"


def test_ties_go_to_the_smaller_node_id_on_both_bodies_and_after_a_reload(rng, tmp_path):
    """Embeddings of +-1/8 entries in 64 dimensions: every score is a multiple of 1/64, exact in
    float32 whatever the summation order, so ties are exact and frequent. Both bodies must give
    exactly the greedy written here (best score, then smaller node id, over every camera), and a
    forest reopened from its store (rows in another order) the same."""
    dim = 64

    def sign_vec(pattern: int) -> np.ndarray:
        return (np.where(patterns[pattern], 1.0, -1.0) / 8).astype(np.float32)

    patterns = rng.random((3, dim)) < 0.5
    store = Store(tmp_path / "store")
    try:
        tw = Twins(devices=("cpu", "torch-cpu"), repos=[ForestNodeRepository(store.db), None])
        for i in range(int(rng.integers(40, 90))):
            tw.insert("ab"[int(rng.integers(2))] if i % 7 else "c", sign_vec(int(rng.integers(3))))
        while tw.forests[0].stale_nodes(1):   # every node written: no inexact placeholder
            tw.write_summaries(100, lambda: sign_vec(int(rng.integers(3))))
        tw.check()
        reopened = EventForest(ForestNodeRepository(store.db), device="torch-cpu")
        forests = tw.forests + [reopened]
        for _ in range(30):
            # a pattern (many exact ties) or any other +-1/8 vector (exact scores too)
            q = sign_vec(int(rng.integers(3))) if rng.random() < 0.7 else \
                (np.where(rng.random(dim) < 0.5, 1.0, -1.0) / 8).astype(np.float32)
            k = int(rng.integers(1, 12))
            cam = None if rng.random() < 0.6 else "ab"[int(rng.integers(2))]
            want = brute_greedy(tw.forests[0], q, k, cam)
            for f in forests:
                assert [(n.node_id, s) for n, s in f.retrieve(q, k=k, camera_id=cam)] == want
    finally:
        store.close()


def brute_greedy(f: EventForest, q: np.ndarray, k: int, cam: str | None) -> list[tuple[int, float]]:
    """Algorithm 1 over every camera at once from the public API: the best score, ties to the
    smaller node id; drop the pick, its ancestors and descendants (within its camera)."""
    pool = {}
    for c in f.cameras():
        if cam is not None and c != cam:
            continue
        stack = [r.node_id for r in f.roots(c)]
        while stack:
            n = f.node(stack.pop())
            pool[n.node_id] = n
            stack.extend(n.children)
    qn = q / np.linalg.norm(q)
    score = {nid: float(np.float32(n.embedding.astype(np.float64) @ qn)) for nid, n in pool.items()}
    out = []
    while pool and len(out) < k:
        best = min(pool, key=lambda i: (-score[i], i))
        out.append((best, score[best]))
        lineage = {a.node_id for a in f.ancestors(best)}
        lineage |= {nid for nid in pool if best in {a.node_id for a in f.ancestors(nid)}}
        pool = {i: n for i, n in pool.items() if i != best and i not in lineage}
    return out


def test_reopened_forest_uploads_every_row_before_its_first_retrieval(rng, tmp_path):
    dim = 16
    store = Store(tmp_path / "store")
    try:
        tw = Twins(devices=("cpu",), repos=[ForestNodeRepository(store.db)])
        for i in range(120):
            tw.insert("xyz"[i % 3], unit_rows(rng.standard_normal(dim).astype(np.float32)))
        tw.write_summaries(30, lambda: unit_rows(rng.standard_normal(dim).astype(np.float32)))
        dev = EventForest(ForestNodeRepository(store.db), device="torch-cpu")
        dev.check()
        for _ in range(40):
            q = rng.standard_normal(dim).astype(np.float32)
            k = int(rng.integers(1, 6))
            assert_same_picks([(n.node_id, s) for n, s in tw.forests[0].retrieve(q, k=k)],
                              [(n.node_id, s) for n, s in dev.retrieve(q, k=k)])
    finally:
        store.close()


def test_check_sees_a_device_copy_that_went_out_of_date(rng):
    f = EventForest(None, device="torch-cpu")
    for i in range(20):
        f.insert_event("cam", i, 2.0 * i, 2.0 * i + 1, [], f"e{i}", rng.standard_normal(8))
    f.check()
    idx = f.structure().indexes["cam"]
    idx.mirror.tensors().emb[3] += 0.5     # the device row changes behind the host's back
    with pytest.raises(AssertionError, match="device copy .* embeddings"):
        f.check()


def test_unknown_device_is_refused_at_construction():
    with pytest.raises(VectorError, match="unknown vector device 'tpu'"):
        EventForest(None, device="tpu")


# -- no host synchronisation inside a retrieval ------------------------------------------------------
class OpLog(torch.utils._python_dispatch.TorchDispatchMode):
    """Every aten op that runs, with the devices of its tensor outputs."""

    def __init__(self):
        super().__init__()
        self.ops: list[tuple[str, set[str]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else [out]
        self.ops.append((str(func), {str(t.device) for t in outs if isinstance(t, torch.Tensor)}))
        return out


def fake_cameras(sizes, dim):
    return [NodeTensors(torch.empty((n, dim), device="cuda"), torch.empty((3, n), dtype=torch.int64, device="cuda"),
                        torch.empty(n, dtype=torch.float64, device="cuda")) for n in sizes]


@pytest.mark.parametrize("as_of", [None, 123.0])
def test_device_part_of_a_retrieval_runs_on_fake_cuda_without_reading_back(as_of):
    """FakeTensorMode runs the scores and the greedy on fake CUDA tensors (no GPU needed): any
    read of a value back to the host (``.item()``, ``bool()``, indexing by a device scalar)
    raises there, and so does a tensor on another device. The ops log shows every result
    stayed on the device. (The host -> device uploads before it cannot be faked: on a torch
    built without CUDA, FakeTensorMode refuses copies to a fake CUDA device.)"""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        cams = fake_cameras([50, 1, 300], 32)
        q = torch.empty(32, device="cuda")
        with OpLog() as log:
            s, ids = device_picks(cams, q, 4, as_of)
        assert s.device.type == "cuda" and ids.device.type == "cuda"
        assert s.shape == (9,) and ids.shape == (9,)       # 4 + 1 + 4: min(k, n) per camera
    names = {name for name, _ in log.ops}
    assert "aten._local_scalar_dense.default" not in names
    assert "aten.mm.default" in names or "aten.mv.default" in names
    off_device = [(name, devs) for name, devs in log.ops if devs - {"cuda:0"}]
    assert off_device == []


@pytest.mark.parametrize("left_on_host", ["query", "node ids"])
def test_fake_cuda_catches_a_tensor_left_on_the_host(left_on_host):
    """The check can fail: a query, or the node ids, on the CPU against device rows is refused."""
    from torch._subclasses.fake_tensor import FakeTensorDeviceMismatchError, FakeTensorMode

    with FakeTensorMode(), pytest.raises(FakeTensorDeviceMismatchError, match="same device"):
        cam = fake_cameras([10], 8)[0]
        q = torch.empty(8, device="cuda")
        if left_on_host == "query":
            q = torch.empty(8)
        else:
            cam = NodeTensors(cam.emb, torch.empty((3, 10), dtype=torch.int64), cam.t_end)
        device_picks([cam], q, 2, None)


@pytest.mark.gpu
def test_cuda_forest_matches_numpy_and_never_syncs_inside_a_retrieval(rng):
    dim = 128
    tw = Twins(devices=("cpu", "cuda"))
    assert tw.forests[1].index_device.startswith("torch-cuda")
    centers = unit_rows(rng.standard_normal((20, dim)))
    for i in range(3000):
        c = centers[int(rng.integers(20))]
        tw.insert(f"cam{i % 4}", unit_rows(c + 0.3 * rng.standard_normal(dim).astype(np.float32) / np.sqrt(dim)))
    tw.write_summaries(500, lambda: unit_rows(rng.standard_normal(dim).astype(np.float32)))
    tw.check()
    assert random_queries(tw, rng, 200, dim) <= 10
    dev = tw.forests[1]
    indexes = list(dev.structure().indexes.values())
    for ix in indexes:
        ix.sync_mirror()
    body = indexes[0].mirror.body
    q = body.upload(unit_rows(rng.standard_normal(dim).astype(np.float32)), body.dtype)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        s, ids = device_picks([ix.mirror.tensors() for ix in indexes], q, 8, 5000.0)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert s.is_cuda and ids.is_cuda and len(s) == 32
