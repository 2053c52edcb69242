"""Hierarchical retention (VAM B.3, Table 5): thin old moments and recompress their frames.

Tiers are age bands on each camera's own time axis. ``age = camera_now - t``, where ``t`` is the
moment's time (absolute when known, else relative to its source) and ``camera_now`` the newest
moment's ``t`` of that camera; wall-clock time is never used, so a camera that stopped a week ago
does not age until it records again.

One pass, per camera (``plan_camera`` is the pure part, ``RetentionPass`` applies it):

1. Thinning. Walk the camera's moments in time order and keep a moment when it is protected, or
   when ``t - t_last_kept >= gap(band of the moment)``; every other moment is deleted (row, frame
   file and vector, through the store). Protected, never thinned: the camera's first and last
   moment, and moments the store flags ``protected`` (event keyframes: the flag lives in the
   store, so it cannot be forgotten between passes).

   Fixed point: re-running the walk on its own output keeps everything. Let ``m`` be a survivor
   and ``p`` its survivor predecessor; ``m`` was kept because it is protected or
   ``t_m - t_p >= gap``. In the next walk the last kept moment before ``m`` is ``p`` or an
   earlier survivor (only deletions happen before it), so ``t_m - t_last >= t_m - t_p >= gap``:
   ``m`` is kept again as long as its band (hence its gap) is unchanged. Bands only move to
   older tiers (``camera_now`` never decreases: the last moment is never deleted), so a frame
   kept by one pass is deleted by a later one only when it crossed into an older tier (larger
   gap), when it lost its protection (an event dropped it, or it was the camera's last moment and
   newer moments arrived), or when the disk budget raised the gaps.

2. Recompression, after the keep set is decided (B.3: "compression is applied only after the
   keep set has been determined"). A row's stored ``tier`` says which quality its file has. When
   the band is a later tier than the stored one the file is re-encoded once, straight to the
   band's settings (long side <= ``max_side``, JPEG ``quality``; recent -> long after a pause goes
   from the original in one encode), written to a temporary name and renamed into place, then
   the row's tier is set. A moment already at its tier is never re-encoded. The JPEG carries a
   comment naming its tier, so a crash between the rename and ``set_tier`` does not encode twice.

3. Disk budget (``RetentionConfig.disk_budget_bytes``). When ``store.frame_bytes()`` is above it
   after a full cycle, the gaps are raised, oldest tier first: that tier's gap is doubled until
   the planned deletions bring the total under the budget or only protected moments remain in
   it, then the next younger tier. The raised gaps (``RetentionPass.gaps``) stay in force for later
   passes of the same ``RetentionPass``; the report says when the budget cannot be met.

Work is done in bounded chunks (``chunk`` deletions or encodes per store call), cameras in a
rotating order, and ``run(budget_s, max_moments)`` stops between chunks, so a pass can run in a
background thread (``RetentionWorker``) between ingest batches without holding long locks; the
next run resumes at the camera where it stopped (planning is idempotent, so repeating part of a
camera is harmless).
"""
from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence, runtime_checkable

log = logging.getLogger(__name__)

_EPS = 1e-6  # seconds: container timestamps are floats; a 1.0 s gap may read 0.9999999


# -- tiers ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tier:
    """One age band. ``max_age_s`` None = no upper bound (the last tier). ``max_side`` and
    ``quality`` None = no recompression (the file keeps the quality it has)."""

    name: str
    max_age_s: float | None
    min_gap_s: float
    max_side: int | None = None
    quality: int | None = None

    @property
    def recompresses(self) -> bool:
        return self.max_side is not None or self.quality is not None


DEFAULT_TIERS: tuple[Tier, ...] = (
    # Recent: every moment the camera's own sampling kept. VAM's 1 s gap assumed 1 fps sampling;
    # applied to a camera sampled at 2 fps it deleted, at a pass's whim, what the indexer had just
    # kept (a second run of the same command changed the store). Moments the sampler took close
    # together (a variable frame rate) are the camera's sampling too, so no gap at all.
    Tier("recent", 3600.0, 0.0),
    Tier("mid", 86400.0, 20.0, 768, 70),
    Tier("long", None, 120.0, 512, 45),
)


def check_tiers(tiers: Sequence[Tier]) -> tuple[Tier, ...]:
    tiers = tuple(tiers)
    if not tiers:
        raise ValueError("retention needs at least one tier")
    names = [t.name for t in tiers]
    if len(set(names)) != len(names):
        raise ValueError(f"retention tier names must be unique: {names}")
    last = -math.inf
    for i, t in enumerate(tiers):
        if t.min_gap_s < 0:
            raise ValueError(f"tier {t.name}: min_gap_s must be >= 0")
        if t.max_side is not None and t.max_side < 1:
            raise ValueError(f"tier {t.name}: max_side must be >= 1")
        if t.quality is not None and not 1 <= t.quality <= 100:
            raise ValueError(f"tier {t.name}: quality must be in 1..100")
        if t.max_age_s is None:
            if i != len(tiers) - 1:
                raise ValueError(f"tier {t.name}: only the last tier may have no max_age_s")
        elif t.max_age_s <= last:
            raise ValueError(f"tier {t.name}: max_age_s must increase from tier to tier")
        else:
            last = t.max_age_s
    if tiers[-1].max_age_s is not None:
        raise ValueError("the last retention tier must have max_age_s=None (no upper bound)")
    return tiers


# -- the store interface -------------------------------------------------------------------------
@dataclass(frozen=True)
class RetentionRow:
    """What retention needs to know about one moment."""

    moment_id: int
    t: float  # the camera's own axis: t_abs when known, else t_rel
    tier: str  # the quality its frame file has now
    protected: bool  # linked to an event as a keyframe (or otherwise pinned): never thinned
    frame_path: Path  # absolute, or relative to the store root
    nbytes: int  # size of the frame file


@runtime_checkable
class RetentionStore(Protocol):
    """The store as retention sees it (implemented by ``memory.moments.MomentRepository``).

    - ``retention_rows``: every moment of the camera, ordered by ``t`` (ties by moment_id).
    - ``delete_moments``: rows, frame files and vectors, one transaction; it must skip a row that
      is protected when the transaction runs (a keyframe linked after retention read the rows).
    - ``set_tier``: called after the files were re-encoded (their size on disk changed; a
      downscaled file's width/height too).
    - ``frame_bytes``: bytes of all frame files of the store.
    """

    root: Path

    def cameras(self) -> list[str]: ...

    def retention_rows(self, camera_id: str) -> list[RetentionRow]: ...

    def delete_moments(self, ids: list[int]) -> None: ...

    def set_tier(self, ids_and_tiers: list[tuple[int, str]]) -> None: ...

    def frame_bytes(self) -> int: ...


# -- re-encoding ---------------------------------------------------------------------------------
Encoder = Callable[[Path, Tier], int]  # re-encode the file in place for the tier; its new size


def _marker(tier: Tier) -> bytes:
    return f"vam-retention:{tier.name}".encode()


def reencode_jpeg(path: Path, tier: Tier) -> int:
    """Re-encode ``path`` in place for ``tier``: long side <= ``tier.max_side`` (aspect kept,
    never upscaled), JPEG ``tier.quality`` (90 when None). Written to ``<name>.<pid>.tmp`` (the
    store sweeps stale ones) and renamed into place. A file whose JPEG comment already names this
    tier (re-encoded before a crash, tier not yet recorded) is left as it is. Returns the size."""
    from PIL import Image

    path = Path(path)
    marker = _marker(tier)
    with Image.open(path) as im:
        if im.format == "JPEG" and im.info.get("comment") == marker:
            return path.stat().st_size
        if tier.max_side is not None and max(im.size) > tier.max_side:
            # thumbnail() lets libjpeg decode at a reduced DCT scale first (draft), then resamples.
            im.thumbnail((tier.max_side, tier.max_side), Image.Resampling.LANCZOS, reducing_gap=2.0)
        else:
            im.load()
        out = im if im.mode in ("RGB", "L") else im.convert("RGB")
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            out.save(tmp, format="JPEG", quality=tier.quality or 90, comment=marker)
            os.replace(tmp, path)
        except BaseException:
            try:
                tmp.unlink()
            except OSError:
                pass
            raise
    return path.stat().st_size


# -- planning (pure) -----------------------------------------------------------------------------
@dataclass
class CameraPlan:
    camera_now: float
    bands: list[int]  # band (tier index) of each row, in the rows' time order
    keep: list[bool]
    delete_ids: list[int]
    reencode: list[tuple[RetentionRow, int]]  # (kept row, target tier index), oldest first

    def kept_per_band(self, n_tiers: int) -> list[int]:
        out = [0] * n_tiers
        for b, k in zip(self.bands, self.keep):
            out[b] += k
        return out


def band_of(age: float, tiers: Sequence[Tier]) -> int:
    for i, t in enumerate(tiers):
        if t.max_age_s is None or age <= t.max_age_s:
            return i
    return len(tiers) - 1


def sort_rows(rows: Sequence[RetentionRow]) -> list[RetentionRow]:
    rows = list(rows)
    if any(rows[i].t > rows[i + 1].t or (rows[i].t == rows[i + 1].t and rows[i].moment_id > rows[i + 1].moment_id)
           for i in range(len(rows) - 1)):
        rows.sort(key=lambda r: (r.t, r.moment_id))
    return rows


def thin(times: Sequence[float], bands: Sequence[int], protected: Sequence[bool],
         gaps: Sequence[float]) -> list[bool]:
    """Greedy thinning in time order: keep a moment when it is protected or at least
    ``gaps[band]`` after the last kept one. The first and last are always kept."""
    n = len(times)
    keep = [False] * n
    last = -math.inf
    for i in range(n):
        if protected[i] or i == 0 or i == n - 1 or times[i] - last >= gaps[bands[i]] - _EPS:
            keep[i] = True
            last = times[i]
    return keep


def plan_camera(rows: Sequence[RetentionRow], tiers: Sequence[Tier],
                gaps: Sequence[float] | None = None) -> CameraPlan:
    """What one pass does to one camera: which rows to delete, which kept files to re-encode.
    ``gaps``: the gap of each tier when not its ``min_gap_s`` (raised by the disk budget)."""
    rows = sort_rows(rows)
    if not rows:
        return CameraPlan(0.0, [], [], [], [])
    gaps = list(gaps) if gaps is not None else [t.min_gap_s for t in tiers]
    index = {t.name: i for i, t in enumerate(tiers)}
    now = rows[-1].t
    times = [r.t for r in rows]
    bands = [band_of(now - t, tiers) for t in times]
    keep = thin(times, bands, [r.protected for r in rows], gaps)
    delete_ids = [r.moment_id for r, k in zip(rows, keep) if not k]
    reencode = []
    for r, b, k in zip(rows, bands, keep):
        # An unknown stored tier is taken as the first (original quality): re-encoded when aged.
        if k and b > index.get(r.tier, 0):
            reencode.append((r, b))
    return CameraPlan(now, bands, keep, delete_ids, reencode)


# -- the pass ------------------------------------------------------------------------------------
@dataclass
class RetentionReport:
    cameras_total: int = 0
    cameras_done: int = 0  # camera visits completed by this run (a budget re-cycle visits again)
    examined: int = 0  # rows read
    deleted: int = 0
    reencoded: int = 0  # files encoded
    retiered: int = 0  # rows whose tier was set (re-encoded, or moved to a tier that keeps quality)
    kept_per_tier: dict = field(default_factory=dict)  # after the last cycle, over the cameras it did
    bytes_before: int | None = None
    bytes_after: int | None = None
    complete: bool = True  # False: stopped by budget_s / max_moments; the next run resumes
    budget_bytes: int | None = None
    budget_met: bool | None = None  # None: no budget
    gaps_s: dict = field(default_factory=dict)  # the gap of each tier in force (raised by the budget)
    errors: list = field(default_factory=list)
    elapsed_s: float = 0.0


class _Stop(Exception):
    pass


class RetentionPass:
    """Applies the tiers to a store. Keep one instance per store: it remembers where an
    incomplete run stopped and the gaps the disk budget raised."""

    def __init__(self, store: RetentionStore, tiers: Sequence[Tier] = DEFAULT_TIERS, cfg=None, *,
                 encoder: Encoder | None = None, chunk: int = 128):
        from ..config import RetentionConfig

        self.store = store
        self.tiers = check_tiers(tiers)
        self.cfg = cfg if cfg is not None else RetentionConfig()
        self.encoder: Encoder = encoder or reencode_jpeg
        self.chunk = max(1, int(chunk))
        self.gaps = [t.min_gap_s for t in self.tiers]  # raised by the disk budget, never lowered
        self._cursor = 0  # index into the sorted camera list where the next run starts
        self._lock = threading.Lock()  # one run at a time (a worker and a manual call may overlap)

    # the run ------------------------------------------------------------------------------------
    def run(self, budget_s: float | None = None, max_moments: int | None = None) -> RetentionReport:
        """One pass over every camera (from where the last incomplete run stopped), then the disk
        budget. ``budget_s`` / ``max_moments`` (deletions + re-tiers) stop it between chunks;
        ``complete`` says whether it finished. Store errors of one camera are reported and the
        pass goes on; an error listing the cameras raises (the worker records it)."""
        with self._lock:
            return self._run(budget_s, max_moments)

    def _run(self, budget_s: float | None, max_moments: int | None) -> RetentionReport:
        t0 = time.perf_counter()
        deadline = None if budget_s is None else time.monotonic() + budget_s
        rep = RetentionReport(budget_bytes=self.cfg.disk_budget_bytes)
        rep.kept_per_tier = {t.name: 0 for t in self.tiers}
        self._left = math.inf if max_moments is None else max(0, int(max_moments))
        self._deadline = deadline
        try:
            rep.bytes_before = self.store.frame_bytes()
            for _ in range(8):  # a cycle, then at most a few budget escalations
                self._cycle(rep)
                if not self._budget(rep):
                    break
        except _Stop:
            rep.complete = False
        rep.gaps_s = {t.name: g for t, g in zip(self.tiers, self.gaps)}
        try:
            rep.bytes_after = self.store.frame_bytes()
        except Exception as e:  # noqa: BLE001 - reported, never raised
            rep.errors.append(f"frame_bytes: {type(e).__name__}: {e}")
        if rep.budget_bytes is not None and rep.bytes_after is not None and rep.budget_met is None:
            rep.budget_met = rep.bytes_after <= rep.budget_bytes
        rep.elapsed_s = time.perf_counter() - t0
        return rep

    def _check(self) -> None:
        if self._left <= 0 or (self._deadline is not None and time.monotonic() >= self._deadline):
            raise _Stop

    def _cycle(self, rep: RetentionReport) -> None:
        """Every camera once, from the cursor (a run that stopped resumes there)."""
        cams = sorted(self.store.cameras())
        rep.cameras_total = len(cams)
        rep.kept_per_tier = {t.name: 0 for t in self.tiers}
        if self._cursor >= len(cams):
            self._cursor = 0
        while self._cursor < len(cams):
            self._check()
            cam = cams[self._cursor]
            try:
                self._camera(cam, rep)
            except _Stop:
                raise
            except Exception as e:  # noqa: BLE001 - one bad camera does not stop the others
                log.exception("retention: camera %s", cam)
                rep.errors.append(f"camera {cam}: {type(e).__name__}: {e}")
            self._cursor += 1
        self._cursor = 0

    def _camera(self, cam: str, rep: RetentionReport) -> None:
        rows = self.store.retention_rows(cam)
        rep.examined += len(rows)
        plan = plan_camera(rows, self.tiers, self.gaps)
        ids = plan.delete_ids
        while ids:
            self._check()
            part = ids[:int(min(self.chunk, self._left))]
            n = len(part)
            self.store.delete_moments(part)
            rep.deleted += n
            self._left -= n
            ids = ids[n:]
        todo = plan.reencode
        while todo:
            self._check()
            part = todo[:int(min(self.chunk, self._left))]
            n = len(part)
            done = []
            for row, b in part:
                tier = self.tiers[b]
                if tier.recompresses:
                    path = row.frame_path if row.frame_path.is_absolute() else Path(self.store.root) / row.frame_path
                    try:
                        self.encoder(path, tier)
                    except Exception as e:  # noqa: BLE001 - a missing/corrupt file stays at its tier
                        rep.errors.append(f"re-encode moment {row.moment_id} ({path}): {type(e).__name__}: {e}")
                        continue
                    rep.reencoded += 1
                done.append((row.moment_id, tier.name))
            if done:
                self.store.set_tier(done)
                rep.retiered += len(done)
            self._left -= n
            todo = todo[n:]
        for name, k in zip((t.name for t in self.tiers), plan.kept_per_band(len(self.tiers))):
            rep.kept_per_tier[name] += k
        rep.cameras_done += 1

    # disk budget --------------------------------------------------------------------------------
    def _budget(self, rep: RetentionReport) -> bool:
        """After a full cycle: True when the gaps were raised (so another cycle applies them)."""
        budget = self.cfg.disk_budget_bytes
        if budget is None:
            return False
        total = self.store.frame_bytes()
        if total <= budget:
            rep.budget_met = True
            return False
        rows = {cam: sort_rows(self.store.retention_rows(cam)) for cam in sorted(self.store.cameras())}
        span = max((r[-1].t - r[0].t for r in rows.values() if r), default=0.0)

        def kept_bytes(gaps) -> int:
            out = 0
            for rs in rows.values():
                plan = plan_camera(rs, self.tiers, gaps)
                out += sum(r.nbytes for r, k in zip(rs, plan.keep) if k)
            return out

        listed = sum(r.nbytes for rs in rows.values() for r in rs)
        other = total - listed  # bytes retention cannot free (files without rows, if any)
        gaps = list(self.gaps)
        raised = False
        est = total
        for i in reversed(range(len(self.tiers))):  # oldest tier first
            # Double the gap until under budget, or until it exceeds every camera's span: then
            # every unprotected moment of this band is planned away (the first moment is kept,
            # so any later one is less than the span after the last kept one).
            while est > budget and gaps[i] <= span:
                gaps[i] = gaps[i] * 2 if gaps[i] > 0 else 1.0
                raised = True
                est = other + kept_bytes(gaps)
            if est <= budget:
                break
        if not raised:
            rep.budget_met = False
            rep.errors.append(f"disk budget {budget} B cannot be met: {total} B with only protected "
                              f"moments (and each camera's first/last) left")
            return False
        self.gaps = gaps  # the next cycle applies them; the check after it reports a miss
        return True


# -- the background worker -----------------------------------------------------------------------
class RetentionWorker:
    """Runs ``RetentionPass`` every ``interval_s`` in a daemon thread, each run bounded by
    ``pass_budget_s``; an incomplete run continues after ``resume_s``. Errors are logged and
    kept (``errors``, ``last_report.errors``), never raised into the caller."""

    def __init__(self, store: RetentionStore, tiers: Sequence[Tier] = DEFAULT_TIERS, cfg=None, *,
                 interval_s: float | None = None, pass_budget_s: float | None = 2.0,
                 max_moments: int | None = None, resume_s: float = 0.2, encoder: Encoder | None = None,
                 on_report: Callable[[RetentionReport], None] | None = None):
        self.retention = RetentionPass(store, tiers, cfg, encoder=encoder)
        self.cfg = self.retention.cfg
        self.interval_s = float(interval_s if interval_s is not None else self.cfg.interval_s)
        self.pass_budget_s = pass_budget_s
        self.max_moments = max_moments
        self.resume_s = resume_s
        self.on_report = on_report
        self.last_report: RetentionReport | None = None
        self.passes = 0
        self.errors: deque[str] = deque(maxlen=100)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> bool:
        """Start the thread (the first pass runs at once). False when retention is disabled."""
        if not self.cfg.enabled or self.running:
            return self.running
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="vam-retention", daemon=True)
        self._thread.start()
        return True

    def trigger(self) -> None:
        """Run a pass now instead of at the next interval."""
        self._wake.set()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop after the chunk in progress; joins the thread."""
        self._stop.set()
        self._wake.set()
        t = self._thread
        if t is not None:
            t.join(timeout)
            if not t.is_alive():
                self._thread = None

    def __enter__(self) -> "RetentionWorker":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _loop(self) -> None:
        delay = 0.0
        while True:
            if delay > 0:
                self._wake.wait(delay)
            self._wake.clear()
            if self._stop.is_set():
                return
            complete = True
            try:
                rep = self.retention.run(budget_s=self.pass_budget_s, max_moments=self.max_moments)
                self.last_report = rep
                self.passes += 1
                complete = rep.complete
                self.errors.extend(rep.errors)
                if self.on_report is not None:
                    self.on_report(rep)
            except Exception as e:  # noqa: BLE001 - never into ingest
                log.exception("retention pass failed")
                msg = f"pass: {type(e).__name__}: {e}"
                self.errors.append(msg)
                self.last_report = RetentionReport(complete=False, errors=[msg])
            delay = self.interval_s if complete else self.resume_s
