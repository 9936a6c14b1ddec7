// Layout propagation between oneDNN steps (see propagate_layouts in function_plan.h), and the
// choice of blocked Conv layouts for Winograd (has_winograd_conv) and depthwise-separable
// networks (has_depthwise_conv).

#include <kiln/engine/compile/function_plan.h>

#include <algorithm>
#include <variant>

namespace kiln::engine::compile {

namespace {

// One read of a value: the step and the position among its inputs.
struct Use {
  size_t step;
  size_t input;
};

}  // namespace

std::string producer_layout(const CompiledFunctionImpl& impl, int value) {
  for (auto step = impl.steps.rbegin(); step != impl.steps.rend(); ++step) {
    if (step->outputs.empty() || step->outputs[0] != value) continue;
    if (step->cpu_op == nullptr) return std::string();
    auto native = step->cpu_op->native_output_layout(0);
    return native ? native->id : std::string();
  }
  return std::string();
}

namespace {

std::vector<int64_t> ints_or(const ir::Node& node, const char* name,
                             std::vector<int64_t> fallback) {
  const ir::Attribute* a = node.attribute(name);
  const auto* v = a ? std::get_if<std::vector<int64_t>>(&a->value) : nullptr;
  return v ? *v : fallback;
}

// Whether the Conv has a Winograd kernel's shape (its weight's size aside).
bool winograd_shape(const ir::Node& node, const std::vector<std::unique_ptr<Slot>>& slots) {
  if (node.op != "Conv" || !node.domain.empty() || node.inputs.size() < 2 || node.inputs[0] < 0 ||
      node.inputs[1] < 0) {
    return false;
  }
  const Slot& x = *slots[static_cast<size_t>(node.inputs[0])];
  const Slot& w = *slots[static_cast<size_t>(node.inputs[1])];
  if (!x.sizes || !w.sizes || w.kind != Slot::Kind::Constant || x.sizes->size() != 4 ||
      *w.sizes != std::vector<int64_t>{(*w.sizes)[0], (*x.sizes)[1], 3, 3}) {
    return false;
  }
  const ir::Attribute* group = node.attribute("group");
  const auto* g = group ? std::get_if<int64_t>(&group->value) : nullptr;
  auto ones = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t i) { return i == 1; });
  };
  constexpr int64_t kBlock = 16;
  return (g == nullptr || *g == 1) && ones(ints_or(node, "strides", {})) &&
         ones(ints_or(node, "dilations", {})) && (*x.sizes)[1] % kBlock == 0 &&
         (*w.sizes)[0] % kBlock == 0;
}

}  // namespace

bool has_large_weights(const ir::Node& node, const std::vector<std::unique_ptr<Slot>>& slots) {
  if (node.op != "Conv" || node.inputs.size() < 2 || node.inputs[1] < 0) return false;
  const Slot& w = *slots[static_cast<size_t>(node.inputs[1])];
  if (w.kind != Slot::Kind::Constant || !w.sizes) return false;
  constexpr int64_t kMaxWeights = int64_t{1} << 20;
  int64_t numel = 1;
  for (int64_t d : *w.sizes) {
    if (d <= 0 || numel > kMaxWeights) return numel > kMaxWeights;
    numel *= d;
  }
  return numel > kMaxWeights;
}

// The direct kernel wins on an Intel Xeon (winograd_fit), not on an AMD EPYC (AVX-512 with
// 512-bit FMAs done in two halves, where the direct kernel is the slower): there the Winograd
// kernel took an OCR detector's runs to 6.9-7.2 ms against 8.3-8.4 at 1 thread and
// 3.7-3.8 against 4.3-4.4 at 2 (its stem, head and smoothing Convs, `kiln bench`).
bool direct_wins_one_block() {
  static const bool wins = [] {
    __builtin_cpu_init();
    return !__builtin_cpu_is("amd");
  }();
  return wins;
}

WinogradFit winograd_fit(const ir::Node& node, const std::vector<std::unique_ptr<Slot>>& slots,
                         bool own_loops) {
  if (!winograd_shape(node, slots)) return WinogradFit::No;
  // A Winograd weight is 16/9 (oneDNN's F(2x2, 3x3)) to 4 (F(4x4, 3x3)) times the direct
  // one (kiln's F(3x3, 3x3): 25/9), and the Conv gains least where weights are large and
  // images small: ResNet-18's 7x7 stage on Winograd ran 5% faster but
  // made its cache entry 77 MB against 47 and its warm load 13-15 ms against 10-12 (mapping
  // and checking the larger entry), so such Convs stay direct.
  if (has_large_weights(node, slots)) return WinogradFit::TooLarge;
  // One block of output channels over a large image: oneDNN's Winograd kernel multiplies
  // matrices one block wide, and its transformed tiles of a large image leave the caches, so
  // the transforms outweigh the multiplications saved. On an Intel Xeon (two 512-bit FMA units)
  // it took 1.3-1.8 x the direct kernel's time for 16 output channels at 80 x 80 and above, at
  // 1 and 2 threads (an OCR detector's stem and head: 16 -> 16 at 160 x 160 1.25 ms against
  // 0.74, 64 -> 16 at 80 x 80 1.07 against 0.72); from 48 output channels, or below 40 x 40,
  // it won or tied. On CPUs of half that FMA width the direct kernel is slower, and the
  // Winograd kernel ahead (direct_wins_one_block).
  const Slot& x = *slots[static_cast<size_t>(node.inputs[0])];
  const Slot& w = *slots[static_cast<size_t>(node.inputs[1])];
  constexpr int64_t kOneBlock = 16, kLargeImage = 80 * 80;
  // kiln's Winograd loops (winograd_conv.cpp) run these 1.4-2 x faster than the direct ones,
  // at 1 and 2 threads (`kiln_winograd_bench`, on an AMD EPYC: 16 -> 16 at 160 x 160 150
  // GFLOP/s against 102, 64 -> 16 at 80 x 80 182 against 109, at 1 thread; on an Intel Xeon
  // the OCR detector's such Convs 0.51-0.65 ms against 0.99-1.0 direct).
  if (!own_loops && direct_wins_one_block() && (*w.sizes)[0] <= kOneBlock &&
      (*x.sizes)[2] * (*x.sizes)[3] >= kLargeImage) {
    return WinogradFit::FewOutputChannels;
  }
  return WinogradFit::Yes;
}

bool has_winograd_conv(const ir::Graph& graph, const std::vector<std::unique_ptr<Slot>>& slots,
                       const std::vector<bool>& skipped, bool own_loops) {
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (!skipped[n] && winograd_fit(graph.nodes[n], slots, own_loops) == WinogradFit::Yes) {
      return true;
    }
  }
  return false;
}

bool has_depthwise_conv(const ir::Graph& graph, const std::vector<std::unique_ptr<Slot>>& slots,
                        const std::vector<bool>& skipped) {
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const ir::Node& node = graph.nodes[n];
    if (skipped[n] || node.op != "Conv" || !node.domain.empty() || node.inputs.size() < 2 ||
        node.inputs[0] < 0) {
      continue;
    }
    const Slot& x = *slots[static_cast<size_t>(node.inputs[0])];
    const ir::Attribute* group = node.attribute("group");
    const auto* g = group ? std::get_if<int64_t>(&group->value) : nullptr;
    if (x.sizes && x.sizes->size() == 4 && g != nullptr && *g > 1 && *g == (*x.sizes)[1]) {
      return true;
    }
  }
  return false;
}

runtime::Result<size_t> propagate_layouts(CompiledFunctionImpl& impl) {
  const size_t num_slots = impl.slots.size();
  std::vector<int> producer(num_slots, -1);
  std::vector<std::vector<Use>> uses(num_slots);
  for (size_t i = 0; i < impl.steps.size(); ++i) {
    const Step& step = impl.steps[i];
    for (size_t k = 0; k < step.inputs.size(); ++k) {
      if (step.inputs[k] >= 0) uses[static_cast<size_t>(step.inputs[k])].push_back({i, k});
    }
    if (!step.outputs.empty() && step.outputs[0] >= 0) {
      producer[static_cast<size_t>(step.outputs[0])] = static_cast<int>(i);
    }
  }
  std::vector<bool> is_output(num_slots, false);
  for (int v : impl.outputs) is_output[static_cast<size_t>(v)] = true;

  size_t kept = 0;
  for (size_t v = 0; v < num_slots; ++v) {
    if (producer[v] < 0 || is_output[v] || uses[v].empty()) continue;
    Slot& slot = *impl.slots[v];
    if (slot.kind == Slot::Kind::Constant || slot.kind == Slot::Kind::Input || !slot.sizes) {
      continue;
    }
    Step& made_by = impl.steps[static_cast<size_t>(producer[v])];
    if (made_by.cpu_op == nullptr || made_by.outputs.size() != 1) continue;
    auto layout = made_by.cpu_op->native_output_layout(0);
    if (!layout) continue;
    bool agree = std::all_of(uses[v].begin(), uses[v].end(), [&](const Use& use) {
      const Step& reader = impl.steps[use.step];
      // (A step reading the value twice, e.g. a Conv's source and its residual, has two uses:
      // both positions must want the layout, and both are switched.)
      if (reader.cpu_op == nullptr) return false;
      auto wanted = reader.cpu_op->native_input_layout(use.input);
      return wanted && wanted->id == layout->id;
    });
    if (!agree) continue;
    KILN_RETURN_IF_ERROR(made_by.cpu_op->use_native_output(0));
    for (const Use& use : uses[v]) {
      KILN_RETURN_IF_ERROR(impl.steps[use.step].cpu_op->use_native_input(use.input));
    }
    slot.native_bytes = std::max<uint64_t>(layout->bytes, 1);
    std::string note = "output in native layout";
    made_by.placement.detail += made_by.placement.detail.empty() ? note : "; " + note;
    ++kept;
  }
  return kept;
}

}  // namespace kiln::engine::compile
