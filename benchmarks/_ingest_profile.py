"""Where bench_ingest.py's pipeline spends its CPU (``--profile``): a stack sampler per thread
group, and CPU seconds per pipeline stage."""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from _common import print_table


class StackSampler:
    """A poor man's sampling profiler (py-spy is not at hand): every ``interval`` seconds it
    records, for each live thread, the innermost Python frame and the innermost frame inside
    vam_engine. Threads inside C code (decoding, JPEG, SQLite, kernels) show the Python line
    that called it. Time under a name = samples x interval."""

    def __init__(self, interval: float = 0.002):
        import collections

        self.interval = interval
        self.leaf = collections.Counter()
        self.engine = collections.Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    @staticmethod
    def _group(name: str) -> str:
        for prefix in ("vam-decode", "vam-jpeg", "vam-gate", "MainThread"):
            if name.startswith(prefix):
                return prefix
        return name.split("-")[0]

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval):
            names = {t.ident: t.name for t in threading.enumerate()}
            self.samples += 1
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                group = self._group(names.get(ident, "?"))
                code = frame.f_code
                self.leaf[(group, f"{Path(code.co_filename).name}:{frame.f_lineno} {code.co_name}")] += 1
                f = frame
                while f is not None and "vam_engine" not in f.f_code.co_filename:
                    f = f.f_back
                if f is not None:
                    self.engine[(group, f"{Path(f.f_code.co_filename).name}:{f.f_lineno} {f.f_code.co_name}")] += 1

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def report(self, title: str, top: int = 8) -> dict:
        out = {"title": title, "interval_s": self.interval, "samples": self.samples, "groups": {}}
        print(f"\nprofile: {title} ({self.samples} samples every {self.interval * 1e3:g} ms; "
              f"seconds per thread group, innermost vam_engine frame)")
        groups = sorted({g for g, _ in self.engine} | {g for g, _ in self.leaf})
        for g in groups:
            rows = sorted(((n, k) for (gg, k), n in self.engine.items() if gg == g), reverse=True)[:top]
            leaf = sorted(((n, k) for (gg, k), n in self.leaf.items() if gg == g), reverse=True)[:top]
            out["groups"][g] = {"engine_frames": [(k, n * self.interval) for n, k in rows],
                                "leaf_frames": [(k, n * self.interval) for n, k in leaf]}
            print(f"  [{g}]")
            for n, k in rows:
                print(f"    {n * self.interval:7.2f} s  {k}")
            if leaf:
                print(f"    innermost: " + "; ".join(f"{k} {n * self.interval:.2f}s" for n, k in leaf[:4]))
        return out


class StageCpu:
    """CPU seconds per pipeline stage for one run: ``time.thread_time()`` around the public
    functions that do each stage's work, on whatever thread runs them (patched for the run,
    restored after), and the gate thread's own CPU clock (``gate_thread``, read before the
    engine closes). Nested stages are reported exclusively (the gate thread's rest is its CPU
    minus the stages run on it). What neither sees (libav's own decoding threads, the main
    thread, interpreter switches) is the process CPU minus all of them."""

    WRAPPED = [  # (key, module, attribute path)
        ("decode_py", "vam_engine.ingest.pyav_decoder", "PyAVDecoder.__iter__"),
        ("stats", "vam_engine.gate.cascade", "GateCascade.gate"),
        ("semantic", "vam_engine.index.semantic", "SemanticStage.process"),
        ("rgb", "vam_engine.ingest.frame", "Frame.rgb"),
        ("embed", "vam_engine.embed.descriptor", "DescriptorEmbedder.embed_images"),
        ("present", "vam_engine.reason.working", "WorkingMemory.observe"),
        ("write", "vam_engine.memory.frames", "FrameFiles.write"),
        ("jpeg", "vam_engine.memory.frames", "encode_jpeg"),
        ("commit", "vam_engine.memory.store", "Store.commit"),
    ]
    ROWS = [  # (label, key, keys nested inside it)
        ("gate statistics (GateCascade.gate)", "stats", ()),
        ("RGB of frames past the gates (Frame.rgb)", "rgb", ()),
        ("embedding (descriptor embed_images)", "embed", ()),
        ("present copy (WorkingMemory.observe)", "present", ()),
        ("semantic stage, rest (committer, batch)", "semantic", ("rgb", "embed", "present")),
        ("gate thread, rest (its CPU clock)", "gate", ("stats", "semantic")),
        ("JPEG encoding (encode_jpeg)", "jpeg", ()),
        ("frame file write, less encoding", "write", ("jpeg",)),
        ("SQLite commit (Store.commit)", "commit", ()),
        ("decode threads' Python (decoder iteration)", "decode_py", ()),
    ]

    GATE_THREAD = "vam-gate"  # the index pipeline's gating thread (gates, semantic stage, batches)

    def __init__(self):
        import collections

        self.cpu = collections.Counter()
        self._lock = threading.Lock()
        self._saved = []

    def _timed(self, key, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*a, **kw):
            c = time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                with self._lock:
                    self.cpu[key] += time.thread_time() - c
        return wrapper

    def _timed_iter(self, key, fn):
        def wrapper(*a, **kw):
            it = fn(*a, **kw)
            while True:
                c = time.thread_time()
                try:
                    item = next(it)
                except StopIteration:
                    return
                finally:
                    with self._lock:
                        self.cpu[key] += time.thread_time() - c
                yield item
        return wrapper

    def __enter__(self):
        import importlib

        for key, mod_name, attr in self.WRAPPED:
            obj = importlib.import_module(mod_name)
            *owners, name = attr.split(".")
            for o in owners:
                obj = getattr(obj, o)
            fn = getattr(obj, name)
            self._saved.append((obj, name, fn))
            setattr(obj, name, (self._timed_iter if name == "__iter__" else self._timed)(key, fn))
        return self

    def __exit__(self, *exc):
        for obj, name, fn in reversed(self._saved):
            setattr(obj, name, fn)

    def gate_thread(self) -> None:
        """Read the gate thread's CPU clock (call while the engine is open: the thread ends
        with it); its total since it started is the "gate" stage."""
        for t in threading.enumerate():
            if t.name == self.GATE_THREAD and t.ident is not None:
                self.cpu["gate"] = time.clock_gettime(time.pthread_getcpuclockid(t.ident))

    def report(self, title: str, total_cpu: float, samples: int, kept: int, decode_cpu: float | None) -> dict:
        rows, seen = [], 0.0
        for label, key, inner in self.ROWS:
            v = self.cpu[key] - sum(self.cpu[k] for k in inner)
            rows.append((label, v))
            seen += v
        rows.append(("rest: libav decoding threads, main thread, switches", total_cpu - seen))
        print(f"\ncpu per stage: {title}; process cpu {total_cpu * 1e3:.0f} ms, {samples} samples, {kept} kept"
              + (f"; decode-only at this sampling: {decode_cpu * 1e3:.0f} ms cpu" if decode_cpu is not None else ""))
        table = print_table(["stage", "cpu ms", "ms per sample", "ms per kept frame", "% of cpu"],
                            [[label, v * 1e3, v * 1e3 / max(1, samples), v * 1e3 / max(1, kept),
                              100 * v / total_cpu if total_cpu > 0 else 0.0] for label, v in rows])
        return {"title": title, "total_cpu_s": total_cpu, "samples": samples, "kept": kept,
                "decode_only_cpu_s": decode_cpu, "stages": {label: v for label, v in rows}, "table": table}
