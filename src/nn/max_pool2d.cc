// MaxPool2D forward/backward. N = batch, H×W×C = input image, OH×OW×C = output image, S = stride,
// F = window. Output (oh, ow) pools input rows [oh·S - pad_top, +F) and columns [ow·S - pad_left,
// +F), clipped to the image.
#include "nn/max_pool2d.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"

namespace dtrain {
namespace {

// Every integer up to 2^24 is exact in a float, so an index below it survives the round trip.
constexpr int64_t kMaxFloatIndex = int64_t{1} << 24;

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// TensorFlow's SAME padding along one dimension: the padding before the first window.
int same_pad_before(int in, int out, int window, int stride) {
  const int total = std::max((out - 1) * stride + window - in, 0);
  return total / 2;
}

// The clipped input range [lo, hi) of window `o`. Never empty: SAME padding is < window on each
// side.
struct Range {
  int lo;
  int hi;
};
Range window_range(int o, int stride, int pad, int window, int in) {
  const int start = o * stride - pad;
  return {std::max(start, 0), std::min(start + window, in)};
}

}  // namespace

MaxPool2D::MaxPool2D(MaxPool2DOptions options) : options_(options) {
  const MaxPool2DOptions& o = options_;
  if (o.height <= 0 || o.width <= 0 || o.channels <= 0 || o.window <= 0 || o.stride <= 0) {
    throw Error(
        fmt::format("max_pool2d: sizes must be positive (height {}, width {}, channels {}, "
                    "window {}, stride {})",
                    o.height, o.width, o.channels, o.window, o.stride));
  }
  if (int64_t{o.height} * o.width * o.channels > kMaxFloatIndex) {
    throw Error(fmt::format("max_pool2d: image {}x{}x{} has more than 2^24 values", o.height,
                            o.width, o.channels));
  }
  out_height_ = ceil_div(o.height, o.stride);
  out_width_ = ceil_div(o.width, o.stride);
  pad_top_ = same_pad_before(o.height, out_height_, o.window, o.stride);
  pad_left_ = same_pad_before(o.width, out_width_, o.window, o.stride);
}

std::string MaxPool2D::describe() const {
  const MaxPool2DOptions& o = options_;
  return fmt::format("max_pool2d {}x{}x{}->{}x{}x{} window {} stride {} same", o.height, o.width,
                     o.channels, out_height_, out_width_, o.channels, o.window, o.stride);
}

Shape MaxPool2D::input_shape() const {
  return {options_.height, options_.width, options_.channels};
}

Shape MaxPool2D::output_shape() const { return {out_height_, out_width_, options_.channels}; }

size_t MaxPool2D::scratch_floats(int batch) const {
  return static_cast<size_t>(batch) * out_height_ * out_width_ * options_.channels;
}

void MaxPool2D::forward(const ParamSet&, const LayerIo& io) const {
  const int h = options_.height, w = options_.width, c = options_.channels;
  const size_t image_floats = static_cast<size_t>(h) * w * c;
  float* out = io.out;
  float* argmax = io.scratch;
  for (int n = 0; n < io.batch; ++n) {
    const float* image = io.in + n * image_floats;
    for (int oh = 0; oh < out_height_; ++oh) {
      const Range rows = window_range(oh, options_.stride, pad_top_, options_.window, h);
      for (int ow = 0; ow < out_width_; ++ow, out += c, argmax += c) {
        const Range cols = window_range(ow, options_.stride, pad_left_, options_.window, w);
        // Start from the window's first input; a later input wins only if strictly larger, so
        // ties keep the first maximum. All channels advance together over contiguous runs.
        const int first = (rows.lo * w + cols.lo) * c;
        for (int ch = 0; ch < c; ++ch) {
          out[ch] = image[first + ch];
          argmax[ch] = static_cast<float>(first + ch);
        }
        for (int ih = rows.lo; ih < rows.hi; ++ih) {
          for (int iw = cols.lo; iw < cols.hi; ++iw) {
            const int base = (ih * w + iw) * c;
            for (int ch = 0; ch < c; ++ch) {
              const float v = image[base + ch];
              if (v > out[ch]) {
                out[ch] = v;
                argmax[ch] = static_cast<float>(base + ch);
              }
            }
          }
        }
      }
    }
  }
}

void MaxPool2D::backward(const ParamSet&, GradSet&, const LayerIo& io, const float* dout,
                         float* din) const {
  // Forward copied in[argmax] to out, so each dout flows back to that one input. Windows overlap
  // when window > stride, hence accumulate.
  if (din == nullptr) return;
  const size_t image_floats =
      static_cast<size_t>(options_.height) * options_.width * options_.channels;
  const size_t outputs_per_image =
      static_cast<size_t>(out_height_) * out_width_ * options_.channels;
  std::fill_n(din, io.batch * image_floats, 0.0f);
  for (int n = 0; n < io.batch; ++n) {
    float* image = din + n * image_floats;
    const float* argmax = io.scratch + n * outputs_per_image;
    const float* grad = dout + n * outputs_per_image;
    for (size_t i = 0; i < outputs_per_image; ++i) image[static_cast<size_t>(argmax[i])] += grad[i];
  }
}

}  // namespace dtrain
