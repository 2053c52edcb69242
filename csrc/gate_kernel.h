// Internal interface between the gate orchestration (gate_stats.cpp) and the per-ISA row
// kernels (gate_rows.inc, compiled once per instruction set). Plain structs and function
// pointers only: the kernel translation units must not instantiate shared inline templates
// (std::...), or the linker could merge an AVX2 copy into the baseline path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vam {

constexpr int kThumb = 64;  // thumbnail side
constexpr int kBins = 64;   // histogram bins (value >> 2)
// The histogram counts the rows y with y % kHistRowStep == 0 only (every column of them): its
// scattered increments were half of the fused pass, and hist_corr, its one consumer, is a
// correlation of shapes that a regular subset of rows estimates closely (reference.py).
#ifndef VAM_HIST_ROW_STEP
#define VAM_HIST_ROW_STEP 4
#endif
constexpr int kHistRowStep = VAM_HIST_ROW_STEP;

// Row/column geometry of one frame size. Rows are cut into "groups": contiguous row ranges
// after which a set of thumbnail cell-rows is complete. For H >= 64 group i is exactly
// cell-row i (the cell bounds partition the rows); for H < 64 every row is a group and the
// cell-rows whose single (nearest) row it is are completed there, so one row may feed
// several cell-rows. Columns need no such care: cells are reduced from per-column sums using
// their bounds, which may overlap for W < 64.
struct Geometry {
  int H, W;
  int ngroups;
  int g_r0[kThumb], g_r1[kThumb];  // group rows [r0, r1)
  int g_i0[kThumb], g_i1[kThumb];  // cell-rows [i0, i1) completed at the end of the group
  int col0[kThumb], col1[kThumb];  // column bounds of each cell-column
  int max_group_rows;              // the tallest group (picks the column-sum width)
  int cell_step;                   // 4, 2 or 1: the largest that divides every column bound
};

// Bytes of per-thread scratch a RowsFn needs for width W (a 4-byte multiple). Layout: four
// 64 x 64 uint16 pair-count tables, 64 x 64 uint32 flushed counts, idx_len(W) uint16 pair
// indices, W column sums (uint16 or uint32), tile-row sums: W + 16 uint32 (at most W tiles a
// row, or (W + 7) / 8 uint64 sums of 8-column groups), W / 2 + 16 uint32 block sums of the column
// sums (cell_sums()).
static inline size_t idx_len(int W) { return ((static_cast<size_t>(W) / 2 + 7) & ~size_t(7)) + 32; }
static inline size_t scratch_bytes(int W) {
  return sizeof(uint16_t) * 4 * kBins * kBins + sizeof(uint32_t) * kBins * kBins + sizeof(uint16_t) * idx_len(W) +
         sizeof(uint32_t) * ((static_cast<size_t>(W) + 3) & ~size_t(3)) + sizeof(uint32_t) * (static_cast<size_t>(W) + 16) +
         sizeof(uint32_t) * (static_cast<size_t>(W) / 2 + 16);
}

// The local-change grid of one frame: tiles of T x T pixels (clipped at the borders), TC a row;
// grid[i * TC + j] accumulates sum |F - R| over tile (i, j). When `shared`, several row parts of
// the frame run concurrently and the two tile rows at a part's ends may be another part's too:
// additions into those are atomic (one per tile and part); the tile rows inside a part are its own.
struct Tiles {
  int T, TC;
  bool shared;
  uint32_t* grid;
};

// Partial sums of a range of rows of one frame.
struct Partial {
  int64_t lap_s2;  // sum of squared Laplacian values
  int64_t mad;     // sum of |F - R|
  int64_t hist[kBins];
};

// What a RowsFn computes besides the thumbnail (always) and |F - R| (when R is given). The
// statistics need kRowsAll (or kRowsHist for a reference's own pass); the other subsets exist
// for the benchmark's breakdown of where the time goes (gate_rows_timing).
enum : unsigned { kRowsLap = 1, kRowsHist = 2, kRowsAll = 3 };

// Processes the row groups [g0, g1) of frame F (H x W, C-contiguous): Laplacian sums when
// `what` has kRowsLap, sum |F - R| and its tile grid (`tiles`) when R is not null, the
// histogram when `what` has kRowsHist (else out->hist is zero), and the thumbnail cells of
// those groups, written as means into `thumb` (64 x 64 float32). `scratch` holds
// scratch_bytes(W) (4-byte aligned is enough: vector accesses are unaligned). `out` is
// overwritten.
using RowsFn = void (*)(const uint8_t* F, const uint8_t* R, const Geometry* g, int g0, int g1,
                        unsigned what, Partial* out, float* thumb, const Tiles* tiles, void* scratch);

// Sum |F - R| over rows [y0, y1) of W-wide frames, added into the tile grid too; `acc` holds
// W + 16 uint32 of scratch. Returns the sum.
using TileRowsFn = int64_t (*)(const uint8_t* F, const uint8_t* R, int W, int y0, int y1, const Tiles* tiles,
                               uint32_t* acc);

// gray = (R*4899 + G*9617 + B*1868 + 8192) >> 14 over n pixels of interleaved RGB.
using GrayFn = void (*)(const uint8_t* rgb, uint8_t* gray, size_t n);

// SSIM of two 64 x 64 thumbnails (see vam_engine/gate/reference.py).
using SsimFn = double (*)(const float* a, const float* b);

struct Kernels {
  RowsFn rows;
  TileRowsFn tile_rows;
  GrayFn gray;
  SsimFn ssim;
  const char* isa;
};

namespace base { Kernels kernels(); }
#if defined(VAM_HAVE_AVX2)
namespace avx2 { Kernels kernels(); }
#endif

// The best kernels this CPU runs (chosen once).
const Kernels& kernels();

}  // namespace vam
