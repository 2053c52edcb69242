// The gate's work split: a call's items run on the calling thread and on helper threads, each
// item claimed from a shared counter. Why not an OpenMP parallel region: its join waits for
// every thread of the team, also for one that the OS has not yet scheduled (the cores are
// shared with decoders and other processes), and on a loaded 2-core machine that wait was a
// whole scheduler slice (~8 ms) for a call of 2 ms of work. Here the caller never waits for a
// helper that has not claimed an item: a helper that wakes after the last claim takes none.
#pragma once

#include <cstdint>

namespace vam {

// fn(ctx, item, worker) for every item in [0, n): worker 0 is the calling thread, 1..threads-1
// the helpers (each worker's scratch can be indexed by it). Returns when every item is done.
// threads <= 1, n <= 1, a pool busy with another caller's items, or a forked child whose
// helpers are gone: everything runs on the calling thread. fn must not throw. Returns whether
// helpers were offered the items (false: they all ran on the calling thread).
using ItemFn = void (*)(void* ctx, int64_t item, int worker);
bool parallel_items(int64_t n, int threads, ItemFn fn, void* ctx);

// Typed convenience: f(item, worker) for a lambda or functor.
template <typename F>
bool parallel_for_items(int64_t n, int threads, F& f) {
  return parallel_items(
      n, threads, [](void* c, int64_t i, int w) { (*static_cast<F*>(c))(i, w); }, &f);
}

}  // namespace vam
