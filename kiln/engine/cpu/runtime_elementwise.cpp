// RuntimeElementwise: Add, Sub, Mul, Div and Where of run-time shapes on kiln's own row loops
// (16 floats per vector; AVX-512 and AVX2 clones), and Transpose on its loops
// (transpose_loops.h), planned at each call, for shape-generic plans.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/runtime_elementwise.h>
#include <kiln/engine/cpu/transpose_loops.h>
#include <kiln/engine/cpu/vector_math.h>
#include <kiln/engine/cpu/where_rows.h>
#include <kiln/kernels/broadcast.h>

#include <algorithm>
#include <array>

namespace kiln::engine::cpu {

using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;
using vec::Floats;
using vec::kLanes;

namespace {

enum class Kind { Add, Sub, Mul, Div, Where, Transpose };

constexpr size_t kMaxInputs = 3;

template <Kind K, typename T>
[[gnu::always_inline]] inline T apply(T a, T b) {
  if constexpr (K == Kind::Add) return a + b;
  if constexpr (K == Kind::Sub) return a - b;
  if constexpr (K == Kind::Mul) return a * b;
  return a / b;
}

// One row of `count` outputs; each input read contiguously (true) or as one value (false).
template <Kind K, bool kA, bool kB>
[[gnu::always_inline]] inline void binary_row(const float* a, const float* b, float* to,
                                              int64_t count) {
  int64_t i = 0;
  const Floats a0 = vec::splat(a[0]), b0 = vec::splat(b[0]);
  for (; i + kLanes <= count; i += kLanes) {
    vec::store(to + i, apply<K>(kA ? vec::load(a + i) : a0, kB ? vec::load(b + i) : b0));
  }
  for (; i < count; ++i) to[i] = apply<K>(a[kA ? i : 0], b[kB ? i : 0]);
}

template <Kind K>
[[gnu::always_inline]] inline void binary_rows_of(int contiguous, const float* a, const float* b,
                                                  float* to, int64_t count) {
  switch (contiguous) {
    case 0:
      return binary_row<K, false, false>(a, b, to, count);
    case 1:
      return binary_row<K, true, false>(a, b, to, count);
    case 2:
      return binary_row<K, false, true>(a, b, to, count);
    default:
      return binary_row<K, true, true>(a, b, to, count);
  }
}

// `contiguous`: bit 0 A's, bit 1 B's row is contiguous.
KILN_VECTOR_CLONES void binary_rows(Kind kind, int contiguous, const float* a, const float* b,
                                    float* to, int64_t count) {
  switch (kind) {
    case Kind::Add:
      return binary_rows_of<Kind::Add>(contiguous, a, b, to, count);
    case Kind::Sub:
      return binary_rows_of<Kind::Sub>(contiguous, a, b, to, count);
    case Kind::Mul:
      return binary_rows_of<Kind::Mul>(contiguous, a, b, to, count);
    default:
      return binary_rows_of<Kind::Div>(contiguous, a, b, to, count);
  }
}

std::string shape_of(const Tensor& t) {
  return runtime::shape_to_string(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()));
}

}  // namespace

struct RuntimeElementwise::Impl {
  Kind kind = Kind::Add;
  std::string op;
  size_t arity = 2;
  bool avx512 = false;
  // This call's walk, kept from call to call so that a call of a rank seen before allocates
  // nothing: the broadcast sizes, and the merged dims with each input's strides along them.
  std::vector<int64_t> shape;
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, kMaxInputs> strides;
  std::vector<int64_t> index;
  int64_t numel = 0;
  // Transpose: its perm and threads, and this call's plan.
  std::vector<int64_t> perm;
  int threads = 1;
  dnnl_impl::TransposeLoops transpose;

  std::string context() const { return "run op '" + op + "' (kiln, run-time shapes)"; }

  // `shape` = the broadcast of every input's sizes. Errors: as kernels::broadcast_shape.
  Status broadcast(Span<const Tensor* const> inputs) {
    size_t rank = 0;
    for (const Tensor* t : inputs) rank = std::max(rank, t->sizes().size());
    shape.assign(rank, 1);
    for (size_t i = 0; i < inputs.size(); ++i) {
      Span<const int64_t> in = inputs[i]->sizes();
      for (size_t k = 0; k < in.size(); ++k) {
        int64_t& to = shape[rank - in.size() + k];
        const int64_t from = in[k];
        if (from == to || from == 1) continue;
        if (to != 1) {
          // Not broadcastable: the reference kernels' message, for the first pair that fails.
          std::vector<int64_t> so_far = {inputs[0]->sizes().begin(), inputs[0]->sizes().end()};
          for (size_t j = 1; j <= i; ++j) {
            auto next = kernels::broadcast_shape(so_far, inputs[j]->sizes());
            if (!next.ok()) return next.status().with_context(context());
            so_far = std::move(*next);
          }
          return Status(Error::InvalidArgument, context() + ": inputs do not broadcast");
        }
        to = from;
      }
    }
    return Status();
  }

  // The merged walk over `shape` (as kernels::make_broadcast_loop, into kept vectors).
  void plan_walk(Span<const Tensor* const> inputs) {
    numel = 1;
    for (int64_t s : shape) numel *= s;
    sizes.clear();
    for (size_t i = 0; i < arity; ++i) strides[i].clear();
    const size_t rank = shape.size();
    std::array<int64_t, kMaxInputs> natural{};  // each input's element stride at dim d
    natural.fill(1);
    // Innermost first, then reversed: each input's natural stride grows as its dims go by.
    for (size_t d = rank; d-- > 0;) {
      const int64_t out = shape[d];
      std::array<int64_t, kMaxInputs> stride{};
      for (size_t i = 0; i < arity; ++i) {
        Span<const int64_t> in = inputs[i]->sizes();
        const size_t missing = rank - in.size();
        const int64_t size = d < missing ? 1 : in[d - missing];
        stride[i] = size == 1 ? 0 : natural[i];
        natural[i] *= size;
      }
      if (out == 1) continue;  // a size-1 dim never moves any offset
      bool merge = !sizes.empty();
      for (size_t i = 0; i < arity && merge; ++i) {
        // The inner (already placed) dim spans into this one for every input.
        merge = stride[i] == strides[i].back() * sizes.back();
      }
      if (merge) {
        sizes.back() *= out;
      } else {
        sizes.push_back(out);
        for (size_t i = 0; i < arity; ++i) strides[i].push_back(stride[i]);
      }
    }
    if (sizes.empty()) {
      sizes.push_back(1);
      for (size_t i = 0; i < arity; ++i) strides[i].push_back(0);
    }
    // Outermost first, as the walk reads them.
    std::reverse(sizes.begin(), sizes.end());
    for (size_t i = 0; i < arity; ++i) std::reverse(strides[i].begin(), strides[i].end());
    index.assign(sizes.size(), 0);
  }

  // Calls fn(out_offset, in_offsets, count) for each innermost row, in row-major order.
  template <typename Fn>
  void walk_rows(Fn&& fn) {
    if (numel == 0) return;
    const size_t rank = sizes.size();
    const int64_t count = sizes.back();
    std::array<int64_t, kMaxInputs> offsets{};
    const int64_t rows = numel / count;
    for (int64_t row = 0, out = 0; row < rows; ++row, out += count) {
      fn(out, offsets, count);
      for (size_t d = rank - 1; d-- > 0;) {
        for (size_t i = 0; i < arity; ++i) offsets[i] += strides[i][d];
        if (++index[d] < sizes[d]) break;
        for (size_t i = 0; i < arity; ++i) offsets[i] -= strides[i][d] * sizes[d];
        index[d] = 0;
      }
    }
  }

  // Bit i set: input i's innermost rows are contiguous (stride 1), else one repeated value.
  int contiguous() const {
    int bits = 0;
    for (size_t i = 0; i < arity; ++i) bits |= strides[i].back() == 1 ? 1 << i : 0;
    return bits;
  }
};

bool RuntimeElementwise::handles(std::string_view op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Where" ||
         op == "Transpose";
}

Result<std::unique_ptr<RuntimeElementwise>> RuntimeElementwise::create(const OpDesc& desc) {
  auto impl = std::make_unique<Impl>();
  impl->op = desc.op;
  if (desc.op == "Add") {
    impl->kind = Kind::Add;
  } else if (desc.op == "Sub") {
    impl->kind = Kind::Sub;
  } else if (desc.op == "Mul") {
    impl->kind = Kind::Mul;
  } else if (desc.op == "Div") {
    impl->kind = Kind::Div;
  } else if (desc.op == "Where") {
    impl->kind = Kind::Where;
  } else if (desc.op == "Transpose") {
    impl->kind = Kind::Transpose;
  } else {
    return dnnl_impl::error(desc, Error::NotSupported, "not an element-wise op of run-time shapes");
  }
  const bool where = impl->kind == Kind::Where;
  const bool transpose = impl->kind == Kind::Transpose;
  impl->arity = where ? 3 : transpose ? 1 : 2;
  const bool present =
      desc.inputs_present.empty() ||
      std::all_of(desc.inputs_present.begin(), desc.inputs_present.end(), [](bool p) { return p; });
  if (desc.inputs.size() != impl->arity || !present || desc.num_outputs != 1 ||
      !desc.post_ops.empty()) {
    return dnnl_impl::error(
        desc, Error::NotSupported,
        "expected " + std::to_string(impl->arity) + " inputs, one output and no post-ops");
  }
  for (size_t i = 0; i < impl->arity; ++i) {
    const ScalarType want = where && i == 0 ? ScalarType::Bool : ScalarType::Float32;
    if (desc.inputs[i].dtype != want) {
      return dnnl_impl::error(
          desc, Error::NotSupported,
          where       ? "not a bool condition selecting f32 values"
          : transpose ? "an input that is not f32"
                      : "inputs that are not both f32");
    }
  }
  if (transpose) {
    KILN_ASSIGN_OR_RETURN(impl->perm, dnnl_impl::Attrs(desc).get_ints("perm"));
    impl->threads = desc.num_threads;
  }
  impl->avx512 = cpu_has_avx512();
  return std::unique_ptr<RuntimeElementwise>(new RuntimeElementwise(std::move(impl)));
}

RuntimeElementwise::RuntimeElementwise(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RuntimeElementwise::~RuntimeElementwise() = default;

Result<Span<const int64_t>> RuntimeElementwise::output_sizes(Span<const Tensor* const> inputs) {
  if (inputs.size() != impl_->arity ||
      std::any_of(inputs.begin(), inputs.end(), [](const Tensor* t) { return t == nullptr; })) {
    return Status(Error::InvalidArgument,
                  impl_->context() + ": expected " + std::to_string(impl_->arity) + " inputs");
  }
  if (impl_->kind == Kind::Transpose) {
    Status planned = impl_->transpose.plan(inputs[0]->sizes(), impl_->perm,
                                           inputs[0]->element_size(), impl_->threads);
    if (!planned.ok()) return planned.with_context(impl_->context());
    return impl_->transpose.output_sizes();
  }
  KILN_RETURN_IF_ERROR(impl_->broadcast(inputs));
  return Span<const int64_t>(impl_->shape.data(), impl_->shape.size());
}

Status RuntimeElementwise::run(Span<const Tensor* const> inputs, Tensor& out) {
  Impl& m = *impl_;
  KILN_ASSIGN_OR_RETURN(Span<const int64_t> shape, output_sizes(inputs));
  if (!std::equal(shape.begin(), shape.end(), out.sizes().begin(), out.sizes().end()) ||
      out.dtype() != ScalarType::Float32) {
    return Status(Error::InvalidArgument, m.context() + ": output has shape " + shape_of(out) +
                                              " (expected " + runtime::shape_to_string(shape) +
                                              ", f32)");
  }
  if (m.kind == Kind::Transpose) {
    if (inputs[0]->dtype() != ScalarType::Float32) {
      return Status(Error::InvalidArgument,
                    m.context() + ": input 0 is " +
                        std::string(runtime::to_string(inputs[0]->dtype())) + " (expected f32)");
    }
    if (out.numel() > 0) m.transpose.run(inputs[0]->data(), out.mutable_data());
    return Status();
  }
  const bool where = m.kind == Kind::Where;
  for (size_t i = 0; i < m.arity; ++i) {
    const ScalarType want = where && i == 0 ? ScalarType::Bool : ScalarType::Float32;
    if (inputs[i]->dtype() != want) {
      return Status(Error::InvalidArgument,
                    m.context() + ": input " + std::to_string(i) + " is " +
                        std::string(runtime::to_string(inputs[i]->dtype())) + " (expected " +
                        std::string(runtime::to_string(want)) + ")");
    }
  }
  m.plan_walk(inputs);
  if (m.numel == 0) return Status();
  const int contiguous = m.contiguous();
  auto* to = static_cast<float*>(out.mutable_data());
  if (where) {
    const auto* c = static_cast<const bool*>(inputs[0]->data());
    const auto* x = static_cast<const float*>(inputs[1]->data());
    const auto* y = static_cast<const float*>(inputs[2]->data());
    m.walk_rows([&](int64_t o, const std::array<int64_t, kMaxInputs>& in, int64_t count) {
      dnnl_impl::select_rows(m.avx512, contiguous, c + in[0], x + in[1], y + in[2], to + o, count);
    });
    return Status();
  }
  const auto* a = static_cast<const float*>(inputs[0]->data());
  const auto* b = static_cast<const float*>(inputs[1]->data());
  m.walk_rows([&](int64_t o, const std::array<int64_t, kMaxInputs>& in, int64_t count) {
    binary_rows(m.kind, contiguous, a + in[0], b + in[1], to + o, count);
  });
  return Status();
}

std::string RuntimeElementwise::describe() const {
  return "kiln " + impl_->op + " (own loops, run-time shapes)";
}

}  // namespace kiln::engine::cpu
