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
};

// Bytes of per-thread scratch a RowsFn needs for width W (a 4-byte multiple). Layout: four
// 64 x 64 uint16 pair-count tables, 64 x 64 uint32 flushed counts, idx_len(W) uint16 pair
// indices, W column sums (uint16 or uint32).
static inline size_t idx_len(int W) { return ((static_cast<size_t>(W) / 2 + 7) & ~size_t(7)) + 32; }
static inline size_t scratch_bytes(int W) {
  return sizeof(uint16_t) * 4 * kBins * kBins + sizeof(uint32_t) * kBins * kBins + sizeof(uint16_t) * idx_len(W) +
         sizeof(uint32_t) * ((static_cast<size_t>(W) + 3) & ~size_t(3));
}

// Partial sums of a range of rows of one frame.
struct Partial {
  int64_t lap_s2;  // sum of squared Laplacian values
  int64_t mad;     // sum of |F - R|
  int64_t hist[kBins];
};

// Processes the row groups [g0, g1) of frame F (H x W, C-contiguous): Laplacian sums when
// `lap`, sum |F - R| when R is not null, the histogram, and the thumbnail cells of those
// groups, written as means into `thumb` (64 x 64 float32). `scratch` holds scratch_bytes(W)
// (4-byte aligned is enough: vector accesses are unaligned). `out` is overwritten.
using RowsFn = void (*)(const uint8_t* F, const uint8_t* R, const Geometry* g, int g0, int g1,
                        bool lap, Partial* out, float* thumb, void* scratch);

// Sum |a - b| over n bytes.
using SadFn = int64_t (*)(const uint8_t* a, const uint8_t* b, size_t n);

// gray = (R*4899 + G*9617 + B*1868 + 8192) >> 14 over n pixels of interleaved RGB.
using GrayFn = void (*)(const uint8_t* rgb, uint8_t* gray, size_t n);

// SSIM of two 64 x 64 thumbnails (see vam_engine/gate/reference.py).
using SsimFn = double (*)(const float* a, const float* b);

struct Kernels {
  RowsFn rows;
  SadFn sad;
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
