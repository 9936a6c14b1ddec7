// RuntimeRows: Softmax, LogSoftmax, LayerNormalization, RMSNormalization and
// InstanceNormalization of run-time shapes on vectorized row loops of kiln's own (16 floats per
// vector; AVX-512 and AVX2 clones).

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/loop_epilogue.h>
#include <kiln/engine/cpu/runtime_rows.h>
#include <kiln/engine/cpu/vector_math.h>
#include <kiln/kernels/kernels.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

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

enum class RowKind { Softmax, LogSoftmax, LayerNorm, RmsNorm, InstanceNorm, GroupNorm };

using dnnl_impl::Epilogue;

// The activations fused after an instance or group normalization applied to `v`, stored whole
// (`n` = kLanes) or as the first `n` floats of `out`.
[[gnu::always_inline]] inline void store_activated(float* out, Floats v, int64_t n,
                                                   const Epilogue& e) {
  if (e.num_ops != 0) v = dnnl_impl::post_process(v, e, Floats{});
  if (n == kLanes) {
    vec::store(out, v);
  } else {
    for (int64_t j = 0; j < n; ++j) out[j] = v[j];
  }
}

// The fused activations over `n` floats of `y` in place (after the reference kernel).
KILN_VECTOR_CLONES void activate(float* y, int64_t n, const Epilogue& e) {
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) store_activated(y + j, vec::load(y + j), kLanes, e);
  if (j == n) return;
  Floats tail{};
  for (int64_t k = j; k < n; ++k) tail[k - j] = y[k];
  store_activated(y + j, tail, n - j, e);
}

// Below this many elements per thread, starting and joining threads costs more than the rows
// (about 10 us of single-thread work).
constexpr int64_t kMinElementsPerThread = 16384;

// The largest lane, by halves as horizontal_sum adds (a NaN lane may or may not win: a row
// holding one makes every output NaN whatever its maximum, see softmax_rows).
[[gnu::always_inline]] inline float horizontal_max(Floats v) {
  static_assert(kLanes == 16, "the shuffles below are of 16 lanes");
  Floats h =
      __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15);
  v = h > v ? h : v;
  h = __builtin_shufflevector(v, v, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7);
  v = h > v ? h : v;
  h = __builtin_shufflevector(v, v, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  v = h > v ? h : v;
  h = __builtin_shufflevector(v, v, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  v = h > v ? h : v;
  return v[0];
}

[[gnu::always_inline]] inline float horizontal_sum(Floats v) {
  // Pairwise, as a tree: the lanes are partial sums of similar size. Each level adds the upper
  // half of the lanes still summed to the lower half in one vector addition (lane by lane, the
  // compiler moved each lane in and out of the vector: most of a short row's time).
  static_assert(kLanes == 16, "the shuffles below are of 16 lanes");
  v += __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15);
  v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7);
  v += __builtin_shufflevector(v, v, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  v += __builtin_shufflevector(v, v, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  return v[0];
}

// Softmax or log-softmax of rows [begin, end) of `cols` floats each. NaN and infinities
// propagate as in the reference kernel: a row holding NaN or +inf, or only -inf, has a NaN
// among its shifted values (inf - inf), whose exponential (exp_of's too) is NaN, and so is
// every output; -inf beside finite values gives 0 (log-softmax: -inf).
KILN_VECTOR_CLONES void softmax_rows(const float* x, float* y, int64_t begin, int64_t end,
                                     int64_t cols, bool log) {
  const int64_t full = cols / kLanes * kLanes;
  for (int64_t r = begin; r < end; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    Floats vmax = vec::splat(-std::numeric_limits<float>::infinity());
    for (int64_t j = 0; j < full; j += kLanes) {
      const Floats v = vec::load(in + j);
      vmax = v > vmax ? v : vmax;
    }
    float max = horizontal_max(vmax);
    for (int64_t j = full; j < cols; ++j) max = in[j] > max ? in[j] : max;
    // Masked logits (attention's -1e9 or -inf) sit far below the max: their exponentials
    // are 0, in the vectors (exp_of) and in the tail alike.
    Floats vsum = vec::splat(0.0f);
    const Floats shift = vec::splat(max);
    for (int64_t j = 0; j < full; j += kLanes) {
      const Floats e = vec::exp_of(vec::load(in + j) - shift);
      if (!log) vec::store(out + j, e);
      vsum += e;
    }
    float sum = horizontal_sum(vsum);
    for (int64_t j = full; j < cols; ++j) {
      const float shifted = in[j] - max;
      const float e = shifted < -87.0f ? 0.0f : std::exp(shifted);
      if (!log) out[j] = e;
      sum += e;
    }
    if (log) {
      const float offset = max + std::log(sum);
      const Floats voffset = vec::splat(offset);
      for (int64_t j = 0; j < full; j += kLanes) vec::store(out + j, vec::load(in + j) - voffset);
      for (int64_t j = full; j < cols; ++j) out[j] = in[j] - offset;
    } else {
      const Floats inv = vec::splat(1.0f / sum);
      for (int64_t j = 0; j < full; j += kLanes) vec::store(out + j, vec::load(out + j) * inv);
      for (int64_t j = full; j < cols; ++j) out[j] = out[j] / sum;
    }
  }
}

// The mean of one row of `cols` floats and the sum of its squared deviations from that mean
// (two passes, float sums in 16 lanes). Each pass keeps four vectors of sums over blocks of 64
// floats: one chain of additions would wait on the adder's latency at every vector (a row of
// 512 took a third longer than oneDNN's layer normalization).
struct Moments {
  float mean;
  float squares;
};
[[gnu::always_inline]] inline Moments row_moments(const float* in, int64_t cols) {
  const int64_t full = cols / kLanes * kLanes;
  const int64_t blocks = cols / (4 * kLanes) * (4 * kLanes);
  Floats s0 = vec::splat(0.0f), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t j = 0; j < blocks; j += 4 * kLanes) {
    s0 += vec::load(in + j);
    s1 += vec::load(in + j + kLanes);
    s2 += vec::load(in + j + 2 * kLanes);
    s3 += vec::load(in + j + 3 * kLanes);
  }
  for (int64_t j = blocks; j < full; j += kLanes) s0 += vec::load(in + j);
  float sum = horizontal_sum((s0 + s1) + (s2 + s3));
  for (int64_t j = full; j < cols; ++j) sum += in[j];
  const float mean = sum / static_cast<float>(cols);
  const Floats vmean = vec::splat(mean);
  Floats q0 = vec::splat(0.0f), q1 = q0, q2 = q0, q3 = q0;
  for (int64_t j = 0; j < blocks; j += 4 * kLanes) {
    const Floats d0 = vec::load(in + j) - vmean, d1 = vec::load(in + j + kLanes) - vmean;
    const Floats d2 = vec::load(in + j + 2 * kLanes) - vmean;
    const Floats d3 = vec::load(in + j + 3 * kLanes) - vmean;
    q0 += d0 * d0;
    q1 += d1 * d1;
    q2 += d2 * d2;
    q3 += d3 * d3;
  }
  for (int64_t j = blocks; j < full; j += kLanes) {
    const Floats d = vec::load(in + j) - vmean;
    q0 += d * d;
  }
  float squares = horizontal_sum((q0 + q1) + (q2 + q3));
  for (int64_t j = full; j < cols; ++j) squares += (in[j] - mean) * (in[j] - mean);
  return {mean, squares};
}

// Layer normalization of rows [begin, end) of `cols` floats: (x - mean) / sqrt(var + eps) *
// scale (+ bias), with the mean and variance of each row (two passes, float sums).
KILN_VECTOR_CLONES void layer_norm_rows(const float* x, float* y, int64_t begin, int64_t end,
                                        int64_t cols, const float* scale, const float* bias,
                                        float epsilon) {
  const int64_t full = cols / kLanes * kLanes;
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = begin; r < end; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    const auto [mean, squares] = row_moments(in, cols);
    const float inv_std = 1.0f / std::sqrt(squares * inv_cols + epsilon);
    const Floats vmean = vec::splat(mean), vinv = vec::splat(inv_std);
    for (int64_t j = 0; j < full; j += kLanes) {
      Floats v = (vec::load(in + j) - vmean) * vinv * vec::load(scale + j);
      if (bias != nullptr) v += vec::load(bias + j);
      vec::store(out + j, v);
    }
    for (int64_t j = full; j < cols; ++j) {
      float v = (in[j] - mean) * inv_std * scale[j];
      if (bias != nullptr) v += bias[j];
      out[j] = v;
    }
  }
}

// out = in * a + b over `n` floats (one multiply-add an element), then the fused activations.
[[gnu::always_inline]] inline void affine_plane(const float* in, float* out, int64_t n, float a,
                                                float b, const Epilogue& e) {
  const int64_t full = n / kLanes * kLanes;
  const Floats va = vec::splat(a), vb = vec::splat(b);
  if (e.num_ops == 0) {
    for (int64_t j = 0; j < full; j += kLanes) vec::store(out + j, vec::load(in + j) * va + vb);
    for (int64_t j = full; j < n; ++j) out[j] = in[j] * a + b;
    return;
  }
  for (int64_t j = 0; j < full; j += kLanes) {
    store_activated(out + j, vec::load(in + j) * va + vb, kLanes, e);
  }
  if (full < n) {
    Floats tail{};
    for (int64_t j = full; j < n; ++j) tail[j - full] = in[j] * a + b;
    store_activated(out + full, tail, n - full, e);
  }
}

// Instance normalization of rows [begin, end) of `cols` floats, row r being channel
// r % `channels` of an [N, C, spatial...] tensor: (x - mean) / sqrt(var + eps) * scale[c] +
// bias[c], with each row's mean and variance (two passes, float sums) and one multiply-add
// an element, then the fused activations `e`.
KILN_VECTOR_CLONES void instance_norm_rows(const float* x, float* y, int64_t begin, int64_t end,
                                           int64_t cols, int64_t channels, const float* scale,
                                           const float* bias, float epsilon, const Epilogue& e) {
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = begin; r < end; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    const auto [mean, squares] = row_moments(in, cols);
    const int64_t c = r % channels;
    const float a = scale[c] / std::sqrt(squares * inv_cols + epsilon);
    affine_plane(in, out, cols, a, bias[c] - mean * a, e);
  }
}

// Group normalization of rows [begin, end), row r being group r % `groups` of a sample of an
// [N, C, spatial...] tensor: its `per_group` channels of `spatial` floats each, normalized by
// the row's mean and variance (two passes, float sums), then channel c's scale[c] and bias[c]
// (one multiply-add an element) and the fused activations `e`.
KILN_VECTOR_CLONES void group_norm_rows(const float* x, float* y, int64_t begin, int64_t end,
                                        int64_t groups, int64_t per_group, int64_t spatial,
                                        const float* scale, const float* bias, float epsilon,
                                        const Epilogue& e) {
  const int64_t cols = per_group * spatial;
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = begin; r < end; ++r) {
    const auto [mean, squares] = row_moments(x + r * cols, cols);
    const float inv_std = 1.0f / std::sqrt(squares * inv_cols + epsilon);
    for (int64_t k = 0; k < per_group; ++k) {
      const int64_t c = (r % groups) * per_group + k;
      const float* in = x + r * cols + k * spatial;
      float* out = y + r * cols + k * spatial;
      const float a = scale[c] * inv_std;
      affine_plane(in, out, spatial, a, bias[c] - mean * a, e);
    }
  }
}

// RMS normalization of rows [begin, end) of `cols` floats: x / sqrt(mean(x^2) + eps) * scale
// (one pass for the mean square, float sums).
KILN_VECTOR_CLONES void rms_norm_rows(const float* x, float* y, int64_t begin, int64_t end,
                                      int64_t cols, const float* scale, float epsilon) {
  const int64_t full = cols / kLanes * kLanes;
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = begin; r < end; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    Floats vsquares = vec::splat(0.0f);
    for (int64_t j = 0; j < full; j += kLanes) {
      const Floats v = vec::load(in + j);
      vsquares += v * v;
    }
    float squares = horizontal_sum(vsquares);
    for (int64_t j = full; j < cols; ++j) squares += in[j] * in[j];
    const float inv_rms = 1.0f / std::sqrt(squares * inv_cols + epsilon);
    const Floats vinv = vec::splat(inv_rms);
    for (int64_t j = 0; j < full; j += kLanes) {
      vec::store(out + j, vec::load(in + j) * vinv * vec::load(scale + j));
    }
    for (int64_t j = full; j < cols; ++j) out[j] = in[j] * inv_rms * scale[j];
  }
}

// The sizes with leading 1s dropped: a Scale of [1, 768] reads as [768].
Span<const int64_t> without_leading_ones(Span<const int64_t> sizes) {
  size_t skip = 0;
  while (skip + 1 < sizes.size() && sizes[skip] == 1) ++skip;
  return sizes.subspan(skip);
}

}  // namespace

struct RuntimeRows::Impl {
  RowKind kind = RowKind::Softmax;
  int64_t rank = 0;   ///< 0: known only at run time.
  int64_t axis = -1;  ///< As the attribute: negative counts from the end.
  float epsilon = 1e-5f;
  const Tensor* scale = nullptr;
  const Tensor* bias = nullptr;
  int64_t groups = 0;            ///< GroupNormalization's num_groups.
  std::vector<PostOp> post_ops;  ///< Activations fused after an instance or group normalization.
  int num_threads = 1;
};

bool RuntimeRows::handles(std::string_view op) {
  return op == "Softmax" || op == "LogSoftmax" || op == "LayerNormalization" ||
         op == "RMSNormalization" || op == "InstanceNormalization" || op == "GroupNormalization";
}

Result<std::unique_ptr<RuntimeRows>> RuntimeRows::create(const OpDesc& desc) {
  using dnnl_impl::Attrs;
  using dnnl_impl::error;
  if (!handles(desc.op)) {
    return error(desc, Error::NotSupported,
                 "is not Softmax, LogSoftmax, LayerNormalization, RMSNormalization, "
                 "InstanceNormalization or GroupNormalization (no run-time-shape rows)");
  }
  const bool per_channel = desc.op == "InstanceNormalization" || desc.op == "GroupNormalization";
  for (const PostOp& p : desc.post_ops) {
    const bool activation = p.kind == PostOpKind::Relu || p.kind == PostOpKind::Clip ||
                            p.kind == PostOpKind::Sigmoid || p.kind == PostOpKind::Tanh ||
                            p.kind == PostOpKind::Linear || p.kind == PostOpKind::Swish;
    if (!per_channel || !activation) {
      return error(desc, Error::NotSupported,
                   per_channel ? "has a post-op other than an activation"
                               : "has post-ops (only instance and group normalizations take "
                                 "activations)");
    }
  }
  if (desc.num_outputs != 1) {
    return error(desc, Error::NotSupported,
                 "asks for " + std::to_string(desc.num_outputs) +
                     " outputs (expected 1: no Mean or InvStdDev)");
  }
  const bool rms_norm = desc.op == "RMSNormalization";
  const bool group_norm = desc.op == "GroupNormalization";
  const bool instance_norm = desc.op == "InstanceNormalization" || group_norm;  // [N, C, ...]
  // All four normalize rows with a constant scale.
  const bool layer_norm = desc.op == "LayerNormalization" || rms_norm || instance_norm;
  KILN_RETURN_IF_ERROR(dnnl_impl::check_inputs(desc,
                                               instance_norm ? 3
                                               : layer_norm  ? 2
                                                             : 1,
                                               rms_norm     ? 2
                                               : layer_norm ? 3
                                                            : 1));
  auto impl = std::make_unique<Impl>();
  impl->kind = group_norm                ? RowKind::GroupNorm
               : instance_norm           ? RowKind::InstanceNorm
               : rms_norm                ? RowKind::RmsNorm
               : layer_norm              ? RowKind::LayerNorm
               : desc.op == "LogSoftmax" ? RowKind::LogSoftmax
                                         : RowKind::Softmax;
  impl->rank = static_cast<int64_t>(desc.inputs[0].sizes.size());
  if (desc.inputs[0].dtype != ScalarType::Float32) {
    return error(
        desc, Error::NotSupported,
        "input 0 is " + std::string(runtime::to_string(desc.inputs[0].dtype)) + " (expected f32)");
  }
  Attrs attrs(desc);
  KILN_ASSIGN_OR_RETURN(impl->axis, attrs.get_int("axis", -1));
  if (group_norm) {
    if (desc.attributes.end() ==
        std::find_if(desc.attributes.begin(), desc.attributes.end(),
                     [](const ir::Attribute& a) { return a.name == "num_groups"; })) {
      return error(desc, Error::InvalidArgument,
                   "attribute 'num_groups' is missing (expected an int dividing the channels)");
    }
    KILN_ASSIGN_OR_RETURN(impl->groups, attrs.get_int("num_groups", 0));
    if (impl->groups <= 0) {
      return error(desc, Error::InvalidArgument,
                   "attribute 'num_groups' is " + std::to_string(impl->groups) +
                       " (expected a positive divisor of the channels)");
    }
  }
  if (instance_norm) {
    // The spatial axes 2.. of [N, C, D1, ...]: no attribute names them.
    impl->axis = 2;
    if (impl->rank > 0 && impl->rank < 3) {
      return error(
          desc, Error::InvalidArgument,
          "input 0 has rank " + std::to_string(impl->rank) + " (expected >= 3: [N, C, D1, ...])");
    }
  } else if (impl->rank > 0) {
    if (impl->axis < -impl->rank || impl->axis >= impl->rank) {
      return error(desc, Error::InvalidArgument,
                   "attribute 'axis' has value " + std::to_string(impl->axis) + " (expected " +
                       std::to_string(-impl->rank) + ".." + std::to_string(impl->rank - 1) + ")");
    }
    const int64_t axis = impl->axis < 0 ? impl->axis + impl->rank : impl->axis;
    if (!layer_norm && axis != impl->rank - 1) {
      return error(desc, Error::NotSupported,
                   "attribute 'axis' is " + std::to_string(impl->axis) + " (only the last axis, " +
                       std::to_string(impl->rank - 1) + ", runs on run-time-shape rows)");
    }
  }
  if (layer_norm) {
    KILN_ASSIGN_OR_RETURN(double epsilon, attrs.get_float("epsilon", 1e-5));
    KILN_ASSIGN_OR_RETURN(int64_t stash, attrs.get_int("stash_type", 1));  // not instance norm's
    if (stash != 1) {
      return error(desc, Error::NotSupported,
                   "attribute 'stash_type' is " + std::to_string(stash) +
                       " (only 1, float statistics, runs on run-time-shape rows)");
    }
    impl->epsilon = static_cast<float>(epsilon);
    const bool has_bias = !rms_norm && desc.inputs.size() == 3 && dnnl_impl::input_present(desc, 2);
    for (size_t i = 1; i < (has_bias ? 3u : 2u); ++i) {
      const Tensor* c = i < desc.constants.size() ? desc.constants[i] : nullptr;
      if (c == nullptr) {
        return error(desc, Error::NotSupported,
                     "input " + std::to_string(i) + " is computed (expected a constant)");
      }
      if (c->dtype() != ScalarType::Float32) {
        return error(desc, Error::NotSupported,
                     "input " + std::to_string(i) + " is " +
                         std::string(runtime::to_string(c->dtype())) + " (expected f32)");
      }
    }
    impl->scale = desc.constants[1];
    impl->bias = has_bias ? desc.constants[2] : nullptr;
  }
  impl->num_threads = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
  impl->post_ops = desc.post_ops;
  return std::unique_ptr<RuntimeRows>(new RuntimeRows(std::move(impl)));
}

RuntimeRows::RuntimeRows(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RuntimeRows::~RuntimeRows() = default;

Status RuntimeRows::run(const Tensor& x, Tensor& out) {
  const Impl& impl = *impl_;
  const bool group = impl.kind == RowKind::GroupNorm;
  const bool instance = impl.kind == RowKind::InstanceNorm || group;  // per channel of [N, C, ...]
  const bool normalization =
      impl.kind == RowKind::LayerNorm || impl.kind == RowKind::RmsNorm || instance;
  const char* op = impl.kind == RowKind::LayerNorm ? "LayerNormalization"
                   : impl.kind == RowKind::RmsNorm ? "RMSNormalization"
                   : group                         ? "GroupNormalization"
                   : instance                      ? "InstanceNormalization"
                   : impl.kind == RowKind::Softmax ? "Softmax"
                                                   : "LogSoftmax";
  if (impl.rank > 0 && x.dim() != impl.rank) {
    return Status(Error::InvalidArgument, std::string("run op '") + op +
                                              "' (run-time shapes): input 0 has shape " +
                                              runtime::shape_to_string(x.sizes()) +
                                              " (expected rank " + std::to_string(impl.rank) + ")");
  }
  if (!std::equal(out.sizes().begin(), out.sizes().end(), x.sizes().begin(), x.sizes().end())) {
    return Status(Error::InvalidArgument,
                  std::string("run op '") + op + "' (run-time shapes): output 0 has shape " +
                      runtime::shape_to_string(out.sizes()) + " (expected " +
                      runtime::shape_to_string(x.sizes()) + ", as input 0)");
  }
  // An axis outside the rank, or (Softmax) not the last: the reference kernel runs the call
  // and reports what it does not take.
  const int64_t axis = impl.axis < 0 ? impl.axis + x.dim() : impl.axis;
  bool own_loops = axis >= 0 && axis < x.dim() && (normalization || axis == x.dim() - 1) &&
                   x.dtype() == ScalarType::Float32 && out.dtype() == ScalarType::Float32 &&
                   x.is_contiguous() && out.is_contiguous();
  int64_t cols = 1;
  for (int64_t d = std::max<int64_t>(axis, 0); d < x.dim(); ++d) cols *= x.size(d);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  if (instance) {
    // Scale and B of one value per channel; anything else is the reference kernel's (which
    // names what is wrong), as is a rank under 3.
    own_loops = own_loops && x.dim() >= 3 && (!group || x.size(1) % impl.groups == 0);
    for (const Tensor* c : {impl.scale, impl.bias}) {
      own_loops = own_loops && c->dim() == 1 && c->is_contiguous() && x.dim() >= 2 &&
                  c->numel() == x.size(1);
    }
  } else if (normalization) {
    // Scale and B must be the normalized dims themselves (leading 1s aside), not broadcasts;
    // anything else (including shapes that do not broadcast) is the reference kernel's.
    const Span<const int64_t> dims = x.sizes().subspan(static_cast<size_t>(own_loops ? axis : 0));
    const Span<const int64_t> normalized = without_leading_ones(dims);
    for (const Tensor* c : {impl.scale, impl.bias}) {
      if (c == nullptr) continue;
      const Span<const int64_t> sizes = without_leading_ones(c->sizes());
      own_loops = own_loops && c->is_contiguous() && c->sizes().size() <= dims.size() &&
                  std::equal(sizes.begin(), sizes.end(), normalized.begin(), normalized.end());
    }
  }
  const Epilogue epilogue{nullptr, nullptr, impl.post_ops.data(), impl.post_ops.size(), nullptr};
  if (!own_loops && instance) {
    Status status =
        group ? kernels::group_norm(x, *impl.scale, *impl.bias, impl.groups, impl.epsilon, out)
              : kernels::instance_norm(x, *impl.scale, *impl.bias, impl.epsilon, out);
    if (status.ok() && !impl.post_ops.empty()) {
      activate(out.mutable_data_ptr<float>(), out.numel(), epilogue);
    }
    return status;
  }
  if (!own_loops) {
    if (impl.kind == RowKind::RmsNorm) {
      kernels::RmsNormOptions options;
      options.axis = impl.axis;
      options.epsilon = impl.epsilon;
      return kernels::rms_norm(x, *impl.scale, options, out);
    }
    if (impl.kind == RowKind::LayerNorm) {
      kernels::LayerNormOptions options;
      options.axis = impl.axis;
      options.epsilon = impl.epsilon;
      return kernels::layer_norm(x, *impl.scale, impl.bias, options, out, nullptr, nullptr);
    }
    return impl.kind == RowKind::Softmax ? kernels::softmax(x, impl.axis, out)
                                         : kernels::log_softmax(x, impl.axis, out);
  }
  if (rows == 0 || cols == 0) return Status();
  const float* in = x.data_ptr<float>();
  float* result = out.mutable_data_ptr<float>();
  // A group normalization's rows are its (n, group)s, each of C / groups planes.
  const int64_t per_group = group ? x.size(1) / impl.groups : 1;
  const int64_t num_rows = group ? rows / per_group : rows;
  auto run_rows = [&](int64_t begin, int64_t end) {
    if (group) {
      group_norm_rows(in, result, begin, end, impl.groups, per_group, cols,
                      impl.scale->data_ptr<float>(), impl.bias->data_ptr<float>(), impl.epsilon,
                      epilogue);
    } else if (instance) {
      instance_norm_rows(in, result, begin, end, cols, x.size(1), impl.scale->data_ptr<float>(),
                         impl.bias->data_ptr<float>(), impl.epsilon, epilogue);
    } else if (impl.kind == RowKind::RmsNorm) {
      rms_norm_rows(in, result, begin, end, cols, impl.scale->data_ptr<float>(), impl.epsilon);
    } else if (impl.kind == RowKind::LayerNorm) {
      layer_norm_rows(in, result, begin, end, cols, impl.scale->data_ptr<float>(),
                      impl.bias != nullptr ? impl.bias->data_ptr<float>() : nullptr, impl.epsilon);
    } else {
      softmax_rows(in, result, begin, end, cols, impl.kind == RowKind::LogSoftmax);
    }
  };
  const int64_t by_work = rows * cols / kMinElementsPerThread;
  const int parts = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>({impl.num_threads, by_work, num_rows})));
  if (parts == 1) {
    run_rows(0, num_rows);
    return Status();
  }
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int t = 0; t < parts; ++t) run_rows(num_rows * t / parts, num_rows * (t + 1) / parts);
  return Status();
}

std::string RuntimeRows::describe() const {
  switch (impl_->kind) {
    case RowKind::Softmax:
      return "kiln rows (run-time shapes): softmax over the last axis";
    case RowKind::LogSoftmax:
      return "kiln rows (run-time shapes): log-softmax over the last axis";
    case RowKind::LayerNorm:
      return "kiln rows (run-time shapes): layer normalization from axis " +
             std::to_string(impl_->axis);  // as the attribute gives it
    case RowKind::RmsNorm:
      return "kiln rows (run-time shapes): RMS normalization from axis " +
             std::to_string(impl_->axis);
    case RowKind::InstanceNorm:
      return "kiln rows (run-time shapes): instance normalization over the spatial axes";
    case RowKind::GroupNorm:
      return "kiln rows (run-time shapes): group normalization in " +
             std::to_string(impl_->groups) + " groups";
  }
  return {};
}

}  // namespace kiln::engine::cpu
