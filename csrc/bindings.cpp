// pybind11 module vam_engine._C: input validation, output arrays, GIL release.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "box_sums.h"
#include "gate_stats.h"
#include "strided_copy.h"

namespace py = pybind11;

namespace {

std::string shape_str(const py::array& a) {
  std::ostringstream s;
  s << "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s << (i ? ", " : "") << a.shape(i);
  s << (a.ndim() == 1 ? ",)" : ")");
  return s.str();
}

std::string dtype_str(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

bool is_u8(const py::array& a) { return a.dtype().kind() == 'u' && a.dtype().itemsize() == 1; }
bool is_f32(const py::array& a) { return a.dtype().kind() == 'f' && a.dtype().itemsize() == 4; }

// A C-contiguous view of `obj` (copied only when it is not contiguous already), checked to be
// a numpy array of the given kind. Never converts dtypes: a wrong dtype is the caller's bug.
py::array as_array(const py::handle& obj, const char* what, bool (*dtype_ok)(const py::array&),
                   const char* dtype_name) {
  if (!py::isinstance<py::array>(obj))
    throw py::value_error(std::string(what) + " must be a numpy array, got " +
                          py::str(py::type::handle_of(obj)).cast<std::string>());
  py::array a = py::reinterpret_borrow<py::array>(obj);
  if (!dtype_ok(a))
    throw py::value_error(std::string(what) + " must be " + dtype_name + ", got " + dtype_str(a) + " " +
                          shape_str(a));
  if (!(a.flags() & py::array::c_style)) {
    a = py::array::ensure(a, py::array::c_style);
    if (!a) throw py::value_error(std::string("could not make a C-contiguous copy of ") + what);
  }
  return a;
}

void check_shape(const py::array& a, const char* what, const std::vector<py::ssize_t>& want) {
  bool ok = a.ndim() == static_cast<py::ssize_t>(want.size());
  for (size_t i = 0; ok && i < want.size(); ++i) ok = a.shape(i) == want[i];
  if (ok) return;
  std::ostringstream s;
  s << what << " must have shape (";
  for (size_t i = 0; i < want.size(); ++i) s << (i ? ", " : "") << want[i];
  s << (want.size() == 1 ? ",)" : ")") << ", got " << shape_str(a);
  throw py::value_error(s.str());
}

struct Frames {
  py::array arr;
  int64_t n;
  int h, w;
};

Frames check_frames(const py::handle& obj) {
  Frames f;
  f.arr = as_array(obj, "frames", is_u8, "uint8");
  if (f.arr.ndim() != 3)
    throw py::value_error("frames must be N x H x W uint8 gray frames, got ndim " +
                          std::to_string(f.arr.ndim()) + " " + shape_str(f.arr));
  const py::ssize_t h = f.arr.shape(1), w = f.arr.shape(2);
  if (h < 2 || w < 2)
    throw py::value_error("frames must be at least 2 x 2 pixels, got H x W = " + std::to_string(h) + " x " +
                          std::to_string(w));
  if (h * w > std::numeric_limits<int32_t>::max())
    throw py::value_error("frames larger than 2^31 pixels are not supported, got " + shape_str(f.arr));
  f.n = f.arr.shape(0);
  f.h = static_cast<int>(h);
  f.w = static_cast<int>(w);
  return f;
}

py::array check_ref(const py::handle& obj, const Frames& f) {
  py::array r = as_array(obj, "ref", is_u8, "uint8");
  check_shape(r, "ref", {f.h, f.w});
  return r;
}

int check_tile(int tile) {
  if (tile < 1 || tile > vam::kMaxTile)
    throw py::value_error("tile must be 1.." + std::to_string(vam::kMaxTile) + " pixels, got " + std::to_string(tile));
  return tile;
}

py::array_t<uint32_t> tile_grid(const Frames& f, int tile) {
  return py::array_t<uint32_t>({py::ssize_t(f.n), py::ssize_t(vam::tile_grid_rows(f.h, tile)),
                                py::ssize_t(vam::tile_grid_cols(f.w, tile))});
}

const uint8_t* u8(const py::array& a) { return static_cast<const uint8_t*>(a.data()); }
const float* f32(const py::array& a) { return static_cast<const float*>(a.data()); }

py::tuple gate_stats(const py::handle& frames_obj, const py::handle& ref_obj, const py::handle& ref_thumb_obj,
                     const py::handle& ref_hist_obj, int tile) {
  const Frames f = check_frames(frames_obj);
  check_tile(tile);
  py::array ref, ref_thumb, ref_hist;
  if (!ref_obj.is_none()) ref = check_ref(ref_obj, f);
  if (ref_thumb_obj.is_none() != ref_hist_obj.is_none() || (ref_obj.is_none() && !ref_thumb_obj.is_none()))
    throw py::value_error("ref_thumb and ref_hist go together, and only with ref");
  if (!ref_thumb_obj.is_none()) {
    ref_thumb = as_array(ref_thumb_obj, "ref_thumb", is_f32, "float32");
    check_shape(ref_thumb, "ref_thumb", {64, 64});
    ref_hist = as_array(ref_hist_obj, "ref_hist", is_f32, "float32");
    check_shape(ref_hist, "ref_hist", {64});
  }
  const py::ssize_t n = f.n;
  py::array_t<double> lap_var(n), mad(n), ssim(n), hist_corr(n);
  py::array_t<float> thumb({n, py::ssize_t(64), py::ssize_t(64)});
  py::array_t<float> hist({n, py::ssize_t(64)});
  py::array_t<uint32_t> tiles = tile_grid(f, tile);
  vam::StatsOut out{lap_var.mutable_data(), mad.mutable_data(), ssim.mutable_data(),
                    hist_corr.mutable_data(), thumb.mutable_data(), hist.mutable_data(), tiles.mutable_data()};
  const uint8_t* fp = u8(f.arr);
  const uint8_t* rp = ref_obj.is_none() ? nullptr : u8(ref);
  const float* rt = ref_thumb_obj.is_none() ? nullptr : f32(ref_thumb);
  const float* rh = ref_hist_obj.is_none() ? nullptr : f32(ref_hist);
  {
    py::gil_scoped_release nogil;
    vam::gate_stats(fp, f.n, f.h, f.w, rp, rt, rh, tile, out);
  }
  return py::make_tuple(lap_var, mad, ssim, hist_corr, thumb, hist, tiles);
}

py::tuple gate_compare(const py::handle& frames_obj, const py::handle& thumbs_obj, const py::handle& hists_obj,
                       const py::handle& ref_obj, const py::handle& ref_thumb_obj,
                       const py::handle& ref_hist_obj, int tile) {
  const Frames f = check_frames(frames_obj);
  check_tile(tile);
  py::array thumbs = as_array(thumbs_obj, "thumbs", is_f32, "float32");
  check_shape(thumbs, "thumbs", {f.n, 64, 64});
  py::array hists = as_array(hists_obj, "hists", is_f32, "float32");
  check_shape(hists, "hists", {f.n, 64});
  py::array ref = check_ref(ref_obj, f);
  py::array ref_thumb = as_array(ref_thumb_obj, "ref_thumb", is_f32, "float32");
  check_shape(ref_thumb, "ref_thumb", {64, 64});
  py::array ref_hist = as_array(ref_hist_obj, "ref_hist", is_f32, "float32");
  check_shape(ref_hist, "ref_hist", {64});
  const py::ssize_t n = f.n;
  py::array_t<double> mad(n), ssim(n), hist_corr(n);
  py::array_t<uint32_t> tiles = tile_grid(f, tile);
  double *mp = mad.mutable_data(), *sp = ssim.mutable_data(), *hp = hist_corr.mutable_data();
  uint32_t* tp = tiles.mutable_data();
  {
    py::gil_scoped_release nogil;
    vam::gate_compare(u8(f.arr), f32(thumbs), f32(hists), f.n, f.h, f.w, u8(ref), f32(ref_thumb),
                      f32(ref_hist), tile, mp, sp, hp, tp);
  }
  return py::make_tuple(mad, ssim, hist_corr, tiles);
}

py::tuple gate_rows(const py::handle& frames_obj, const py::handle& ref_obj, bool lap, bool hist, int tile) {
  const Frames f = check_frames(frames_obj);
  check_tile(tile);
  py::array ref;
  if (!ref_obj.is_none()) ref = check_ref(ref_obj, f);
  py::array_t<float> thumb({py::ssize_t(f.n), py::ssize_t(64), py::ssize_t(64)});
  py::array_t<int64_t> mad_sums(py::ssize_t(f.n));
  const uint8_t* rp = ref_obj.is_none() ? nullptr : u8(ref);
  float* tp = thumb.mutable_data();
  int64_t* mp = mad_sums.mutable_data();
  {
    py::gil_scoped_release nogil;
    vam::gate_rows_only(u8(f.arr), f.n, f.h, f.w, rp, lap, hist, tile, tp, mp);
  }
  return py::make_tuple(thumb, mad_sums);
}

py::tuple reduce_tiles(const py::handle& sums_obj, int h, int w, int tile, double threshold) {
  check_tile(tile);
  if (h < 2 || w < 2)
    throw py::value_error("h and w must be >= 2 (a frame's size), got " + std::to_string(h) + " x " + std::to_string(w));
  py::array sums = as_array(sums_obj, "sums", [](const py::array& a) {
    return a.dtype().kind() == 'u' && a.dtype().itemsize() == 4; }, "uint32");
  if (sums.ndim() != 3) throw py::value_error("sums must be N x TR x TC uint32, got " + shape_str(sums));
  const py::ssize_t n = sums.shape(0);
  check_shape(sums, "sums", {n, vam::tile_grid_rows(h, tile), vam::tile_grid_cols(w, tile)});
  py::array_t<double> tile_mad(n);
  py::array_t<int64_t> changed(n);
  const uint32_t* sp = static_cast<const uint32_t*>(sums.data());
  double* mp = tile_mad.mutable_data();
  int64_t* cp = changed.mutable_data();
  {
    py::gil_scoped_release nogil;
    vam::reduce_tiles(sp, n, h, w, tile, threshold, mp, cp);
  }
  return py::make_tuple(tile_mad, changed);
}

py::array rgb_to_gray(const py::handle& rgb_obj) {
  py::array rgb = as_array(rgb_obj, "rgb", is_u8, "uint8");
  if (rgb.ndim() < 3 || rgb.shape(rgb.ndim() - 1) != 3)
    throw py::value_error("rgb must be uint8 [..., H, W, 3], got " + shape_str(rgb));
  std::vector<py::ssize_t> shape(rgb.shape(), rgb.shape() + rgb.ndim() - 1);
  py::array_t<uint8_t> gray(shape);
  const size_t npix = static_cast<size_t>(gray.size());
  const uint8_t* src = u8(rgb);
  uint8_t* dst = gray.mutable_data();
  {
    py::gil_scoped_release nogil;
    vam::rgb_to_gray(src, dst, npix);
  }
  return gray;
}

py::array box_sums(const py::handle& frames_obj, int64_t f, int64_t y0, int64_t x0, int64_t h, int64_t w) {
  py::array frames = as_array(frames_obj, "frames", is_u8, "uint8");
  if (frames.ndim() != 4 || frames.shape(3) != 3)
    throw py::value_error("frames must be uint8 (N, H, W, 3), got " + shape_str(frames));
  const int64_t n = frames.shape(0), H = frames.shape(1), W = frames.shape(2);
  if (f < 1 || h < 1 || w < 1 || y0 < 0 || x0 < 0 || y0 + h * f > H || x0 + w * f > W)
    throw py::value_error("box_sums: blocks of " + std::to_string(f) + " px, " + std::to_string(h) + " x " +
                          std::to_string(w) + " of them from (" + std::to_string(y0) + ", " + std::to_string(x0) +
                          "), do not fit frames of " + shape_str(frames));
  py::array_t<uint32_t> out({n, h, w, int64_t{3}});
  const uint8_t* src = u8(frames);
  uint32_t* dst = out.mutable_data();
  {
    py::gil_scoped_release nogil;
    vam::box_sums(src, n, H, W, f, y0, x0, h, w, dst);
  }
  return out;
}

// The byte range [lo, hi) an array's elements span (strides may be negative).
void byte_span(const py::array& a, const uint8_t*& lo, const uint8_t*& hi) {
  const uint8_t* base = static_cast<const uint8_t*>(a.data());
  lo = hi = base;
  if (a.size() == 0) return;
  ptrdiff_t low = 0, high = 0;
  for (py::ssize_t d = 0; d < a.ndim(); ++d) {
    const ptrdiff_t span = static_cast<ptrdiff_t>(a.strides(d)) * static_cast<ptrdiff_t>(a.shape(d) - 1);
    (span < 0 ? low : high) += span;
  }
  lo = base + low;
  hi = base + high + a.itemsize();
}

// Runs with the interpreter lock HELD, unlike every other op here: it is for a caller's thread
// (Engine.push copies a sampled frame and the present's downscale of it, 0.05-0.5 ms). A release
// there hands the lock to whichever pipeline thread is waiting for it (gates, embedding, JPEG,
// commit), and the caller then waits until that thread lets go: up to the switch interval
// (5 ms) of Python, longer in C code that keeps the lock. Holding it this long costs the
// other threads at most this long.
py::array strided_copy(const py::handle& src_obj, int64_t k, const py::handle& out_obj) {
  if (!py::isinstance<py::array>(src_obj))
    throw py::value_error("src must be a numpy array, got " + py::str(py::type::handle_of(src_obj)).cast<std::string>());
  py::array src = py::reinterpret_borrow<py::array>(src_obj);  // any strides: never copied here
  if (!is_u8(src) || src.ndim() != 3)
    throw py::value_error("src must be uint8 (H, W, C), got " + dtype_str(src) + " " + shape_str(src));
  if (k < 1) throw py::value_error("k must be >= 1, got " + std::to_string(k));
  const py::ssize_t H = src.shape(0), W = src.shape(1), C = src.shape(2);
  const py::ssize_t oh = (H + k - 1) / k, ow = (W + k - 1) / k;
  py::array out;
  if (out_obj.is_none()) {
    out = py::array_t<uint8_t>({oh, ow, C});
  } else {
    if (!py::isinstance<py::array>(out_obj))
      throw py::value_error("out must be a numpy array or None, got " +
                            py::str(py::type::handle_of(out_obj)).cast<std::string>());
    out = py::reinterpret_borrow<py::array>(out_obj);
    if (!is_u8(out) || !(out.flags() & py::array::c_style) || !out.writeable())
      throw py::value_error("out must be a writeable C-contiguous uint8 array, got " + dtype_str(out) + " " +
                            shape_str(out));
    check_shape(out, "out", {oh, ow, C});
    const uint8_t *slo, *shi, *olo, *ohi;
    byte_span(src, slo, shi);
    byte_span(out, olo, ohi);
    if (src.size() > 0 && out.size() > 0 && slo < ohi && olo < shi)
      throw py::value_error("out must not overlap src");
  }
  if (out.size() > 0)
    vam::strided_copy(u8(src), size_t(H), size_t(W), size_t(C), src.strides(0), src.strides(1), src.strides(2),
                      size_t(k), static_cast<uint8_t*>(out.mutable_data()));
  return out;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "vam_engine native kernels: fused gate statistics (CPU, multi-threaded) and color conversion";

  m.def("gate_stats", &gate_stats, py::arg("frames"), py::arg("ref") = py::none(),
        py::arg("ref_thumb") = py::none(), py::arg("ref_hist") = py::none(), py::arg("tile") = 16,
        R"doc(Fused gate statistics of N gray frames against an optional reference.

frames: uint8 (N, H, W), H, W >= 2; ref: uint8 (H, W) or None; ref_thumb float32 (64, 64) and
ref_hist float32 (64,): the reference's own statistics when the caller has them (saves a pass);
tile: side of the cells of the local-change grid, 1..1024 pixels (the cascade's tiles are 2 x 2 cells).
Returns (lap_var f64[N], mad f64[N], ssim f64[N], hist_corr f64[N], thumb f32[N, 64, 64],
hist f32[N, 64], tile_sums u32[N, ceil(H/tile), ceil(W/tile)]); mad, ssim and hist_corr are NaN
and tile_sums zero when ref is None. The definitions are vam_engine.gate.reference.frame_stats.)doc");

  m.def("gate_compare", &gate_compare, py::arg("frames"), py::arg("thumbs"), py::arg("hists"), py::arg("ref"),
        py::arg("ref_thumb"), py::arg("ref_hist"), py::arg("tile") = 16,
        R"doc(Only the reference-dependent statistics, reusing the frames' thumbnails and histograms.

frames uint8 (N, H, W), thumbs float32 (N, 64, 64), hists float32 (N, 64), ref uint8 (H, W),
ref_thumb float32 (64, 64), ref_hist float32 (64,), tile as for gate_stats. Returns (mad, ssim,
hist_corr, tile_sums): f64[N] each and u32[N, ceil(H/tile), ceil(W/tile)].)doc");

  m.def("gate_rows", &gate_rows, py::arg("frames"), py::arg("ref") = py::none(), py::arg("lap") = true,
        py::arg("hist") = true, py::arg("tile") = 16,
        R"doc(The row pass of gate_stats alone, one thread, for the benchmark's time breakdown.

Always the thumbnail; the Laplacian sums when lap, the histogram when hist, sum |F - R| and its
tiles when ref is given; no per-frame finish. Returns (thumb f32[N, 64, 64], sum |F - R| i64[N]:
zero without ref).)doc");

  m.def("reduce_tiles", &reduce_tiles, py::arg("sums"), py::arg("h"), py::arg("w"), py::arg("tile"),
        py::arg("threshold"),
        R"doc(What the cascade reads of N frames' tile grids: vam_engine.gate.reference.reduce_tiles per frame.

sums: uint32 (N, ceil(h/tile), ceil(w/tile)) from gate_stats / gate_compare; h, w: the frames'
size; tile: the cell side; threshold: a tile mean at or over it counts as changed. Returns
(tile_mad f64[N], tiles_changed i64[N]).)doc");

  m.def("rgb_to_gray", &rgb_to_gray, py::arg("rgb"),
        "uint8 [..., H, W, 3] RGB -> uint8 [..., H, W] gray, OpenCV's fixed-point BT.601 rule "
        "(R*4899 + G*9617 + B*1868 + 8192) >> 14.");

  m.def("box_sums", &box_sums, py::arg("frames"), py::arg("f"), py::arg("y0"), py::arg("x0"), py::arg("h"),
        py::arg("w"),
        "Exact sums of f x f blocks: uint8 (N, H, W, 3) -> uint32 (N, h, w, 3), block (i, j) starting at "
        "(y0 + i*f, x0 + j*f); the area resize of vam_engine.embed.descriptor.working_image.");

  m.def("strided_copy", &strided_copy, py::arg("src"), py::arg("k") = 1, py::arg("out") = py::none(),
        "A C-contiguous copy of src[::k, ::k] (uint8 (H, W, C), any strides) into out (None: a new "
        "array; else writeable C-contiguous uint8 (ceil(H/k), ceil(W/k), C), not overlapping src). "
        "Keeps the interpreter lock (for a caller's thread: Engine.push); returns out.");

  m.def("gate_isa", &vam::active_isa, "The instruction set of the row kernels in use ('base' or 'avx2').");
  m.def(
      "_set_isa",
      [](const std::string& name) {
        if (!vam::set_isa(name.c_str()))
          throw py::value_error("instruction set '" + name + "' is not available on this CPU/build "
                                "(choose from auto, base, avx2)");
      },
      py::arg("name"), "Force the row kernels ('auto', 'base', 'avx2'); for tests and benchmarks.");
  m.def("set_adaptive_threads", &vam::set_adaptive_threads, py::arg("on"),
        "Whether gate calls may fall back to one thread when their calls with helpers have been slower "
        "(default True); False forces the helpers. For tests and benchmarks.");
  m.def("max_threads", &vam::max_threads, "Threads a gate call may use: the OpenMP thread count of the calling thread (1 without OpenMP).");
  m.def(
      "_set_threads",
      [](int n) {
        if (n < 1) throw py::value_error("threads must be >= 1, got " + std::to_string(n));
        vam::set_threads(n);
      },
      py::arg("n"), "Set the OpenMP threads of later calls from this thread (omp_set_num_threads); for tests.");
}
