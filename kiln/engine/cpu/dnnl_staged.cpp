#include <kiln/engine/cpu/dnnl_staged.h>

#include <cstring>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

// Reads the fields `layout_bytes` writes, in order.
class FieldReader {
 public:
  explicit FieldReader(const std::string& bytes) : bytes_(bytes) {}
  template <typename T>
  bool get(T& value) {
    if (bytes_.size() - at_ < sizeof(T)) return false;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  const std::string& bytes_;
  size_t at_ = 0;
};

}  // namespace

std::optional<dnnl::memory::desc> layout_from_bytes(const std::string& bytes,
                                                    const dnnl::memory::dims& dims) {
  if (bytes.empty()) return std::nullopt;
  dnnl_memory_desc_t d;
  std::memset(&d, 0, sizeof d);
  FieldReader r(bytes);
  if (!r.get(d.ndims) || d.ndims != static_cast<int>(dims.size()) || d.ndims > DNNL_MAX_NDIMS) {
    return std::nullopt;
  }
  auto get_dims = [&](dnnl_dims_t& out) {
    for (int i = 0; i < d.ndims; ++i) {
      if (!r.get(out[i])) return false;
    }
    return true;
  };
  int32_t data_type = 0;
  if (!get_dims(d.dims) || !r.get(data_type) || !get_dims(d.padded_dims) ||
      !get_dims(d.padded_offsets) || !r.get(d.offset0)) {
    return std::nullopt;
  }
  d.data_type = static_cast<dnnl_data_type_t>(data_type);
  d.format_kind = dnnl_blocked;
  dnnl_blocking_desc_t& b = d.format_desc.blocking;
  if (!get_dims(b.strides) || !r.get(b.inner_nblks) || b.inner_nblks < 0 ||
      b.inner_nblks > DNNL_MAX_NDIMS) {
    return std::nullopt;
  }
  for (int i = 0; i < b.inner_nblks; ++i) {
    if (!r.get(b.inner_blks[i])) return std::nullopt;
  }
  for (int i = 0; i < b.inner_nblks; ++i) {
    if (!r.get(b.inner_idxs[i])) return std::nullopt;
  }
  if (!r.get(d.extra.flags) || !r.get(d.extra.compensation_mask) || !r.get(d.extra.scale_adjust) ||
      !r.get(d.extra.asymm_compensation_mask) || !r.done()) {
    return std::nullopt;
  }
  for (int i = 0; i < d.ndims; ++i) {
    if (d.dims[i] != dims[static_cast<size_t>(i)]) return std::nullopt;
  }
  dnnl::memory::desc md(d);
  // Round trip: the descriptor must encode to the same bytes (so it is the one described).
  if (layout_bytes(md) != bytes) return std::nullopt;
  return md;
}

std::optional<dnnl::memory::desc> input_layout_hint(const OpDesc& desc, size_t index,
                                                    const dnnl::memory::dims& dims) {
  if (index >= desc.input_layouts.size()) return std::nullopt;
  return layout_from_bytes(desc.input_layouts[index], dims);
}

StagedOp::StagedOp(const OpDesc& desc, dnnl::primitive primitive,
                   const dnnl::primitive_desc_base& pd, std::vector<int64_t> output_sizes)
    : primitive_(std::move(primitive)) {
  op_ = desc.op;
  num_threads_ = desc.num_threads;
  num_inputs_ = desc.inputs.size();
  outputs_ = {TensorDesc{runtime::ScalarType::Float32, std::move(output_sizes)}};
  describe_ = describe_pd(pd);
  hold_scratchpad(pd);
}

void StagedOp::bind_input(size_t index, int arg, const dnnl::memory::desc& plain,
                          const dnnl::memory::desc& want) {
  Binding b{index, arg, std::nullopt};
  if (want != plain) b.stage.emplace(plain, want, true);
  args_[arg] = wrap(want != plain ? want : plain, nullptr);
  describe_ += " in" + std::to_string(index) + ":" + format_of(want);
  inputs_.push_back(std::move(b));
}

void StagedOp::bind_param(const OpDesc& desc, size_t index, int arg, const dnnl::memory::desc& md) {
  const runtime::Tensor* constant = input_constant(desc, index);
  if (constant == nullptr) {
    bind_input(index, arg, md, md);
    return;
  }
  dnnl::memory owned(md, cpu_engine());
  std::memcpy(owned.get_data_handle(), constant->data(), constant->nbytes());
  args_[arg] = owned;
}

void StagedOp::bind_output(int arg, const dnnl::memory::desc& plain,
                           const dnnl::memory::desc& made) {
  Binding b{0, arg, std::nullopt};
  if (made != plain) b.stage.emplace(plain, made, false);
  args_[arg] = wrap(made != plain ? made : plain, nullptr);
  describe_ += " dst:" + format_of(made);
  output_ = std::move(b);
}

Status StagedOp::finish() {
  if (finished_) return Status();
  for (Binding& b : inputs_) {
    if (!b.stage) continue;
    KILN_RETURN_IF_ERROR(make(*b.stage));
    args_[b.arg] = b.stage->internal();
  }
  if (output_ && output_->stage) {
    KILN_RETURN_IF_ERROR(make(*output_->stage));
    args_[output_->arg] = output_->stage->internal();
  }
  finished_ = true;
  return Status();
}

Status StagedOp::run(runtime::Span<const runtime::Tensor*> inputs,
                     runtime::Span<runtime::Tensor*> outputs) {
  KILN_RETURN_IF_ERROR(check_run_counts(inputs, outputs));
  if (!output_) return Status(Error::Internal, "run op '" + op_ + "' (oneDNN): no output bound");
  if (!finished_) KILN_RETURN_IF_ERROR(finish());
  for (Binding& b : inputs_) {
    if (inputs[b.index] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op '" + op_ + "' (oneDNN): input " + std::to_string(b.index) + " is null");
    }
    if (b.stage) {
      KILN_RETURN_IF_ERROR(convert(*b.stage, inputs[b.index]->data()));
    } else {
      point(args_[b.arg], inputs[b.index]->data());
    }
  }
  void* out = outputs[0]->mutable_data();
  if (!output_->stage) point(args_[output_->arg], out);
  if (copy_inputs_) {
    auto* to = static_cast<uint8_t*>(args_[output_->arg].get_data_handle());
    for (const Binding& b : inputs_) {
      const dnnl::memory& from = args_[b.arg];
      size_t bytes = from.get_desc().get_size();
      if (from.get_data_handle() != to) std::memcpy(to, from.get_data_handle(), bytes);
      to += bytes;
    }
  } else if (copy_rows_ > 0) {
    auto* to = static_cast<uint8_t*>(args_[output_->arg].get_data_handle());
    const size_t rows = static_cast<size_t>(copy_rows_);
    for (size_t r = 0; r < rows; ++r) {
      for (const Binding& b : inputs_) {
        const dnnl::memory& from = args_[b.arg];
        const size_t row = from.get_desc().get_size() / rows;
        std::memcpy(to, static_cast<const uint8_t*>(from.get_data_handle()) + r * row, row);
        to += row;
      }
    }
  } else if (loops_ != nullptr && inputs_.size() == 2) {
    const dnnl::memory& y = args_[output_->arg];
    loops_(static_cast<const float*>(args_[inputs_[0].arg].get_data_handle()),
           static_cast<const float*>(args_[inputs_[1].arg].get_data_handle()),
           static_cast<float*>(y.get_data_handle()),
           static_cast<int64_t>(y.get_desc().get_size() / sizeof(float)), num_threads_);
  } else {
    KILN_RETURN_IF_ERROR(execute(primitive_, args_));
  }
  if (output_->stage) KILN_RETURN_IF_ERROR(convert(*output_->stage, out));
  return Status();
}

std::optional<std::vector<uint64_t>> StagedOp::input_offsets_in_output() const {
  if (!copy_inputs_ || !output_ || output_->stage) return std::nullopt;
  std::vector<uint64_t> offsets;
  uint64_t at = 0;
  for (const Binding& b : inputs_) {
    if (b.stage || b.index != offsets.size()) return std::nullopt;
    offsets.push_back(at);
    at += args_.at(b.arg).get_desc().get_size();
  }
  return offsets;
}

std::optional<CpuOp::NativeLayout> StagedOp::native_input_layout(size_t index) const {
  for (const Binding& b : inputs_) {
    if (b.index == index && b.stage) return b.stage->native();
  }
  return std::nullopt;
}

std::optional<CpuOp::NativeLayout> StagedOp::native_output_layout(size_t index) const {
  if (index == 0 && output_ && output_->stage) return output_->stage->native();
  return std::nullopt;
}

Status StagedOp::use_native_input(size_t index) {
  for (Binding& b : inputs_) {
    if (b.index != index || !b.stage) continue;
    args_[b.arg] = wrap(b.stage->internal_desc(), nullptr);
    b.stage.reset();
    return Status();
  }
  return CpuOp::use_native_input(index);
}

Status StagedOp::use_native_output(size_t index) {
  if (index != 0 || !output_ || !output_->stage) return CpuOp::use_native_output(index);
  args_[output_->arg] = wrap(output_->stage->internal_desc(), nullptr);
  output_->stage.reset();
  return Status();
}

}  // namespace kiln::engine::cpu::dnnl_impl
