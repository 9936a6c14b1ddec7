#include <kiln/engine/compile/reference_run.h>

#include <kiln/engine/compile/work_flops.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/executor/kernel_registry.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

namespace kiln::engine::compile {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

runtime::Tensor ReferenceValue::tensor() { return Tensor(dtype, sizes, bytes.data()); }

namespace {

std::string describe(const ir::Node& node) { return "node '" + node.name + "' (" + node.op + ")"; }

// The values of one run: each graph value's EValue and its storage (kept until the run ends),
// and the bytes they hold together.
class RunValues {
 public:
  RunValues(const ir::Model& model, const ir::Graph& graph,
            const std::vector<Span<const uint8_t>>& weight_data, uint64_t max_bytes)
      : values_(graph.values.size()), storage_(graph.values.size()), max_bytes_(max_bytes) {
    for (size_t v = 0; v < graph.values.size(); ++v) {
      const ir::Value& value = graph.values[v];
      if (value.weight >= 0 && static_cast<size_t>(value.weight) < model.weights.size()) {
        values_[v] = EValue(weight(model, weight_data, static_cast<size_t>(value.weight)));
      } else {
        values_[v] = unbounded(value.type.dtype);
      }
    }
  }

  static Tensor weight(const ir::Model& model, const std::vector<Span<const uint8_t>>& data,
                       size_t index) {
    const ir::Weight& w = model.weights[index];
    const uint8_t* bytes = index < data.size() ? data[index].data() : w.data.data();
    return Tensor(w.dtype, w.sizes, const_cast<uint8_t*>(bytes));
  }

  static EValue unbounded(runtime::ScalarType dtype) {
    return EValue(Tensor(dtype, {}, nullptr, runtime::ShapeDynamism::Unbounded, 0));
  }

  EValue& operator[](size_t v) { return values_[v]; }
  EValue* none() { return &none_; }

  // Gives `value` (a graph value, or a scratch output) storage for `sizes`.
  Status resize(EValue& value, Span<const int64_t> sizes, const ir::Node& node) {
    KILN_ASSIGN_OR_RETURN(int64_t numel, runtime::checked_numel(sizes));
    Tensor& t = value.to_tensor();
    const uint64_t need = static_cast<uint64_t>(numel) * t.element_size();
    std::vector<uint8_t>* buffer = nullptr;
    if (&value >= values_.data() && &value < values_.data() + values_.size()) {
      buffer = &storage_[static_cast<size_t>(&value - values_.data())];
    } else {
      scratch_.push_back(std::make_unique<std::vector<uint8_t>>());
      buffer = scratch_.back().get();
    }
    const uint64_t others = held_ - buffer->size();
    if (max_bytes_ != 0 && (need > max_bytes_ || others > max_bytes_ - need)) {
      return Status(Error::MemoryAllocationFailed,
                    describe(node) + ": an output of shape " + runtime::shape_to_string(sizes) +
                        " needs " + std::to_string(need) + " bytes, past the reference run's " +
                        std::to_string(max_bytes_) + " (" + std::to_string(others) +
                        " held by other values)");
    }
    buffer->resize(static_cast<size_t>(need) + 1);
    held_ = others + buffer->size();
    t.set_data(buffer->data(), buffer->size());
    return t.resize(sizes);
  }

 private:
  std::vector<EValue> values_;
  std::vector<std::vector<uint8_t>> storage_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> scratch_;
  EValue none_;
  uint64_t held_ = 0;
  uint64_t max_bytes_;
};

std::vector<int64_t> sizes_of(const EValue& value) {
  if (!value.is_tensor()) return {};
  Span<const int64_t> sizes = value.to_tensor().sizes();
  return {sizes.begin(), sizes.end()};
}

// Counts the work of `node` (from its inputs' sizes and `output`'s, its first output) into
// `flops`; past `max_flops`, an error naming the node.
Status count_work(const ir::Node& node, const std::vector<EValue*>& inputs,
                  Span<const int64_t> output, double max_flops, double& flops) {
  if (max_flops <= 0 || !counts_work(node.op)) return Status();
  std::vector<std::vector<int64_t>> input_sizes;
  for (EValue* input : inputs) input_sizes.push_back(sizes_of(*input));
  flops += work_flops(node, input_sizes, {output.begin(), output.end()});
  if (flops > max_flops) {
    return Status(Error::OutOfResources, describe(node) + " brings the reference run's work to " +
                                             std::to_string(flops) + " flops, past its limit of " +
                                             std::to_string(max_flops));
  }
  return Status();
}

Status run_node(const ir::Model& model, const ir::Graph& graph, const ir::Node& node,
                RunValues& values, const std::vector<Span<const uint8_t>>& weight_data,
                const ReferenceLimits& limits, double& flops, const ReferenceObserver& observe) {
  if (!node.regions.empty() || !node.domain.empty()) {
    return Status(Error::NotSupported, describe(node) +
                                           ": the reference run takes nodes of the default domain "
                                           "without regions only");
  }
  runtime::KernelFunction kernel = runtime::get_kernel(node.op);
  if (kernel == nullptr) {
    return Status(Error::OperatorMissing, describe(node) + ": no reference kernel for its op");
  }
  std::vector<EValue*> inputs;
  for (int v : node.inputs) {
    inputs.push_back(v >= 0 && static_cast<size_t>(v) < graph.values.size()
                         ? &values[static_cast<size_t>(v)]
                         : values.none());
  }
  std::vector<EValue> scratch(node.outputs.size());
  std::vector<EValue*> outputs;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const int v = node.outputs[i];
    if (v >= 0 && static_cast<size_t>(v) < graph.values.size()) {
      outputs.push_back(&values[static_cast<size_t>(v)]);
    } else {
      scratch[i] = RunValues::unbounded(runtime::ScalarType::Float32);
      outputs.push_back(&scratch[i]);
    }
  }
  std::vector<std::pair<std::string, EValue>> attributes;
  for (const ir::Attribute& attribute : node.attributes) {
    if (auto scalar = ir::scalar_attribute(attribute.value)) {
      attributes.emplace_back(attribute.name, std::move(*scalar));
    } else if (const auto* ref = std::get_if<ir::WeightRef>(&attribute.value);
               ref != nullptr && ref->weight >= 0 &&
               static_cast<size_t>(ref->weight) < model.weights.size()) {
      attributes.emplace_back(
          attribute.name,
          EValue(RunValues::weight(model, weight_data, static_cast<size_t>(ref->weight))));
    }
  }
  // The work is counted when the first output is sized, before the kernel computes it.
  runtime::KernelContext context(node.op, [&](EValue& value, Span<const int64_t> sizes) {
    if (!outputs.empty() && &value == outputs[0]) {
      KILN_RETURN_IF_ERROR(count_work(node, inputs, sizes, limits.max_flops, flops));
    }
    return values.resize(value, sizes, node);
  });
  Status status = kernel(context, inputs, outputs, runtime::Attributes(std::move(attributes)));
  if (!status.ok()) return status.with_context(describe(node));
  if (observe) {
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] >= 0 && outputs[i]->is_tensor()) observe(node, outputs[i]->to_tensor());
    }
  }
  return Status();
}

}  // namespace

Result<std::vector<ReferenceValue>> run_reference(
    const ir::Model& model, std::string_view function, Span<const Tensor* const> inputs,
    const ReferenceLimits& limits, const std::vector<Span<const uint8_t>>& weight_data,
    const ReferenceObserver& observe) {
  const ir::Graph* graph = model.find_function(function);
  if (graph == nullptr) {
    return Status(Error::NotFound, "no function '" + std::string(function) + "' in the model");
  }
  if (inputs.size() != graph->inputs.size()) {
    return Status(Error::InvalidArgument, "function '" + std::string(function) + "' takes " +
                                              std::to_string(graph->inputs.size()) +
                                              " inputs, got " + std::to_string(inputs.size()));
  }
  RunValues values(model, *graph, weight_data, limits.max_bytes);
  for (size_t i = 0; i < inputs.size(); ++i) {
    values[static_cast<size_t>(graph->inputs[i])] = EValue(*inputs[i]);
  }
  double flops = 0;
  for (const ir::Node& node : graph->nodes) {
    KILN_RETURN_IF_ERROR(
        run_node(model, *graph, node, values, weight_data, limits, flops, observe));
  }
  std::vector<ReferenceValue> results;
  for (int v : graph->outputs) {
    const EValue& value = values[static_cast<size_t>(v)];
    if (!value.is_tensor()) {
      return Status(Error::Internal, "function output " + std::to_string(v) + " is no tensor");
    }
    const Tensor& t = value.to_tensor();
    ReferenceValue out;
    out.dtype = t.dtype();
    out.sizes = sizes_of(value);
    const auto* data = static_cast<const uint8_t*>(t.data());
    if (data != nullptr) out.bytes.assign(data, data + t.nbytes());
    out.bytes.resize(std::max<size_t>(out.bytes.size(), 1));
    results.push_back(std::move(out));
  }
  return results;
}

}  // namespace kiln::engine::compile
