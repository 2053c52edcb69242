// Orchestration of the fused gate statistics: geometry, the work split over the gate pool (gate_pool.h), and the per-frame
// finish (variance, SSIM, histogram correlation). The per-pixel loops are in gate_rows.inc.
#include "gate_stats.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

#include "gate_kernel.h"
#include "gate_pool.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace vam {

// ---------------------------------------------------------------------------------------------
// Kernel dispatch

namespace {

const Kernels* pick(const char* name) {
  static const Kernels base_k = base::kernels();
#if defined(VAM_HAVE_AVX2)
  static const Kernels avx2_k = avx2::kernels();
  static const bool has_avx2 = __builtin_cpu_supports("avx2") != 0;
  const bool want_avx2 = std::strcmp(name, "avx2") == 0;
  if ((want_avx2 || std::strcmp(name, "auto") == 0) && has_avx2) return &avx2_k;
  if (want_avx2) return nullptr;
#else
  if (std::strcmp(name, "avx2") == 0) return nullptr;
#endif
  if (std::strcmp(name, "base") == 0 || std::strcmp(name, "auto") == 0) return &base_k;
  return nullptr;
}

std::atomic<const Kernels*> g_active{nullptr};

const Kernels& active() {
  const Kernels* k = g_active.load(std::memory_order_acquire);
  if (!k) {
    k = pick("auto");
    g_active.store(k, std::memory_order_release);
  }
  return *k;
}

}  // namespace

const Kernels& kernels() { return active(); }

const char* active_isa() { return active().isa; }

bool set_isa(const char* name) {
  const Kernels* k = pick(name);
  if (!k) return false;
  g_active.store(k, std::memory_order_release);
  return true;
}

int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void set_threads(int n) {
#ifdef _OPENMP
  omp_set_num_threads(n);
#else
  (void)n;
#endif
}

// ---------------------------------------------------------------------------------------------
// Per-frame finish

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int cell_lo(int i, int n) { return static_cast<int>(static_cast<int64_t>(i) * n / kThumb); }
int cell_hi(int i, int n) {
  const int lo = cell_lo(i, n);
  const int hi = static_cast<int>(static_cast<int64_t>(i + 1) * n / kThumb);
  return hi > lo + 1 ? hi : lo + 1;
}

Geometry make_geometry(int H, int W) {
  Geometry g;
  std::memset(&g, 0, sizeof(g));
  g.H = H;
  g.W = W;
  for (int j = 0; j < kThumb; ++j) {
    g.col0[j] = cell_lo(j, W);
    g.col1[j] = cell_hi(j, W);
  }
  if (H >= kThumb) {  // the cell-row bounds partition the rows
    g.ngroups = kThumb;
    for (int i = 0; i < kThumb; ++i) {
      g.g_r0[i] = cell_lo(i, H);
      g.g_r1[i] = cell_hi(i, H);
      g.g_i0[i] = i;
      g.g_i1[i] = i + 1;
    }
  } else {  // nearest sampling: cell-row i is row i*H//64; every row is some cell-row's
    g.ngroups = H;
    for (int y = 0; y < H; ++y) {
      g.g_r0[y] = y;
      g.g_r1[y] = y + 1;
      g.g_i0[y] = kThumb;
      g.g_i1[y] = 0;
    }
    for (int i = 0; i < kThumb; ++i) {
      const int y = cell_lo(i, H);
      if (i < g.g_i0[y]) g.g_i0[y] = i;
      if (i + 1 > g.g_i1[y]) g.g_i1[y] = i + 1;
    }
  }
  g.cell_step = 4;
  for (int j = 0; j < kThumb; ++j)
    while (g.col0[j] % g.cell_step != 0 || g.col1[j] % g.cell_step != 0) g.cell_step /= 2;
  g.max_group_rows = 0;
  for (int k = 0; k < g.ngroups; ++k) {
    const int n = g.g_r1[k] - g.g_r0[k];
    if (n > g.max_group_rows) g.max_group_rows = n;
  }
  return g;
}

// Population variance from exact integer sums.
double variance(int64_t s1, int64_t s2, int64_t n) {
#if defined(__SIZEOF_INT128__)
  const __int128 num = static_cast<__int128>(n) * s2 - static_cast<__int128>(s1) * s1;
  return static_cast<double>(num) / (static_cast<double>(n) * static_cast<double>(n));
#else
  const long double m = static_cast<long double>(s1) / n;
  return static_cast<double>(static_cast<long double>(s2) / n - m * m);
#endif
}

// Sum of the reflect-101 Laplacian over the frame. Summed over rows, F[y-1] + F[y+1] - 2F[y]
// telescopes to F[1] + F[H-2] - F[0] - F[H-1] per column (likewise along rows), so only the
// two outer rows and columns on each side are read.
int64_t laplacian_sum(const uint8_t* F, int H, int W) {
  const uint8_t* r0 = F;
  const uint8_t* r1 = F + static_cast<size_t>(W);
  const uint8_t* rb = F + static_cast<size_t>(H - 2) * W;
  const uint8_t* rl = F + static_cast<size_t>(H - 1) * W;
  int64_t s = 0;
  for (int x = 0; x < W; ++x) s += int(r1[x]) + rb[x] - r0[x] - rl[x];
  for (int y = 0; y < H; ++y) {
    const uint8_t* c = F + static_cast<size_t>(y) * W;
    s += int(c[1]) + c[W - 2] - c[0] - c[W - 1];
  }
  return s;
}

// The work split. Items are claimed one at a time (gate_pool.h): a helper that starts late (its
// core busy with a decoder) takes fewer items, and the caller never waits for one that has not
// started, so more, smaller items balance better; each part of a frame pays a fixed cost,
// though (its histogram tables are cleared and folded: ~5 us), so a part keeps at least
// kMinPartPixels. Calls under two such parts stay on the calling thread.
constexpr int64_t kMinPartPixels = int64_t(192) << 10;
constexpr int kItemsPerThread = 8;

int call_threads(int64_t pixels) {
  const int T = max_threads();
  if (T <= 1 || pixels < 2 * kMinPartPixels) return 1;
  const int64_t most = pixels / kMinPartPixels;
  return static_cast<int>(most < T ? most : T);
}

// Whether the helpers pay off, learnt from the calls themselves. On a machine whose cores are
// busy (decoders, other processes, another library's spinning threads) a helper may run at half
// speed or be preempted while it holds an item, and then a call with helpers takes longer than
// one without (measured at 720p on a shared 2-core machine: 2,500 frames/s with the team, 3,900
// on one thread). So each entry point keeps, per call size (pixels, in powers of two: small
// calls have more overhead per pixel), the wall time per pixel of its last kWindow calls in
// either mode. The team is the default (it is the faster one on free cores, by up to the thread
// count, where one thread at most saves the join); a call runs alone only while the team's
// median is over kFallback times one thread's, and the mode not taken is probed every
// kProbeTeam-th (kProbeAlone-th) call so that both follow the load. Medians: one preempted call
// must not flip the choice.
constexpr double kFallback = 1.15;
constexpr uint64_t kProbeTeam = 8, kProbeAlone = 32;
constexpr int kWindow = 3;
constexpr int kSizeClasses = 12;
std::atomic<bool> g_adaptive{true};

class ThreadChoice {
 public:
  // The threads for a call of `pixels` that could use `threads`: `threads` or 1.
  int pick(int threads, int64_t pixels) {
    if (threads <= 1) return 1;
    if (!g_adaptive.load(std::memory_order_relaxed)) return threads;
    std::lock_guard<std::mutex> lk(m_);
    Class& c = cls_[size_class(pixels)];
    ++c.calls;
    if (c.n[1] == 0) return threads;  // nothing known: the team first, then one thread
    if (c.n[0] == 0) return 1;
    const bool team = !(median(c, 1) > kFallback * median(c, 0));
    const bool probe = c.calls % (team ? kProbeAlone : kProbeTeam) == 0;
    return (team != probe) ? threads : 1;
  }
  void record(int threads, double seconds, int64_t pixels) {
    if (pixels <= 0 || !g_adaptive.load(std::memory_order_relaxed)) return;
    const int mode = threads > 1 ? 1 : 0;
    std::lock_guard<std::mutex> lk(m_);
    Class& c = cls_[size_class(pixels)];
    c.v[mode][c.next[mode]] = 1e9 * seconds / static_cast<double>(pixels);
    c.next[mode] = (c.next[mode] + 1) % kWindow;
    if (c.n[mode] < kWindow) ++c.n[mode];
  }

 private:
  struct Class {
    double v[2][kWindow] = {};  // ns per pixel: one thread, the team
    int n[2] = {0, 0}, next[2] = {0, 0};
    uint64_t calls = 0;
  };
  static int size_class(int64_t pixels) {
    int k = 0;
    for (int64_t p = pixels >> 18; p > 1 && k < kSizeClasses - 1; p >>= 1) ++k;
    return k;
  }
  static double median(const Class& c, int mode) {
    double t[kWindow];
    const int n = c.n[mode];
    for (int i = 0; i < n; ++i) t[i] = c.v[mode][i];
    for (int i = 1; i < n; ++i)  // insertion sort of at most kWindow values
      for (int j = i; j > 0 && t[j - 1] > t[j]; --j) std::swap(t[j - 1], t[j]);
    return t[n / 2];
  }
  std::mutex m_;
  Class cls_[kSizeClasses];
};

ThreadChoice g_stats_choice, g_compare_choice;

// Times a call's work for a ThreadChoice: only calls that could use helpers are recorded, as
// team calls when the pool took their items (`team`, set by the caller), else as one thread's.
struct CallTimer {
  ThreadChoice& choice;
  int could;
  int64_t pixels;
  bool team = false;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~CallTimer() {
    if (could > 1)
      choice.record(team ? 2 : 1, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                    pixels);
  }
};

// How many row parts to cut each frame into: about kItemsPerThread items a thread in all.
int parts_per_frame(int64_t nframes, int ngroups, size_t frame_px, int threads) {
  if (threads <= 1 || nframes <= 0) return 1;
  const int64_t want = (static_cast<int64_t>(kItemsPerThread) * threads + nframes - 1) / nframes;
  int64_t most = static_cast<int64_t>(frame_px) / kMinPartPixels;
  if (most > ngroups) most = ngroups;
  if (most < 1) most = 1;
  return static_cast<int>(want < most ? want : most);
}

}  // namespace

void set_adaptive_threads(bool on) { g_adaptive.store(on, std::memory_order_relaxed); }

double ssim_thumbs(const float* a, const float* b) { return active().ssim(a, b); }

double hist_correl(const double* a, const double* b) {
  double ma = 0.0, mb = 0.0;
  for (int i = 0; i < kBins; ++i) {
    ma += a[i];
    mb += b[i];
  }
  ma /= kBins;
  mb /= kBins;
  double sab = 0.0, saa = 0.0, sbb = 0.0;
  bool equal = true;
  for (int i = 0; i < kBins; ++i) {
    const double da = a[i] - ma, db = b[i] - mb;
    sab += da * db;
    saa += da * da;
    sbb += db * db;
    equal = equal && a[i] == b[i];
  }
  const double den = std::sqrt(saa * sbb);
  if (den == 0.0) return equal ? 1.0 : 0.0;
  return sab / den;
}

// ---------------------------------------------------------------------------------------------
// Batched entry points

void gate_stats(const uint8_t* frames, int64_t N, int H, int W, const uint8_t* ref, const float* ref_thumb_in,
                const float* ref_hist_in, int tile, const StatsOut& out) {
  if (N <= 0) return;
  const int TC = tile_grid_cols(W, tile);
  const size_t grid_len = static_cast<size_t>(tile_grid_rows(H, tile)) * TC;
  std::memset(out.tile_sums, 0, sizeof(uint32_t) * grid_len * static_cast<size_t>(N));  // parts add into it
  const Kernels& K = active();
  const Geometry g = make_geometry(H, W);
  const size_t frame_px = static_cast<size_t>(H) * W;
  // Without the caller's cached thumbnail and histogram of the reference, the reference gets
  // its own pass (as frame -1).
  const bool ref_pass = ref && !(ref_thumb_in && ref_hist_in);
  const int64_t nf = N + (ref_pass ? 1 : 0);
  const int could = call_threads(nf * static_cast<int64_t>(frame_px));
  const int threads = g_stats_choice.pick(could, nf * static_cast<int64_t>(frame_px));
  CallTimer timer{g_stats_choice, could, nf * static_cast<int64_t>(frame_px)};
  const int P = parts_per_frame(nf, g.ngroups, frame_px, threads);
  const int64_t items = nf * P;
  std::vector<Partial> parts(static_cast<size_t>(items));
  std::vector<float> ref_thumb_own(ref_pass ? kThumb * kThumb : 0);
  const float* ref_thumb = ref_pass ? ref_thumb_own.data() : ref_thumb_in;
  double ref_hist[kBins];
  if (ref && !ref_pass)
    for (int b = 0; b < kBins; ++b) ref_hist[b] = ref_hist_in[b];
  const int64_t first = ref_pass ? -1 : 0;

  // Per-worker scratch, allocated here so that no allocation can fail inside the workers.
  const size_t scratch_words = scratch_bytes(W) / sizeof(uint32_t);
  std::vector<uint32_t> scratch_all(scratch_words * static_cast<size_t>(threads));

  // A frame is finished (variance, SSIM, histogram correlation) by the worker that completes
  // its last part, inside the one work loop: no barrier between the pass and the finish. With
  // a reference pass the frames need the reference's thumbnail and histogram first: that case
  // finishes in a second loop.
  std::vector<std::atomic<int>> parts_left(static_cast<size_t>(ref_pass ? 0 : N));
  for (auto& c : parts_left) c.store(P, std::memory_order_relaxed);
  auto finish = [&](int64_t f) {
    const Partial* fp = parts.data() + (f - first) * P;
    int64_t s2 = 0, m = 0, hist[kBins] = {};
    for (int p = 0; p < P; ++p) {
      s2 += fp[p].lap_s2;
      m += fp[p].mad;
      for (int b = 0; b < kBins; ++b) hist[b] += fp[p].hist[b];
    }
    const int64_t n = static_cast<int64_t>(frame_px);
    const int64_t s1 = laplacian_sum(frames + static_cast<size_t>(f) * frame_px, H, W);
    out.lap_var[f] = variance(s1, s2, n);
    double hd[kBins];
    float* ho = out.hist + f * kBins;
    for (int b = 0; b < kBins; ++b) {
      hd[b] = static_cast<double>(hist[b]);
      ho[b] = static_cast<float>(hist[b]);
    }
    if (ref) {
      out.mad[f] = static_cast<double>(m) / static_cast<double>(n);
      out.ssim[f] = K.ssim(out.thumb + static_cast<size_t>(f) * kThumb * kThumb, ref_thumb);
      out.hist_corr[f] = hist_correl(hd, ref_hist);
    } else {
      out.mad[f] = out.ssim[f] = out.hist_corr[f] = kNaN;
    }
  };

  auto pass = [&](int64_t it, int worker) {
    uint32_t* scratch = scratch_all.data() + scratch_words * static_cast<size_t>(worker);
    const int64_t f = first + it / P;  // the reference first, so it never trails
    const int p = static_cast<int>(it % P);
    const int g0 = static_cast<int>(static_cast<int64_t>(p) * g.ngroups / P);
    const int g1 = static_cast<int>(static_cast<int64_t>(p + 1) * g.ngroups / P);
    if (f < 0) {
      K.rows(ref, nullptr, &g, g0, g1, kRowsHist, &parts[it], ref_thumb_own.data(), nullptr, scratch);
    } else {
      const Tiles tiles{tile, TC, P > 1, out.tile_sums + static_cast<size_t>(f) * grid_len};
      K.rows(frames + static_cast<size_t>(f) * frame_px, ref, &g, g0, g1, kRowsAll, &parts[it],
             out.thumb + static_cast<size_t>(f) * kThumb * kThumb, &tiles, scratch);
      // acq_rel: the finishing worker sees every part's partial sums and tile additions
      if (!ref_pass && parts_left[f].fetch_sub(1, std::memory_order_acq_rel) == 1) finish(f);
    }
  };
  timer.team = parallel_for_items(items, threads, pass);
  if (ref_pass) {
    for (int b = 0; b < kBins; ++b) {
      int64_t s = 0;
      for (int p = 0; p < P; ++p) s += parts[p].hist[b];
      ref_hist[b] = static_cast<double>(s);
    }
    auto fin = [&](int64_t f, int) { finish(f); };
    parallel_for_items(N, threads, fin);
  }
}

void gate_compare(const uint8_t* frames, const float* thumbs, const float* hists, int64_t N, int H, int W,
                  const uint8_t* ref, const float* ref_thumb, const float* ref_hist, int tile, double* mad,
                  double* ssim, double* hist_corr, uint32_t* tile_sums) {
  if (N <= 0) return;
  const Kernels& K = active();
  const size_t frame_px = static_cast<size_t>(H) * W;
  // |F - R| reads two frames a pixel: a part of half the pixels costs about what a gate_stats part does
  const int could = call_threads(2 * N * static_cast<int64_t>(frame_px));
  const int threads = g_compare_choice.pick(could, N * static_cast<int64_t>(frame_px));
  CallTimer timer{g_compare_choice, could, N * static_cast<int64_t>(frame_px)};
  const int P = parts_per_frame(N, H, 2 * frame_px, threads);
  const int64_t items = N * P;
  std::vector<int64_t> sums(static_cast<size_t>(items));
  double rh[kBins];
  for (int b = 0; b < kBins; ++b) rh[b] = ref_hist[b];
  const int TC = tile_grid_cols(W, tile);
  const size_t grid_len = static_cast<size_t>(tile_grid_rows(H, tile)) * TC;
  std::memset(tile_sums, 0, sizeof(uint32_t) * grid_len * static_cast<size_t>(N));
  const size_t acc_len = static_cast<size_t>(W) + 16;  // see TileRowsFn
  std::vector<uint32_t> acc_all(acc_len * static_cast<size_t>(threads));
  std::vector<std::atomic<int>> parts_left(static_cast<size_t>(N));
  for (auto& c : parts_left) c.store(P, std::memory_order_relaxed);

  auto work = [&](int64_t it, int worker) {
    uint32_t* acc = acc_all.data() + acc_len * static_cast<size_t>(worker);
    const int64_t f = it / P;
    const int p = static_cast<int>(it % P);
    const int r0 = static_cast<int>(static_cast<int64_t>(p) * H / P);
    const int r1 = static_cast<int>(static_cast<int64_t>(p + 1) * H / P);
    const Tiles tiles{tile, TC, P > 1, tile_sums + static_cast<size_t>(f) * grid_len};
    sums[it] = K.tile_rows(frames + f * frame_px, ref, W, r0, r1, &tiles, acc);
    if (parts_left[f].fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    int64_t m = 0;  // the frame's last part: finish it
    for (int q = 0; q < P; ++q) m += sums[f * P + q];
    mad[f] = static_cast<double>(m) / static_cast<double>(frame_px);
    ssim[f] = K.ssim(thumbs + static_cast<size_t>(f) * kThumb * kThumb, ref_thumb);
    double hd[kBins];
    for (int b = 0; b < kBins; ++b) hd[b] = hists[f * kBins + b];
    hist_corr[f] = hist_correl(hd, rh);
  };
  timer.team = parallel_for_items(items, threads, work);
}

void gate_rows_only(const uint8_t* frames, int64_t N, int H, int W, const uint8_t* ref, bool lap, bool hist,
                    int tile, float* thumb, int64_t* mad_sums) {
  const Kernels& K = active();
  const Geometry g = make_geometry(H, W);
  const size_t frame_px = static_cast<size_t>(H) * W;
  const int TC = tile_grid_cols(W, tile);
  std::vector<uint32_t> grid(static_cast<size_t>(tile_grid_rows(H, tile)) * TC);
  std::vector<uint32_t> scratch(scratch_bytes(W) / sizeof(uint32_t));
  const unsigned what = (lap ? kRowsLap : 0u) | (hist ? kRowsHist : 0u);
  for (int64_t f = 0; f < N; ++f) {
    const Tiles tiles{tile, TC, false, grid.data()};
    Partial part;
    K.rows(frames + static_cast<size_t>(f) * frame_px, ref, &g, 0, g.ngroups, what, &part,
           thumb + static_cast<size_t>(f) * kThumb * kThumb, &tiles, scratch.data());
    mad_sums[f] = part.mad;
  }
}

void reduce_tiles(const uint32_t* sums, int64_t N, int H, int W, int tile, double threshold, double* tile_mad,
                  int64_t* changed) {
  const int TR = tile_grid_rows(H, tile), TC = tile_grid_cols(W, tile);
  const int wr = TR > 1 ? TR - 1 : 1, wc = TC > 1 ? TC - 1 : 1;  // tiles a column, a row
  const int dr = TR > 1 ? 1 : 0, dc = TC > 1 ? 1 : 0;            // the second cell of a pair
  // Tile areas: sums of the cells' clipped areas (exact integers, as float64 in the reference).
  std::vector<double> area(static_cast<size_t>(wr) * wc);
  auto side = [tile](int n, int i) { return static_cast<double>(n - i * tile < tile ? n - i * tile : tile); };
  for (int i = 0; i < wr; ++i)
    for (int j = 0; j < wc; ++j) {
      const double r0 = side(H, i), c0 = side(W, j);
      double a = r0 * c0;
      if (dc) a += r0 * side(W, j + 1);
      if (dr) {
        const double r1 = side(H, i + 1);
        a += r1 * c0;
        if (dc) a += r1 * side(W, j + 1);
      }
      area[static_cast<size_t>(i) * wc + j] = a;
    }
  for (int64_t f = 0; f < N; ++f) {
    const uint32_t* g = sums + static_cast<size_t>(f) * TR * TC;
    double best = -std::numeric_limits<double>::infinity();
    int64_t n = 0;
    for (int i = 0; i < wr; ++i) {
      const uint32_t* a = g + static_cast<size_t>(i) * TC;
      const uint32_t* b = g + static_cast<size_t>(i + dr) * TC;
      for (int j = 0; j < wc; ++j) {
        // the reference adds the row pairs first, then the column pairs: integers, any order
        int64_t t = int64_t(a[j]) + (dc ? int64_t(a[j + 1]) : 0);
        if (dr) t += int64_t(b[j]) + (dc ? int64_t(b[j + 1]) : 0);
        const double m = static_cast<double>(t) / area[static_cast<size_t>(i) * wc + j];
        if (m > best) best = m;
        n += m >= threshold;
      }
    }
    tile_mad[f] = best;
    changed[f] = n;
  }
}

void rgb_to_gray(const uint8_t* rgb, uint8_t* gray, size_t n) {
  const Kernels& K = active();
  constexpr size_t kChunk = size_t(1) << 18;
  const int64_t chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t i0 = static_cast<size_t>(c) * kChunk;
    const size_t len = (n - i0 < kChunk) ? n - i0 : kChunk;
    K.gray(rgb + 3 * i0, gray + i0, len);
  }
}

}  // namespace vam
