"""Stage 3 of VAM: the strictly online, per-camera moment commit (semantic dedup + event boundaries).

Input: the frames of ONE camera that passed the image gates, as ``push(t, emb, key)`` with ``t``
strictly increasing (seconds on the camera's axis) and ``emb`` a finite, non-zero 1-D embedding of
a fixed dimension (normalized here; L2-normalized float32 is what the embedders give). Output: for
every pushed frame exactly one :class:`Decision`, in push order, with at most ONE frame of
lookahead: after any ``push`` only the newest frame can still be undecided (held); ``finish()``
decides it. Decisions depend on the frames only, never on how the caller groups its pushes.

Rules as implemented (``d(a, b) = 1 - cos(a, b)``):

1. Reference. The reference ``ref`` is always the last KEPT frame. The camera's first frame is
   kept, has ``distance=None`` and opens the first event.
2. Thresholds. ``tau_dedup`` / ``tau_event`` are Otsu thresholds (64 bins over [min, max], see
   :mod:`.otsu`) over the last ``cfg.window`` entries of the dedup history / event history, once
   that history holds ``cfg.min_history`` entries; before that, or when Otsu has no answer (all
   distances equal), the fallbacks ``1 - cfg.dedup_fallback_sim`` / ``1 - cfg.event_fallback_sim``.
   An adaptive value is clamped to ``[ADAPTIVE_MIN, ADAPTIVE_MAX] = [0.02, 0.5]``: below 0.02 mere
   sensor noise would count as change (everything kept); above 0.5 (cos sim 0.5) whole scene changes
   could be called redundant, and because the reference only moves on a keep, a too-high dedup
   threshold would feed itself (the memory freezes). Rule 5 bounds any freeze to ``max_event_s``
   anyway. ``tau_dedup`` is computed once per pushed frame, before that frame's distance is
   appended; ``tau_event`` once per kept frame, before that frame's ``d_k`` is appended.
3. Dedup. A new frame ``f`` with ``d = d(f, ref) < tau_dedup`` is redundant: it is held, and the
   frame held before it (if any) is dropped with reason ``"dedup"`` (only the newest frame of a run
   is held). Otherwise the run ends: the held frame, if any, is KEPT (keep both ends: the run's
   first frame is the reference, its last is the held one), becomes the reference, and ``f`` is
   re-evaluated against it with the same ``tau_dedup``: redundant -> ``f`` is held (a new run
   against the new reference), else ``f`` is kept. ``finish()`` keeps the held frame (the end of
   the last run). ``d`` of the final comparison is appended to the dedup history, one entry per
   frame (none for the first frame), and reported as ``Decision.distance``.
4. Events. Over the sequence of kept frames, ``d_k = d(kept_k, kept_{k-1})`` (= the distance of
   kept frame ``k`` to the reference it was compared with). Kept frame ``k`` opens a new event when
   ``d_k > tau_event and d_k >= d_{k-1}`` (a peak with BACKWARD context only: a rising or flat
   stretch above the threshold opens an event at each of its kept frames; ``d_{k-1}`` is taken as
   -inf for the camera's second kept frame). A forward-looking peak test (``d_k >= d_{k+1}``) would
   need the next KEPT frame, which can lie arbitrarily many dropped frames later; that would break
   the one-frame lookahead, so it is not used. Each ``d_k`` is appended to the event history.
5. Maximum event length. When ``f`` arrives more than ``cfg.max_event_s`` after the open event's
   first kept frame, the held frame (if any, always within the limit) is kept first (rules 3-4), and
   then, if the (possibly new) open event still started more than ``max_event_s`` before ``f``,
   ``f`` is kept and opens a new event even when it is redundant. So an event's kept frames never
   span more than ``max_event_s``, and a static scene still gets a kept frame at least about every
   ``max_event_s``.

``state()`` returns a :class:`CommitterState` with everything needed to continue identically:
reference, held frame (t, embedding, key, distance), both histories, the last consecutive-kept
distance, the open event's start, the last kept and last pushed ``t``; ``to_json()`` /
``from_json()`` turn it into JSON with full field names (and read the version 1 layout, whose
names were abbreviated). Keys are echoed back unchanged and are not stored, except the held
frame's key, which ``state()`` must serialize: a key must be JSON-serializable (str, int, float,
bool, None, lists/dicts of those; a JSON round trip turns tuples into lists) or have a
``to_json()`` giving such a value, read back by the ``key_from_json`` given to ``from_json``.
Bad input (non-finite or zero embedding, wrong shape, a dimension change, non-finite or
non-increasing ``t``) raises :class:`CommitInputError` (a ``ValueError``) naming ``t`` and the
problem, and leaves the committer unchanged.
"""
from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from ..config import CommitConfig
from ..errors import VamError
from ..numerics import finite_time
from .otsu import otsu_threshold

ADAPTIVE_MIN = 0.02
ADAPTIVE_MAX = 0.5
STATE_VERSION = 2  # 1: the same state under abbreviated names (read, never written)


class CommitInputError(VamError, ValueError):
    """A frame pushed to the committer is unusable; the message names its t and the problem."""


@dataclass
class Decision:
    t: float
    key: Any  # the caller's handle for the frame, echoed back
    kept: bool
    reason: str | None  # None when kept; "dedup" when semantically redundant
    event_start: bool  # this kept frame opens a new event (the previous one ends at the previous kept frame)
    distance: float | None  # cosine distance to the reference the decision used; None for the first frame


@dataclass(frozen=True)
class HeldFrame:
    """The newest frame of a run of similar frames: its decision waits for the next frame."""

    t: float
    embedding: np.ndarray  # float64, unit norm
    key: Any
    distance: float  # to the reference, as its decision will report it


def _key_to_json(key: Any) -> Any:
    return key.to_json() if hasattr(key, "to_json") else key


@dataclass(frozen=True)
class CommitterState:
    """A committer's persisted state (``OnlineCommitter.state()``); see the module docstring."""

    dim: int | None = None
    reference: np.ndarray | None = None  # float64, unit norm: the last kept frame
    held: HeldFrame | None = None
    dedup_history: tuple[float, ...] = ()
    event_history: tuple[float, ...] = ()
    prev_kept_distance: float | None = None  # d_{k-1}
    event_t0: float | None = None
    last_kept_t: float | None = None
    last_t: float | None = None

    def to_json(self) -> dict:
        h = self.held
        return {
            "version": STATE_VERSION,
            "dim": self.dim,
            "reference": None if self.reference is None else self.reference.tolist(),
            "held": None if h is None else {"t": h.t, "embedding": h.embedding.tolist(),
                                            "key": _key_to_json(h.key), "distance": h.distance},
            "dedup_history": list(self.dedup_history),
            "event_history": list(self.event_history),
            "prev_kept_distance": self.prev_kept_distance,
            "event_t0": self.event_t0,
            "last_kept_t": self.last_kept_t,
            "last_t": self.last_t,
        }

    @classmethod
    def from_json(cls, data: dict, key_from_json: Callable[[Any], Any] | None = None) -> "CommitterState":
        """Read ``to_json()``'s output, or a version 1 state (stores written before names were
        spelled out). Raises VamError naming the problem."""
        try:
            version = data.get("version")
            if version not in (1, STATE_VERSION):
                raise ValueError(f"unknown state version {version!r}")
            old = version == 1
            name = (lambda new, v1: v1 if old else new)  # noqa: E731
            opt = lambda x: None if x is None else float(x)  # noqa: E731
            held = None
            h = data["held"]
            if h is not None:
                key = h["key"] if key_from_json is None else key_from_json(h["key"])
                held = HeldFrame(float(h["t"]), np.asarray(h[name("embedding", "emb")], dtype=np.float64), key,
                                 float(h[name("distance", "d")]))
            ref = data[name("reference", "ref")]
            return cls(dim=None if data["dim"] is None else int(data["dim"]),
                       reference=None if ref is None else np.asarray(ref, dtype=np.float64), held=held,
                       dedup_history=tuple(float(x) for x in data[name("dedup_history", "dedup_hist")]),
                       event_history=tuple(float(x) for x in data[name("event_history", "event_hist")]),
                       prev_kept_distance=opt(data[name("prev_kept_distance", "prev_dk")]),
                       event_t0=opt(data["event_t0"]), last_kept_t=opt(data["last_kept_t"]),
                       last_t=opt(data["last_t"]))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise VamError(f"invalid committer state: {type(exc).__name__}: {exc}") from None


class OnlineCommitter:
    """Per-camera online commit; see the module docstring for the exact rules."""

    def __init__(self, cfg: CommitConfig | None = None, state: CommitterState | None = None, body=None):
        """``body``: the dedup similarities' body for ``push_batch`` (index/dedup_bodies.py,
        chosen once; default the CPU's)."""
        self.cfg = cfg if cfg is not None else CommitConfig()
        self._body = body
        # during push_batch: the batch's similarity matrix, and the rows in it of the reference
        # and of the held frame (None outside a batch, or for a frame not in the matrix)
        self._sims: np.ndarray | None = None
        self._ref_row: int | None = None
        self._held_row: int | None = None
        self._dedup_fb = 1.0 - float(self.cfg.dedup_fallback_sim)
        self._event_fb = 1.0 - float(self.cfg.event_fallback_sim)
        self._dim: int | None = None
        self._ref: np.ndarray | None = None
        self._held: HeldFrame | None = None
        self._dedup_hist: deque[float] = deque(maxlen=self.cfg.window)
        self._event_hist: deque[float] = deque(maxlen=self.cfg.window)
        self._prev_dk: float | None = None  # d_{k-1}: distance of the last kept frame to the one before
        self._event_t0: float | None = None  # t of the open event's first kept frame
        self._last_kept_t: float | None = None
        self._last_t: float | None = None  # t of the last pushed frame
        if state is not None:
            self._load(state)

    # -- thresholds ------------------------------------------------------------------------------
    def _adaptive(self, hist: deque, fallback: float) -> float:
        if len(hist) < self.cfg.min_history:
            return fallback
        tau = otsu_threshold(np.fromiter(hist, dtype=np.float64, count=len(hist)))
        if tau is None:
            return fallback
        return min(max(tau, ADAPTIVE_MIN), ADAPTIVE_MAX)

    def thresholds(self) -> tuple[float, float]:
        """The current (dedup distance threshold, event distance threshold)."""
        return self._adaptive(self._dedup_hist, self._dedup_fb), self._adaptive(self._event_hist, self._event_fb)

    # -- input -----------------------------------------------------------------------------------
    def _check(self, t, emb) -> tuple[float, np.ndarray]:
        return self._check_after(t, emb, self._last_t, self._dim)

    @staticmethod
    def _check_after(t, emb, last_t: float | None, dim: int | None) -> tuple[float, np.ndarray]:
        """(t, unit embedding) of a frame pushed after one at ``last_t``, of dimension ``dim``."""
        tf = finite_time(t, f"t={t!r:.40}: the frame's timestamp", error=CommitInputError)
        if last_t is not None and not tf > last_t:
            raise CommitInputError(f"t={tf}: timestamps must increase strictly (previous frame t={last_t})")
        try:
            e = np.asarray(emb, dtype=np.float64)
        except (TypeError, ValueError):
            raise CommitInputError(f"t={tf}: embedding is not numeric") from None
        if e.ndim != 1 or e.size == 0:
            raise CommitInputError(f"t={tf}: embedding must be a non-empty 1-D vector, got shape {e.shape}")
        if dim is not None and e.size != dim:
            raise CommitInputError(f"t={tf}: embedding dimension changed from {dim} to {e.size}")
        if not np.all(np.isfinite(e)):
            raise CommitInputError(f"t={tf}: embedding has NaN or inf values")
        n = float(np.linalg.norm(e))
        if not n > 0 or not math.isfinite(n):
            raise CommitInputError(f"t={tf}: embedding has zero (or non-finite) norm")
        return tf, e / n

    def _dist(self, e: np.ndarray, row: int | None = None) -> float:
        """1 - cos(e, reference); in a batch from its similarity matrix (``row``: e's row)."""
        if row is not None and self._ref_row is not None:
            return 1.0 - float(self._sims[self._ref_row, row])
        return 1.0 - float(np.dot(e, self._ref))

    # -- decisions -------------------------------------------------------------------------------
    def _keep(self, t: float, e: np.ndarray, key: Any, d: float | None, forced: bool = False,
              row: int | None = None) -> Decision:
        if d is None:  # the camera's first kept frame
            start = True
        else:
            tau_e = self._adaptive(self._event_hist, self._event_fb)
            peak = d > tau_e and (self._prev_dk is None or d >= self._prev_dk)
            start = forced or peak
            self._event_hist.append(d)
            self._prev_dk = d
        if start:
            self._event_t0 = t
        self._ref = e
        self._ref_row = row
        self._last_kept_t = t
        return Decision(t=t, key=key, kept=True, reason=None, event_start=start, distance=d)

    def _keep_held(self) -> Decision:
        h, row = self._held, self._held_row
        self._held = self._held_row = None
        return self._keep(h.t, h.embedding, h.key, h.distance, row=row)

    def push(self, t: float, emb: np.ndarray, key: Any = None, *, keep: bool = False) -> list[Decision]:
        """Add one frame; returns the decisions that became final (the held frame's and/or this one's).
        ``keep``: the frame is kept whatever its distance (the image gates saw a local change
        the embedding may not); a held frame before it ends its run and is kept too."""
        t, e = self._check(t, emb)
        return self._decide(t, e, key, keep)

    def _decide(self, t: float, e: np.ndarray, key: Any, keep: bool, row: int | None = None) -> list[Decision]:
        """The rules of the module docstring for one checked frame (``row``: its row in the
        batch's similarity matrix, None outside a batch)."""
        self._last_t = t
        if self._ref is None:
            self._dim = e.size
            return [self._keep(t, e, key, None, row=row)]
        tau_d = self._adaptive(self._dedup_hist, self._dedup_fb)
        out: list[Decision] = []
        d = self._dist(e, row)
        forced = t - self._event_t0 > self.cfg.max_event_s
        if not (forced or keep) and d < tau_d:  # redundant: hold it, drop the previously held one
            if self._held is not None:
                h = self._held
                out.append(Decision(t=h.t, key=h.key, kept=False, reason="dedup", event_start=False,
                                    distance=h.distance))
            self._held, self._held_row = HeldFrame(t, e, key, d), row
            self._dedup_hist.append(d)
            return out
        if self._held is not None:  # the run ends: keep its last frame, it becomes the reference
            out.append(self._keep_held())
            d = self._dist(e, row)
            forced = t - self._event_t0 > self.cfg.max_event_s
            if not (forced or keep) and d < tau_d:
                self._held, self._held_row = HeldFrame(t, e, key, d), row
                self._dedup_hist.append(d)
                return out
        self._dedup_hist.append(d)
        out.append(self._keep(t, e, key, d, forced=forced, row=row))
        return out

    def push_many(self, items: Iterable[tuple]) -> list[Decision]:
        """``push`` for each ``(t, emb)`` or ``(t, emb, key)``; same decisions as pushing one by one.

        Not atomic: on bad input, the frames before the bad one stay pushed (and their decisions
        are lost to the caller), so callers that need them push frame by frame."""
        out: list[Decision] = []
        for item in items:
            out.extend(self.push(*item))
        return out

    def push_batch(self, ts, embs, keys=None, keeps=None) -> list[Decision]:
        """``push`` of each frame of a batch (``ts``: B times, ``embs``: B x D, ``keys`` and
        ``keeps`` per frame or None), with the same decisions as pushing them one by one; the
        similarities come from the body in one call (on CUDA, one kernel launch for the batch).

        The body gets the reference, the held frame and the batch's frames stacked; every pair
        the sequential rules can need is in its matrix (the reference only ever becomes the
        held frame or one of the batch's). Atomic: a bad frame raises CommitInputError naming
        its t before any decision, and the committer is unchanged."""
        n = len(ts)
        keys = [None] * n if keys is None else list(keys)
        keeps = [False] * n if keeps is None else [bool(k) for k in keeps]
        if len(embs) != n or len(keys) != n or len(keeps) != n:
            raise CommitInputError(f"push_batch: {n} times, {len(embs)} embeddings, {len(keys)} keys and "
                                   f"{len(keeps)} keep flags (all must be equal)")
        if n == 0:
            return []
        checked, last_t, dim = [], self._last_t, self._dim
        for t, emb in zip(ts, embs):
            tf, e = self._check_after(t, emb, last_t, dim)
            checked.append((tf, e))
            last_t, dim = tf, e.size
        rows = [e for _, e in checked]
        first = 0
        if self._held is not None:
            rows.insert(0, self._held.embedding)
            first += 1
        if self._ref is not None:
            rows.insert(0, self._ref)
            first += 1
        if self._body is None:
            from .dedup_bodies import CpuBody

            self._body = CpuBody()
        if getattr(self._body, "scans", False):
            return self._scan_on_body(np.stack(rows), first, checked, keys, keeps)
        self._sims = self._body.sims(np.stack(rows))
        self._ref_row = 0 if self._ref is not None else None
        self._held_row = first - 1 if self._held is not None else None
        try:
            out: list[Decision] = []
            for i, ((t, e), key, keep) in enumerate(zip(checked, keys, keeps)):
                out.extend(self._decide(t, e, key, keep, row=first + i))
            return out
        finally:
            self._sims = self._ref_row = self._held_row = None

    def _scan_on_body(self, rows: np.ndarray, first: int, checked: list, keys: list, keeps: list) -> list[Decision]:
        """push_batch's rules run by the body (on the device): the state goes there as a
        ScanState, the decisions and the state after them come back."""
        from .dedup_bodies import ScanState

        out: list[Decision] = []
        start = 0
        if self._ref is None:  # the camera's first frame: kept, no distance; the reference from here
            t, e = checked[0]
            out += self._decide(t, e, keys[0], keeps[0])
            start = 1
        if start < len(checked):
            h = self._held
            state = ScanState(ref_row=0 if start == 0 else first, held_row=None if h is None else first - 1,
                              held_t=0.0 if h is None else h.t, held_d=0.0 if h is None else h.distance,
                              event_t0=self._event_t0, prev_dk=self._prev_dk,
                              dedup_history=list(self._dedup_hist), event_history=list(self._event_hist))
            res = self._body.scan(rows, first + start, [t for t, _ in checked[start:]], keeps[start:], state, self.cfg)
            for frame, kept, event_start, d in res.decisions:
                t, key = (h.t, h.key) if frame == -1 else (checked[start + frame][0], keys[start + frame])
                out.append(Decision(t=t, key=key, kept=kept, reason=None if kept else "dedup",
                                    event_start=event_start, distance=d))
                if kept:
                    self._last_kept_t = t
            s = res.state
            self._ref = rows[s.ref_row]
            if s.held_row is None:
                self._held = None
            elif s.held_frame >= 0:  # else the frame held before the batch still is
                i = start + s.held_frame
                self._held = HeldFrame(checked[i][0], checked[i][1], keys[i], s.held_d)
            self._event_t0, self._prev_dk = s.event_t0, s.prev_dk
            self._dedup_hist.clear()
            self._dedup_hist.extend(s.dedup_history)
            self._event_hist.clear()
            self._event_hist.extend(s.event_history)
            self._last_t = checked[-1][0]
        return out

    def finish(self) -> list[Decision]:
        """End of stream: keep the held frame (the end of the last run). Pushing afterwards goes on
        against the last kept frame."""
        if self._held is None:
            return []
        return [self._keep_held()]

    @property
    def pending(self) -> bool:
        """Whether a frame is held (its decision not yet final)."""
        return self._held is not None

    @property
    def held_t(self) -> float | None:
        """The held frame's time (None: none held)."""
        return None if self._held is None else self._held.t

    # -- persistence -----------------------------------------------------------------------------
    def state(self) -> CommitterState:
        """A snapshot (later pushes do not change it), safe to serialize on another thread."""
        h = self._held
        if h is not None:
            try:
                json.dumps(_key_to_json(h.key))
            except (TypeError, ValueError) as exc:
                raise CommitInputError(f"t={h.t}: the held frame's key {h.key!r} is not JSON-serializable "
                                       f"({exc}); keys must be JSON-serializable or None") from None
        return CommitterState(dim=self._dim, reference=self._ref, held=h,  # both replaced, never mutated
                              dedup_history=tuple(self._dedup_hist), event_history=tuple(self._event_hist),
                              prev_kept_distance=self._prev_dk, event_t0=self._event_t0,
                              last_kept_t=self._last_kept_t, last_t=self._last_t)

    def _load(self, s: CommitterState) -> None:
        if not isinstance(s, CommitterState):
            raise TypeError(f"state must be a CommitterState (see CommitterState.from_json), got {type(s).__name__}")
        problem = None
        if s.reference is not None and s.reference.shape != (s.dim,):
            problem = "reference does not match dim"
        elif s.held is not None and (s.reference is None or s.held.embedding.shape != (s.dim,)):
            problem = "held frame does not match dim"
        elif s.reference is not None and s.event_t0 is None:
            problem = "a reference without an open event"
        if problem is not None:
            raise VamError(f"invalid committer state: {problem}")
        self._dim, self._ref, self._held = s.dim, s.reference, s.held
        self._dedup_hist.extend(s.dedup_history)
        self._event_hist.extend(s.event_history)
        self._prev_dk, self._event_t0 = s.prev_kept_distance, s.event_t0
        self._last_kept_t, self._last_t = s.last_kept_t, s.last_t
