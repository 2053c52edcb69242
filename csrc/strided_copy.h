// A C-contiguous copy of every k-th row and column of an H x W x C uint8 image with any strides:
// the private copy (k = 1) and the present's downscale (k > 1) of a frame pushed by a caller
// (vam_engine/ingest/pushed.py, vam_engine/reason/working.py; numpy's src[::k, ::k] is the reference).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vam {

// out[i, j, c] = src[i*k, j*k, c] for i < ceil(H/k), j < ceil(W/k), c < C, with src's strides in
// bytes (sy, sx, sc: any sign); out is C-contiguous, (ceil(H/k), ceil(W/k), C).
void strided_copy(const uint8_t* src, size_t H, size_t W, size_t C, ptrdiff_t sy, ptrdiff_t sx, ptrdiff_t sc,
                  size_t k, uint8_t* out);

}  // namespace vam
