// N = images, OH×OW = output size, C = C_in, O = C_out, P = KH·KW·C (one patch row). in is
// (N,H,W,C), w is (KH,KW,C,O), which is already the (P, O) matrix the GEMM wants; cols is
// (N·OH·OW, P); out is (N·OH·OW, O).
#include "nn/conv_im2col.h"

#include <algorithm>

#include "tensor/blas.h"
#include "tensor/thread_team.h"

namespace dtrain {
namespace {

using conv_detail::ThreadBuffer;

// A thread's patch rows at once: small enough to stay in a core's L2 cache (2 MB here) beside the
// weights and the GEMM's packed copies. One image of lenet's conv2 is 627 KB of patch rows, and
// one image at a time measured fastest for it; conv1's 78 KB images go 6 at a time.
constexpr size_t kChunkBytes = 512 * 1024;

// The valid kernel columns [lo, hi) for an output column whose window starts at input column
// `start` (possibly negative): those whose input column start + kw lies inside [0, W). May be
// empty only for a window entirely in the padding, which SAME never produces.
struct KernelColumns {
  int lo;
  int hi;
};
KernelColumns valid_kernel_columns(int start, int width, int kernel) {
  const int lo = std::max(0, -start);
  return {lo, std::max(lo, std::min(kernel, width - start))};
}

}  // namespace

Im2colConv::Im2colConv(const ConvShape& shape) : s_(shape) {
  const size_t image_bytes = static_cast<size_t>(out_pixels()) * patch_size() * sizeof(float);
  chunk_images_ = static_cast<int>(std::max<size_t>(1, kChunkBytes / image_bytes));
}

int Im2colConv::patch_size() const { return s_.kernel_height * s_.kernel_width * s_.in_channels; }

// Row (n, oh, ow) of cols holds the KH×KW×C input patch of output (oh, ow), in w's (kh, kw, c)
// order. For one kernel row kh the valid kernel columns map to consecutive input columns, and NHWC
// keeps their channels adjacent, so each kernel row is one contiguous copy plus zeroed padding on
// either side; rows of kernel that fall above or below the image are zero.
void Im2colConv::im2col(const float* in, int images, float* cols) const {
  const int h = s_.height, w = s_.width, c = s_.in_channels;
  const int kh_size = s_.kernel_height, kw_size = s_.kernel_width;
  const size_t row_floats = static_cast<size_t>(kw_size) * c;
  float* dst = cols;
  for (int n = 0; n < images; ++n) {
    const float* image = in + n * s_.image_floats();
    for (int oh = 0; oh < s_.out_height; ++oh) {
      const int top = oh * s_.stride_height - s_.pad_top;
      for (int ow = 0; ow < s_.out_width; ++ow) {
        const int left = ow * s_.stride_width - s_.pad_left;
        const KernelColumns kc = valid_kernel_columns(left, w, kw_size);
        for (int kh = 0; kh < kh_size; ++kh, dst += row_floats) {
          const int ih = top + kh;
          if (ih < 0 || ih >= h) {
            std::fill_n(dst, row_floats, 0.0f);
            continue;
          }
          const float* src = image + (static_cast<size_t>(ih) * w + (left + kc.lo)) * c;
          std::fill_n(dst, static_cast<size_t>(kc.lo) * c, 0.0f);
          std::copy_n(src, static_cast<size_t>(kc.hi - kc.lo) * c, dst + kc.lo * c);
          std::fill_n(dst + kc.hi * c, static_cast<size_t>(kw_size - kc.hi) * c, 0.0f);
        }
      }
    }
  }
}

// The adjoint of im2col: every column entry is added back to the input element it was copied from;
// entries that were padding are dropped.
void Im2colConv::col2im_add(const float* cols, int images, float* din) const {
  const int h = s_.height, w = s_.width, c = s_.in_channels;
  const int kh_size = s_.kernel_height, kw_size = s_.kernel_width;
  const size_t row_floats = static_cast<size_t>(kw_size) * c;
  const float* src = cols;
  for (int n = 0; n < images; ++n) {
    float* image = din + n * s_.image_floats();
    for (int oh = 0; oh < s_.out_height; ++oh) {
      const int top = oh * s_.stride_height - s_.pad_top;
      for (int ow = 0; ow < s_.out_width; ++ow) {
        const int left = ow * s_.stride_width - s_.pad_left;
        const KernelColumns kc = valid_kernel_columns(left, w, kw_size);
        for (int kh = 0; kh < kh_size; ++kh, src += row_floats) {
          const int ih = top + kh;
          if (ih < 0 || ih >= h) continue;
          float* dst = image + (static_cast<size_t>(ih) * w + (left + kc.lo)) * c;
          const float* run = src + kc.lo * c;
          const int run_floats = (kc.hi - kc.lo) * c;
          for (int i = 0; i < run_floats; ++i) dst[i] += run[i];
        }
      }
    }
  }
}

void Im2colConv::input_gradient_chunk(const float* w, const float* dout, int images, float* dcols,
                                      float* din) const {
  const int p = patch_size(), o = s_.out_channels;
  gemm(Trans::kNo, Trans::kYes, images * out_pixels(), p, o, 1.0f, dout, o, w, o, 0.0f, dcols, p,
       Split::kNone);
  col2im_add(dcols, images, din);
}

void Im2colConv::input_gradient(const float* w, const float* dout, int batch, float* din) const {
  const int parts = parallel_parts();
  parallel_ranges(static_cast<size_t>(parts), 1, [&](int part, size_t, size_t) {
    const auto [begin, end] = conv_detail::image_range(batch, parts, part);
    float* dcols = conv_detail::thread_buffer(
        ThreadBuffer::kColumnGradient,
        static_cast<size_t>(chunk_images_) * out_pixels() * patch_size());
    std::fill_n(din + begin * s_.image_floats(), (end - begin) * s_.image_floats(), 0.0f);
    for (int first = begin; first < end; first += chunk_images_) {
      input_gradient_chunk(w, dout + first * s_.out_image_floats(),
                           std::min(chunk_images_, end - first), dcols,
                           din + first * s_.image_floats());
    }
  });
}

void Im2colConv::forward(const float* w, const float* bias, const float* in, int batch,
                         float* out) const {
  const int p = patch_size(), o = s_.out_channels, pixels = out_pixels();
  const int parts = parallel_parts();
  parallel_ranges(static_cast<size_t>(parts), 1, [&](int part, size_t, size_t) {
    const auto [begin, end] = conv_detail::image_range(batch, parts, part);
    float* cols = conv_detail::thread_buffer(ThreadBuffer::kColumns,
                                             static_cast<size_t>(chunk_images_) * pixels * p);
    for (int first = begin; first < end; first += chunk_images_) {
      const int images = std::min(chunk_images_, end - first);
      const int rows = images * pixels;
      float* out_chunk = out + first * s_.out_image_floats();
      im2col(in + first * s_.image_floats(), images, cols);
      // Broadcast the bias into out, then let the GEMM accumulate on top of it (beta = 1).
      if (bias != nullptr) {
        for (int r = 0; r < rows; ++r) std::copy_n(bias, o, out_chunk + static_cast<size_t>(r) * o);
      }
      gemm(Trans::kNo, Trans::kNo, rows, o, p, 1.0f, cols, p, w, o, bias != nullptr ? 1.0f : 0.0f,
           out_chunk, o, Split::kNone);
    }
  });
}

void Im2colConv::backward(const float* w, const float* in, const float* dout, int batch, float beta,
                          float* dw, float* db, float* din) const {
  // Forward was out = cols·w + b with cols = im2col(in), so dw = colsᵀ·dout, db = Σ_rows dout,
  // dcols = dout·wᵀ and din = col2im(dcols), the adjoint of im2col.
  const int p = patch_size(), o = s_.out_channels, pixels = out_pixels();
  const int parts = parallel_parts();
  std::vector<const float*> dw_parts(static_cast<size_t>(parts));
  std::vector<const float*> db_parts(static_cast<size_t>(parts));
  parallel_ranges(static_cast<size_t>(parts), 1, [&](int part, size_t, size_t) {
    const auto [begin, end] = conv_detail::image_range(batch, parts, part);
    const size_t chunk_floats = static_cast<size_t>(chunk_images_) * pixels * p;
    float* cols = conv_detail::thread_buffer(ThreadBuffer::kColumns, chunk_floats);
    float* dcols = conv_detail::thread_buffer(ThreadBuffer::kColumnGradient, chunk_floats);
    float* dw_part = conv_detail::thread_buffer(ThreadBuffer::kWeightGradient, s_.weight_floats());
    float* db_part = conv_detail::thread_buffer(ThreadBuffer::kBiasGradient, o);
    std::fill_n(dw_part, s_.weight_floats(), 0.0f);
    std::fill_n(db_part, o, 0.0f);
    if (din != nullptr) {
      std::fill_n(din + begin * s_.image_floats(), (end - begin) * s_.image_floats(), 0.0f);
    }
    for (int first = begin; first < end; first += chunk_images_) {
      const int images = std::min(chunk_images_, end - first);
      const int rows = images * pixels;
      const float* dout_chunk = dout + first * s_.out_image_floats();
      im2col(in + first * s_.image_floats(), images, cols);
      gemm(Trans::kYes, Trans::kNo, p, o, rows, 1.0f, cols, p, dout_chunk, o, 1.0f, dw_part, o,
           Split::kNone);
      for (int r = 0; r < rows; ++r) {
        const float* __restrict row = dout_chunk + static_cast<size_t>(r) * o;
        for (int j = 0; j < o; ++j) db_part[j] += row[j];
      }
      if (din != nullptr) {
        input_gradient_chunk(w, dout_chunk, images, dcols, din + first * s_.image_floats());
      }
    }
    dw_parts[part] = dw_part;
    db_parts[part] = db_part;
  });
  conv_detail::sum_partials(dw_parts, s_.weight_floats(), beta, dw);
  if (db != nullptr) conv_detail::sum_partials(db_parts, o, 0.0f, db);
}

}  // namespace dtrain
