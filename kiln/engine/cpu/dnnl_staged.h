#pragma once

// An op of one primitive whose inputs and output may be in oneDNN's own layouts: each is
// converted from or to the caller's plain tensor through a buffer the op holds, unless layout
// propagation hands it over natively (internal to kiln/engine/cpu).

#include <kiln/engine/cpu/dnnl_common.h>

#include <optional>

namespace kiln::engine::cpu::dnnl_impl {

class StagedOp final : public DnnlOp {
 public:
  /// Takes `primitive` (built from `pd`) and the output's plain sizes; holds the scratchpad.
  StagedOp(const OpDesc& desc, dnnl::primitive primitive, const dnnl::primitive_desc_base& pd,
           std::vector<int64_t> output_sizes);

  /// Input `index` (a run-time tensor in plain layout `plain`) feeds argument `arg`, which the
  /// primitive reads in layout `want`; a conversion is staged when the two differ.
  void bind_input(size_t index, int arg, const dnnl::memory::desc& plain,
                  const dnnl::memory::desc& want);
  /// Input `index` is a parameter in plain layout `md` (never staged): a copy of its constant
  /// value when `desc` has one, else the run-time tensor.
  void bind_param(const OpDesc& desc, size_t index, int arg, const dnnl::memory::desc& md);
  /// The output (plain layout `plain`) is argument `arg`, written in layout `made`.
  void bind_output(int arg, const dnnl::memory::desc& plain, const dnnl::memory::desc& made);

  /// From now on, `run` copies the inputs' bytes (in their bound layouts) one after another
  /// into the output (skipping an input already in place) instead of running the primitive:
  /// for a Concat whose inputs are
  /// contiguous slices of the output's layout (oneDNN's concat copies such slices in small
  /// pieces, several times slower than one copy each).
  void copy_inputs_in_order() {
    copy_inputs_ = true;
    describe_ += " (pieces copied)";
  }
  /// From now on, `run` copies the inputs' bytes (all plain, none converted) row by row: for
  /// each of `rows` rows, each input's row in turn, one after another into the output (a
  /// plain Concat whose axis has `rows` rows of the dimensions before it, such as a decoder's
  /// keys appended to its past ones, head by head). oneDNN's concat copied GPT decode's 66 KB
  /// in 5.7 us.
  void copy_rows_in_order(int64_t rows) {
    copy_rows_ = rows;
    describe_ += " (rows copied)";
  }
  /// y = a op b over `count` floats, on up to `threads` threads.
  using Elementwise = void (*)(const float* a, const float* b, float* y, int64_t count,
                               int threads);
  /// From now on, `run` computes the output from inputs 0 and 1 with `loops` (kiln's own)
  /// instead of running the primitive, which may be empty: over the bytes of the bound layouts,
  /// which must be one and the same for the three (a same-shape Add or Mul, whose primitive
  /// would generate code at creation for memory-bound work).
  void run_on_loops(Elementwise loops, const std::string& what) {
    loops_ = loops;
    describe_ = "kiln " + what + " (own loops, in the layout of its inputs)";
  }
  std::string provider() const override { return loops_ != nullptr ? "kiln" : "onednn"; }
  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override;
  /// With `copy_inputs_in_order` and no input or output converted: the inputs' offsets.
  std::optional<std::vector<uint64_t>> input_offsets_in_output() const override;
  std::optional<NativeLayout> native_input_layout(size_t index) const override;
  std::optional<NativeLayout> native_output_layout(size_t index) const override;
  Status use_native_input(size_t index) override;
  Status use_native_output(size_t index) override;
  /// Makes the conversions left after the layout hand-overs and binds their buffers.
  Status finish() override;

 private:
  struct Binding {
    size_t index = 0;
    int arg = 0;
    std::optional<Staging> stage;  ///< The conversion, when the layouts differ.
  };
  dnnl::primitive primitive_;
  std::vector<Binding> inputs_;
  std::optional<Binding> output_;
  bool copy_inputs_ = false;
  int64_t copy_rows_ = 0;  ///< `copy_rows_in_order`'s rows; 0: off.
  Elementwise loops_ = nullptr;
  bool finished_ = false;
};

/// The memory descriptor `layout_bytes` encoded, when `bytes` is one of dims `dims`; nullopt
/// for anything else (then the op works on plain tensors).
std::optional<dnnl::memory::desc> layout_from_bytes(const std::string& bytes,
                                                    const dnnl::memory::dims& dims);

/// `desc.input_layouts[index]` as a descriptor of dims `dims`, or nullopt (absent, plain or
/// not decodable).
std::optional<dnnl::memory::desc> input_layout_hint(const OpDesc& desc, size_t index,
                                                    const dnnl::memory::dims& dims);

}  // namespace kiln::engine::cpu::dnnl_impl
