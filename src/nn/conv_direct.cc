// DirectConv: the threads' split of the batch, the padding, and which instruction set runs.
#include "nn/conv_direct.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "tensor/thread_team.h"

namespace dtrain {

using conv_detail::ThreadBuffer;

std::span<const DirectConvIsa* const> direct_conv_isas_here() {
  static const std::vector<const DirectConvIsa*> isas = [] {
    std::vector<const DirectConvIsa*> here;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) here.push_back(&direct_conv_avx512());
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      here.push_back(&direct_conv_avx2());
    }
    here.push_back(&direct_conv_baseline());
    return here;
  }();
  return isas;
}

bool DirectConv::supports(const ConvShape& shape, std::string* why_not) {
  if (shape.out_channels % 16 == 0) return true;
  *why_not = fmt::format("{} output channels: the direct kernels take multiples of 16",
                         shape.out_channels);
  return false;
}

DirectConv::DirectConv(const ConvShape& shape, const DirectConvIsa& isa)
    : s_(shape),
      isa_(isa),
      im2col_(shape),
      padded_height_((shape.out_height - 1) * shape.stride_height + shape.kernel_height),
      padded_width_((isa.covered_columns(shape.out_width) - 1) * shape.stride_width +
                    shape.kernel_width) {}

size_t DirectConv::padded_floats() const {
  return static_cast<size_t>(padded_height_) * padded_width_ * s_.in_channels + kDirectConvSlack;
}

// VALID padding with strides may leave the image's last rows or columns unread: those are not
// copied.
void DirectConv::pad(const float* image, float* padded) const {
  std::fill_n(padded, padded_floats(), 0.0f);
  const int c = s_.in_channels;
  const int rows = std::min(s_.height, padded_height_ - s_.pad_top);
  const int cols = std::min(s_.width, padded_width_ - s_.pad_left);
  for (int ih = 0; ih < rows; ++ih) {
    std::copy_n(image + static_cast<size_t>(ih) * s_.width * c, static_cast<size_t>(cols) * c,
                padded + (static_cast<size_t>(ih + s_.pad_top) * padded_width_ + s_.pad_left) * c);
  }
}

void DirectConv::forward(const float* w, const float* bias, const float* in, int batch,
                         float* out) const {
  const int parts = parallel_parts();
  parallel_ranges(static_cast<size_t>(parts), 1, [&](int part, size_t, size_t) {
    const auto [begin, end] = conv_detail::image_range(batch, parts, part);
    float* padded = conv_detail::thread_buffer(ThreadBuffer::kColumns, padded_floats());
    DirectConvImage image{.shape = &s_,
                          .padded_height = padded_height_,
                          .padded_width = padded_width_,
                          .padded = padded,
                          .w = w,
                          .bias = bias};
    for (int n = begin; n < end; ++n) {
      pad(in + n * s_.image_floats(), padded);
      image.out = out + n * s_.out_image_floats();
      isa_.forward(image);
    }
  });
}

void DirectConv::backward(const float* w, const float* in, const float* dout, int batch, float beta,
                          float* dw, float* db, float* din) const {
  const int parts = parallel_parts();
  std::vector<const float*> dw_parts(static_cast<size_t>(parts));
  std::vector<const float*> db_parts(static_cast<size_t>(parts));
  parallel_ranges(static_cast<size_t>(parts), 1, [&](int part, size_t, size_t) {
    const auto [begin, end] = conv_detail::image_range(batch, parts, part);
    float* padded = conv_detail::thread_buffer(ThreadBuffer::kColumns, padded_floats());
    float* dw_part = conv_detail::thread_buffer(ThreadBuffer::kWeightGradient, s_.weight_floats());
    float* db_part = conv_detail::thread_buffer(ThreadBuffer::kBiasGradient, s_.out_channels);
    std::fill_n(dw_part, s_.weight_floats(), 0.0f);
    std::fill_n(db_part, s_.out_channels, 0.0f);
    DirectConvImage image{.shape = &s_,
                          .padded_height = padded_height_,
                          .padded_width = padded_width_,
                          .padded = padded,
                          .w = w,
                          .dw = dw_part,
                          .db = db != nullptr ? db_part : nullptr};
    for (int n = begin; n < end; ++n) {
      pad(in + n * s_.image_floats(), padded);
      image.dout = dout + n * s_.out_image_floats();
      isa_.weight_gradient(image);
    }
    dw_parts[part] = dw_part;
    db_parts[part] = db_part;
  });
  conv_detail::sum_partials(dw_parts, s_.weight_floats(), beta, dw);
  if (db != nullptr) conv_detail::sum_partials(db_parts, s_.out_channels, 0.0f, db);
  if (din != nullptr) im2col_.input_gradient(w, dout, batch, din);
}

}  // namespace dtrain
