#include <kiln/engine/cpu/blocked_gemv.h>
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/winograd_weights.h>

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace kiln::engine::cpu::dnnl_impl {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine = [] {
    // oneDNN registers each kernel it generates with VTune by default: its first one looks
    // for VTune's library (libJitPI.so) along the whole library path, dozens of failed opens,
    // 0.1-0.2 ms of every process's first specialization. Only when the environment asks for
    // a profiler (DNNL_JIT_PROFILE / ONEDNN_JIT_PROFILE) does oneDNN keep its own setting.
    if (std::getenv("DNNL_JIT_PROFILE") == nullptr &&
        std::getenv("ONEDNN_JIT_PROFILE") == nullptr) {
      (void)dnnl_set_jit_profiling_flags(0);
    }
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

dnnl::stream& cpu_stream() {
  // One per thread: ops may run on several threads at once (dnnl_rnn_directions.cpp).
  static thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

ThreadScope::ThreadScope(int num_threads) {
  if (num_threads <= 0) return;
  previous_ = omp_get_max_threads();
  omp_set_num_threads(num_threads);
}

ThreadScope::~ThreadScope() {
  if (previous_ > 0) omp_set_num_threads(previous_);
}

const ir::AttributeValue* Attrs::find(std::string_view name) const {
  for (const ir::Attribute& attribute : desc_.attributes) {
    if (attribute.name == name) return &attribute.value;
  }
  return nullptr;
}

Status Attrs::wrong_type(std::string_view name, std::string_view expected) const {
  return error(desc_, Error::InvalidArgument,
               "attribute '" + std::string(name) + "' has the wrong type (expected " +
                   std::string(expected) + ")");
}

Result<int64_t> Attrs::get_int(std::string_view name, int64_t fallback) const {
  const ir::AttributeValue* value = find(name);
  if (value == nullptr) return fallback;
  if (const auto* i = std::get_if<int64_t>(value)) return *i;
  return wrong_type(name, "int");
}

Result<double> Attrs::get_float(std::string_view name, double fallback) const {
  const ir::AttributeValue* value = find(name);
  if (value == nullptr) return fallback;
  if (const auto* f = std::get_if<double>(value)) return *f;
  if (const auto* i = std::get_if<int64_t>(value)) return static_cast<double>(*i);
  return wrong_type(name, "float");
}

Result<std::string> Attrs::get_string(std::string_view name, std::string fallback) const {
  const ir::AttributeValue* value = find(name);
  if (value == nullptr) return fallback;
  if (const auto* s = std::get_if<std::string>(value)) return *s;
  return wrong_type(name, "string");
}

Result<std::vector<int64_t>> Attrs::get_ints(std::string_view name) const {
  const ir::AttributeValue* value = find(name);
  if (value == nullptr) return std::vector<int64_t>();
  if (const auto* v = std::get_if<std::vector<int64_t>>(value)) return *v;
  return wrong_type(name, "ints");
}

Status error(const OpDesc& desc, Error code, const std::string& problem) {
  return Status(code, "create op '" + desc.op + "' (oneDNN): " + problem);
}

bool input_present(const OpDesc& desc, size_t index) {
  if (index >= desc.inputs.size()) return false;
  return desc.inputs_present.empty() || desc.inputs_present[index];
}

const runtime::Tensor* input_constant(const OpDesc& desc, size_t index) {
  if (index >= desc.constants.size()) return nullptr;
  return desc.constants[index];
}

Status check_inputs(const OpDesc& desc, size_t min_inputs, size_t max_inputs) {
  size_t count = desc.inputs.size() - static_cast<size_t>(num_residuals(desc));
  if (count < min_inputs || count > max_inputs) {
    return error(desc, Error::InvalidArgument,
                 "has " + std::to_string(count) + " inputs (expected " +
                     std::to_string(min_inputs) + ".." + std::to_string(max_inputs) + ")");
  }
  if (!desc.inputs_present.empty() && desc.inputs_present.size() != desc.inputs.size()) {
    return error(desc, Error::InvalidArgument, "inputs_present has the wrong length");
  }
  if (!desc.constants.empty() && desc.constants.size() != desc.inputs.size()) {
    return error(desc, Error::InvalidArgument, "constants has the wrong length");
  }
  for (size_t i = 0; i < desc.inputs.size(); ++i) {
    if (!input_present(desc, i)) {
      if (i < min_inputs) {
        return error(desc, Error::InvalidArgument,
                     "input " + std::to_string(i) + " is absent (expected present)");
      }
      continue;
    }
    if (desc.inputs[i].dtype != runtime::ScalarType::Float32) {
      return error(desc, Error::NotSupported,
                   "input " + std::to_string(i) + " has dtype " +
                       std::string(runtime::to_string(desc.inputs[i].dtype)) + " (expected f32)");
    }
    const runtime::Tensor* constant = input_constant(desc, i);
    if (constant != nullptr &&
        (constant->dtype() != desc.inputs[i].dtype || !constant->is_contiguous() ||
         !std::equal(constant->sizes().begin(), constant->sizes().end(),
                     desc.inputs[i].sizes.begin(), desc.inputs[i].sizes.end()))) {
      return error(desc, Error::InvalidArgument,
                   "constant input " + std::to_string(i) +
                       " does not match its declared type (or is not contiguous)");
    }
  }
  if (desc.num_outputs != 1) {
    return error(desc, Error::NotSupported,
                 "asks for " + std::to_string(desc.num_outputs) + " outputs (expected 1)");
  }
  return Status();
}

dnnl::memory::dims to_dims(runtime::Span<const int64_t> sizes) {
  dnnl::memory::dims dims(sizes.begin(), sizes.end());
  if (dims.empty()) dims.push_back(1);
  return dims;
}

dnnl::memory::desc plain_md(runtime::Span<const int64_t> sizes) {
  dnnl::memory::dims dims = to_dims(sizes);
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * dims[i];
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

int num_residuals(const OpDesc& desc) {
  int count = 0;
  for (const PostOp& post_op : desc.post_ops) count += post_op.kind == PostOpKind::AddResidual;
  return count;
}

Result<std::vector<int>> append_post_ops(const OpDesc& desc, const dnnl::memory::desc& dst_md,
                                         bool use_sum, dnnl::post_ops& ops) {
  std::vector<int> binary_indices;
  for (const PostOp& post_op : desc.post_ops) {
    switch (post_op.kind) {
      case PostOpKind::Relu:
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        break;
      case PostOpKind::Clip:
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, post_op.alpha, post_op.beta);
        break;
      case PostOpKind::Sigmoid:
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f);
        break;
      case PostOpKind::Tanh:
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f);
        break;
      case PostOpKind::Gelu:
        ops.append_eltwise(1.0f,
                           post_op.alpha == 1.0f ? dnnl::algorithm::eltwise_gelu_tanh
                                                 : dnnl::algorithm::eltwise_gelu_erf,
                           0.0f, 0.0f);
        break;
      case PostOpKind::Linear:
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, post_op.alpha, post_op.beta);
        break;
      case PostOpKind::Swish:  // x * sigmoid(alpha * x)
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
        break;
      case PostOpKind::AddResidual:
        if (use_sum) {
          if (!binary_indices.empty()) {
            return error(desc, Error::NotSupported, "has more than one residual post-op");
          }
          ops.append_sum(1.0f);
        } else {
          ops.append_binary(dnnl::algorithm::binary_add, dst_md);
        }
        binary_indices.push_back(ops.len() - 1);
        break;
    }
  }
  return binary_indices;
}

dnnl::memory wrap(const dnnl::memory::desc& md, const void* data) {
  return dnnl::memory(md, cpu_engine(), const_cast<void*>(data));
}

CpuOp::NativeLayout native_layout(const dnnl::memory::desc& md) {
  return CpuOp::NativeLayout{layout_bytes(md), static_cast<uint64_t>(md.get_size())};
}

Staging::Staging(dnnl::memory::desc plain, dnnl::memory::desc internal, bool to_internal,
                 bool own_buffer)
    : plain_desc_(std::move(plain)),
      internal_desc_(std::move(internal)),
      to_internal_(to_internal),
      own_buffer_(own_buffer) {}

Status Staging::make() {
  if (made_) return Status();
  try {
    plain_ = wrap(plain_desc_, nullptr);
    internal_ = wrap(internal_desc_, nullptr);
    reorder_ = to_internal_ ? dnnl::reorder(plain_, internal_) : dnnl::reorder(internal_, plain_);
  } catch (const dnnl::error& e) {
    return Status(Error::Internal, std::string("oneDNN layout conversion: ") + e.what());
  }
  made_ = true;
  return Status();
}

std::string layout_bytes(const dnnl::memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked && d.format_kind != dnnl_format_kind_wino) {
    return std::string();
  }
  std::string out;
  auto put = [&out](const auto& value) {
    out.append(reinterpret_cast<const char*>(&value), sizeof(value));
  };
  auto put_dims = [&](const dnnl_dims_t& dims) {
    for (int i = 0; i < d.ndims; ++i) put(dims[i]);
  };
  if (d.format_kind == dnnl_format_kind_wino) {
    // Winograd weights (packed constants only; the tag keeps them apart from blocked layouts,
    // which layout_from_bytes decodes).
    out = "wino";
    put(d.ndims);
    put_dims(d.dims);
    put(static_cast<int32_t>(d.data_type));
    const dnnl_wino_desc_t& w = d.format_desc.wino_desc;
    put(static_cast<int32_t>(w.wino_format));
    for (int v : {w.r, w.alpha, w.ic, w.oc, w.ic_block, w.oc_block, w.ic2_block, w.oc2_block}) {
      put(v);
    }
    put(w.adj_scale);
    put(static_cast<uint64_t>(w.size));
    return out;
  }
  put(d.ndims);
  put_dims(d.dims);
  put(static_cast<int32_t>(d.data_type));
  put_dims(d.padded_dims);
  put_dims(d.padded_offsets);
  put(d.offset0);
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  put_dims(b.strides);
  put(b.inner_nblks);
  for (int i = 0; i < b.inner_nblks && i < DNNL_MAX_NDIMS; ++i) put(b.inner_blks[i]);
  for (int i = 0; i < b.inner_nblks && i < DNNL_MAX_NDIMS; ++i) put(b.inner_idxs[i]);
  put(d.extra.flags);
  put(d.extra.compensation_mask);
  put(d.extra.scale_adjust);
  put(d.extra.asymm_compensation_mask);
  return out;
}

Result<dnnl::memory> pack_constant(const OpDesc& desc, size_t input,
                                   const dnnl::memory::desc& source_md, const void* source,
                                   const dnnl::memory::desc& target) {
  auto reorder_into = [&](void* data) -> Status {
    if (desc.verify_constant) {
      Status verified = desc.verify_constant(input);
      if (!verified.ok()) return verified.with_context("create op '" + desc.op + "'");
    }
    // oneDNN's reorder into its Winograd layouts transforms a kernel at a time (most of a
    // ResNet's cold load); kiln's packing writes the same bytes 16 output channels at a time.
    const dnnl::memory::dims dims = source_md.dims();
    if (packs_winograd(target) && dims.size() == 4 && dims[2] == 3 && dims[3] == 3 &&
        source_md == plain_md(runtime::Span<const int64_t>(dims.data(), dims.size()))) {
      Status packed =
          pack_winograd_weights(target, static_cast<const float*>(source), dims[0], dims[1], data);
      return packed.ok() ? packed : error(desc, Error::Internal, packed.message());
    }
    if (pack_blocked_b(source_md, source, target, data)) return Status();
    try {
      // On one thread (oneDNN sizes a reorder's split when it is created): a model's packings
      // are interleaved with serial work (code generation, planning), during which a woken
      // OpenMP team spins for its next region; on a virtual machine that spinning made a
      // 2-thread specialization about twice as slow (each of the serial part's page-table
      // changes then interrupts the spinning core). A reorder is memory-bound: one thread
      // streams it almost as fast.
      ThreadScope one_thread(1);
      dnnl::memory from = wrap(source_md, source);
      dnnl::memory to(target, cpu_engine(), data);
      // The scratchpad (Winograd transforms: megabytes) comes from bulk memory mapped in one
      // call: as oneDNN's own allocation each of its pages would fault at its first write.
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::reorder::primitive_desc pd(from, to, attr);
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
      runtime::AlignedBuffer scratch;
      if (size_t bytes = pd.scratchpad_desc().get_size(); bytes > 0) {
        KILN_ASSIGN_OR_RETURN(scratch, runtime::allocate_bulk(bytes));
        runtime::prefault_for_write(scratch.get(), bytes);
        args[DNNL_ARG_SCRATCHPAD] = wrap(pd.scratchpad_desc(), scratch.get());
      }
      dnnl::reorder(pd).execute(cpu_stream(), args);
      cpu_stream().wait();
    } catch (const dnnl::error& e) {
      return error(desc, Error::Internal, std::string("packing a weight failed: ") + e.what());
    }
    return Status();
  };
  std::string source_layout = layout_bytes(source_md);
  std::string target_layout = layout_bytes(target);
  if (desc.packed == nullptr || source_layout.empty() || target_layout.empty()) {
    dnnl::memory owned(target, cpu_engine());
    KILN_RETURN_IF_ERROR(reorder_into(owned.get_data_handle()));
    return owned;
  }
  PackKey key;
  uint64_t known = input < desc.constant_hashes.size() ? desc.constant_hashes[input] : 0;
  // The tag keeps the two hash domains (content hash, bytes hash) apart.
  key.source_hash = known != 0 ? known : hash_source(source, source_md.get_size());
  key.layouts = (known != 0 ? "c" : "b") + source_layout + target_layout;
  auto bytes =
      desc.packed->get(key, target.get_size(), [&](uint8_t* data) { return reorder_into(data); });
  if (!bytes.ok()) return bytes.status().with_context("create op '" + desc.op + "' (oneDNN)");
  return wrap(target, *bytes);
}

Status check_planned_output(const OpDesc& desc, size_t index, const std::vector<int64_t>& sizes) {
  if (index >= desc.output_sizes.size() || desc.output_sizes[index] == sizes) return Status();
  return error(desc, Error::NotSupported,
               "its attributes give output " + std::to_string(index) + " the shape " +
                   runtime::shape_to_string(sizes) + ", not the plan's " +
                   runtime::shape_to_string(desc.output_sizes[index]));
}

dnnl::primitive_attr base_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void DnnlOp::hold_scratchpad(const dnnl::primitive_desc_base& pd) {
  scratchpad_ = dnnl::memory(pd.scratchpad_desc(), cpu_engine());
  args_[DNNL_ARG_SCRATCHPAD] = scratchpad_;
}

namespace {
uint64_t round_up_64(uint64_t bytes) { return (bytes + 63) / 64 * 64; }
}  // namespace

uint64_t DnnlOp::scratchpad_bytes() const {
  uint64_t bytes = scratchpad_ ? round_up_64(scratchpad_.get_desc().get_size()) : 0;
  for (const StepBuffer& buffer : step_buffers_) {
    bytes += round_up_64(buffer.memory.get_desc().get_size());
  }
  return bytes;
}

void DnnlOp::use_scratchpad(void* data) {
  auto* at = static_cast<uint8_t*>(data);
  if (scratchpad_ && scratchpad_.get_desc().get_size() > 0) {
    scratchpad_ = dnnl::memory(scratchpad_.get_desc(), cpu_engine(), at);
    args_[DNNL_ARG_SCRATCHPAD] = scratchpad_;
    at += round_up_64(scratchpad_.get_desc().get_size());
  }
  for (StepBuffer& buffer : step_buffers_) {
    point(buffer.memory, at);
    buffer.owned.reset();
    at += round_up_64(buffer.memory.get_desc().get_size());
  }
}

Result<dnnl::memory> DnnlOp::step_buffer(const dnnl::memory::desc& md) {
  KILN_ASSIGN_OR_RETURN(runtime::AlignedBuffer owned, runtime::allocate_aligned(md.get_size()));
  dnnl::memory memory = wrap(md, owned.get());
  step_buffers_.push_back(StepBuffer{memory, std::move(owned)});
  return memory;
}

Status DnnlOp::execute(const dnnl::primitive& primitive,
                       const std::unordered_map<int, dnnl::memory>& args) {
  ThreadScope threads(num_threads_);
  try {
    primitive.execute(cpu_stream(), args);
    cpu_stream().wait();
  } catch (const dnnl::error& e) {
    return Status(Error::Internal, "run op '" + op_ + "' (oneDNN): " + e.what());
  }
  return Status();
}

Status DnnlOp::make(Staging& stage) {
  if (stage.made_) return Status();
  {
    ThreadScope threads(num_threads_);
    KILN_RETURN_IF_ERROR(stage.make());
  }
  if (stage.own_buffer_) {
    KILN_ASSIGN_OR_RETURN(stage.internal_, step_buffer(stage.internal_desc_));
  }
  return Status();
}

Status DnnlOp::convert(Staging& stage, const void* plain, const dnnl::memory* other) {
  KILN_RETURN_IF_ERROR(make(stage));
  point(stage.plain_, plain);
  const dnnl::memory& internal = other != nullptr ? *other : stage.internal_;
  return stage.to_internal_
             ? execute(stage.reorder_, {{DNNL_ARG_FROM, stage.plain_}, {DNNL_ARG_TO, internal}})
             : execute(stage.reorder_, {{DNNL_ARG_FROM, internal}, {DNNL_ARG_TO, stage.plain_}});
}

Status DnnlOp::check_run_counts(runtime::Span<const runtime::Tensor*> inputs,
                                runtime::Span<runtime::Tensor*> outputs) const {
  if (inputs.size() != num_inputs_ || outputs.size() != outputs_.size() || outputs[0] == nullptr) {
    return Status(Error::InvalidArgument, "run op '" + op_ + "' (oneDNN): got " +
                                              std::to_string(inputs.size()) + " inputs and " +
                                              std::to_string(outputs.size()) +
                                              " outputs (expected " + std::to_string(num_inputs_) +
                                              " and " + std::to_string(outputs_.size()) + ")");
  }
  return Status();
}

SimpleOp::SimpleOp(const OpDesc& desc, dnnl::primitive primitive,
                   const dnnl::primitive_desc_base& pd, std::vector<int64_t> output_sizes,
                   const dnnl::memory::desc& dst_md)
    : primitive_(std::move(primitive)) {
  op_ = desc.op;
  num_threads_ = desc.num_threads;
  num_inputs_ = desc.inputs.size();
  outputs_ = {TensorDesc{runtime::ScalarType::Float32, std::move(output_sizes)}};
  describe_ = describe_pd(pd);
  hold_scratchpad(pd);
  args_[DNNL_ARG_DST] = wrap(dst_md, nullptr);
}

void SimpleOp::bind_input(const OpDesc& desc, size_t index, int arg, const dnnl::memory::desc& md) {
  const runtime::Tensor* constant = input_constant(desc, index);
  if (constant != nullptr) {
    dnnl::memory owned(md, cpu_engine());
    std::memcpy(owned.get_data_handle(), constant->data(), constant->nbytes());
    args_[arg] = owned;
  } else {
    args_[arg] = wrap(md, nullptr);
    bindings_.emplace_back(index, arg);
  }
}

Status SimpleOp::run(runtime::Span<const runtime::Tensor*> inputs,
                     runtime::Span<runtime::Tensor*> outputs) {
  KILN_RETURN_IF_ERROR(check_run_counts(inputs, outputs));
  for (const auto& [index, arg] : bindings_) {
    if (inputs[index] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op '" + op_ + "' (oneDNN): input " + std::to_string(index) + " is null");
    }
    point(args_[arg], inputs[index]->data());
  }
  point(args_[DNNL_ARG_DST], outputs[0]->mutable_data());
  return execute(primitive_, args_);
}

std::string format_of(const dnnl::memory::desc& md) {
  const dnnl_memory_desc_t& c = md.data;
  if (c.format_kind != dnnl_blocked) return "other";
  const auto& blocking = c.format_desc.blocking;
  static constexpr char kLetters[] = "abcdefghijkl";
  // Dimensions from outermost to innermost stride, then inner blocks: oneDNN's tag spelling.
  std::vector<int> order(static_cast<size_t>(c.ndims));
  for (int i = 0; i < c.ndims; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return blocking.strides[a] > blocking.strides[b]; });
  std::string tag;
  for (int d : order) {
    bool blocked = false;
    for (int b = 0; b < blocking.inner_nblks; ++b) blocked |= blocking.inner_idxs[b] == d;
    tag += blocked ? static_cast<char>(kLetters[d] - 'a' + 'A') : kLetters[d];
  }
  for (int b = 0; b < blocking.inner_nblks; ++b) {
    tag += std::to_string(blocking.inner_blks[b]) + kLetters[blocking.inner_idxs[b]];
  }
  return tag;
}

std::string describe_pd(const dnnl::primitive_desc_base& pd) {
  return "oneDNN " + std::string(pd.impl_info_str());
}

}  // namespace kiln::engine::cpu::dnnl_impl

namespace kiln::engine::cpu {

namespace {

// The instruction set oneDNN generates code for here (the CPU's, or less under
// ONEDNN_MAX_CPU_ISA), by the names ONEDNN_MAX_CPU_ISA takes.
std::string effective_isa_name() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41:
      return "SSE41";
    case dnnl_cpu_isa_avx:
      return "AVX";
    case dnnl_cpu_isa_avx2:
      return "AVX2";
    case dnnl_cpu_isa_avx2_vnni:
      return "AVX2_VNNI";
    case dnnl_cpu_isa_avx512_mic:
      return "AVX512_MIC";
    case dnnl_cpu_isa_avx512_mic_4ops:
      return "AVX512_MIC_4OPS";
    case dnnl_cpu_isa_avx512_core:
      return "AVX512_CORE";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "AVX512_CORE_VNNI";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "AVX512_CORE_BF16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "AVX512_CORE_AMX";
    default:
      return "isa " + std::to_string(static_cast<unsigned>(dnnl_get_effective_cpu_isa()));
  }
}

}  // namespace

std::string provider_version() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " (" + std::string(v->hash ? v->hash : "") + ") " +
         effective_isa_name();
}

}  // namespace kiln::engine::cpu
