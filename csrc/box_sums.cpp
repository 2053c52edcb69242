// See box_sums.h. Row-major passes the compiler vectorizes: the f rows of a block row are added
// into one uint32 row (contiguous adds over w*f*3 values), then each output pixel adds its f
// columns of that row. One read of the frame, no temporaries per pixel.
#include "box_sums.h"

#include <vector>

namespace vam {

void box_sums(const uint8_t* frames, size_t n, size_t H, size_t W, size_t f, size_t y0, size_t x0, size_t h,
              size_t w, uint32_t* out) {
  const size_t span = w * f * 3;  // the bytes of a row the blocks cover
  std::vector<uint32_t> acc(span);
  for (size_t k = 0; k < n; ++k) {
    const uint8_t* frame = frames + k * H * W * 3;
    for (size_t i = 0; i < h; ++i) {
      const uint8_t* row = frame + ((y0 + i * f) * W + x0) * 3;
      for (size_t x = 0; x < span; ++x) acc[x] = row[x];
      for (size_t dy = 1; dy < f; ++dy) {
        const uint8_t* r = row + dy * W * 3;
        for (size_t x = 0; x < span; ++x) acc[x] += r[x];
      }
      uint32_t* o = out + ((k * h + i) * w) * 3;
      for (size_t j = 0; j < w; ++j) {
        const uint32_t* a = acc.data() + j * f * 3;
        uint32_t s0 = 0, s1 = 0, s2 = 0;
        for (size_t dx = 0; dx < f; ++dx) {
          s0 += a[dx * 3];
          s1 += a[dx * 3 + 1];
          s2 += a[dx * 3 + 2];
        }
        o[j * 3] = s0;
        o[j * 3 + 1] = s1;
        o[j * 3 + 2] = s2;
      }
    }
  }
}

}  // namespace vam
