#include "tensor/bf16_gemm.h"

#include <omp.h>

#include <bit>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "tensor/aligned.h"
#include "tensor/blas.h"

namespace dtrain {
namespace {

using dnnl::memory;
using Type = dnnl::memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One product's shape, layout and scales: the primitives made for it serve every call that has it.
struct Shape {
  bool trans_a, trans_b;
  int m, n, k, lda, ldb, ldc;
  // C = alpha·product + beta·C, as oneDNN's output scale and sum post-op: in the primitive, so
  // that each value is one shape (a folded SGD step's -lr and decay change once an epoch).
  float alpha, beta;
  bool operator==(const Shape&) const = default;
  Shape unscaled() const {
    Shape s = *this;
    s.alpha = 1.0f;
    s.beta = 0.0f;
    return s;
  }
};

struct ShapeHash {
  size_t operator()(const Shape& s) const {
    size_t h = static_cast<size_t>(s.trans_a) | static_cast<size_t>(s.trans_b) << 1;
    for (int v : {s.m, s.n, s.k, s.lda, s.ldb, s.ldc}) h = h * 1000003u ^ static_cast<size_t>(v);
    for (float v : {s.alpha, s.beta}) h = h * 1000003u ^ std::bit_cast<uint32_t>(v);
    return h;
  }
};

// The logical (rows x cols) operand op(X) of a matrix stored `ld` apart, transposed or not.
memory::desc stored(int rows, int cols, bool transposed, int ld, Type type) {
  return memory::desc({rows, cols}, type, transposed ? memory::dims{1, ld} : memory::dims{ld, 1});
}

dnnl::reorder conversion(const memory::desc& from, const memory::desc& to) {
  return dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to));
}

// A's and B's floats become dense bf16 in the order they are stored: a plain conversion, at 5
// G floats/s. Converting B straight into the blocked layout oneDNN's kernel reads, or transposing
// it, runs at 1 G/s, much slower than the kernel's own copy of a plain B (measured at
// mnist_inference's shapes).
struct Plan {
  memory::desc a_floats, a_bf16, b_floats, b_bf16, c;
  dnnl::reorder to_a, to_b;
  dnnl::matmul product;
  memory::desc scratchpad;

  explicit Plan(const Shape& s)
      : a_floats(stored(s.m, s.k, s.trans_a, s.lda, Type::f32)),
        a_bf16(stored(s.m, s.k, s.trans_a, s.trans_a ? s.m : s.k, Type::bf16)),
        b_floats(stored(s.k, s.n, s.trans_b, s.ldb, Type::f32)),
        b_bf16(stored(s.k, s.n, s.trans_b, s.trans_b ? s.k : s.n, Type::bf16)),
        c({s.m, s.n}, Type::f32, memory::dims{s.ldc, 1}) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (s.alpha != 1.0f) attr.set_output_scales(0, {s.alpha});
    if (s.beta != 0.0f) {
      dnnl::post_ops sum;
      sum.append_sum(s.beta);
      attr.set_post_ops(sum);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_bf16, b_bf16, c), attr,
                                          cpu_engine());
    to_a = conversion(a_floats, a_bf16);
    to_b = conversion(b_floats, b_bf16);
    product = dnnl::matmul(pd);
    scratchpad = pd.scratchpad_desc();
  }
};

// This thread's primitives, stream and buffers. A run has a few dozen shapes; a program that makes
// more (every batch size of an evaluation's tail, say) starts over rather than grow without bound.
struct ThreadState {
  dnnl::stream stream{cpu_engine()};
  std::unordered_map<Shape, std::unique_ptr<Plan>, ShapeHash> plans;
  // Scales seen per unscaled shape: past a few (a learning rate new every step), making a
  // primitive per value costs more than adding the product to C here.
  std::unordered_map<Shape, int, ShapeHash> scales_seen;
  // Cache-line aligned: oneDNN's AMX kernel ran the 4096x784x100 TN product at a quarter of its
  // speed on operands and outputs 16 bytes off a line, as std::vector's are.
  std::vector<uint16_t, AlignedAllocator<uint16_t>> a, b;
  FloatBuffer product;
  std::vector<unsigned char, AlignedAllocator<unsigned char>> scratchpad;

  Plan& plan(const Shape& s) {
    if (plans.size() > 256) {
      plans.clear();
      scales_seen.clear();
    }
    std::unique_ptr<Plan>& slot = plans[s];
    if (slot == nullptr) slot = std::make_unique<Plan>(s);
    return *slot;
  }

  // Whether a product of shape `s` with new scales should get a primitive of its own.
  bool scales_in_primitive(const Shape& s) {
    if (plans.contains(s)) return true;
    return ++scales_seen[s.unscaled()] <= kMaxScalesPerShape;
  }
  static constexpr int kMaxScalesPerShape = 8;
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

template <typename T>
T* grown(std::vector<T, AlignedAllocator<T>>& buffer, size_t bytes) {
  const size_t count = bytes / sizeof(T) + 1;
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

memory view(const memory::desc& desc, const void* data) {
  return memory(desc, cpu_engine(), const_cast<void*>(data));
}

void run(ThreadState& t, Plan& p, const float* a, const float* b, float* c) {
  memory a_bf16 = view(p.a_bf16, grown(t.a, p.a_bf16.get_size()));
  memory b_bf16 = view(p.b_bf16, grown(t.b, p.b_bf16.get_size()));
  memory a_floats = view(p.a_floats, a), b_floats = view(p.b_floats, b);
  p.to_a.execute(t.stream, a_floats, a_bf16);
  p.to_b.execute(t.stream, b_floats, b_bf16);
  p.product.execute(t.stream, {{DNNL_ARG_SRC, a_bf16},
                               {DNNL_ARG_WEIGHTS, b_bf16},
                               {DNNL_ARG_DST, view(p.c, c)},
                               {DNNL_ARG_SCRATCHPAD,
                                view(p.scratchpad, grown(t.scratchpad, p.scratchpad.get_size()))}});
  t.stream.wait();
}

}  // namespace

void bf16_gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
               int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  // oneDNN asks OpenMP how many threads it may use: 1, as the caller is one part of a split
  // (see onednn_gemm in blas.cc); put back after.
  const int threads = omp_get_max_threads();
  if (threads != 1) omp_set_num_threads(1);
  ThreadState& t = thread_state();
  const bool ta = trans_a == Trans::kYes, tb = trans_b == Trans::kYes;
  const Shape shape{ta, tb, m, n, k, lda, ldb, ldc, alpha, beta};
  if (ldc == n && t.scales_in_primitive(shape)) {
    run(t, t.plan(shape), a, b, c);
  } else {
    // Rows of C apart (a team's split by columns), or scales new at every call: the product lands
    // in a dense buffer and is added to C here. oneDNN 2.6 takes a strided output, or a scale
    // given at run time, but then leaves AMX for its gemm:jit kernel, 2 to 3 times slower.
    Shape dense = shape.unscaled();
    dense.ldc = n;
    float* product = grown(t.product, sizeof(float) * static_cast<size_t>(m) * n);
    run(t, t.plan(dense), a, b, product);
    for (int r = 0; r < m; ++r) {
      float* __restrict row = c + static_cast<size_t>(r) * ldc;
      const float* __restrict add = product + static_cast<size_t>(r) * n;
      if (beta == 0.0f) {
        for (int col = 0; col < n; ++col) row[col] = alpha * add[col];
      } else {
        for (int col = 0; col < n; ++col) row[col] = beta * row[col] + alpha * add[col];
      }
    }
  }
  if (threads != 1) omp_set_num_threads(threads);
}

bool bf16_gemm_pays(int m, int /*n*/, int k) {
  constexpr int kTileDepth = 32, kTileRows = 16;
  return k >= kTileDepth && m >= kTileRows;
}

std::string bf16_gemm_implementation(int m, int n, int k) {
  const memory::desc a = stored(m, k, false, k, Type::bf16);
  const memory::desc b = stored(k, n, false, n, Type::bf16);
  const memory::desc c({m, n}, Type::f32, memory::dims{n, 1});
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), cpu_engine()).impl_info_str();
}

std::string bf16_unsupported_reason() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  if (isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx) return "";
  __builtin_cpu_init();
  const bool cpu_has = __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
  if (cpu_has) {
    return "oneDNN's kernels are held to " + onednn_isa_name() +
           ", below AVX512-BF16 (ONEDNN_MAX_CPU_ISA)";
  }
  return "this CPU has neither AVX512-BF16 nor AMX-BF16 (oneDNN's kernels: " + onednn_isa_name() +
         ")";
}

}  // namespace dtrain
