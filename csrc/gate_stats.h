// Fused gate statistics of gray uint8 frames (see vam_engine/gate/reference.py for the exact
// definitions). No Python here: bindings.cpp validates inputs and owns the arrays.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vam {

struct StatsOut {
  double* lap_var;    // [N]
  double* mad;        // [N], NaN without a reference
  double* ssim;       // [N], NaN without a reference
  double* hist_corr;  // [N], NaN without a reference
  float* thumb;       // [N, 64, 64]
  float* hist;        // [N, 64]
  uint32_t* tile_sums;  // [N, TR, TC]: sum |F - R| per tile (zero without a reference)
};

// The local-change grid of H x W frames in tiles of `tile` pixels (clipped at the borders).
inline int tile_grid_rows(int H, int tile) { return (H + tile - 1) / tile; }
inline int tile_grid_cols(int W, int tile) { return (W + tile - 1) / tile; }
constexpr int kMaxTile = 1024;  // a tile's sum stays below 2^32

// frames: N x H x W (C-contiguous), ref: H x W or null. H, W >= 2, 1 <= tile <= kMaxTile.
// ref_thumb (64 x 64) and ref_hist (64) may be given with ref (the caller's cache); otherwise
// they are computed from ref.
void gate_stats(const uint8_t* frames, int64_t N, int H, int W, const uint8_t* ref, const float* ref_thumb,
                const float* ref_hist, int tile, const StatsOut& out);

// Only the reference-dependent statistics, from the frames' thumbnails and histograms.
void gate_compare(const uint8_t* frames, const float* thumbs, const float* hists, int64_t N, int H, int W,
                  const uint8_t* ref, const float* ref_thumb, const float* ref_hist, int tile, double* mad,
                  double* ssim, double* hist_corr, uint32_t* tile_sums);

// The row pass of gate_stats alone, on the calling thread: the thumbnail always, the Laplacian
// sums when `lap`, the histogram when `hist`, sum |F - R| and its tiles when ref is given; no
// per-frame finish (variance, SSIM, histogram correlation). Returns the thumbnails into `thumb`
// (N x 64 x 64) and sum |F - R| per frame into `mad_sums` (N). For the benchmark's breakdown
// of where the time goes; the statistics themselves come from gate_stats.
void gate_rows_only(const uint8_t* frames, int64_t N, int H, int W, const uint8_t* ref, bool lap, bool hist,
                    int tile, float* thumb, int64_t* mad_sums);

// What the cascade reads of N frames' tile grids (sums: N x ceil(H/tile) x ceil(W/tile), cells of
// `tile` pixels): vam_engine.gate.reference.reduce_tiles, the same float64 rule. Tiles are the
// 2 x 2 blocks of cells at a stride of one cell (a side with one cell: that cell); tile_mad[f]
// is the largest tile mean (sum / clipped area) and changed[f] the tiles whose mean is >=
// threshold.
void reduce_tiles(const uint32_t* sums, int64_t N, int H, int W, int tile, double threshold, double* tile_mad,
                  int64_t* changed);

// OpenCV's fixed-point BT.601: gray = (R*4899 + G*9617 + B*1868 + 8192) >> 14, n pixels.
void rgb_to_gray(const uint8_t* rgb, uint8_t* gray, size_t n);

// SSIM of two 64 x 64 thumbnails (7x7 uniform window, sample covariance, range 255).
double ssim_thumbs(const float* a, const float* b);

// Pearson correlation of two 64-bin histograms (OpenCV HISTCMP_CORREL, constant rules).
double hist_correl(const double* a, const double* b);

// "base" or "avx2": the row kernels in use; set_isa("auto" | "base" | "avx2") returns false
// when the CPU (or build) lacks the asked-for set. For tests and benchmarks.
const char* active_isa();
bool set_isa(const char* name);

// Threads a call may use: OpenMP's count for the calling thread (OMP_NUM_THREADS,
// omp_set_num_threads; 1 without OpenMP), which the gate's own pool (gate_pool.h) runs;
// set_threads is omp_set_num_threads.
int max_threads();
void set_threads(int n);

// Whether a call may run on one thread when its calls with helpers have been slower (the
// default; see ThreadChoice in gate_stats.cpp). Off: every call that can use helpers does (for
// tests of the parallel paths and the benchmark's team rows).
void set_adaptive_threads(bool on);

}  // namespace vam
