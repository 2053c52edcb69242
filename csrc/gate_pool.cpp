// See gate_pool.h. One process-wide pool, created on first use and never destroyed (its
// helpers block on a condition variable between calls; process exit ends them).
#include "gate_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(_WIN32)
#include <process.h>
#define VAM_GETPID _getpid
#else
#include <unistd.h>
#define VAM_GETPID getpid
#endif

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#include <immintrin.h>
#define VAM_CPU_RELAX() _mm_pause()
#else
#define VAM_CPU_RELAX() std::this_thread::yield()
#endif

namespace vam {
namespace {

// A job's claim word: epoch (20 bits) | next item (22 bits) | item count (22 bits). A helper
// claims item i by a compare-exchange of the whole word, so it cannot claim from a job other
// than the one whose word it read, and it never claims past the count.
constexpr int kItemBits = 22;
constexpr uint64_t kEpochMask = (uint64_t(1) << 20) - 1;
constexpr uint64_t kItemMask = (uint64_t(1) << kItemBits) - 1;
constexpr int64_t kMaxItems = int64_t(kItemMask);
constexpr int kMaxHelpers = 63;

inline uint64_t pack(uint64_t epoch, uint64_t next, uint64_t n) {
  return (epoch & kEpochMask) << (2 * kItemBits) | (next << kItemBits) | n;
}

// After its last item a helper watches for the next job this long before it blocks: waking a
// blocked thread takes tens to hundreds of microseconds (far more in a virtual machine, where the
// idle core is halted), a fair share of a 0.2 ms one-frame call, and calls come back to back in
// a batch of cameras. OpenMP's default spins longer.
constexpr auto kSpin = std::chrono::microseconds(200);

struct Pool {
  int pid = 0;
  std::mutex busy;  // one caller's job at a time; another caller runs its items inline
  std::mutex m;     // epoch, want, sleepers (the helpers' wake-up)
  std::condition_variable wake;
  uint64_t epoch = 0;
  std::atomic<uint64_t> epoch_seen_by_spinners{0};  // epoch, readable without the lock
  int want = 0;      // helpers asked to join the current job: ids 1..want
  int sleepers = 0;  // helpers blocked on `wake`
  std::vector<std::thread> helpers;

  std::atomic<uint64_t> claim{0};
  std::atomic<int64_t> done{0};
  ItemFn fn = nullptr;  // the current job (written before its claim word is published)
  void* ctx = nullptr;
  std::mutex dm;  // the caller's wait for the last item
  std::condition_variable done_cv;

  // Claims and runs items of the job whose claim word carries `ep` until none is left.
  void work(uint64_t ep, int worker) {
    for (;;) {
      uint64_t c = claim.load(std::memory_order_acquire);
      for (;;) {
        if ((c >> (2 * kItemBits)) != (ep & kEpochMask)) return;
        const uint64_t next = (c >> kItemBits) & kItemMask, n = c & kItemMask;
        if (next >= n) return;
        if (claim.compare_exchange_weak(c, c + (uint64_t(1) << kItemBits), std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
          fn(ctx, static_cast<int64_t>(next), worker);
          if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<int64_t>(n)) {
            std::lock_guard<std::mutex> lk(dm);
            done_cv.notify_one();
          }
          break;
        }
      }
    }
  }

  // Spins (for kSpin) until a job newer than `seen` is published; false when none came.
  bool spin_for_job(uint64_t seen) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0;; ++i) {
      if (epoch_seen_by_spinners.load(std::memory_order_acquire) != seen) return true;
      VAM_CPU_RELAX();
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return false;
    }
  }

  void helper_loop(int id) {
    uint64_t seen = 0;
    for (;;) {
      spin_for_job(seen);
      uint64_t ep;
      {
        std::unique_lock<std::mutex> lk(m);
        ++sleepers;
        wake.wait(lk, [&] { return epoch != seen && id <= want; });
        --sleepers;
        ep = seen = epoch;
      }
      work(ep, id);
    }
  }

  void run(int64_t n, int threads, ItemFn f, void* c) {
    int nh = threads - 1;
    if (nh > kMaxHelpers) nh = kMaxHelpers;
    if (nh > n - 1) nh = static_cast<int>(n - 1);
    while (static_cast<int>(helpers.size()) < nh) {
      const int id = static_cast<int>(helpers.size()) + 1;
      helpers.emplace_back([this, id] { helper_loop(id); });
    }
    fn = f;
    ctx = c;
    done.store(0, std::memory_order_relaxed);
    uint64_t ep;
    bool sleeping;
    {
      std::lock_guard<std::mutex> lk(m);
      ep = ++epoch;
      want = nh;
      claim.store(pack(ep, 0, static_cast<uint64_t>(n)), std::memory_order_release);
      epoch_seen_by_spinners.store(ep, std::memory_order_release);
      sleeping = sleepers > 0;
    }
    if (sleeping) wake.notify_all();  // spinning helpers see the epoch (and take the lock next)
    work(ep, 0);
    // Only items a helper has claimed can be outstanding here: wait for those (briefly
    // spinning, then on the condition variable).
    for (int s = 0; done.load(std::memory_order_acquire) < n; ++s) {
      if (s < 2000) {
        VAM_CPU_RELAX();
        continue;
      }
      std::unique_lock<std::mutex> lk(dm);
      done_cv.wait_for(lk, std::chrono::milliseconds(1),
                       [&] { return done.load(std::memory_order_acquire) >= n; });
    }
  }
};

std::atomic<Pool*> g_pool{nullptr};
std::mutex g_pool_make;

Pool* pool() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  const int pid = static_cast<int>(VAM_GETPID());
  if (p && p->pid == pid) return p;
  std::lock_guard<std::mutex> lk(g_pool_make);
  p = g_pool.load(std::memory_order_acquire);
  if (!p || p->pid != pid) {  // first use, or a forked child: the parent's helpers do not exist here
    p = new Pool();  // never freed (see above); a forked child leaks its parent's copy
    p->pid = pid;
    g_pool.store(p, std::memory_order_release);
  }
  return p;
}

void inline_items(int64_t n, ItemFn fn, void* ctx) {
  for (int64_t i = 0; i < n; ++i) fn(ctx, i, 0);
}

}  // namespace

bool parallel_items(int64_t n, int threads, ItemFn fn, void* ctx) {
  if (n <= 0) return false;
  if (threads <= 1 || n == 1 || n > kMaxItems) {
    inline_items(n, fn, ctx);
    return false;
  }
  Pool* p = pool();
  std::unique_lock<std::mutex> lk(p->busy, std::try_to_lock);
  if (!lk.owns_lock()) {
    inline_items(n, fn, ctx);
    return false;
  }
  p->run(n, threads, fn, ctx);
  return true;
}

}  // namespace vam
