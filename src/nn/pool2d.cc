// MaxPool2D and AveragePool2D forward/backward. N = batch, H×W×C = input image, OH×OW×C = output
// image, SH×SW = strides, PH×PW = window. Output (oh, ow) pools input rows [oh·SH - pad_top, +PH)
// and columns [ow·SW - pad_left, +PW), clipped to the image. The team's threads take the batch's
// images in contiguous runs.
#include "nn/pool2d.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"
#include "tensor/thread_team.h"

namespace dtrain {
namespace {

// Every integer up to 2^24 is exact in a float, so an index below it survives the round trip.
constexpr int64_t kMaxFloatIndex = int64_t{1} << 24;

}  // namespace

Pool2D::Pool2D(Pool2DOptions options, const char* kind) : options_(options) {
  const Pool2DOptions& o = options_;
  if (o.height <= 0 || o.width <= 0 || o.channels <= 0 || o.pool_height <= 0 || o.pool_width <= 0 ||
      o.stride_height <= 0 || o.stride_width <= 0) {
    throw Error(fmt::format(
        "{}: sizes must be positive (height {}, width {}, channels {}, pool {}x{}, strides {}x{})",
        kind, o.height, o.width, o.channels, o.pool_height, o.pool_width, o.stride_height,
        o.stride_width));
  }
  if (int64_t{o.height} * o.width * o.channels > kMaxFloatIndex) {
    throw Error(fmt::format("{}: image {}x{}x{} has more than 2^24 values", kind, o.height, o.width,
                            o.channels));
  }
  rows_ = axis_geometry(o.height, o.pool_height, o.stride_height, o.padding);
  cols_ = axis_geometry(o.width, o.pool_width, o.stride_width, o.padding);
  if (rows_.out <= 0 || cols_.out <= 0) {
    throw Error(fmt::format("{}: a {}x{} window does not fit a {}x{} image with VALID padding",
                            kind, o.pool_height, o.pool_width, o.height, o.width));
  }
}

Shape Pool2D::input_shape() const { return {options_.height, options_.width, options_.channels}; }

Shape Pool2D::output_shape() const { return {rows_.out, cols_.out, options_.channels}; }

// Never empty: SAME padding is < window on each side, and VALID windows lie inside the image.
Pool2D::Range Pool2D::row_range(int oh) const {
  const int start = oh * options_.stride_height - rows_.pad_before;
  return {std::max(start, 0), std::min(start + options_.pool_height, options_.height)};
}

Pool2D::Range Pool2D::col_range(int ow) const {
  const int start = ow * options_.stride_width - cols_.pad_before;
  return {std::max(start, 0), std::min(start + options_.pool_width, options_.width)};
}

std::string Pool2D::geometry() const {
  const Pool2DOptions& o = options_;
  return fmt::format("{}x{}x{}->{}x{}x{} window {}x{} stride {}x{} {}", o.height, o.width,
                     o.channels, rows_.out, cols_.out, o.channels, o.pool_height, o.pool_width,
                     o.stride_height, o.stride_width,
                     o.padding == Padding::kSame ? "same" : "valid");
}

std::string MaxPool2D::describe() const { return "max_pool2d " + geometry(); }

size_t MaxPool2D::scratch_floats(int batch) const {
  return static_cast<size_t>(batch) * rows_.out * cols_.out * options_.channels;
}

void MaxPool2D::forward(const ParamSet&, const LayerIo& io) const {
  const int h = options_.height, w = options_.width, c = options_.channels;
  const size_t image_floats = static_cast<size_t>(h) * w * c;
  const size_t outputs_per_image = static_cast<size_t>(rows_.out) * cols_.out * c;
  parallel_ranges(io.batch, 1, [&](int, size_t begin, size_t end) {
    float* out = io.out + begin * outputs_per_image;
    float* argmax = io.scratch + begin * outputs_per_image;
    for (size_t n = begin; n < end; ++n) {
      const float* image = io.in + n * image_floats;
      for (int oh = 0; oh < rows_.out; ++oh) {
        const Range rows = row_range(oh);
        for (int ow = 0; ow < cols_.out; ++ow, out += c, argmax += c) {
          const Range cols = col_range(ow);
          // Start from the window's first input; a later input wins only if strictly larger, so
          // ties keep the first maximum. All channels advance together over contiguous runs.
          const int first = (rows.lo * w + cols.lo) * c;
          for (int ch = 0; ch < c; ++ch) {
            out[ch] = image[first + ch];
            argmax[ch] = static_cast<float>(first + ch);
          }
          // Arithmetic rather than a branch, so the channels vectorise: `larger` is 0 or 1, and
          // indices below 2^24 make at + larger·(index - at) exact.
          float* __restrict best = out;
          float* __restrict where = argmax;
          for (int ih = rows.lo; ih < rows.hi; ++ih) {
            for (int iw = cols.lo; iw < cols.hi; ++iw) {
              const int base = (ih * w + iw) * c;
              const float* __restrict pixel = image + base;
              for (int ch = 0; ch < c; ++ch) {
                const float v = pixel[ch], so_far = best[ch], at = where[ch];
                const float larger = static_cast<float>(v > so_far);
                best[ch] = v > so_far ? v : so_far;
                where[ch] = at + larger * (static_cast<float>(base + ch) - at);
              }
            }
          }
        }
      }
    }
  });
}

void MaxPool2D::backward(const ParamSet&, GradSet&, const LayerIo& io, const float* dout,
                         float* din) const {
  // Forward copied in[argmax] to out, so each dout flows back to that one input. Windows overlap
  // when window > stride, hence accumulate.
  if (din == nullptr) return;
  const size_t image_floats =
      static_cast<size_t>(options_.height) * options_.width * options_.channels;
  const size_t outputs_per_image = static_cast<size_t>(rows_.out) * cols_.out * options_.channels;
  parallel_ranges(io.batch, 1, [&](int, size_t begin, size_t end) {
    std::fill_n(din + begin * image_floats, (end - begin) * image_floats, 0.0f);
    for (size_t n = begin; n < end; ++n) {
      float* image = din + n * image_floats;
      const float* argmax = io.scratch + n * outputs_per_image;
      const float* grad = dout + n * outputs_per_image;
      for (size_t i = 0; i < outputs_per_image; ++i) {
        image[static_cast<size_t>(argmax[i])] += grad[i];
      }
    }
  });
}

std::string AveragePool2D::describe() const { return "average_pool2d " + geometry(); }

void AveragePool2D::forward(const ParamSet&, const LayerIo& io) const {
  const int h = options_.height, w = options_.width, c = options_.channels;
  const size_t image_floats = static_cast<size_t>(h) * w * c;
  const size_t outputs_per_image = static_cast<size_t>(rows_.out) * cols_.out * c;
  parallel_ranges(io.batch, 1, [&](int, size_t begin, size_t end) {
    float* out = io.out + begin * outputs_per_image;
    for (size_t n = begin; n < end; ++n) {
      const float* image = io.in + n * image_floats;
      for (int oh = 0; oh < rows_.out; ++oh) {
        const Range rows = row_range(oh);
        for (int ow = 0; ow < cols_.out; ++ow, out += c) {
          const Range cols = col_range(ow);
          std::fill_n(out, c, 0.0f);
          for (int ih = rows.lo; ih < rows.hi; ++ih) {
            for (int iw = cols.lo; iw < cols.hi; ++iw) {
              const float* pixel = image + static_cast<size_t>(ih * w + iw) * c;
              for (int ch = 0; ch < c; ++ch) out[ch] += pixel[ch];
            }
          }
          const float inv_count =
              1.0f / static_cast<float>((rows.hi - rows.lo) * (cols.hi - cols.lo));
          for (int ch = 0; ch < c; ++ch) out[ch] *= inv_count;
        }
      }
    }
  });
}

void AveragePool2D::backward(const ParamSet&, GradSet&, const LayerIo& io, const float* dout,
                             float* din) const {
  // Forward was out = Σ_window in / count, so each input of a window receives dout / count.
  if (din == nullptr) return;
  const int h = options_.height, w = options_.width, c = options_.channels;
  const size_t image_floats = static_cast<size_t>(h) * w * c;
  const size_t outputs_per_image = static_cast<size_t>(rows_.out) * cols_.out * c;
  parallel_ranges(io.batch, 1, [&](int, size_t begin, size_t end) {
    std::fill_n(din + begin * image_floats, (end - begin) * image_floats, 0.0f);
    const float* grad = dout + begin * outputs_per_image;
    for (size_t n = begin; n < end; ++n) {
      float* image = din + n * image_floats;
      for (int oh = 0; oh < rows_.out; ++oh) {
        const Range rows = row_range(oh);
        for (int ow = 0; ow < cols_.out; ++ow, grad += c) {
          const Range cols = col_range(ow);
          const float inv_count =
              1.0f / static_cast<float>((rows.hi - rows.lo) * (cols.hi - cols.lo));
          for (int ih = rows.lo; ih < rows.hi; ++ih) {
            for (int iw = cols.lo; iw < cols.hi; ++iw) {
              float* pixel = image + static_cast<size_t>(ih * w + iw) * c;
              for (int ch = 0; ch < c; ++ch) pixel[ch] += grad[ch] * inv_count;
            }
          }
        }
      }
    }
  });
}

}  // namespace dtrain
