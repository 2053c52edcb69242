"""The event forest's node index on a torch device: each camera's node rows mirrored in a
resident tensor (the vector spaces' torch body, vectors/bodies.py ``TorchRows``, in float32)
beside the nodes' ids, leaf-ordinal ranges and end times, and the greedy lineage-pruned
retrieval run there. The host arrays (forest/index.py ``CameraIndex``) stay the truth: the
mirror is told which rows changed and copies them over before the next retrieval.

A retrieval is three steps:

1. ``CameraMirror.sync``: the rows changed since the last retrieval go host -> device (pinned,
   non-blocking on CUDA: the host does not wait for them);
2. ``device_picks``: every camera's scores (one matrix-vector product) and its greedy, on the
   device, without a host synchronisation: no scalar is read back, each pick stays a tensor;
3. one device -> host copy of the picks (at most k per camera), the retrieval's only wait on the
   device; the cameras' picks are merged on the host (forest/index.py ``retrieve_picks``).

The greedy is the host one step for step: the best score, equal scores to the smaller node id;
drop every node whose leaf range overlaps the pick's (its ancestors and descendants); repeat.
A step with nothing left picks a -inf score, which the host drops. Scores are float32 on both
sides, computed in different orders: they agree to float rounding (~1e-7), so two nodes whose
scores differ by less than that may come in either order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

NO_ID = torch.iinfo(torch.int64).max   # larger than any node id: loses every tie


@dataclass(frozen=True)
class NodeTensors:
    """One camera's node rows on the device: views of the mirror's first n rows."""

    emb: torch.Tensor      # (n, d) float32: current or placeholder embeddings
    meta: torch.Tensor     # (3, n) int64: node id, leaf_lo, leaf_hi
    t_end: torch.Tensor    # (n,) float64


def lineage_greedy(nodes: NodeTensors, q: torch.Tensor, k: int, as_of: float | None):
    """Algorithm 1 on one camera, on the nodes' device: (scores, node ids), each (min(k, n),),
    best first; -inf scores where the pool ran out."""
    # explicit ops rather than Python indexing, which FakeTensorMode cannot run on fake CUDA
    # tensors under a torch built without CUDA (the test of this function runs it so)
    ids, lo, hi = nodes.meta.unbind(0)
    s = nodes.emb @ q
    if as_of is not None:
        s.masked_fill_(nodes.t_end > as_of, float("-inf"))
    scores, picked = [], []
    for _ in range(min(k, len(ids))):
        best = s.max()
        j = torch.where(s == best, ids, NO_ID).argmin().view(1)
        scores.append(best.view(1))
        picked.append(ids.index_select(0, j))
        lo_j, hi_j = lo.index_select(0, j), hi.index_select(0, j)
        s.masked_fill_((lo <= hi_j) & (hi >= lo_j), float("-inf"))
    if not scores:
        return s.narrow(0, 0, 0), ids.narrow(0, 0, 0)
    return torch.cat(scores), torch.cat(picked)


def device_picks(cameras: list[NodeTensors], q: torch.Tensor, k: int, as_of: float | None):
    """Every camera's greedy picks, concatenated: (scores, node ids) on the device, with no host
    synchronisation (tests/memory/forest/test_device.py runs it on fake CUDA tensors)."""
    got = [lineage_greedy(c, q, k, as_of) for c in cameras]
    return torch.cat([s for s, _ in got]), torch.cat([i for _, i in got])


class CameraMirror:
    """One camera's node rows on a torch device, in the host index's row order: embeddings in
    a ``TorchRows`` body, ids / leaf ranges and end times beside them."""

    def __init__(self, body):
        self.body = body
        self.n = 0
        self.meta = torch.empty((3, 0), dtype=torch.int64, device=body.device)
        self.t_end = torch.empty(0, dtype=torch.float64, device=body.device)

    def _reserve(self, n: int) -> None:
        cap = self.t_end.shape[0]
        if n <= cap:
            return
        cap_new = max(n, 2 * cap, 1024)
        meta = torch.empty((3, cap_new), dtype=torch.int64, device=self.body.device)
        t_end = torch.empty(cap_new, dtype=torch.float64, device=self.body.device)
        meta[:, :cap] = self.meta
        t_end[:cap] = self.t_end
        self.meta, self.t_end = meta, t_end

    def sync(self, rows: np.ndarray, emb: np.ndarray, meta: np.ndarray, t_end: np.ndarray, n: int) -> None:
        """The host index now has ``n`` rows, and rows ``rows`` hold ``emb``, ``meta`` (3 x
        len(rows): ids, leaf_lo, leaf_hi) and ``t_end``: copy them over."""
        if len(rows):
            self._reserve(n)
            self.body.put_rows(rows, emb)
            idx = self.body.upload(rows)
            self.meta.index_copy_(1, idx, self.body.upload(meta))
            self.t_end.index_copy_(0, idx, self.body.upload(t_end))
        self.n = n

    def tensors(self) -> NodeTensors:
        n = self.n
        return NodeTensors(self.body.t.narrow(0, 0, n), self.meta.narrow(1, 0, n), self.t_end.narrow(0, 0, n))

    def download(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(embeddings, meta, t_end) of the mirrored rows, copied to the host (for the check)."""
        t = self.tensors()
        return t.emb.float().cpu().numpy(), t.meta.cpu().numpy(), t.t_end.cpu().numpy()


def mirrored_picks(indexes, q: np.ndarray, k: int, as_of: float | None) -> list[tuple[int, float]]:
    """Each camera's greedy picks (node id, score) from its mirror, unsorted across cameras;
    ``indexes``: CameraIndex objects with mirrors, all on one device."""
    for ix in indexes:
        ix.sync_mirror()
    body = indexes[0].mirror.body
    qt = body.upload(q, body.dtype)
    s, ids = device_picks([ix.mirror.tensors() for ix in indexes], qt, k, as_of)
    s, ids = s.cpu().numpy(), ids.cpu().numpy()    # the retrieval's one wait on the device
    return [(int(i), float(x)) for i, x in zip(ids, s) if np.isfinite(x)]
