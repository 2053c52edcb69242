#include "strided_copy.h"

#include <cstring>

namespace vam {

void strided_copy(const uint8_t* src, size_t H, size_t W, size_t C, ptrdiff_t sy, ptrdiff_t sx, ptrdiff_t sc,
                  size_t k, uint8_t* out) {
  const size_t oh = (H + k - 1) / k, ow = (W + k - 1) / k;
  const size_t orow = ow * C;
  const ptrdiff_t step_y = sy * static_cast<ptrdiff_t>(k), step_x = sx * static_cast<ptrdiff_t>(k);
  const bool dense_rows = k == 1 && sc == 1 && sx == static_cast<ptrdiff_t>(C);
  if (dense_rows && sy == static_cast<ptrdiff_t>(W * C)) {  // the common private copy: one block
    std::memcpy(out, src, H * W * C);
    return;
  }
  for (size_t i = 0; i < oh; ++i) {
    const uint8_t* row = src + static_cast<ptrdiff_t>(i) * step_y;
    uint8_t* o = out + i * orow;
    if (dense_rows) {
      std::memcpy(o, row, orow);
    } else if (C == 3 && sc == 1) {  // RGB pixels: 3 bytes each, k pixels apart
      for (size_t j = 0; j < ow; ++j, o += 3) {
        const uint8_t* p = row + static_cast<ptrdiff_t>(j) * step_x;
        o[0] = p[0];
        o[1] = p[1];
        o[2] = p[2];
      }
    } else {
      for (size_t j = 0; j < ow; ++j) {
        const uint8_t* p = row + static_cast<ptrdiff_t>(j) * step_x;
        for (size_t c = 0; c < C; ++c) *o++ = p[static_cast<ptrdiff_t>(c) * sc];
      }
    }
  }
}

}  // namespace vam
