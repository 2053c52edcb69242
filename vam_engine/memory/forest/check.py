"""Structural invariants of the event forest (a test and debugging aid), and the seed's merge
policy simulated for comparison (benchmarks/bench_forest.py)."""
from __future__ import annotations

import math

import numpy as np

from .index import frozen_unit, mean_direction


def fail(msg: str):
    raise AssertionError(msg)


def check_forest(forest) -> None:
    """AssertionError with a message on the first broken invariant of a forest's structures
    (``EventForest.structure()``, read under its lock)."""
    _check_reachable(forest)
    for nid, n in forest.nodes.items():
        _check_node(forest, nid, n)
    if set(forest.by_event.values()) - set(forest.nodes):
        fail("event map points at missing nodes")


def _check_reachable(forest) -> None:
    """Every node reachable exactly once from its camera's roots (no cycles, no orphans), the
    roots in order, and each camera's retrieval index holding exactly its nodes."""
    nodes = forest.nodes
    seen: set[int] = set()
    for cam, roots in forest.roots.items():
        if len(roots) > forest.cfg.root_cap:
            fail(f"camera {cam!r}: {len(roots)} roots > root_cap {forest.cfg.root_cap}")
        prev = None
        for rid in roots:
            r = nodes.get(rid)
            if r is None:
                fail(f"camera {cam!r}: root {rid} does not exist")
            if r.parent is not None:
                fail(f"root {rid} has parent {r.parent}")
            if r.camera_id != cam:
                fail(f"root {rid} belongs to camera {r.camera_id!r}, listed under {cam!r}")
            if prev is not None and (r.t_start < prev.t_end or r.leaf_lo != prev.leaf_hi + 1):
                fail(f"camera {cam!r}: roots {prev.node_id} and {rid} out of order or overlapping")
            prev = r
            stack = [rid]
            while stack:
                nid = stack.pop()
                if nid in seen:
                    fail(f"node {nid} reached twice (cycle or shared child)")
                seen.add(nid)
                n = nodes.get(nid)
                if n is None:
                    fail(f"node {nid} is referenced but does not exist")
                if n.camera_id != cam:
                    fail(f"node {nid} of camera {n.camera_id!r} sits in a tree of {cam!r}")
                for c in n.children:
                    if c not in nodes:
                        fail(f"node {nid}: child {c} does not exist")
                    if nodes[c].parent != nid:
                        fail(f"node {c}: parent pointer {nodes[c].parent}, but it is a child of {nid}")
                stack.extend(n.children)
        if roots and nodes[roots[0]].leaf_lo != 0:
            fail(f"camera {cam!r}: leaf ordinals do not start at 0")
    if len(seen) != len(nodes):
        orphans = sorted(set(nodes) - seen)[:5]
        fail(f"{len(nodes) - len(seen)} nodes unreachable from any root, e.g. {orphans}")
    for cam in forest.roots:
        if cam not in forest.indexes or forest.indexes[cam].n != sum(1 for n in nodes.values() if n.camera_id == cam):
            fail(f"camera {cam!r}: retrieval index does not hold exactly the camera's nodes")
    if set(forest.indexes) != set(forest.roots):
        fail("retrieval indexes and cameras differ")
    for cam, idx in forest.indexes.items():
        differs = idx.mirror_mismatch()
        if differs is not None:
            fail(f"camera {cam!r}: the device copy of its retrieval index holds other {differs} than the host's")


def _check_node(forest, nid: int, n) -> None:
    """One node's own invariants: interval, keyframes, staleness, its index row; a leaf's event
    and embedding, an internal node's children (order, ranges, AVL balance, keyframes taken
    from them, the placeholder embedding of a pending node)."""
    nodes, budget = forest.nodes, forest.cfg.keyframes
    if nid >= forest.next_id:
        fail(f"node {nid} >= next id {forest.next_id}")
    if not (n.t_start <= n.t_end):
        fail(f"node {nid}: interval [{n.t_start}, {n.t_end}]")
    if len(n.keyframes) != len(n.keyframe_times) or len(n.keyframes) > budget:
        fail(f"node {nid}: {len(n.keyframes)} keyframes (budget {budget}) / {len(n.keyframe_times)} times")
    if any(a > b for a, b in zip(n.keyframe_times, n.keyframe_times[1:])):
        fail(f"node {nid}: keyframes not sorted by time")
    if (nid in forest.stale) != n.stale:
        fail(f"node {nid}: stale set disagrees with its versions")
    idx = forest.indexes[n.camera_id]
    r = idx.row.get(nid)
    if r is None or idx.ids[r] != nid or idx.t_end[r] != n.t_end or idx.lo[r] != n.leaf_lo \
            or idx.hi[r] != n.leaf_hi:
        fail(f"node {nid}: retrieval index row out of date")
    if not n.children:
        _check_leaf(forest, nid, n, idx, r)
    else:
        _check_internal(forest, nid, n, idx, r)


def _check_leaf(forest, nid: int, n, idx, r) -> None:
    if n.height != 0 or n.n_leaves != 1 or n.event_id is None or n.leaf_lo != n.leaf_hi:
        fail(f"leaf {nid}: height {n.height}, n_leaves {n.n_leaves}, event {n.event_id}")
    if forest.by_event.get(n.event_id) != nid:
        fail(f"leaf {nid}: event map does not point at it")
    if n.stale or n.embedding is None:
        fail(f"leaf {nid}: leaves are never pending")
    if any(not (n.t_start <= t <= n.t_end) for t in n.keyframe_times):
        fail(f"leaf {nid}: a keyframe lies outside its interval")
    if not np.allclose(idx.emb[r], n.embedding, atol=1e-6):
        fail(f"leaf {nid}: retrieval index holds a different embedding")


def _check_internal(forest, nid: int, n, idx, r) -> None:
    nodes, budget = forest.nodes, forest.cfg.keyframes
    if len(n.children) != 2:
        fail(f"node {nid}: {len(n.children)} children (nodes are binary)")
    if n.event_id is not None:
        fail(f"internal node {nid} has event {n.event_id}")
    l, rr = nodes[n.children[0]], nodes[n.children[1]]
    if l.t_end > rr.t_start or l.leaf_hi + 1 != rr.leaf_lo:
        fail(f"node {nid}: children {l.node_id}, {rr.node_id} out of order or overlapping")
    if (n.t_start, n.t_end) != (l.t_start, rr.t_end):
        fail(f"node {nid}: interval [{n.t_start}, {n.t_end}] != children's [{l.t_start}, {rr.t_end}]")
    if (n.leaf_lo, n.leaf_hi) != (l.leaf_lo, rr.leaf_hi):
        fail(f"node {nid}: leaf range differs from its children's")
    if n.height != max(l.height, rr.height) + 1:
        fail(f"node {nid}: height {n.height}, children {l.height}, {rr.height}")
    if abs(l.height - rr.height) > 1:
        fail(f"node {nid}: AVL balance broken (children heights {l.height}, {rr.height})")
    if n.n_leaves != l.n_leaves + rr.n_leaves or n.n_leaves != n.leaf_hi - n.leaf_lo + 1:
        fail(f"node {nid}: n_leaves {n.n_leaves} != {l.n_leaves} + {rr.n_leaves}")
    if n.height > 1.45 * math.log2(n.n_leaves + 2):
        fail(f"node {nid}: height {n.height} > 1.45 log2({n.n_leaves} + 2)")
    # a subset of the children's keyframes is, by induction, a subset of the leaves'
    pool = set(zip(l.keyframes, l.keyframe_times)) | set(zip(rr.keyframes, rr.keyframe_times))
    if not set(zip(n.keyframes, n.keyframe_times)) <= pool:
        fail(f"node {nid}: keyframes not taken from its children's")
    if len(n.keyframes) != min(budget, len(l.keyframes) + len(rr.keyframes)):
        fail(f"node {nid}: {len(n.keyframes)} keyframes, expected "
             f"{min(budget, len(l.keyframes) + len(rr.keyframes))}")
    if n.stale:
        if n.embedding is not None:
            fail(f"node {nid}: pending but has an embedding")
        want = mean_direction(idx.eff(l.node_id), l.n_leaves, idx.eff(rr.node_id), rr.n_leaves)
    else:
        if n.embedding is None:
            fail(f"node {nid}: current but has no embedding")
        want = n.embedding
    if not np.allclose(idx.emb[r], want, atol=1e-5):
        fail(f"node {nid}: retrieval index embedding out of date")


def reference_policy_depth(embeddings, root_cap: int = 4, lam: float = 0.1) -> list[int]:
    """The seed's policy, simulated for comparison: each new event becomes the newest root;
    while roots exceed ``root_cap``, the adjacent pair with the best cos(e_j, e_k) - lam (d_j +
    d_k) gets a new parent over both (d = max + 1, placeholder embedding = n_leaves-weighted
    normalized mean). Returns the largest depth in the forest after each insert."""
    roots: list[tuple[np.ndarray, int, int]] = []   # (unit embedding, depth, n_leaves)
    out, deepest = [], 0
    for i, e in enumerate(embeddings):
        roots.append((frozen_unit(e, None, f"embedding {i}"), 0, 1))
        while len(roots) > root_cap:
            best_i, best_s = 0, -math.inf
            for j in range(len(roots) - 1):
                (ea, da, _), (eb, db, _) = roots[j], roots[j + 1]
                s = float(ea @ eb) - lam * (da + db)
                if s > best_s:
                    best_i, best_s = j, s
            (ea, da, na), (eb, db, nb) = roots[best_i], roots[best_i + 1]
            d = max(da, db) + 1
            deepest = max(deepest, d)
            roots[best_i:best_i + 2] = [(mean_direction(ea, na, eb, nb), d, na + nb)]
        out.append(deepest)
    return out
