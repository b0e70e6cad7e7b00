#include "nn/conv_onednn.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "tensor/thread_team.h"

namespace dtrain {
namespace {

using conv_detail::ThreadBuffer;
using dnnl::memory;
using Tag = dnnl::memory::format_tag;

// Measured on lenet's shapes with one thread and 50 images (forward + both backward passes): with
// 32 input channels oneDNN takes 15 ms against im2col's 26; with 16, 24 against 41; with 8 they tie
// (19 ms); with 4, 3 or 1, oneDNN's forward kernel is 2 to 16 times slower than im2col (with 1 it
// takes 19 ms for 63 MFLOP). Below 8 channels the layer therefore keeps im2col.
constexpr int kMinInputChannels = 8;

// Below 32 input channels oneDNN's backward passes lose to im2col's even where its forward wins.
// Measured training a whole model, two threads, batch 100, rounds interleaved: the Keras example
// CNN, whose second convolution takes 16 channels to 32 (VALID, 14x14 to 10x10), ran an epoch in
// 3.74 and 3.49 s with im2col's backward against 4.64 and 4.37 s with oneDNN's (its weight
// gradient, jit:avx512_core, five times its forward); with that convolution SAME, 6.15 and 6.36 s
// against 6.58 and 6.59. With 32 input channels oneDNN's backward wins: the same CNN with a first
// convolution of 32 filters 6.90 and 7.43 s with im2col's backward against 6.68 and 7.11, and lenet
// (its conv2 takes 32 channels to 64) 2884 and 2942 examples/sec against 3398 and 3416.
constexpr int kMinBackwardInputChannels = 32;

// The number of images the shape is probed with: about what one thread convolves at lenet's batch.
constexpr int kProbeImages = 50;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// oneDNN asks OpenMP how many threads it may use; this thread's answer is 1, as it is one part of
// the team's split. The setting belongs to the calling thread only.
dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream = [] {
    omp_set_num_threads(1);
    return dnnl::stream(cpu_engine());
  }();
  return stream;
}

memory::dims dims(std::initializer_list<int> values) {
  return memory::dims(values.begin(), values.end());
}

// A oneDNN view of floats dtrain owns. oneDNN's memory takes a non-const handle even for inputs,
// which it only reads.
memory view(const memory::desc& desc, const float* data) {
  return memory(desc, cpu_engine(), const_cast<float*>(data));
}

// This thread's buffer `which`, grown to hold `desc`, as oneDNN memory.
memory thread_memory(ThreadBuffer which, const memory::desc& desc) {
  return memory(desc, cpu_engine(),
                conv_detail::thread_buffer(which, desc.get_size() / sizeof(float) + 1));
}

bool is_vectorised(const char* implementation) {
  const std::string name(implementation);
  return name.find("ref") == std::string::npos && name.find("gemm") == std::string::npos;
}

}  // namespace

struct OneDnnConv::Primitives {
  // bf16 precision: the passes read bf16 images, weights and output gradients (src_in, dst_in,
  // converted per call) and write fp32.
  bool bf16 = false;
  memory::desc src, dst, bias, user_weights;
  memory::desc src_in, dst_in;
  dnnl::reorder to_src_in, to_dst_in;
  memory::desc forward_weights, backward_weights, weight_gradient;
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data backward_data;
  dnnl::convolution_backward_weights backward_weights_pass;
  dnnl::reorder to_forward_weights, to_backward_weights, from_weight_gradient;
  memory::desc forward_scratchpad, backward_data_scratchpad, backward_weights_scratchpad;
  std::string implementation;  // every pass's kernel: "brgconv:avx512_core / jit:avx512_core"
  std::string forward_implementation;
  bool vectorised = false;

  Primitives(const ConvShape& s, int images, Precision precision)
      : bf16(precision == Precision::kBf16) {
    const memory::dims strides = dims({s.stride_height, s.stride_width});
    const memory::dims pad_before = dims({s.pad_top, s.pad_left});
    const memory::dims pad_after = dims({s.pad_bottom(), s.pad_right()});
    src = memory::desc(dims({images, s.in_channels, s.height, s.width}), memory::data_type::f32,
                       Tag::nhwc);
    dst = memory::desc(dims({images, s.out_channels, s.out_height, s.out_width}),
                       memory::data_type::f32, Tag::nhwc);
    const memory::data_type inputs = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    src_in = memory::desc(src.dims(), inputs, Tag::nhwc);
    dst_in = memory::desc(dst.dims(), inputs, Tag::nhwc);
    const memory::dims weight_dims =
        dims({s.out_channels, s.in_channels, s.kernel_height, s.kernel_width});
    user_weights = memory::desc(weight_dims, memory::data_type::f32, Tag::hwio);
    const memory::desc any_weights(weight_dims, inputs, Tag::any);
    const memory::desc any_weight_gradient(weight_dims, memory::data_type::f32, Tag::any);
    if (s.bias) bias = memory::desc(dims({s.out_channels}), memory::data_type::f32, Tag::x);

    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // one per thread, see backward()
    dnnl::engine& engine = cpu_engine();
    const auto algorithm = dnnl::algorithm::convolution_direct;
    const dnnl::convolution_forward::primitive_desc forward_pd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm, src_in,
                                        any_weights, bias, dst, strides, pad_before, pad_after),
        attr, engine);
    const dnnl::convolution_backward_data::primitive_desc backward_data_pd(
        dnnl::convolution_backward_data::desc(algorithm, src, any_weights, dst_in, strides,
                                              pad_before, pad_after),
        attr, engine, forward_pd);
    const dnnl::convolution_backward_weights::primitive_desc backward_weights_pd(
        dnnl::convolution_backward_weights::desc(algorithm, src_in, any_weight_gradient, bias,
                                                 dst_in, strides, pad_before, pad_after),
        attr, engine, forward_pd);
    forward_weights = forward_pd.weights_desc();
    backward_weights = backward_data_pd.weights_desc();
    weight_gradient = backward_weights_pd.diff_weights_desc();
    forward = dnnl::convolution_forward(forward_pd);
    backward_data = dnnl::convolution_backward_data(backward_data_pd);
    backward_weights_pass = dnnl::convolution_backward_weights(backward_weights_pd);
    to_forward_weights =
        dnnl::reorder(dnnl::reorder::primitive_desc(engine, user_weights, engine, forward_weights));
    to_backward_weights = dnnl::reorder(
        dnnl::reorder::primitive_desc(engine, user_weights, engine, backward_weights));
    from_weight_gradient =
        dnnl::reorder(dnnl::reorder::primitive_desc(engine, weight_gradient, engine, user_weights));
    if (bf16) {
      to_src_in = dnnl::reorder(dnnl::reorder::primitive_desc(engine, src, engine, src_in));
      to_dst_in = dnnl::reorder(dnnl::reorder::primitive_desc(engine, dst, engine, dst_in));
    }
    forward_scratchpad = forward_pd.scratchpad_desc();
    backward_data_scratchpad = backward_data_pd.scratchpad_desc();
    backward_weights_scratchpad = backward_weights_pd.scratchpad_desc();
    forward_implementation = forward_pd.impl_info_str();
    implementation = forward_implementation;
    for (const char* pass :
         {backward_data_pd.impl_info_str(), backward_weights_pd.impl_info_str()}) {
      if (implementation.find(pass) == std::string::npos)
        implementation += std::string(" / ") + pass;
    }
    vectorised = is_vectorised(forward_pd.impl_info_str()) &&
                 is_vectorised(backward_data_pd.impl_info_str()) &&
                 is_vectorised(backward_weights_pd.impl_info_str());
  }

  // The images and the output's gradient as the passes read them: the floats themselves, or under
  // bf16 their conversion (to nearest, ties to even) in this thread's buffers.
  memory source_input(memory floats) const {
    return converted(floats, src_in, to_src_in, ThreadBuffer::kSourceBf16);
  }
  memory gradient_input(memory floats) const {
    return converted(floats, dst_in, to_dst_in, ThreadBuffer::kGradientBf16);
  }

 private:
  memory converted(memory& floats, const memory::desc& to, const dnnl::reorder& conversion,
                   ThreadBuffer which) const {
    if (!bf16) return floats;
    memory bf16_copy = thread_memory(which, to);
    conversion.execute(thread_stream(), floats, bf16_copy);
    return bf16_copy;
  }
};

std::unique_ptr<OneDnnConv> OneDnnConv::create(const ConvShape& shape, bool forced,
                                               std::string* why_not) {
  if (!forced && shape.in_channels < kMinInputChannels) {
    *why_not = fmt::format("{} input channel(s): below {}, im2col is faster (measured)",
                           shape.in_channels, kMinInputChannels);
    return nullptr;
  }
  std::unique_ptr<OneDnnConv> conv(new OneDnnConv(shape));
  try {
    const Primitives& probe = conv->primitives(kProbeImages, Precision::kFp32);
    conv->implementation_ = probe.implementation;
    conv->forward_implementation_ = probe.forward_implementation;
    if (!forced && !probe.vectorised) {
      *why_not =
          "oneDNN has only reference or GEMM kernels for this shape (" + probe.implementation + ")";
      return nullptr;
    }
  } catch (const dnnl::error& e) {
    *why_not = fmt::format("oneDNN cannot run this shape: {}", e.what());
    return nullptr;
  }
  return conv;
}

bool OneDnnConv::backward_beats_im2col(const ConvShape& shape) {
  return shape.in_channels >= kMinBackwardInputChannels;
}

OneDnnConv::OneDnnConv(const ConvShape& shape) : s_(shape) {}

OneDnnConv::~OneDnnConv() = default;

const OneDnnConv::Primitives& OneDnnConv::primitives(int images, Precision precision) const {
  std::lock_guard lock(mutex_);
  std::unique_ptr<Primitives>& slot = by_images_[{images, precision}];
  if (slot == nullptr) slot = std::make_unique<Primitives>(s_, images, precision);
  return *slot;
}

// Each part's images go through the primitives made for their number; they are made before the
// team starts, on the calling thread, so the parts only look them up.
std::vector<const OneDnnConv::Primitives*> OneDnnConv::primitives_per_part(
    int batch, Precision precision) const {
  const int parts = parallel_parts();
  std::vector<const Primitives*> made(static_cast<size_t>(parts), nullptr);
  for (int part = 0; part < parts; ++part) {
    const auto [begin, end] = conv_detail::image_range(batch, parts, part);
    if (begin < end) made[part] = &primitives(end - begin, precision);
  }
  return made;
}

void OneDnnConv::forward(const float* w, const float* bias, const float* in, int batch,
                         float* out) const {
  const std::vector<const Primitives*> made = primitives_per_part(batch, thread_precision());
  const int parts = static_cast<int>(made.size());
  parallel_ranges(made.size(), 1, [&](int part, size_t, size_t) {
    const Primitives* p = made[part];
    if (p == nullptr) return;
    const int begin = conv_detail::image_range(batch, parts, part).begin;
    dnnl::stream& stream = thread_stream();
    memory user_weights = view(p->user_weights, w);
    memory weights = thread_memory(ThreadBuffer::kWeights, p->forward_weights);
    p->to_forward_weights.execute(stream, user_weights, weights);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, p->source_input(view(p->src, in + begin * s_.image_floats()))},
        {DNNL_ARG_WEIGHTS, weights},
        {DNNL_ARG_DST, view(p->dst, out + begin * s_.out_image_floats())},
        {DNNL_ARG_SCRATCHPAD, thread_memory(ThreadBuffer::kScratchpad, p->forward_scratchpad)}};
    if (s_.bias) args.emplace(DNNL_ARG_BIAS, view(p->bias, bias));
    p->forward.execute(stream, args);
    stream.wait();
  });
}

void OneDnnConv::backward(const float* w, const float* in, const float* dout, int batch, float beta,
                          float* dw, float* db, float* din) const {
  const std::vector<const Primitives*> made = primitives_per_part(batch, thread_precision());
  const int parts = static_cast<int>(made.size());
  std::vector<const float*> dw_parts, db_parts;
  std::vector<const float*> dw_of(made.size(), nullptr), db_of(made.size(), nullptr);
  parallel_ranges(made.size(), 1, [&](int part, size_t, size_t) {
    const Primitives* p = made[part];
    if (p == nullptr) return;
    const int begin = conv_detail::image_range(batch, parts, part).begin;
    dnnl::stream& stream = thread_stream();
    const memory diff_dst = p->gradient_input(view(p->dst, dout + begin * s_.out_image_floats()));
    if (din != nullptr) {
      memory user_weights = view(p->user_weights, w);
      memory weights = thread_memory(ThreadBuffer::kWeights, p->backward_weights);
      p->to_backward_weights.execute(stream, user_weights, weights);
      p->backward_data.execute(
          stream, {{DNNL_ARG_DIFF_DST, diff_dst},
                   {DNNL_ARG_WEIGHTS, weights},
                   {DNNL_ARG_DIFF_SRC, view(p->src, din + begin * s_.image_floats())},
                   {DNNL_ARG_SCRATCHPAD,
                    thread_memory(ThreadBuffer::kScratchpad, p->backward_data_scratchpad)}});
    }
    // The gradient in oneDNN's layout lands in kColumns (unused by this implementation), then in
    // dtrain's layout in kWeightGradient, where the sum over parts reads it.
    memory gradient = thread_memory(ThreadBuffer::kColumns, p->weight_gradient);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, p->source_input(view(p->src, in + begin * s_.image_floats()))},
        {DNNL_ARG_DIFF_DST, diff_dst},
        {DNNL_ARG_DIFF_WEIGHTS, gradient},
        {DNNL_ARG_SCRATCHPAD,
         thread_memory(ThreadBuffer::kScratchpad, p->backward_weights_scratchpad)}};
    if (s_.bias) {
      float* db_part = conv_detail::thread_buffer(ThreadBuffer::kBiasGradient, s_.out_channels);
      args.emplace(DNNL_ARG_DIFF_BIAS, view(p->bias, db_part));
      db_of[part] = db_part;
    }
    p->backward_weights_pass.execute(stream, args);
    memory plain = thread_memory(ThreadBuffer::kWeightGradient, p->user_weights);
    p->from_weight_gradient.execute(stream, gradient, plain);
    stream.wait();
    dw_of[part] = static_cast<const float*>(plain.get_data_handle());
  });
  for (size_t part = 0; part < made.size(); ++part) {
    if (dw_of[part] != nullptr) dw_parts.push_back(dw_of[part]);
    if (db_of[part] != nullptr) db_parts.push_back(db_of[part]);
  }
  conv_detail::sum_partials(dw_parts, s_.weight_floats(), beta, dw);
  if (db != nullptr) conv_detail::sum_partials(db_parts, s_.out_channels, 0.0f, db);
}

}  // namespace dtrain
