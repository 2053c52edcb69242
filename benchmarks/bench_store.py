"""Moment store: cost per committed moment as the store grows (1e3 -> 1e5, or 1e6), and reopen time.

One camera, one source, committed in batches of ``--batch`` (64) moments, in one process:

- ``moment_store``: ``Store`` + ``VectorMemory`` (default ``VectorConfig``: index "auto",
  snapshot every 10 000 vector changes) in a temporary directory. Each moment is a
  ``PendingMoment`` at 0.5 fps (t_rel 2 s apart) with a random 512-d L2-normalized float32
  embedding and gate statistics; every ``--event-every`` (50) moments one opens a new event (so
  the store closes the previous one: keyframes + mean embedding in the "event" space). Each
  batch also carries its kept samples' rows and the source's progress, as the pipeline's do.
- ``moment_store_indexed``: the same, on a database to which the benchmark adds two indexes
  (``moments(event_id)``, ``events(camera_id, closed)``) and, after the first checkpoint,
  ``ANALYZE``: a what-if, not the engine as shipped (no engine code is changed, only the
  database), showing what the store's event lookups cost once they stop scanning (the shipped
  event close reads every moment row and every frame vector: see the query plans printed).
- ``full_rewrite``: the reference implementations' defect (docs/design.md section 6: "rewriting the
  whole database on every insert"): every moment record, its embedding included, in one JSON
  file, rewritten in full (temporary name + rename) on every committed batch. It runs only until
  one rewrite takes longer than ``--rewrite-limit-s`` (2 s); its cost grows with the size from
  there on.

Frame files: no JPEG is encoded. One tiny fixed JPEG (a few hundred bytes) is encoded once and
its bytes are written for every moment with the store's own protocol (temporary name, rename,
before the row's transaction), timed apart (the "frame stub" column) and left out of the
per-moment figure: the figure is the per-moment metadata + vector cost, the same work for both
methods. Embeddings are generated outside the timed region.

Figures, for each checkpoint size S (1e3, 1e4, 1e5, [1e6], and the size where full_rewrite
stopped), as means over the window of batches committed while the store grew from S - W to S
(W = min(S/2, ``--window``)):

- ``us/moment``: the commit (SQLite transaction + in-memory index update) per moment, without
  snapshots, plus the amortized snapshot: one snapshot taken at S, times the vector changes per
  moment (1 + 1/event-every), over ``snapshot_every``;
- ``vs moment_store``: a method's us/moment over moment_store's at the same size (how many
  times slower);
- ``reopen s``: moment_store: a second ``Store`` + ``VectorMemory`` opened on the
  directory as it is at S (the last automatic snapshot loaded, the vector log since it
  replayed; below the first snapshot, the indexes are rebuilt from the vectors table);
  full_rewrite: ``json.load`` of the file.

The run stops with a non-zero status if the reopened memory lacks a vector. No timing is
asserted.

    python benchmarks/bench_store.py                      # 1e3, 1e4, 1e5, all three: about 5 min on 2 cores
    python benchmarks/bench_store.py --quick              # 1e3, 1e4 (smoke run, ~2 min: mostly full_rewrite)
    python benchmarks/bench_store.py --max-size 1000000 --methods moment_store_indexed --name bench_store_1e6
        # full run to 1e6: about 30 min on 2 cores; 5 GB of SQLite, a 4.4 GB frame snapshot
        # (vectors + HNSW), two copies in RAM at the reopen (~9 GB). The shipped moment_store
        # would take hours there (its event close grows linearly with the store), so the full
        # run measures the indexed what-if
    python benchmarks/bench_store.py --index flat --snapshot-every 50000

Prints one table and writes benchmarks/results/bench_store.json (``--name``).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import print_table, write_json

CAMERA = "c"
DT = 2.0  # seconds between moments (0.5 fps)


def tiny_jpeg() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), 128, np.uint8)).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def write_stub(root: Path, frame_ref: str, blob: bytes) -> None:
    """Store.write_frame's protocol (temporary name with the pid, rename into place),
    with fixed bytes instead of an encoded frame."""
    path = root / frame_ref
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(blob)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(blob)
    os.replace(tmp, path)


def embeddings(rng, n: int, dim: int) -> np.ndarray:
    e = rng.standard_normal((n, dim), dtype=np.float32)
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    return e


def next_batch(n: int, batch: int, checkpoints, max_size: int) -> int:
    """Moments in the next batch: ``batch``, cut short so that a batch ends at each checkpoint."""
    nxt = min([c for c in checkpoints if c > n] + [max_size])
    return min(batch, nxt - n)


def batches(args, checkpoints: list[int], rng):
    """(moments committed before it, its embeddings) of each batch up to --max-size: ``--batch``
    moments, cut short so that a batch ends at each checkpoint. Embeddings are made here,
    outside the timed regions."""
    n = 0
    while n < args.max_size:
        m = next_batch(n, args.batch, checkpoints, args.max_size)
        yield n, embeddings(rng, m, args.dim)
        n += m


def window(size: int, batch: int, cap: int) -> tuple[int, int]:
    """Moment range (lo, hi] of the window ending at ``size``: half the size, at most ``cap``,
    at least one batch."""
    w = max(batch, min(size // 2, cap))
    return size - w, size


def window_mean(ends: np.ndarray, per_moment: np.ndarray, counts: np.ndarray, lo: int, hi: int) -> float | None:
    """Mean per moment over the batches whose end lies in (lo, hi], weighted by their moments."""
    sel = (ends > lo) & (ends <= hi)
    if not sel.any():
        return None
    return float((per_moment[sel] * counts[sel]).sum() / counts[sel].sum())


# -- full_rewrite --------------------------------------------------------------------------------
def run_full_rewrite(args, checkpoints: list[int]) -> dict:
    """The whole database (every record + embedding) as one JSON file, rewritten per batch."""
    rng = np.random.default_rng(args.seed)
    root = Path(tempfile.mkdtemp(prefix="vam-bench-store-json-", dir=args.tmp))
    path = root / "db.json"
    records: list[dict] = []
    ends, secs, reopen, last = [], [], {}, {}
    stopped = None
    event_id = 0
    t_start = time.perf_counter()
    try:
        for n, embs in batches(args, checkpoints, rng):
            m = len(embs)
            t0 = time.perf_counter()
            for j in range(m):
                i = n + j
                if i % args.event_every == 0:
                    event_id += 1
                records.append({"moment_id": i + 1, "camera_id": CAMERA, "source_id": 1, "t_rel": i * DT,
                                "t_abs": None, "pts": i, "frame_ref": f"frames/{CAMERA}/1/{i:015d}.jpg",
                                "width": 1280, "height": 720, "lap_var": 100.0, "mad": 30.0, "ssim": 0.5,
                                "hist_corr": 0.7, "event_id": event_id, "embedding": embs[j].tolist()})
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "w") as f:
                json.dump(records, f)
            os.replace(tmp, path)
            dt = time.perf_counter() - t0
            n += m
            ends.append(n)
            secs.append(dt / m)
            if n in checkpoints or dt > args.rewrite_limit_s:
                t0 = time.perf_counter()
                with open(path) as f:
                    back = json.load(f)
                reopen[n] = time.perf_counter() - t0
                last[n] = dt
                if len(back) != n:
                    raise SystemExit(f"full_rewrite: reopened {len(back)} records, expected {n}")
                del back
                print(f"  full_rewrite {n:>9,} moments: last rewrite {dt:.2f} s "
                      f"({1e6 * dt / m:,.0f} us/moment), reopen {reopen[n]:.2f} s, "
                      f"file {path.stat().st_size / 1e6:,.1f} MB", flush=True)
            if dt > args.rewrite_limit_s:
                stopped = n
                break
        file_bytes = path.stat().st_size
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"ends": ends, "secs_per_moment": secs, "reopen_s": reopen, "last_rewrite_s": last, "stopped_at": stopped, "file_bytes": file_bytes,
            "wall_s": time.perf_counter() - t_start}


# -- moment_store --------------------------------------------------------------------------------
WHAT_IF_SQL = ("CREATE INDEX IF NOT EXISTS bench_moments_event ON moments (event_id)",
               "CREATE INDEX IF NOT EXISTS bench_events_open ON events (camera_id, closed)")
PLAN_QUERIES = {  # the store's per-moment / per-event lookups whose plans the JSON records
    "open_event": ("SELECT event_id FROM events WHERE camera_id=? AND closed=0", ("c",)),
    "event_members": ("SELECT moment_id, embedding_id FROM moments WHERE event_id=? ORDER BY t", (1,)),
    "event_vectors": ("SELECT v.vec FROM vectors v JOIN moments m ON v.space='frame' AND v.id=m.moment_id "
                      "WHERE m.event_id=?", (1,)),
}


SPACES = ("frame", "event")  # the vector spaces these moments fill


class StoreTimers:
    """Timing hooks on one store's instances (no engine code changed): the in-memory index update
    (the store's on_vectors callback), automatic snapshots, and the committer's event close.
    ``snapshot`` stays the unwrapped one, for the checkpoints' own snapshot."""

    def __init__(self, store, vm):
        self.acc = {"apply": 0.0, "snapshot": 0.0, "close_event": 0.0}
        self.natural_snaps: list[dict] = []
        self.n_committed = 0
        self.apply, self.snapshot, self.close_event = vm.apply, vm.snapshot, store.committer.close_open_event
        store.db.on_vectors = self.timed("apply", self.apply)
        vm.snapshot = self.timed_snapshot
        store.committer.close_open_event = self.timed("close_event", self.close_event)

    def timed(self, key: str, fn):
        def go(*a):
            t0 = time.perf_counter()
            fn(*a)
            self.acc[key] += time.perf_counter() - t0
        return go

    def timed_snapshot(self) -> None:
        t0 = time.perf_counter()
        self.snapshot()
        dt = time.perf_counter() - t0
        self.acc["snapshot"] += dt
        self.natural_snaps.append({"moments": self.n_committed, "s": dt})

    def reset(self) -> None:
        for k in self.acc:
            self.acc[k] = 0.0


def commit_batch(store, src, root: Path, blob: bytes, n: int, embs: np.ndarray,
                 event_every: int) -> tuple[float, float]:
    """Moments n .. n + len(embs) in one CommitBatch, with their frame stubs written first:
    (seconds writing the stubs, seconds in Store.commit)."""
    from vam_engine.memory.commit import CommitBatch
    from vam_engine.memory.records import GateRecord, GateSample, PendingMoment

    m, gate = len(embs), GateRecord(100.0, 30.0, 0.5, 0.7, None)
    t0 = time.perf_counter()
    refs = []
    for j in range(m):
        ref = store.frames.ref(CAMERA, src.source_id, (n + j) * DT)
        write_stub(root, ref, blob)
        refs.append(ref)
    frame_s = time.perf_counter() - t0
    batch = CommitBatch()
    for j in range(m):
        i = n + j
        batch.moments.append(PendingMoment(CAMERA, src.source_id, i * DT, None, i, refs[j], 1280, 720, gate,
                                           embedding=embs[j], event_start=(i % event_every == 0 and i > 0)))
        batch.samples.append(GateSample(CAMERA, src.source_id, i * DT, gate))
    batch.progress[src.source_id] = (n + m - 1) * DT
    t0 = time.perf_counter()
    store.commit(batch)
    return frame_s, time.perf_counter() - t0


def close_spaces(vm) -> None:
    """Stop each space's background ANN build (the reopen or the writer may have started one)."""
    for name in SPACES:
        sp = vm.space(name)
        if sp is not None:
            sp.close()


def index_kinds(vm) -> dict:
    return {name: vm.space(name).index_kind for name in SPACES if vm.space(name) is not None}


def run_moment_store(args, checkpoints: list[int], what_if: bool = False) -> dict:
    """``what_if``: the benchmark adds two indexes (moments.event_id; events(camera_id, closed))
    and runs ANALYZE after the first checkpoint, so the store's event lookups stop scanning; no
    engine code is changed, only the database."""
    from vam_engine.config import VectorConfig
    from vam_engine.memory.store import Store
    from vam_engine.memory.vector_memory import VectorMemory

    cfg = VectorConfig(**{k: v for k, v in (("index", args.index), ("snapshot_every", args.snapshot_every),
                                            ("ann_min_size", args.ann_min_size)) if v is not None})
    label = "moment_store" + ("_indexed" if what_if else "")
    rng = np.random.default_rng(args.seed)
    root = Path(tempfile.mkdtemp(prefix="vam-bench-store-", dir=args.tmp))
    blob = tiny_jpeg()
    store = Store(root)
    if what_if:
        with store.db.conn() as c:
            for sql in WHAT_IF_SQL:
                c.execute(sql)
    vm = VectorMemory(store.vector_table, store.root / "vectors", cfg)
    timers = StoreTimers(store, vm)
    src = store.sources.open(CAMERA, "bench://c", "fingerprint", "fps=0.5")
    n_batches = args.max_size // args.batch + len(checkpoints) + 1
    cols = {k: np.zeros(n_batches) for k in ("commit", "apply", "snapshot", "close_event", "frame")}
    ends, counts = np.zeros(n_batches, np.int64), np.zeros(n_batches, np.int64)
    at: dict[int, dict] = {}
    b = 0
    t_start = last_print = time.perf_counter()
    try:
        for n, embs in batches(args, checkpoints, rng):
            m = len(embs)
            timers.reset()
            cols["frame"][b], cols["commit"][b] = commit_batch(store, src, root, blob, n, embs, args.event_every)
            for k, v in timers.acc.items():
                cols[k][b] = v
            n += m
            timers.n_committed = n
            ends[b], counts[b] = n, m
            b += 1
            now = time.perf_counter()
            if now - last_print > 30:
                last_print = now
                print(f"  {label} {n:>9,} moments, {now - t_start:.0f} s", flush=True)
            if n in checkpoints:
                at[n] = checkpoint(store, vm, timers.snapshot, root, cfg, n)
                if what_if and n == checkpoints[0]:
                    store.db.conn().execute("ANALYZE")
                print(f"  {label} {n:>9,} moments: reopen {at[n]['reopen_s']:.2f} s "
                      f"({at[n]['replayed']:,} log entries replayed), snapshot {at[n]['snapshot_s']:.2f} s, "
                      f"db {at[n]['db_bytes'] / 1e6:,.0f} MB, {now - t_start:.0f} s so far", flush=True)
        close_spaces(vm)
        store.close()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"  kept the store at {root}")
    per = {k: v[:b] / np.maximum(counts[:b], 1) for k, v in cols.items()}
    return {"ends": ends[:b], "counts": counts[:b], "per": per, "at": at, "natural_snapshots": timers.natural_snaps,
            "wall_s": time.perf_counter() - t_start, "blob_bytes": len(blob), "config": cfg.model_dump()}


def checkpoint(store, vm, snapshot, root: Path, cfg, n: int) -> dict:
    """At size n: reopen the directory as it is, check it, then time one snapshot (``snapshot``:
    the writer's own, unwrapped, so it is not counted as an automatic one)."""
    from vam_engine.memory.store import Store
    from vam_engine.memory.vector_memory import VectorMemory

    con = sqlite3.connect(f"file:{root / 'store.sqlite'}?mode=ro", uri=True)
    replayed = con.execute("SELECT COUNT(*) FROM vector_log").fetchone()[0]
    events = con.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    con.close()
    t0 = time.perf_counter()
    s2 = Store(root, create=False)
    vm2 = VectorMemory(s2.vector_table, s2.root / "vectors", cfg)
    reopen = time.perf_counter() - t0
    sizes = {name: vm2.size(name) for name in SPACES}
    kinds = index_kinds(vm2)
    close_spaces(vm2)
    s2.close()
    del vm2, s2
    if sizes["frame"] != n or sizes["frame"] != vm.size("frame"):
        raise SystemExit(f"reopen at {n}: frame space holds {sizes['frame']} vectors, expected {n}")
    if sizes["event"] != vm.size("event"):
        raise SystemExit(f"reopen at {n}: event space holds {sizes['event']}, the writer {vm.size('event')}")
    seq = store.vector_table.seq()
    t0 = time.perf_counter()
    snapshot()
    snap = time.perf_counter() - t0
    changes_per_moment = seq / n  # every change ever logged (the log is pruned, seq is not)
    plans = {k: " / ".join(r[3] for r in store.db.conn().execute("EXPLAIN QUERY PLAN " + q, a))
             for k, (q, a) in PLAN_QUERIES.items()}
    db = sum(p.stat().st_size for p in root.glob("store.sqlite*"))
    idx = sum(p.stat().st_size for p in (root / "vectors").glob("*.index"))
    return {"reopen_s": reopen, "replayed": replayed, "events": events, "reopen_sizes": sizes,
            "reopen_index": kinds, "writer_index": index_kinds(vm),
            "snapshot_s": snap, "changes_per_moment": changes_per_moment,
            "snapshot_us_per_moment": 1e6 * snap * changes_per_moment / cfg.snapshot_every,
            "db_bytes": db, "index_bytes": idx, "query_plans": plans}


# -- main ----------------------------------------------------------------------------------------
METHODS = ("full_rewrite", "moment_store", "moment_store_indexed")


def store_record(ms: dict, method: str, s: int, args) -> dict:
    lo, hi = window(s, args.batch, args.window)
    c = ms["at"][s]
    part = {k: window_mean(ms["ends"], v, ms["counts"], lo, hi) for k, v in ms["per"].items()}
    commit_us = 1e6 * (part["commit"] - part["snapshot"])
    return {"size": s, "method": method, "window": [lo, hi], "us_per_moment": commit_us + c["snapshot_us_per_moment"],
            "commit_us": commit_us, "sqlite_us": 1e6 * (part["commit"] - part["apply"]),
            "index_apply_us": 1e6 * (part["apply"] - part["snapshot"]),
            "event_close_us": 1e6 * part["close_event"], "natural_snapshot_us": 1e6 * part["snapshot"],
            "frame_stub_us": 1e6 * part["frame"], "worst_commit_s": worst_commit(ms, lo, hi), **c}


def worst_commit(ms: dict, lo: int, hi: int) -> float | None:
    """The longest single commit (seconds, snapshots included) among the window's batches."""
    sel = (ms["ends"] > lo) & (ms["ends"] <= hi)
    return float((ms["per"]["commit"][sel] * ms["counts"][sel]).max()) if sel.any() else None


def slowest_batches(ms: dict, k: int = 20) -> list[dict]:
    secs = ms["per"]["commit"] * ms["counts"]
    out = []
    for i in np.argsort(-secs)[:k]:
        out.append({"end": int(ms["ends"][i]), "moments": int(ms["counts"][i]), "commit_s": float(secs[i]),
                    **{f"{c}_s": float(ms["per"][c][i] * ms["counts"][i]) for c in ("apply", "snapshot", "close_event")}})
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-size", type=int, default=None, help="moments committed (default 100000; 10000 with --quick)")
    ap.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, of {', '.join(METHODS)} (default all)")
    ap.add_argument("--batch", type=int, default=64, help="moments per commit (default 64: StoreConfig.commit_every)")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--event-every", type=int, default=50, help="moments per event (default 50)")
    ap.add_argument("--window", type=int, default=20_000, help="largest window of moments a figure averages")
    ap.add_argument("--index", default=None, help="VectorConfig.index (default: the config's, auto)")
    ap.add_argument("--snapshot-every", type=int, default=None, help="VectorConfig.snapshot_every (default 10000)")
    ap.add_argument("--ann-min-size", type=int, default=None,
                    help="VectorConfig.ann_min_size (default 200000: where index auto builds HNSW)")
    ap.add_argument("--rewrite-limit-s", type=float, default=2.0, help="full_rewrite stops after a rewrite this long")
    ap.add_argument("--tmp", default=None, help="directory for the temporary stores (default: the system's)")
    ap.add_argument("--keep", action="store_true", help="keep the moment store directory")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="smoke run: up to 1e4")
    ap.add_argument("--name", default="bench_store", help="results file name (benchmarks/results/<name>.json)")
    args = ap.parse_args(argv)
    if args.max_size is None:
        args.max_size = 10_000 if args.quick else 100_000
    bad = [m for m in method_list(args) if m not in METHODS]
    if bad:
        ap.error(f"unknown methods {bad}; choose from {', '.join(METHODS)}")
    return args


def method_list(args) -> list[str]:
    return [m.strip() for m in args.methods.split(",") if m.strip()]


def rewrite_record(rewrite: dict, s: int, ref: float | None, args) -> tuple[dict, list]:
    """full_rewrite's record and table row at size s (its mean rewrite cost over the window)."""
    lo, hi = window(s, args.batch, args.window)
    e = np.array(rewrite["ends"])
    us = 1e6 * window_mean(e, np.array(rewrite["secs_per_moment"]), np.diff(e, prepend=0), lo, hi)
    r = {"size": s, "method": "full_rewrite", "window": [lo, hi], "us_per_moment": us,
         "vs_moment_store": None if ref is None else us / ref, "reopen_s": rewrite["reopen_s"][s],
         "last_rewrite_s": rewrite["last_rewrite_s"][s]}
    row = [s, "full_rewrite" + (" (stopped)" if s == rewrite["stopped_at"] else ""), us, r["vs_moment_store"],
           "-", "-", "-", "-", "-", "-", r["last_rewrite_s"], r["reopen_s"], "-"]
    return r, row


def size_records(stores: dict, rewrite: dict | None, ckpts: list[int], args) -> tuple[list, list]:
    """(table rows, records) per checkpoint size and method, "vs moment_store" against the shipped store."""
    rows, records = [], []
    for s in ckpts:
        ref = None
        for m, ms in stores.items():
            if s not in ms["at"]:
                continue
            rec = store_record(ms, m, s, args)
            ref = ref if ref is not None else (rec["us_per_moment"] if m == "moment_store" else None)
            rec["vs_moment_store"] = None if ref is None else rec["us_per_moment"] / ref
            records.append(rec)
            rows.append([s, m, rec["us_per_moment"], rec["vs_moment_store"], rec["commit_us"], rec["sqlite_us"],
                         rec["event_close_us"], rec["index_apply_us"], rec["snapshot_us_per_moment"],
                         rec["frame_stub_us"], rec["worst_commit_s"], rec["reopen_s"], rec["replayed"]])
        if rewrite is not None and s in rewrite["reopen_s"]:
            r, row = rewrite_record(rewrite, s, ref, args)
            records.append(r)
            rows.append(row)
    return rows, records


def print_growth(m: str, ms: dict, records: list) -> None:
    """How a store's costs grew from the first checkpoint to the last, its slowest commit and plans."""
    rs = [r for r in records if r["method"] == m]
    if len(rs) < 2:
        return
    a, z = rs[0], rs[-1]
    print(f"{m} growth {a['size']:,} -> {z['size']:,} moments: us/moment x"
          f"{z['us_per_moment'] / a['us_per_moment']:.2f} (sqlite without event close x"
          f"{(z['sqlite_us'] - z['event_close_us']) / (a['sqlite_us'] - a['event_close_us']):.2f}, "
          f"event close x{z['event_close_us'] / max(a['event_close_us'], 1e-9):.1f}, index update x"
          f"{z['index_apply_us'] / a['index_apply_us']:.2f}, snapshot x"
          f"{z['snapshot_us_per_moment'] / max(a['snapshot_us_per_moment'], 1e-9):.1f}); reopen "
          f"{a['reopen_s']:.2f} -> {z['reopen_s']:.2f} s; index {z['writer_index']['frame']}")
    w = slowest_batches(ms, 1)[0]
    snaps = ms["natural_snapshots"]
    print(f"  slowest commit of the run: {w['commit_s']:.2f} s, the batch ending at {w['end']:,} moments "
          f"(index update {w['apply_s']:.2f} s of it, snapshot {w['snapshot_s']:.2f} s, event close "
          f"{w['close_event_s']:.2f} s); {len(snaps)} automatic snapshots"
          + (f", the last at {snaps[-1]['moments']:,} moments took {snaps[-1]['s']:.2f} s" if snaps else ""))
    print(f"  query plans at {z['size']:,}: " + "; ".join(f"{k}: {v}" for k, v in z["query_plans"].items()))


def print_summary(rows: list, records: list, stores: dict, rewrite: dict | None, args) -> str:
    print()
    table = print_table(["size", "method", "us/moment", "vs moment_store", "commit us", "sqlite us",
                         "event close us", "index us", "snapshot us", "frame stub us", "worst commit s", "reopen s",
                         "replayed"], rows)
    print("us/moment = commit (sqlite + index update, without snapshots) + snapshot (one at this size x "
          "changes/moment / snapshot_every); 'event close us' is part of 'sqlite us'; frame stub: fixed bytes "
          "written per moment, not in us/moment; worst commit s: the longest single batch commit in the window "
          "(snapshots included; full_rewrite: its last rewrite); window: the last min(size/2, "
          f"{args.window:,}) moments before the size")
    for m, ms in stores.items():
        print_growth(m, ms, records)
    if rewrite is not None:
        st = rewrite["stopped_at"]
        print("full_rewrite: " + (f"stopped at {st:,} moments (one rewrite {rewrite['last_rewrite_s'][st]:.2f} s > "
                                  f"{args.rewrite_limit_s:g} s, file {rewrite['file_bytes'] / 1e6:,.0f} MB); "
                                  f"its cost per moment grows with the size from there on"
                                  if st else f"reached {rewrite['ends'][-1]:,} moments"))
    return table


def store_json(ms: dict) -> dict:
    def thin(v):
        return v[::max(1, len(v) // 2000)]

    return {"wall_s": ms["wall_s"], "frame_blob_bytes": ms["blob_bytes"], "natural_snapshots": ms["natural_snapshots"],
            "slowest_batches": slowest_batches(ms),
            "batches_us_per_moment": {"ends": thin(ms["ends"]).tolist(),
                                      **{k: (1e6 * thin(v)).round(2).tolist() for k, v in ms["per"].items()}}}


def main(argv=None) -> int:
    args = parse_args(argv)
    methods = method_list(args)
    t_start = time.perf_counter()
    import vam_engine.memory.store  # noqa: F401 - imports are not timed

    base_sizes = [s for s in (1_000, 10_000, 100_000, 1_000_000, 10_000_000) if s <= args.max_size]
    ckpts = sorted(set(base_sizes) | {args.max_size})
    print(f"moments: camera {CAMERA!r}, one source, batches of {args.batch}, {args.dim}-d float32 embeddings, "
          f"an event every {args.event_every} moments; frames: one fixed {len(tiny_jpeg())}-byte JPEG written per "
          f"moment (no encoding; timed apart, not in us/moment); {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rewrite = None
    if "full_rewrite" in methods:
        print("full_rewrite (JSON of every record + embedding, rewritten per batch):", flush=True)
        rewrite = run_full_rewrite(args, ckpts)
        if rewrite["stopped_at"]:
            ckpts = sorted(set(ckpts) | {rewrite["stopped_at"]})
    stores = {}
    for m in ("moment_store", "moment_store_indexed"):
        if m in methods:
            print(f"{m} (Store + VectorMemory" + (", + 2 indexes and ANALYZE added by the benchmark"
                                                   if m.endswith("indexed") else "") + "):", flush=True)
            stores[m] = run_moment_store(args, ckpts, what_if=m.endswith("indexed"))
    rows, records = size_records(stores, rewrite, ckpts, args)
    table = print_summary(rows, records, stores, rewrite, args)
    wall = time.perf_counter() - t_start
    path = write_json(args.name, {
        "args": vars(args), "checkpoints": ckpts, "records": records, "table": table,
        "vector_config": next(iter(stores.values()))["config"] if stores else None,
        "frames": "one fixed tiny JPEG's bytes written per moment (temporary name + rename), no encoding; "
                  "timed apart (frame_stub_us), not in us_per_moment",
        "what_if_sql": list(WHAT_IF_SQL) + ["ANALYZE (after the first checkpoint)"],
        "stores": {m: store_json(ms) for m, ms in stores.items()}, "full_rewrite": rewrite, "wall_s": wall})
    print(f"\n{wall:.1f} s; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
