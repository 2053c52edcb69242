"""Compile every Triton kernel of the package ahead of time, without a GPU, and report the
resources each launch configuration takes and the occupancy they allow.

    python -m vam_engine.kernels.compile_report --arch 80,90,100 [--json PATH]

The launches are the ones the host functions make (``plan_gate_stats``, ``plan_gate_compare``,
``plan_cosine_sims``: the same functions ``gate_stats`` and co. run), planned on ``meta`` tensors
for the frame sizes of 360p, 720p, 1080p and 4K batches (the gates' batch: ``ingest.batch_size``
frames; one frame for a camera's first reference) and the committer's batches of embeddings.
Each distinct compilation (kernel, argument specialization, constexprs, options) is compiled for
each ``sm_XX`` target with ``triton.compile`` exactly as the JIT would specialize it at that
launch (pointer alignment, integers divisible by 16 or equal to 1). Registers, local memory
(spills) and static shared memory are read from the cubin with the ``cuobjdump`` Triton bundles,
the dynamic shared memory from the compiled kernel's metadata.

Exits 1 when a kernel fails to compile or spills (uses local memory), else 0. How to read the
occupancy column for these bandwidth-bound kernels: docs/gpu.md.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field

RESOLUTIONS = {"360p": (360, 640), "720p": (720, 1280), "1080p": (1080, 1920), "4K": (2160, 3840)}
EMBED_DIMS = (512, 768)  # CLIP ViT-B/16 and ViT-L/14 image embeddings


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of a compute capability (CUDA C Programming Guide, table of technical
    specifications)."""
    regs: int = 65536
    max_warps: int = 64
    max_blocks: int = 32
    smem: int = 228 * 1024  # shared memory per SM at the largest carve-out
    # sm_90 and later cubins count the 1 KB the driver reserves per block in their static shared
    # memory (the same kernel shows 0 for sm_80 and 1024 for sm_90); for sm_80 it is added here
    reserved_smem: int = 0


ARCHS = {80: ArchLimits(smem=164 * 1024, reserved_smem=1024), 86: ArchLimits(max_warps=48, max_blocks=16,
                                                                              smem=100 * 1024, reserved_smem=1024),
         89: ArchLimits(max_warps=48, max_blocks=24, smem=100 * 1024, reserved_smem=1024),
         90: ArchLimits(), 100: ArchLimits(), 120: ArchLimits(max_warps=48, max_blocks=24, smem=100 * 1024)}
REG_UNIT = 256  # registers are allocated per warp in units of 256
SUB_PARTITIONS = 4  # an SM's register file is split between its 4 schedulers
# SMs of a reference device of each arch (A100, H100/H200, B200), for the waves column: a launch of
# fewer blocks than the SMs can hold at once does not wait on occupancy at all
REFERENCE_SMS = {80: 108, 86: 84, 89: 128, 90: 132, 100: 148, 120: 170}


def occupancy(arch: int, regs: int, smem_block: int, warps: int) -> tuple[int, float, str]:
    """(resident warps per SM, their fraction of the SM's maximum, the binding limit) of a kernel
    of ``regs`` registers per thread, ``smem_block`` bytes of shared memory and ``warps`` warps per
    block (the CUDA occupancy calculator's rule)."""
    lim = ARCHS[arch]
    per_warp = -(-max(regs, 1) * 32 // REG_UNIT) * REG_UNIT
    by_regs = SUB_PARTITIONS * ((lim.regs // SUB_PARTITIONS) // per_warp) // warps
    # the hardware caps first: on a tie, nothing the kernel uses is what limits it
    limits = {"warps": lim.max_warps // warps, "blocks": lim.max_blocks, "registers": by_regs}
    smem = smem_block + lim.reserved_smem
    if smem:
        limits["shared memory"] = lim.smem // smem
    binding = min(limits, key=limits.get)
    blocks = limits[binding]
    return blocks * warps, blocks * warps / lim.max_warps, binding


@dataclass
class Compilation:
    """One distinct compilation of a kernel, and the launches (cases) that use it."""
    kernel: str
    module: str
    signature: dict
    constexprs: dict  # {argument index: value}
    attrs: dict
    options: dict
    cases: list = field(default_factory=list)
    blocks: int = 0  # the largest grid among its launches

    def key(self) -> str:
        return json.dumps([self.kernel, self.signature, sorted(self.constexprs.items()),
                           sorted((k, v) for k, v in self.attrs.items()), sorted(self.options.items())],
                          default=str)

    def label(self) -> str:
        names = list(self.signature)
        cx = [f"{names[i[0]]}={v}" for i, v in sorted(self.constexprs.items()) if names[i[0]].isupper()]
        one = [names[i[0]] for i, v in sorted(self.constexprs.items()) if not names[i[0]].isupper()]
        # integer arguments the JIT specialized as divisible by 16 (pointers always are here)
        div = [names[i[0]] for i, a in sorted(self.attrs.items())
               if a and not self.signature[names[i[0]]].startswith("*")]
        return " ".join(cx + [f"{n}==1" for n in one] + ([f"{'/'.join(div)}%16" ] if div else [])
                        + [f"warps={self.options.get('num_warps')}"])


@dataclass
class Row:
    kernel: str
    config: str
    cases: list
    arch: int
    ok: bool
    regs: int = 0
    spill_bytes: int = 0  # local memory per thread (where ptxas puts spilled registers)
    stack_bytes: int = 0
    smem_static: int = 0
    smem_dynamic: int = 0
    warps_per_block: int = 0
    warps_per_sm: int = 0
    occupancy: float = 0.0
    limit: str = ""
    blocks: int = 0  # the largest grid of the launches using it
    waves: float = 0.0  # blocks / (blocks resident at once on the arch's REFERENCE_SMS)
    error: str = ""


class _ArgSpec:
    """What triton's specializer reads of a tensor: its dtype and address (meta tensors: 0, aligned)."""

    def __init__(self, t):
        self.dtype = t.dtype

    @staticmethod
    def data_ptr() -> int:
        return 0


def _specialize(launch, arch: int) -> tuple:
    """(signature, constexprs, attrs, options) of ``launch`` as JITFunction.run would derive them
    on a device of compute capability ``arch``."""
    import torch
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    fn = launch.kernel
    backend = make_backend(GPUTarget("cuda", arch, 32))
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    # the options JITFunction.run adds to a launch's (those this Triton has)
    kwargs = dict(launch.params, debug=bool(fn.debug or knobs.runtime.debug))
    for name in ("instrumentation_mode", "fpsan_homomorphic_casts"):
        if hasattr(knobs.compilation, name):
            kwargs[name] = getattr(knobs.compilation, name)
    args = [_ArgSpec(a) if isinstance(a, torch.Tensor) else a for a in launch.args]
    bound, spec, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, spec, options)
    return signature, constexprs, attrs, options.__dict__


def cases(batch: int, tile: int, rows: int) -> list[tuple[str, list]]:
    """(case name, its planned launches) of every launch configuration the dispatch makes."""
    import torch

    from ..config import CommitConfig
    from . import cosine_dedup, gate_stats

    meta = torch.device("meta")
    out = []
    for res, (h, w) in RESOLUTIONS.items():
        frames = torch.empty((batch, h, w), dtype=torch.uint8, device=meta)
        ref = torch.empty((h, w), dtype=torch.uint8, device=meta)
        thumbs = torch.empty((batch, 64, 64), dtype=torch.float32, device=meta)
        hists = torch.empty((batch, 64), dtype=torch.float32, device=meta)
        out.append((f"{res} stats", gate_stats.plan_gate_stats(frames, ref, tile)[1]))
        out.append((f"{res} stats first", gate_stats.plan_gate_stats(frames, None, tile)[1]))
        out.append((f"{res} reference", gate_stats.plan_gate_stats(frames[:1], None, tile)[1]))
        out.append((f"{res} compare", gate_stats.plan_gate_compare(frames, thumbs, hists, ref, thumbs[0], hists[0],
                                                                    tile)[1]))
    for d in EMBED_DIMS:
        emb = torch.empty((rows, d), dtype=torch.float64, device=meta)
        out.append((f"dedup D={d}", cosine_dedup.plan_cosine_sims(emb)[1]))
    # the committer's scan of a batch (rows - 2 new frames after the reference and the held frame)
    commit = CommitConfig()
    win = 1 << (commit.window - 1).bit_length()
    f64 = dict(dtype=torch.float64, device=meta)
    sims = torch.empty((rows, rows), **f64)
    for first, what in ((2, "held"), (1, "none held")):  # the batch's first row: after reference (and held frame)
        b = rows - first
        scan = cosine_dedup.plan_dedup_scan(
            sims, torch.empty((b,), **f64), torch.empty((b,), dtype=torch.int32, device=meta),
            torch.empty((win,), **f64), torch.empty((win,), **f64), torch.empty((cosine_dedup.STATE_SLOTS,), **f64),
            first, commit.window, commit.min_history, 1 - commit.dedup_fallback_sim, 1 - commit.event_fallback_sim,
            commit.max_event_s)[1]
        out.append((f"dedup scan {what}", scan))
    return out


def compilations(arch: int, batch: int, tile: int, rows: int) -> list[Compilation]:
    found: dict[str, Compilation] = {}
    for case, launches in cases(batch, tile, rows):
        for launch in launches:
            sig, cx, attrs, opts = _specialize(launch, arch)
            c = Compilation(launch.name, launch.kernel.fn.__module__, sig, cx, attrs, opts)
            c = found.setdefault(c.key(), c)
            if case not in c.cases:
                c.cases.append(case)
            c.blocks = max(c.blocks, math.prod(launch.grid))
    return list(found.values())


def _cuobjdump() -> str:
    import triton

    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


def _resources(cubin: bytes) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([_cuobjdump(), "--dump-resource-usage", f.name], capture_output=True, text=True,
                              check=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", text)
    if m is None:
        raise RuntimeError(f"cuobjdump printed no resource usage: {text[-300:]}")
    return dict(zip(("regs", "stack", "shared", "local"), map(int, m.groups())))


def compile_one(job: tuple) -> dict:
    """Compile one Compilation for one arch (in a worker process); returns the row's fields."""
    module, kernel, signature, constexprs, attrs, options, arch = job
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(importlib.import_module(module), kernel)
    try:
        k = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", arch, 32),
                           options=options)
        r = _resources(k.asm["cubin"])
    except Exception as exc:  # a compile failure is a row of the report, not a crash of it
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}"}
    warps = int(options["num_warps"])
    smem = r["shared"] + int(k.metadata.shared)
    wps, occ, limit = occupancy(arch, r["regs"], smem, warps)
    return {"ok": True, "regs": r["regs"], "spill_bytes": r["local"], "stack_bytes": r["stack"],
            "smem_static": r["shared"], "smem_dynamic": int(k.metadata.shared), "warps_per_block": warps,
            "warps_per_sm": wps, "occupancy": round(occ, 3), "limit": limit}


def report(archs, batch: int, tile: int, rows: int, workers: int | None = None) -> list[Row]:
    plans = []
    for arch in archs:
        for c in compilations(arch, batch, tile, rows):
            plans.append((c, arch))
    jobs = [(c.module, c.kernel, c.signature, c.constexprs, c.attrs, c.options, arch) for c, arch in plans]
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            results = list(pool.map(compile_one, jobs))
    else:
        results = [compile_one(j) for j in jobs]
    rows = [Row(c.kernel, c.label(), c.cases, arch, blocks=c.blocks, **res) for (c, arch), res in zip(plans, results)]
    for r in rows:
        if r.ok:
            r.waves = round(r.blocks / (REFERENCE_SMS[r.arch] * (r.warps_per_sm // r.warps_per_block)), 2)
    return rows


def _print(rows: list[Row]) -> None:
    head = ["kernel", "config", "arch", "regs", "spill B", "smem B", "warps/SM", "occ", "limit", "blocks", "waves",
            "used by"]
    table = [[r.kernel, r.config, f"sm_{r.arch}",
              *([r.regs, r.spill_bytes, r.smem_static + r.smem_dynamic, r.warps_per_sm, f"{r.occupancy:.0%}", r.limit,
                 r.blocks, r.waves] if r.ok else ["FAILED", "", "", "", "", r.error[:60], "", ""]),
              ", ".join(r.cases) if len(r.cases) <= 4 else f"{len(r.cases)} cases"] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *table)]
    for line in [head, ["-" * w for w in widths], *table]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip())


def main(argv=None) -> int:
    if os.environ.get("TRITON_INTERPRET"):
        print("compile_report compiles for a GPU target: unset TRITON_INTERPRET", file=sys.stderr)
        return 2
    from ..config import GateConfig, IngestConfig

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="80,90,100", help="compute capabilities, comma-separated (default 80,90,100)")
    ap.add_argument("--json", default=None, help="also write the rows as JSON to this path")
    ap.add_argument("--batch", type=int, default=IngestConfig().batch_size,
                    help="frames per gate batch (default: ingest.batch_size)")
    ap.add_argument("--rows", type=int, default=None,
                    help="rows of a dedup batch (default: ingest.batch_size frames + reference + held frame)")
    ap.add_argument("--workers", type=int, default=None, help="compiler processes (default: one per CPU)")
    args = ap.parse_args(argv)
    try:
        archs = [int(a) for a in args.arch.split(",") if a.strip()]
    except ValueError:
        ap.error(f"--arch must be comma-separated integers such as 80,90,100, got {args.arch!r}")
    unknown = [a for a in archs if a not in ARCHS]
    if unknown or not archs:
        ap.error(f"--arch: unknown compute capability {unknown or args.arch!r}; known: {sorted(ARCHS)}")
    if args.batch < 1:
        ap.error(f"--batch must be at least 1, got {args.batch}")
    rows = args.rows if args.rows is not None else args.batch + 2
    # the cascade's local-change grid sums cells of half a tile (gate/bodies.py: Tiles.cell)
    tile = GateConfig().tile_size // 2
    t0 = time.monotonic()
    try:
        out = report(archs, args.batch, tile, rows, args.workers)
    except (AttributeError, ImportError, KeyError, TypeError) as exc:  # the JIT internals _specialize follows
        import triton

        print(f"compile_report: cannot specialize the launches as Triton {triton.__version__}'s JIT does "
              f"({type(exc).__name__}: {exc}); written against Triton 3.9", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - t0
    _print(out)
    failed = [r for r in out if not r.ok]
    spilled = [r for r in out if r.ok and r.spill_bytes > 0]
    print(f"\n{len(out)} compilations ({len({r.kernel for r in out})} kernels) for "
          f"{', '.join(f'sm_{a}' for a in archs)} in {elapsed:.1f} s; {len(failed)} failed, {len(spilled)} spill")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"archs": archs, "batch": args.batch, "tile": tile, "dedup_rows": rows,
                       "elapsed_s": round(elapsed, 1), "compilations": [asdict(r) for r in out]}, f, indent=1)
    return 1 if failed or spilled else 0


if __name__ == "__main__":
    sys.exit(main())
