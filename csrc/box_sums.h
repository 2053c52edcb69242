// Exact integer sums of f x f pixel blocks of RGB frames: the area resize of the default image
// embedder (vam_engine/embed/descriptor.py working_image, whose numpy body is the reference).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vam {

// frames: n frames of H x W x 3 uint8 (C-contiguous, row stride W*3); out: n x h x w x 3 uint32,
// out[k, i, j, c] = sum over dy, dx < f of frames[k, y0 + i*f + dy, x0 + j*f + dx, c].
void box_sums(const uint8_t* frames, size_t n, size_t H, size_t W, size_t f, size_t y0, size_t x0, size_t h,
              size_t w, uint32_t* out);

}  // namespace vam
