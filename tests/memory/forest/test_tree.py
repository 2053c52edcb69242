"""The Event Forest (vam_engine/memory/forest.py): balanced joins, parent pointers, greedy
lineage-pruned retrieval, bottom-up stale summaries, persistence and crash consistency.

Most structural checks go through ``EventForest.check()``, called after every operation of
random sequences; the tests below also check what ``check()`` cannot see (leaf order against
the inserted events, what insert reports as stale, retrieval against a brute force written
here from the public API) and that ``check()`` itself catches corruption.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vam_engine.config import ForestConfig
from vam_engine.memory import Store
from vam_engine.memory.forest import EventForest, ForestNodeRepository, reference_policy_depth
from vam_engine.memory.records import ForestNode

DIM = 8


# -- helpers -----------------------------------------------------------------------------------
def _emb(kind: str, i: int, dim: int = DIM) -> np.ndarray:
    """Embedding number ``i`` of a sequence of the given kind (adversarial ones included)."""
    e = np.zeros(dim, np.float32)
    if kind == "same":
        e[0] = 1
    elif kind == "alternating":
        e[i % 2] = 1
    elif kind == "opposite":          # a, -a, a, ...: pairwise means cancel exactly
        e[0] = 1 if i % 2 == 0 else -1
    elif kind == "drift":
        e[0], e[1] = math.cos(0.05 * i), math.sin(0.05 * i)
    else:
        e = np.random.default_rng(1000 + i).standard_normal(dim).astype(np.float32)
    return e


KINDS = ("same", "alternating", "opposite", "drift", "random")


class Feeder:
    """Inserts events in time order per camera and remembers what it inserted."""

    def __init__(self, forest: EventForest):
        self.f = forest
        self.next_event = 1
        self.next_moment = 1
        self.last_end: dict[str, float] = {}
        self.events: dict[str, list[int]] = {}

    def insert(self, cam: str, gap: float = 1.0, dur: float = 1.0, kind: str = "random", nkf: int = 2):
        t0 = self.last_end.get(cam, 0.0) + gap
        t1 = t0 + dur
        kf = []
        for j in range(nkf):
            kf.append((self.next_moment, t0 + (t1 - t0) * (j + 0.5) / nkf))
            self.next_moment += 1
        ev = self.next_event
        self.next_event += 1
        stale = self.f.insert_event(cam, ev, t0, t1, kf, f"event {ev} on {cam}", _emb(kind, ev))
        self.last_end[cam] = t1
        self.events.setdefault(cam, []).append(ev)
        return ev, stale


def all_nodes(f: EventForest) -> dict[int, ForestNode]:
    """Every node, reached from the roots through the public API."""
    out = {}
    for cam in f.cameras():
        stack = [r.node_id for r in f.roots(cam)]
        while stack:
            n = f.node(stack.pop())
            out[n.node_id] = n
            stack.extend(n.children)
    return out


def same_node(a: ForestNode, b: ForestNode) -> bool:
    if (a.embedding is None) != (b.embedding is None):
        return False
    if a.embedding is not None and not np.array_equal(a.embedding, b.embedding):
        return False
    return ForestNode.__eq__(_no_emb(a), _no_emb(b))


def _no_emb(n: ForestNode) -> ForestNode:
    return replace(n, embedding=None)


def assert_same_forest(f: EventForest, g: EventForest) -> None:
    a, b = all_nodes(f), all_nodes(g)
    assert sorted(a) == sorted(b)
    for nid in a:
        assert same_node(a[nid], b[nid]), (a[nid], b[nid])
    assert f.cameras() == g.cameras()
    for cam in f.cameras():
        assert [r.node_id for r in f.roots(cam)] == [r.node_id for r in g.roots(cam)]
    assert len(f) == len(g)


def effective_embeddings(f: EventForest) -> dict[int, np.ndarray]:
    """What retrieval should score each node with, computed independently: the written
    embedding, or for a pending node the n_leaves-weighted normalized mean of its children's."""
    nodes = all_nodes(f)
    eff = {}
    for n in sorted(nodes.values(), key=lambda n: n.height):
        if not n.stale:
            eff[n.node_id] = n.embedding.astype(np.float64)
            continue
        l, r = (nodes[c] for c in n.children)
        m = l.n_leaves * eff[l.node_id] + r.n_leaves * eff[r.node_id]
        norm = np.linalg.norm(m)
        if norm < 1e-6 * n.n_leaves:
            m, norm = (eff[l.node_id] if l.n_leaves >= r.n_leaves else eff[r.node_id]), 1.0
        eff[n.node_id] = m / norm
    return eff


def assert_greedy(f: EventForest, q: np.ndarray, k: int, cam=None, as_of=None) -> list:
    """retrieve() must be Algorithm 1: each pick is (up to float error) the best node left in
    the pool, the pool losing each pick's ancestors and descendants; it stops early only when
    the pool is empty."""
    got = f.retrieve(q, k=k, camera_id=cam, as_of=as_of)
    nodes = all_nodes(f)
    eff = effective_embeddings(f)
    qn = q / np.linalg.norm(q)
    anc = {nid: {a.node_id for a in f.ancestors(nid)} for nid in nodes}
    pool = {nid for nid, n in nodes.items()
            if (cam is None or n.camera_id == cam) and (as_of is None or n.t_end <= as_of)}
    for node, score in got:
        assert node.node_id in pool, f"pick {node.node_id} was not in the pool (lineage, camera or as_of)"
        assert abs(score - float(eff[node.node_id] @ qn)) < 1e-4
        best = max(float(eff[i] @ qn) for i in pool)
        assert score >= best - 1e-4, f"pick scored {score}, the pool's best is {best}"
        pool = {i for i in pool if i != node.node_id and i not in anc[node.node_id]
                and node.node_id not in anc[i]}
    assert len(got) == k or not pool
    ids = [n.node_id for n, _ in got]
    for a in ids:
        for b in ids:
            assert a == b or (a not in anc[b] and b not in anc[a]), "retrieved a node with its ancestor"
    scores = [s for _, s in got]
    assert scores == sorted(scores, reverse=True)
    return got


def versions(f: EventForest) -> dict[int, int]:
    return {nid: n.summary_version for nid, n in all_nodes(f).items()}


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store")
    yield s
    s.close()


# -- random sequences ----------------------------------------------------------------------------
_insert = st.tuples(st.just("insert"), st.integers(0, 2), st.sampled_from([0.0, 0.5, 3.0]),
                    st.sampled_from([0.0, 0.1, 1.0, 50.0]), st.sampled_from(KINDS), st.integers(0, 3))
_step = st.one_of(
    _insert, _insert, _insert, _insert,
    st.tuples(st.just("write"), st.integers(0, 50)),
    st.tuples(st.just("write_old"), st.integers(0, 50)),
    st.tuples(st.just("retrieve"), st.integers(0, 3), st.integers(1, 4), st.booleans()),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_step, min_size=20, max_size=150), root_cap=st.sampled_from([1, 2, 4]),
       lam=st.sampled_from([0.0, 0.1, 1.0]))
def test_random_sequences_keep_every_invariant(steps, root_cap, lam):
    f = EventForest(None, ForestConfig(root_cap=root_cap, merge_lambda=lam, keyframes=3))
    feed = Feeder(f)
    rng = np.random.default_rng(len(steps))
    for step in steps:
        if step[0] == "insert":
            _, c, gap, dur, kind, nkf = step
            before = versions(f)
            _, stale = feed.insert(f"cam{c}", gap, dur, kind, nkf)
            after = versions(f)
            changed = {nid for nid, v in after.items() if before.get(nid) != v and f.node(nid).children}
            assert set(stale) == changed, "insert must report exactly the new and changed internal nodes"
            assert all(f.node(nid).stale for nid in stale)
        elif step[0] == "write":
            ready = f.stale_nodes()
            if ready:
                n = ready[step[1] % len(ready)]
                e = rng.standard_normal(DIM)
                assert f.set_summary(n.node_id, n.summary_version, f"written {n.node_id}", e)
                got = f.node(n.node_id)
                assert not got.stale and got.summary == f"written {n.node_id}"
                assert np.allclose(got.embedding, e / np.linalg.norm(e), atol=1e-6)
        elif step[0] == "write_old":
            internal = [n for n in all_nodes(f).values() if n.children]
            if internal:
                n = internal[step[1] % len(internal)]
                assert not f.set_summary(n.node_id, n.summary_version - 1, "too late", np.ones(DIM))
                assert same_node(f.node(n.node_id), n)
        else:
            _, c, k, use_as_of = step
            cam = None if c == 3 else f"cam{c}"
            as_of = feed.last_end.get(cam or "cam0", 0.0) / 2 if use_as_of else None
            assert_greedy(f, rng.standard_normal(DIM), k, cam, as_of)
        f.check()
    # what check() cannot know: the leaves are exactly the inserted events, in order
    for cam, evs in feed.events.items():
        leaves = [lf.event_id for r in f.roots(cam) for lf in f.leaves(r.node_id)]
        assert leaves == evs
        assert len(f.roots(cam)) == min(root_cap, len(evs))


# -- depth ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["random", "same"])
def test_depth_stays_logarithmic_where_the_reference_policy_chains(kind):
    n = 2000
    embs = [_emb(kind, i) for i in range(n)]
    ref = reference_policy_depth(embs, root_cap=4, lam=0.1)
    assert len(ref) == n and ref == sorted(ref)
    assert ref[-1] > 0.1 * n, f"the sequence should make the seed's policy chain (depth {ref[-1]})"
    f = EventForest(None, ForestConfig(root_cap=4, merge_lambda=0.1))
    for i, e in enumerate(embs):
        f.insert_event("c", i, float(i), i + 0.5, [(i, i + 0.25)], f"e{i}", e)
    f.check()
    deepest = max(r.height for r in f.roots("c"))
    assert deepest <= 1.45 * math.log2(n + 2), f"height {deepest} for {n} events"
    assert deepest <= 2 * math.log2(n)
    assert sum(r.n_leaves for r in f.roots("c")) == n


def test_reference_policy_first_merges():
    embs = [_emb("random", i) for i in range(6)]
    assert reference_policy_depth(embs, root_cap=4)[:5] == [0, 0, 0, 0, 1]
    assert reference_policy_depth(embs, root_cap=1) == [0, 1, 2, 3, 4, 5]  # one root: a chain


def test_taller_later_tree_takes_the_earlier_one_down_its_left_spine():
    # root_cap 2, lambda 0: A (e1) stays alone while B's leaves (e2) merge among themselves;
    # then C (-e2) makes (A, B) the best pair, and A, much lower than B, must be joined into
    # B's left spine instead of getting a new parent over A and B.
    f = EventForest(None, ForestConfig(root_cap=2, merge_lambda=0.0))
    e1, e2 = np.eye(DIM)[0], np.eye(DIM)[1]
    f.insert_event("c", 1, 0, 1, [], "A", e1)
    for i in range(2, 18):
        f.insert_event("c", i, i, i + 0.5, [], f"B{i}", e2)
        f.check()
    a, b = f.roots("c")
    assert a.event_id == 1 and b.height >= 3
    stale = f.insert_event("c", 100, 50, 51, [], "C", -e2)
    f.check()
    joined, c = f.roots("c")
    assert c.event_id == 100
    assert [lf.event_id for lf in f.leaves(joined.node_id)] == [1] + list(range(2, 18))
    assert joined.height <= b.height + 1
    depth_a = len(f.ancestors(f.leaf_for_event(1).node_id))
    assert depth_a == b.height, "A must sit at the bottom of B's left spine"
    assert len(stale) >= b.height - 1  # the spine nodes all gained A: all stale


def test_single_root_is_an_avl_tree():
    f = EventForest(None, ForestConfig(root_cap=1))
    for i in range(300):
        f.insert_event("c", i, i, i + 1, [], "", _emb("opposite", i))
    f.check()
    (root,) = f.roots("c")
    assert root.n_leaves == 300 and root.height <= 1.45 * math.log2(302)
    assert [lf.event_id for lf in f.leaves(root.node_id)] == list(range(300))


# -- lineage -------------------------------------------------------------------------------------
def test_parent_pointers_and_lineage():
    f = EventForest(None, ForestConfig())
    feed = Feeder(f)
    for i in range(120):
        feed.insert("a" if i % 3 else "b", kind="drift")
    nodes = all_nodes(f)
    assert len(nodes) == len(f)
    for nid, n in nodes.items():
        for ch in f.children(nid):
            assert ch.parent == nid
        anc = f.ancestors(nid)
        chain = [nid] + [a.node_id for a in anc]
        for lower, upper in zip(chain, chain[1:]):
            assert f.node(lower).parent == upper
        top = anc[-1] if anc else n
        assert top.parent is None and top.node_id in {r.node_id for r in f.roots(n.camera_id)}
        leaf_ids = [lf.node_id for lf in f.leaves(nid)]
        assert len(leaf_ids) == n.n_leaves
        times = [f.node(i).t_start for i in leaf_ids]
        assert times == sorted(times)
        assert f.node(leaf_ids[0]).t_start == n.t_start and f.node(leaf_ids[-1]).t_end == n.t_end
        for a in anc:
            assert set(leaf_ids) <= {lf.node_id for lf in f.leaves(a.node_id)}
    for cam, evs in feed.events.items():
        for ev in evs:
            leaf = f.leaf_for_event(ev)
            assert leaf.event_id == ev and leaf.camera_id == cam and leaf.is_leaf


def test_keyframes_are_spread_in_time_not_by_count():
    # left event: 16 keyframes within 10 s; right event: 16 within 1000 s. A merged node's 16
    # keyframes spread over the 1010 s come mostly from the long event.
    f = EventForest(None, ForestConfig(root_cap=1, keyframes=16))
    f.insert_event("c", 1, 0, 10, [(i, i * 10 / 16) for i in range(16)], "short", np.ones(DIM))
    f.insert_event("c", 2, 10, 1010, [(100 + i, 10 + i * 1000 / 16) for i in range(16)], "long", np.ones(DIM))
    (root,) = f.roots("c")
    assert len(root.keyframes) == 16 and root.keyframe_times == sorted(root.keyframe_times)
    assert sum(1 for m in root.keyframes if m >= 100) >= 13
    # a leaf given more than the budget keeps an even spread of them
    f.insert_event("c", 3, 2000, 2100, [(1000 + i, 2000 + i) for i in range(100)], "many", np.ones(DIM))
    leaf = f.leaf_for_event(3)
    assert len(leaf.keyframes) == 16 and leaf.keyframe_times[0] == 2000 and leaf.keyframe_times[-1] == 2099
    assert max(np.diff(leaf.keyframe_times)) <= 8
    f.check()


# -- retrieval -----------------------------------------------------------------------------------
def test_retrieve_prunes_lineage_and_respects_camera_and_as_of():
    f = EventForest(None, ForestConfig())
    feed = Feeder(f)
    for i in range(200):
        feed.insert(("a", "b", "c")[i % 3], kind="random")
    rng = np.random.default_rng(5)
    for _ in range(20):
        q = rng.standard_normal(DIM)
        for k in (1, 2, 5):
            got = assert_greedy(f, q, k)
            assert len(got) == k
        got = assert_greedy(f, q, 3, cam="b")
        assert got and all(n.camera_id == "b" for n, _ in got)
        got = assert_greedy(f, q, 3, as_of=100.0)
        assert got and all(n.t_end <= 100.0 for n, _ in got)
    # a node's own written embedding as the query: that node comes first, scored ~1
    ready = f.stale_nodes(camera_id="a")
    target = ready[0]
    e = rng.standard_normal(DIM)
    assert f.set_summary(target.node_id, target.summary_version, "target", e)
    (best, score), _ = f.retrieve(e, k=2)
    assert best.node_id == target.node_id and score == pytest.approx(1.0, abs=1e-5)
    # ...unless as_of is before its end, or it is another camera's
    assert all(n.node_id != target.node_id for n, _ in f.retrieve(e, k=2, as_of=target.t_end - 1e-3))
    assert all(n.node_id != target.node_id for n, _ in f.retrieve(e, k=2, camera_id="b"))
    assert f.retrieve(e, k=2, camera_id="nope") == []
    assert f.retrieve(e, k=0) == []
    with pytest.raises(ValueError, match="dimension"):
        f.retrieve(np.ones(DIM + 1))


def test_retrieve_returns_fewer_when_the_pool_runs_out():
    f = EventForest(None, ForestConfig(root_cap=1))
    for i in range(3):
        f.insert_event("c", i, i, i + 1, [], "", _emb("random", i))
    # 3 leaves + 2 internal nodes; at most 3 pairwise-unrelated nodes (the leaves)
    got = assert_greedy(f, np.ones(DIM), 10)
    assert 1 <= len(got) <= 3
    assert EventForest(None).retrieve(np.ones(DIM)) == []


# -- summaries -----------------------------------------------------------------------------------
def test_stale_nodes_come_bottom_up_and_all_get_written():
    f = EventForest(None, ForestConfig())
    feed = Feeder(f)
    for i in range(60):
        feed.insert("a" if i % 4 else "b", kind="same")
    written = set()
    rounds = 0
    while True:
        ready = f.stale_nodes()
        if not ready:
            break
        rounds += 1
        heights = [n.height for n in ready]
        assert heights == sorted(heights)
        for n in ready:
            assert n.stale and n.children
            assert all(not f.node(c).stale for c in n.children), "offered before its children"
        assert [n.node_id for n in f.stale_nodes(limit=2)] == [n.node_id for n in ready[:2]]
        assert all(n.camera_id == "b" for n in f.stale_nodes(camera_id="b"))
        for n in ready:
            assert f.set_summary(n.node_id, n.summary_version, f"s{n.node_id}", _emb("random", n.node_id))
            written.add(n.node_id)
        f.check()
    assert rounds >= 3  # the trees are several levels deep: one round cannot do it
    internal = {nid for nid, n in all_nodes(f).items() if n.children}
    assert written == internal and not any(n.stale for n in all_nodes(f).values())


def test_set_summary_for_a_changed_node_is_refused():
    f = EventForest(None, ForestConfig(root_cap=1))
    feed = Feeder(f)
    for _ in range(4):
        feed.insert("c")
    (root,) = f.roots("c")
    old = root.summary_version
    # the next event joins the single tree: its root (or the node replacing it) changes
    feed.insert("c")
    assert f.node(root.node_id).summary_version != old
    before = f.node(root.node_id)
    assert f.set_summary(root.node_id, old, "describes 4 events, not 5", np.ones(DIM)) is False
    after = f.node(root.node_id)
    assert after.stale and after.summary == before.summary and after.embedding is None
    # a placeholder summary joins the children's until the writer delivers
    assert " / " in after.summary
    with pytest.raises(ValueError, match="leaf"):
        f.set_summary(f.leaf_for_event(1).node_id, 1, "x", np.ones(DIM))
    with pytest.raises(KeyError):
        f.set_summary(10_000, 1, "x", np.ones(DIM))
    # a written summary is kept as the placeholder when the node changes again: write the
    # whole tree bottom-up, then one more event changes (at least) the root
    while f.stale_nodes():
        for n in f.stale_nodes():
            assert f.set_summary(n.node_id, n.summary_version, f"WRITTEN {n.node_id}", _emb("random", n.node_id))
    (root,) = f.roots("c")
    assert root.height >= 2 and not root.stale
    stale = feed.insert("c")[1]
    assert root.node_id in stale
    assert f.node(root.node_id).stale and f.node(root.node_id).summary == f"WRITTEN {root.node_id}"
    f.check()


# -- validation ----------------------------------------------------------------------------------
def test_bad_events_are_rejected_without_changing_anything():
    f = EventForest(None, ForestConfig())
    f.insert_event("c", 1, 10, 20, [(1, 15)], "", np.ones(DIM))
    f.insert_event("d", 2, 0, 5, [], "", np.ones(DIM))
    snap = all_nodes(f)
    cases = [
        (("c", 3, 15, 25, [], "", np.ones(DIM)), "event 3.*before"),          # overlaps the last one
        (("c", 3, 5, 6, [], "", np.ones(DIM)), "event 3.*before"),            # out of order
        (("c", 1, 30, 31, [], "", np.ones(DIM)), "event 1.*duplicate"),
        (("e", 2, 30, 31, [], "", np.ones(DIM)), "event 2.*duplicate"),       # ids are global
        (("c", 3, 30, 29, [], "", np.ones(DIM)), "event 3.*interval"),
        (("c", 3, 30, float("nan"), [], "", np.ones(DIM)), "event 3"),
        (("c", 3, 30, 31, [(9, 40)], "", np.ones(DIM)), "keyframe 9"),
        (("c", 3, 30, 31, [], "", np.ones(DIM + 1)), "dimension"),
        (("c", 3, 30, 31, [], "", np.zeros(DIM)), "zero vector"),
        (("c", 3, 30, 31, [], "", None), "embedding"),
        (("", 3, 30, 31, [], "", np.ones(DIM)), "camera_id"),
    ]
    for args, msg in cases:
        with pytest.raises(ValueError, match=msg):
            f.insert_event(*args)
    assert sorted(all_nodes(f)) == sorted(snap) and len(f) == 2
    f.check()
    f.insert_event("c", 3, 20, 21, [], "", np.ones(DIM))  # touching the previous event is fine


def test_check_catches_corruption():
    def build():
        f = EventForest(None, ForestConfig())
        feed = Feeder(f)
        for i in range(40):
            feed.insert("c", kind="random", nkf=3)
        f.check()
        return f

    def internal(f):
        return next(n for n in f.structure().nodes.values() if n.children and n.height >= 2)

    corruptions = {
        "parent pointer": lambda f: setattr(f.structure().nodes[internal(f).children[0]], "parent", None),
        "height": lambda f: setattr(internal(f), "height", internal(f).height + 1),
        "interval": lambda f: setattr(internal(f), "t_end", internal(f).t_end + 1),
        "keyframes": lambda f: setattr(internal(f), "keyframes", internal(f).keyframes[:-1] + [999_999]),
        "cycle": lambda f: setattr(internal(f), "children", (f.roots("c")[0].node_id, internal(f).children[1])),
        "too many roots": lambda f: f.structure().roots["c"].extend([f.structure().roots["c"][0]] * 4),
        "stale flag": lambda f: setattr(internal(f), "written_version", internal(f).summary_version),
    }
    for name, corrupt in corruptions.items():
        f = build()
        corrupt(f)
        with pytest.raises(AssertionError):
            f.check()


# -- persistence ---------------------------------------------------------------------------------
def _ops(f: EventForest, start: int, n: int) -> None:
    """A deterministic mix of inserts on two cameras and summary writes."""
    feed_t = {"a": 0.0, "b": 0.0}
    for cam in feed_t:
        leaves = [lf for r in f.roots(cam) for lf in f.leaves(r.node_id)]
        if leaves:
            feed_t[cam] = leaves[-1].t_end
    for i in range(start, start + n):
        cam = "a" if i % 3 else "b"
        t0 = feed_t[cam] + 1
        f.insert_event(cam, i, t0, t0 + 2, [(10 * i, t0 + 1)], f"event {i}", _emb("random", i))
        feed_t[cam] = t0 + 2
        if i % 4 == 0:
            for node in f.stale_nodes(limit=2):
                f.set_summary(node.node_id, node.summary_version, f"sum {node.node_id}", _emb("drift", node.node_id))


def test_reopen_restores_every_node(tmp_path):
    s = Store(tmp_path / "store")
    f = EventForest(ForestNodeRepository(s.db), ForestConfig())
    _ops(f, 1, 150)
    f.check()
    q = np.random.default_rng(0).standard_normal(DIM)
    expect_retrieve = [(n.node_id, round(sc, 5)) for n, sc in f.retrieve(q, k=3)]
    expect_stale = [(n.node_id, n.summary_version) for n in f.stale_nodes()]
    s.close()

    s2 = Store(tmp_path / "store")
    g = EventForest(ForestNodeRepository(s2.db), ForestConfig())
    g.check()
    assert_same_forest(f, g)
    assert [(n.node_id, round(sc, 5)) for n, sc in g.retrieve(q, k=3)] == expect_retrieve
    assert [(n.node_id, n.summary_version) for n in g.stale_nodes()] == expect_stale
    # carrying on after the reopen builds exactly what a forest that never closed builds
    # (a memory-only one fed the same calls)
    _ops(g, 151, 60)
    g.check()
    s2.close()
    m = EventForest(None, ForestConfig())
    _ops(m, 1, 150)
    assert_same_forest(f, m)
    _ops(m, 151, 60)
    assert_same_forest(g, m)


def test_schema_is_created_in_the_store(store):
    EventForest(ForestNodeRepository(store.db), ForestConfig())
    tables = {r[0] for r in store.db.conn().execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"forest_nodes", "forest_meta"} <= tables
    EventForest(ForestNodeRepository(store.db), ForestConfig())  # idempotent


def _crash_during_persist(monkeypatch):
    real = ForestNodeRepository._write

    def persist_then_die(conn, *args):
        real(conn, *args)       # every row written inside the transaction...
        raise RuntimeError("simulated crash")   # ...then it dies before commit

    monkeypatch.setattr(ForestNodeRepository, "_write", staticmethod(persist_then_die))


def test_crash_inside_a_transaction_leaves_the_previous_state(tmp_path, monkeypatch):
    s = Store(tmp_path / "store")
    f = EventForest(ForestNodeRepository(s.db), ForestConfig())
    _ops(f, 1, 40)
    before = all_nodes(f)
    stale = f.stale_nodes()[0]
    leaves_a = [(lf.event_id, lf.t_start, lf.t_end, list(zip(lf.keyframes, lf.keyframe_times)), lf.summary,
                 lf.embedding) for r in f.roots("a") for lf in f.leaves(r.node_id)]

    with monkeypatch.context() as mp:
        _crash_during_persist(mp)
        with pytest.raises(RuntimeError, match="simulated"):
            f.insert_event("a", 999, 1e6, 1e6 + 1, [], "lost", np.ones(DIM))
        with pytest.raises(RuntimeError, match="simulated"):
            f.set_summary(stale.node_id, stale.summary_version, "lost", np.ones(DIM))
        with pytest.raises(RuntimeError, match="simulated"):
            f.rebuild("a", leaves_a[1:])
        with pytest.raises(RuntimeError, match="simulated"):
            f.remove_camera("b")

    f.check()
    now = all_nodes(f)
    assert sorted(now) == sorted(before) and all(same_node(now[i], before[i]) for i in now)
    assert f.leaf_for_event(999) is None
    s.close()
    s2 = Store(tmp_path / "store")
    g = EventForest(ForestNodeRepository(s2.db), ForestConfig())
    assert_same_forest(f, g)
    # and the forest works on: the failed event can go in now
    g.insert_event("a", 999, 1e6, 1e6 + 1, [], "kept", np.ones(DIM))
    g.check()
    assert g.leaf_for_event(999).summary == "kept"
    s2.close()


# -- rebuild / remove ----------------------------------------------------------------------------
def test_rebuild_after_a_deletion_and_remove_camera(tmp_path):
    s = Store(tmp_path / "store")
    f = EventForest(ForestNodeRepository(s.db), ForestConfig())
    _ops(f, 1, 90)
    b_before = {nid: n for nid, n in all_nodes(f).items() if n.camera_id == "b"}
    old = {nid: n for nid, n in all_nodes(f).items() if n.camera_id == "a"}
    old_max = max(all_nodes(f))
    leaves = [lf for r in f.roots("a") for lf in f.leaves(r.node_id)]
    kept = leaves[:10] + leaves[11:]          # event leaves[10] was deleted
    spec = [(lf.event_id, lf.t_start, lf.t_end, list(zip(lf.keyframes, lf.keyframe_times)), lf.summary,
             lf.embedding) for lf in kept]
    stale = f.rebuild("a", spec)
    f.check()
    new_leaves = [lf for r in f.roots("a") for lf in f.leaves(r.node_id)]
    assert [lf.event_id for lf in new_leaves] == [lf.event_id for lf in kept]
    assert [lf.node_id for lf in new_leaves] == [lf.node_id for lf in kept]  # leaf ids survive
    assert f.leaf_for_event(leaves[10].event_id) is None
    internal = {nid for nid, n in all_nodes(f).items() if n.camera_id == "a" and n.children}
    assert set(stale) == internal and all(f.node(i).stale for i in internal)
    assert min(internal) > old_max  # internal nodes are new: no id of the old tree is reused
    assert not (internal & set(old))
    after_b = {nid: n for nid, n in all_nodes(f).items() if n.camera_id == "b"}
    assert sorted(after_b) == sorted(b_before) and all(same_node(after_b[i], b_before[i]) for i in after_b)

    # a rebuild with events out of order is refused whole
    snap = all_nodes(f)
    with pytest.raises(ValueError, match="before"):
        f.rebuild("a", [spec[1], spec[0]])
    with pytest.raises(ValueError, match="duplicate"):
        f.rebuild("a", [spec[0], spec[0]])
    b_event = next(n.event_id for n in b_before.values() if n.event_id is not None)
    with pytest.raises(ValueError, match="duplicate"):   # an event of camera b
        f.rebuild("a", [(b_event, 0, 1, [], "", np.ones(DIM))])
    assert sorted(all_nodes(f)) == sorted(snap)

    assert f.remove_camera("a") == len(internal) + len(kept)
    assert f.cameras() == ["b"] and f.roots("a") == []
    assert f.remove_camera("a") == 0
    f.check()
    s.close()
    s2 = Store(tmp_path / "store")
    g = EventForest(ForestNodeRepository(s2.db), ForestConfig())
    assert_same_forest(f, g)
    g.check()
    # a camera rebuilt from nothing is empty; inserting into a removed camera starts afresh
    g.insert_event("a", 5000, 0, 1, [], "", np.ones(DIM))
    assert g.leaf_for_event(5000).leaf_lo == 0
    g.check()
    s2.close()
