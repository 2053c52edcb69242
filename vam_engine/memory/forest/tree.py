"""The Event Forest: a per-camera hierarchy of event summaries (OASIS section 3.1), kept
balanced, persisted in the store, and searched with greedy lineage pruning (OASIS 3.2 /
Algorithm 1).

Nodes. A node R = ([t_start, t_end], keyframes F, summary s, embedding e, height d). Leaves are
events (height 0); an internal node has exactly two children, earlier one first, and covers
their union. F is at most ``cfg.keyframes`` moment ids chosen from the children's keyframes and
spread evenly in time. s and e come from an LLM writer (``s = Merge(s_j, s_k)``, ``e = E(s)``)
that runs later and elsewhere: until it delivers, a node is *stale* (``written_version !=
summary_version``), keeps a placeholder summary, and is scored with a placeholder embedding,
the n_leaves-weighted normalized mean of its children's (current or placeholder) embeddings.

Which pair merges. Each camera keeps at most ``cfg.root_cap`` roots. A new event becomes the
newest root; when that makes one root too many, the adjacent pair of roots with the best seed
score ``cos(e_j, e_k) - lambda (d_j + d_k)`` is merged. That choice is the paper's.

How a pair merges (our change). The paper merges by putting a new parent over the two roots.
With a small root cap that degenerates: whatever rule picks the pair, a left-to-right
construction that keeps a bounded number of roots and only ever puts new parents over them
builds trees of bounded Strahler number, so depth grows polynomially in the number of events
(measured: the seed's rule reaches depth ~0.2 N, i.e. a chain; even picking the pair that
minimizes the resulting depth still gives ~sqrt(N), 139 at N = 1e4). A deep chain makes every
old event sit under ~N/5 ancestors whose summaries the writer must produce and a retrieval has
to prune. So two roots L (earlier) and R are *joined* as balanced (AVL) trees instead:

- if |h(L) - h(R)| <= 1: a new node (L, R), as in the paper;
- if h(L) > h(R) + 1: walk down L's right spine to the first node c with h(c) <= h(R) + 1,
  put a new node (c, R) in c's place, then walk back up to L's root, recomputing each node and
  rotating (standard single/double AVL rotations) where its children's heights differ by more
  than 1; rotations keep the in-order sequence of leaves, which is time order;
- if h(R) > h(L) + 1: the mirror image on R's left spine.

Every tree then stays AVL-balanced: an AVL tree of height h has at least Fib(h + 2) leaves, so
h <= 1.4405 log2(n_leaves) - 0.33 < 1.45 log2(n_leaves + 2). The price: a join changes the
nodes on the path it walks (their leaves grow, rotations regroup them), O(log N) nodes, which
all become stale (benchmarks/bench_forest.py measures ~11 per event at N = 1e4, against exactly
one new node per event under the seed's policy); the writer rewrites them bottom-up (``stale_nodes`` only offers a
node once its children are current) and ``set_summary`` ignores a summary written for a version
that has changed meanwhile, so repeated changes to one node coalesce into one write.

The reference implementation also never set parent pointers and used recursion that
overflowed on its chains; here every node has its parent, and every walk is iterative.

Persistence. Nodes live in the store's SQLite database (``forest_nodes``, forest/nodes.py),
embeddings as float32 blobs. Each public mutating call writes its changes in one transaction; if that fails, the in-memory forest is reloaded from the
database, so memory and disk always hold the state before or after the call, never a mix.
``EventForest(None, cfg)`` (no repository) keeps a forest in memory only (simulations, benchmarks).

Retrieval. Each camera has a contiguous float32 matrix of its nodes' (current or placeholder)
embeddings, updated in place as nodes change. Every node also knows the range of leaf
ordinals (time order within its camera) it covers; within a camera those ranges are laminar
(nested or disjoint), so "ancestor or descendant of the picked node" is exactly "range
overlaps the picked node's range": the greedy pruning is a few vectorized comparisons. Scoring
is one matrix-vector product per camera (numpy's single-threaded einsum for small matrices, as
in vectors/bodies.py, BLAS above ``SINGLE_THREAD_MAX`` multiply-adds). Equal scores go to the
smaller node id. With ``device="cuda"`` (or "torch-cpu") each camera's matrix is mirrored in a
float32 torch tensor, and the scores and the greedy run there (forest/device.py); the host
arrays stay the truth, and the device is chosen once, by the vector spaces' rule.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from ...config import ForestConfig
from ...numerics import time_range
from ...vectors import resolve_rows_device
from ..records import ForestNode
from .index import (CameraIndex, clip_text, frozen_unit, make_camera_index, mean_direction, public_copy,
                    retrieve_picks, spread_in_time)
from .nodes import ForestNodeRepository


# Placeholder summaries of pending nodes are the children's summaries joined, cut to this size.
PLACEHOLDER_CHARS = 1000
_SEP = " / "


class EventForest:
    def __init__(self, nodes: ForestNodeRepository | None, cfg: ForestConfig | None = None, *,
                 device: str = "cpu"):
        """``nodes``: where the forest persists (None: in memory only). ``device``: where the
        retrieval matrices live and retrieval runs, by the vector spaces' rule ("cpu", "auto",
        "cuda", "cuda:N", "torch-cpu"; forest/index.py); VectorError for an unknown one."""
        self.repo = nodes
        self.cfg = cfg if cfg is not None else ForestConfig()
        self.rows_device = resolve_rows_device(device)
        self._lock = threading.RLock()
        self._load()

    # -- state ---------------------------------------------------------------------------------
    def _reset(self) -> None:
        self._nodes: dict[int, ForestNode] = {}
        self._roots: dict[str, list[int]] = {}
        self._index: dict[str, CameraIndex] = {}
        self._by_event: dict[int, int] = {}
        self._last_end: dict[str, float] = {}      # t_end of the camera's newest leaf
        self._next_ordinal: dict[str, int] = {}    # leaf ordinal the camera's next leaf gets
        self._stale: set[int] = set()
        self._dim: int | None = None
        self._next_id = 1
        # per-operation bookkeeping: nodes to write, cameras to delete first, nodes changed
        self._dirty: set[int] = set()
        self._changed: list[int] = []
        self._changed_set: set[int] = set()
        self._deleted_cameras: set[str] = set()

    def _load(self) -> None:
        """(Re)build every in-memory structure from the database."""
        self._reset()
        if self.repo is None:
            return
        self._next_id, nodes = self.repo.load()
        for node in nodes:
            nid, cam = node.node_id, node.camera_id
            if node.embedding is not None:
                self._dim = len(node.embedding)
            self._nodes[nid] = node
            self._next_id = max(self._next_id, nid + 1)
            if node.event_id is not None:
                self._by_event[node.event_id] = nid
            if node.stale:
                self._stale.add(nid)
            if node.parent is None:
                self._roots.setdefault(cam, []).append(nid)
            if not node.children:
                if node.leaf_hi + 1 > self._next_ordinal.get(cam, 0):
                    self._next_ordinal[cam] = node.leaf_hi + 1
                    self._last_end[cam] = node.t_end
        for cam, ids in self._roots.items():
            ids.sort(key=lambda i: self._nodes[i].leaf_lo)
        # placeholder embeddings need the children's first: fill the indexes by height
        for node in sorted(self._nodes.values(), key=lambda n: n.height):
            self._index_put(node)

    def _index_put(self, node: ForestNode) -> None:
        """Store the node's current embedding, or its placeholder from its children's."""
        if node.embedding is not None and not node.stale:
            eff = node.embedding
        else:
            l, r = (self._nodes[c] for c in node.children)
            idx = self._index[node.camera_id]
            eff = mean_direction(idx.eff(l.node_id), l.n_leaves, idx.eff(r.node_id), r.n_leaves)
        idx = self._index.get(node.camera_id)
        if idx is None:
            idx = self._index[node.camera_id] = make_camera_index(self.rows_device, len(eff))
        idx.put(node, eff)

    def _eff(self, node_id: int) -> np.ndarray:
        return self._index[self._nodes[node_id].camera_id].eff(node_id)

    # -- one transaction per public mutation ---------------------------------------------------
    def _run(self, fn):
        """Apply ``fn`` in memory, then write what it changed in one transaction. On any failure
        the database rolled back, so memory is reloaded from it."""
        with self._lock:
            self._dirty, self._changed, self._changed_set = set(), [], set()
            self._deleted_cameras = set()
            try:
                result = fn()
                if self.repo is not None:
                    self.repo.save(self._deleted_cameras, [self._nodes[i] for i in sorted(self._dirty)
                                                           if i in self._nodes], self._next_id)
            except BaseException:
                self._load()
                raise
            finally:
                self._dirty, self._changed, self._changed_set = set(), [], set()
                self._deleted_cameras = set()
            return result

    # -- validation ------------------------------------------------------------------------------
    def _check_leaf(self, camera_id, event_id, t_start, t_end, keyframes, summary, embedding,
                    last_end: float | None, seen: set) -> tuple:
        """Validated (t_start, t_end, sorted keyframe pairs, summary, unit embedding) of one event;
        ValueError naming the event otherwise."""
        if not isinstance(camera_id, str) or not camera_id:
            raise ValueError(f"camera_id must be a non-empty string, got {camera_id!r}")
        if isinstance(event_id, bool) or not isinstance(event_id, (int, np.integer)):
            raise ValueError(f"event_id must be an integer, got {event_id!r}")
        what = f"event {event_id} (camera {camera_id!r})"
        if int(event_id) in self._by_event or int(event_id) in seen:
            raise ValueError(f"{what}: already in the forest (duplicate event_id)")
        t0, t1 = time_range((t_start, t_end), f"{what}: the interval (t_start, t_end)")
        if last_end is not None and t0 < last_end:
            raise ValueError(f"{what}: starts at {t0}, before the camera's previous event ends ({last_end}); "
                             f"events must arrive in time order without overlapping")
        pairs = []
        for kf in keyframes or []:
            try:
                mid, t = kf
                mid_i, t_f = int(mid), float(t)
            except (TypeError, ValueError):
                raise ValueError(f"{what}: keyframes must be (moment_id, t) pairs, got {kf!r}") from None
            if not (t0 <= t_f <= t1):
                raise ValueError(f"{what}: keyframe {mid_i} at t={t_f} lies outside the event [{t0}, {t1}]")
            pairs.append((t_f, mid_i))
        pairs.sort()
        pairs = [pairs[i] for i in spread_in_time([p[0] for p in pairs], self.cfg.keyframes)]
        if not isinstance(summary, str):
            raise ValueError(f"{what}: summary must be a string, got {type(summary).__name__}")
        if embedding is None:
            raise ValueError(f"{what}: a leaf needs its event's embedding")
        emb = frozen_unit(embedding, self._dim, what)
        return t0, t1, pairs, summary, emb

    # -- building --------------------------------------------------------------------------------
    def _new_id(self) -> int:
        nid = self._next_id
        self._next_id += 1
        return nid

    def _add_leaf(self, camera_id: str, event_id: int, t0: float, t1: float, pairs, summary: str,
                  emb: np.ndarray, node_id: int | None = None) -> int:
        if self._dim is None:
            self._dim = len(emb)
        ordinal = self._next_ordinal.get(camera_id, 0)
        nid = self._new_id() if node_id is None else node_id
        node = ForestNode(nid, camera_id, t0, t1, [m for _, m in pairs], [t for t, _ in pairs], summary, emb,
                          0, 1, None, (), int(event_id), 1, 1, ordinal, ordinal)
        self._nodes[nid] = node
        self._by_event[int(event_id)] = nid
        self._next_ordinal[camera_id] = ordinal + 1
        self._last_end[camera_id] = t1
        self._roots.setdefault(camera_id, []).append(nid)
        self._index_put(node)
        self._dirty.add(nid)
        # too many roots: join the best-scoring adjacent pair (one join per new leaf suffices)
        roots = self._roots[camera_id]
        while len(roots) > self.cfg.root_cap:
            i = self._best_pair(roots)
            roots[i:i + 2] = [self._join(roots[i], roots[i + 1])]
        return nid

    def _best_pair(self, roots: list[int]) -> int:
        """Index i of the adjacent pair (roots[i], roots[i+1]) with the best seed score
        cos(e_j, e_k) - lambda (d_j + d_k); the earliest pair on a tie."""
        lam = self.cfg.merge_lambda
        best_i, best_s = 0, -math.inf
        for i in range(len(roots) - 1):
            a, b = roots[i], roots[i + 1]
            s = float(self._eff(a) @ self._eff(b)) - lam * (self._nodes[a].height + self._nodes[b].height)
            if s > best_s:
                best_i, best_s = i, s
        return best_i

    def _h(self, nid: int) -> int:
        return self._nodes[nid].height

    def _join(self, left: int, right: int) -> int:
        """Join two AVL trees, every leaf of ``left`` earlier than every leaf of ``right``; returns
        the joined tree's root (see the module docstring)."""
        hl, hr = self._h(left), self._h(right)
        if abs(hl - hr) <= 1:
            return self._new_internal(left, right)
        if hl > hr:
            c = left
            while self._h(c) > hr + 1:       # L's right spine
                c = self._nodes[c].children[1]
            p = self._nodes[c].parent
            n = self._new_internal(c, right)
        else:
            c = right
            while self._h(c) > hl + 1:       # R's left spine
                c = self._nodes[c].children[0]
            p = self._nodes[c].parent
            n = self._new_internal(left, c)
        self._set_parent(n, p)
        self._replace_child(p, c, n)
        # walk back up: every node on the way gained leaves; rebalance where needed
        top = p
        while p is not None:
            top = self._rebalance(p)
            p = self._nodes[top].parent
        return top

    def _new_internal(self, left: int, right: int) -> int:
        nid = self._new_id()
        ln = self._nodes[left]
        self._nodes[nid] = ForestNode(nid, ln.camera_id, 0.0, 0.0, [], [], "", None, 0, 0, None,
                                      (left, right), None, 0, 0)
        self._set_parent(left, nid)
        self._set_parent(right, nid)
        self._refresh(nid)
        return nid

    def _set_parent(self, child: int, parent: int | None) -> None:
        # a parent pointer is part of the child's row: the child must be written too
        self._nodes[child].parent = parent
        self._dirty.add(child)

    def _replace_child(self, parent: int | None, old: int, new: int) -> None:
        if parent is not None:
            p = self._nodes[parent]
            p.children = tuple(new if c == old else c for c in p.children)
            self._dirty.add(parent)

    def _rebalance(self, x: int) -> int:
        """Recompute node x after a change below it, rotating if its children's heights differ by
        more than 1; returns the node now at x's place."""
        l, r = self._nodes[x].children
        bal = self._h(l) - self._h(r)
        if bal > 1:
            ll, lr = self._nodes[l].children
            if self._h(lr) > self._h(ll):
                self._rotate_left(l)
            return self._rotate_right(x)
        if bal < -1:
            rl, rr = self._nodes[r].children
            if self._h(rl) > self._h(rr):
                self._rotate_right(r)
            return self._rotate_left(x)
        self._refresh(x)
        return x

    def _rotate_left(self, x: int) -> int:
        """x = (A, r), r = (B, C)  ->  r = (x, C), x = (A, B). Leaf order A B C is kept."""
        xn = self._nodes[x]
        r = xn.children[1]
        rn = self._nodes[r]
        a, b, c = xn.children[0], rn.children[0], rn.children[1]
        parent = xn.parent
        xn.children = (a, b)
        self._set_parent(b, x)
        rn.children = (x, c)
        self._set_parent(x, r)
        self._set_parent(r, parent)
        self._replace_child(parent, x, r)
        self._refresh(x)
        self._refresh(r)
        return r

    def _rotate_right(self, x: int) -> int:
        """x = (l, C), l = (A, B)  ->  l = (A, x), x = (B, C)."""
        xn = self._nodes[x]
        l = xn.children[0]
        ln = self._nodes[l]
        a, b, c = ln.children[0], ln.children[1], xn.children[1]
        parent = xn.parent
        xn.children = (b, c)
        self._set_parent(b, x)
        ln.children = (a, x)
        self._set_parent(x, l)
        self._set_parent(l, parent)
        self._replace_child(parent, x, l)
        self._refresh(x)
        self._refresh(l)
        return l

    def _refresh(self, nid: int) -> None:
        """Recompute an internal node from its children: interval, height, leaves, keyframes,
        placeholder summary and embedding; its content changed, so its summary is stale."""
        n = self._nodes[nid]
        l, r = (self._nodes[c] for c in n.children)
        n.t_start, n.t_end = l.t_start, r.t_end
        n.height = max(l.height, r.height) + 1
        n.n_leaves = l.n_leaves + r.n_leaves
        n.leaf_lo, n.leaf_hi = l.leaf_lo, r.leaf_hi
        # keyframes lie inside their leaves (checked on insert) and the children are ordered
        # in time, so the concatenation is sorted
        times, ids = l.keyframe_times + r.keyframe_times, l.keyframes + r.keyframes
        picks = spread_in_time(times, self.cfg.keyframes)
        n.keyframe_times = [times[i] for i in picks]
        n.keyframes = [ids[i] for i in picks]
        if n.written_version == 0:  # never written: the children's summaries stand in for it
            half = (PLACEHOLDER_CHARS - len(_SEP)) // 2
            n.summary = clip_text(l.summary, half) + _SEP + clip_text(r.summary, half)
        # else keep the last written summary as the placeholder: closer than a concatenation
        n.embedding = None
        if nid not in self._changed_set:  # one version per change, however many steps it took
            n.summary_version += 1
            self._changed_set.add(nid)
            self._changed.append(nid)
        self._stale.add(nid)
        self._dirty.add(nid)
        self._index_put(n)

    # -- public mutations ------------------------------------------------------------------------
    def insert_event(self, camera_id: str, event_id: int, t_start: float, t_end: float, keyframes,
                     summary: str, embedding) -> list[int]:
        """Add an event as the newest leaf of its camera (events arrive in time order per camera)
        and merge roots while there are more than ``cfg.root_cap``. ``keyframes``: (moment_id, t)
        pairs inside the event. Returns the ids of the nodes whose summary became stale."""
        with self._lock:
            args = self._check_leaf(camera_id, event_id, t_start, t_end, keyframes, summary, embedding,
                                    self._last_end.get(camera_id), set())

            def op():
                self._add_leaf(camera_id, event_id, *args)
                return [nid for nid in self._changed if nid in self._nodes]

            return self._run(op)

    def set_summary(self, node_id: int, version: int, summary: str, embedding) -> bool:
        """Deliver the writer's summary for ``version`` of an internal node. Refused (False) when
        the node changed since that version was handed out; the newer version is still stale."""
        with self._lock:
            n = self._nodes.get(node_id)
            if n is None:
                raise KeyError(f"no forest node {node_id}")
            if n.is_leaf:
                raise ValueError(f"forest node {node_id} is a leaf: it takes its summary from event "
                                 f"{n.event_id}; rebuild the camera to change it")
            if not isinstance(summary, str):
                raise ValueError(f"forest node {node_id}: summary must be a string")
            emb = frozen_unit(embedding, self._dim, f"forest node {node_id}")
            if version != n.summary_version:
                return False

            def op():
                n.summary, n.embedding, n.written_version = summary, emb, version
                self._stale.discard(node_id)
                self._dirty.add(node_id)
                # the node's own embedding replaces its placeholder, and pending ancestors'
                # placeholders are built from it
                self._index_put(n)
                p = n.parent
                while p is not None and self._nodes[p].stale:
                    self._index_put(self._nodes[p])
                    p = self._nodes[p].parent
                return True

            return self._run(op)

    def remove_camera(self, camera_id: str) -> int:
        """Drop every node of a camera; returns how many."""
        with self._lock:
            if camera_id not in self._roots:
                return 0

            def op():
                count = self._drop_camera(camera_id)
                self._deleted_cameras.add(camera_id)
                return count

            return self._run(op)

    def _drop_camera(self, camera_id: str) -> int:
        ids = [nid for nid, n in self._nodes.items() if n.camera_id == camera_id]
        for nid in ids:
            n = self._nodes.pop(nid)
            if n.event_id is not None:
                self._by_event.pop(n.event_id, None)
            self._stale.discard(nid)
        for d in (self._roots, self._index, self._last_end, self._next_ordinal):
            d.pop(camera_id, None)
        if not self._nodes:
            self._dim = None  # as a reload would find it: the next event sets the dimension
        return len(ids)

    def rebuild(self, camera_id: str, leaves) -> list[int]:
        """Replace a camera's forest by one built from ``leaves`` (event_id, t_start, t_end,
        keyframes, summary, embedding), in time order, e.g. the events left after a deletion.
        Leaves of events already in the camera keep their node ids; every internal node is new
        and stale. Returns the stale node ids."""
        with self._lock:
            old_leaf = {n.event_id: n.node_id for n in self._nodes.values()
                        if n.camera_id == camera_id and n.event_id is not None}
            checked, seen, last_end = [], set(), None
            # the camera's own events may come back: validate against the other cameras only
            hidden = {ev: self._by_event.pop(ev) for ev in old_leaf}
            try:
                for leaf in leaves:
                    if len(leaf) != 6:
                        raise ValueError(f"rebuild({camera_id!r}): each leaf is (event_id, t_start, t_end, "
                                         f"keyframes, summary, embedding), got {len(leaf)} fields")
                    ev = leaf[0]
                    args = self._check_leaf(camera_id, ev, *leaf[1:], last_end, seen)
                    seen.add(int(ev))
                    last_end = args[1]
                    checked.append((int(ev), args))
            finally:
                self._by_event.update(hidden)

            def op():
                self._drop_camera(camera_id)
                self._deleted_cameras.add(camera_id)
                for ev, args in checked:
                    self._add_leaf(camera_id, ev, *args, node_id=old_leaf.get(ev))
                return [nid for nid in self._changed if nid in self._nodes]

            return self._run(op)

    # -- reads -----------------------------------------------------------------------------------
    def node(self, node_id: int) -> ForestNode:
        with self._lock:
            n = self._nodes.get(node_id)
            if n is None:
                raise KeyError(f"no forest node {node_id}")
            return public_copy(n)

    def leaf_for_event(self, event_id: int) -> ForestNode | None:
        with self._lock:
            nid = self._by_event.get(event_id)
            return None if nid is None else public_copy(self._nodes[nid])

    def roots(self, camera_id: str) -> list[ForestNode]:
        """The camera's roots, oldest first."""
        with self._lock:
            return [public_copy(self._nodes[i]) for i in self._roots.get(camera_id, [])]

    def children(self, node_id: int) -> list[ForestNode]:
        with self._lock:
            return [public_copy(self._nodes[c]) for c in self.node(node_id).children]

    def ancestors(self, node_id: int) -> list[ForestNode]:
        """Parent first, root last."""
        with self._lock:
            out, p = [], self.node(node_id).parent
            while p is not None:
                out.append(public_copy(self._nodes[p]))
                p = self._nodes[p].parent
            return out

    def leaves(self, node_id: int) -> list[ForestNode]:
        """The leaves under a node, in time order."""
        with self._lock:
            self.node(node_id)
            out, stack = [], [node_id]
            while stack:
                n = self._nodes[stack.pop()]
                if n.children:
                    stack.append(n.children[1])   # popped after the whole left subtree
                    stack.append(n.children[0])
                else:
                    out.append(public_copy(n))
            return out

    def cameras(self) -> list[str]:
        with self._lock:
            return sorted(self._roots)

    def __len__(self) -> int:
        return len(self._nodes)

    def stale_nodes(self, limit: int | None = None, camera_id: str | None = None) -> list[ForestNode]:
        """Internal nodes waiting for a summary whose children are all current, lowest first, so
        summaries get written bottom-up. Pass each node's ``summary_version`` to set_summary."""
        with self._lock:
            ready = []
            for nid in self._stale:
                n = self._nodes[nid]
                if camera_id is not None and n.camera_id != camera_id:
                    continue
                if all(not self._nodes[c].stale for c in n.children):
                    ready.append(n)
            ready.sort(key=lambda n: (n.height, n.camera_id, n.t_start, n.node_id))
            if limit is not None:
                ready = ready[: max(0, limit)]
            return [public_copy(n) for n in ready]

    def retrieve(self, query_emb, k: int = 2, camera_id: str | None = None,
                 as_of: float | None = None) -> list[tuple[ForestNode, float]]:
        """The ``k`` nodes most similar (cosine) to the query such that none is an ancestor or
        descendant of another (greedy, best first; OASIS Algorithm 1). ``camera_id`` restricts
        to one camera, ``as_of`` to nodes ending at or before that time. Pending nodes are scored
        with their placeholder embedding. Equal scores come in node id order (smaller first),
        whatever the device; the device's scores agree with the host's to float32 rounding."""
        if k < 1:
            return []
        with self._lock:
            if self._dim is None:
                return []
            q = frozen_unit(query_emb, self._dim, "retrieve query")
            if camera_id is not None:
                idx = self._index.get(camera_id)
                indexes = [] if idx is None else [idx]
            else:
                indexes = list(self._index.values())
            picks = retrieve_picks(indexes, q, k, as_of)
            return [(public_copy(self._nodes[nid]), s) for nid, s in picks]

    @property
    def index_device(self) -> str:
        """Where retrieval runs: "numpy" (the host) or "torch-<device>" (forest/device.py)."""
        rows = self.rows_device
        return f"torch-{rows.torch_device}" if rows.kind == "torch" else "numpy"

    def node_embeddings(self, camera_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(node ids, embeddings) of a camera's nodes as ``retrieve`` scores them (a pending node
        by its placeholder), copies in one order; empty for an unknown camera. For baselines."""
        with self._lock:
            idx = self._index.get(camera_id)
            if idx is None:
                return np.empty(0, np.int64), np.empty((0, self._dim or 0), np.float32)
            return idx.ids[:idx.n].copy(), idx.emb[:idx.n].copy()

    # -- invariants ------------------------------------------------------------------------------
    def structure(self) -> "ForestStructure":
        """The forest's own structures as they are now, not copies: for the invariant check
        (``check``) and debugging. Change nothing in them."""
        return ForestStructure(self._nodes, self._roots, self._by_event, self._index, self._stale, self._next_id,
                               self.cfg)

    def check(self) -> None:
        """Verify every structural invariant; AssertionError with a message on the first broken
        one. O(N), iterative."""
        from .check import check_forest

        with self._lock:
            check_forest(self.structure())


@dataclass(frozen=True)
class ForestStructure:
    """An EventForest's structures (``EventForest.structure``): the live objects, not copies."""

    nodes: dict[int, ForestNode]    # every node by id
    roots: dict[str, list[int]]     # per camera, its roots oldest first
    by_event: dict[int, int]        # event id -> its leaf
    indexes: dict[str, CameraIndex]  # per camera, its retrieval matrix
    stale: set[int]                 # nodes waiting for a summary
    next_id: int                    # the id the next node gets
    cfg: ForestConfig
