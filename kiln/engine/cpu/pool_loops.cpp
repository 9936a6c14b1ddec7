// MaxPool and AveragePool (2-D, f32) on loops of kiln's own, for the sizes where oneDNN's
// primitive costs more than the work: a call of one costs about 1 us more than these loops
// (an 8x8 digit classifier's second pool, 10 x 32 x 4 x 4 in nChw16c: 1.2 us against 0.45,
// kiln_pool_bench), and the reference kernel, which took the pools of least work, is slower
// still (about 7 ns an element). Two kinds of input take them:
// - small ones in the layout of their producer, nChw16c or nhwc (a Conv's), read and written
//   natively: at most kMaxNativeElements, beyond which oneDNN runs the windows faster, unless
//   the op avoids generated code (OpDesc::avoid_generated_code: a function expecting frequent
//   reshapes, where oneDNN's kernel would be generated again at each new size);
// - those of little work in any layout (`plain`: what the reference kernel took before).
// They vectorize over 16 channels of one pixel. Lanes that are not contiguous (plain NCHW)
// are first copied into a staging buffer as [H][W][16] (and the result likewise copied out).
// The window geometry (pads, strides, dilations, ceil_mode, SAME_*) is the reference kernel's.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/dnnl_staged.h>
#include <kiln/engine/cpu/loop_epilogue.h>
#include <kiln/engine/cpu/vector_math.h>
#include <kiln/kernels/conv_geometry.h>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;
using namespace vec;  // NOLINT: the vector helpers of the loops below

// Inputs in a producer's nChw16c or nhwc of at most this many elements take the loops (the
// digit classifier's second pool: 0.45 us against oneDNN's 1.2). oneDNN's kernels cost about
// 1 us a call more, but beyond this they run the windows faster (kiln_pool_bench: equal at
// 64 x 14 x 14, 3.6 against 5.1 us at 64 x 28 x 28).
constexpr int64_t kMaxNativeElements = int64_t{1} << 13;

// Where element (n, c, h, w) of a tensor is: channels in groups of 16 lanes, lane j of group g
// at n * batch + g * group + h * row + w * pixel + j * lane.
struct Strides {
  int64_t batch = 0, group = 0, row = 0, pixel = 0, lane = 0;
  bool lanes_contiguous() const { return lane == 1; }
};

enum class Layout { Plain, Blocked16, Nhwc };

Strides strides_of(Layout layout, int64_t channels, int64_t h, int64_t w) {
  const int64_t groups = (channels + kLanes - 1) / kLanes;
  switch (layout) {
    case Layout::Blocked16:
      return {groups * h * w * kLanes, h * w * kLanes, w * kLanes, kLanes, 1};
    case Layout::Nhwc:
      return {h * w * channels, kLanes, w * channels, channels, 1};
    case Layout::Plain:
      break;
  }
  return {channels * h * w, kLanes * h * w, w, 1, h * w};
}

memory::format_tag tag_of(Layout layout) {
  return layout == Layout::Blocked16 ? memory::format_tag::aBcd16b : memory::format_tag::acdb;
}

// The taps of one output position along one axis that fall inside the input: [first, last),
// the input index of tap 0, and the taps inside the padded extent (count_include_pad's).
struct AxisWindow {
  int64_t first = 0, last = 0, start = 0, padded_taps = 0;
};

std::vector<AxisWindow> axis_windows(const kernels::internal::Window& w, size_t slot) {
  std::vector<AxisWindow> out(static_cast<size_t>(w.out[slot]));
  for (int64_t o = 0; o < w.out[slot]; ++o) {
    AxisWindow& a = out[static_cast<size_t>(o)];
    a.start = o * w.stride[slot] - w.pad_begin[slot];
    auto inside =
        kernels::internal::valid_range(w.kernel[slot], w.in[slot], w.dilation[slot], a.start);
    auto padded = kernels::internal::valid_range(w.kernel[slot],
                                                 w.in[slot] + w.pad_begin[slot] + w.pad_end[slot],
                                                 w.dilation[slot], a.start + w.pad_begin[slot]);
    a.first = inside.first;
    a.last = std::max(inside.first, inside.last);
    a.padded_taps = std::max<int64_t>(padded.last - padded.first, 0);
  }
  return out;
}

// One run's work, in plain values (the loops read nothing else).
struct Job {
  const float* x = nullptr;
  float* y = nullptr;
  Strides in, out;
  int64_t channels = 0, groups = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0, dh = 1, dw = 1;
  const AxisWindow* rows = nullptr;
  const AxisWindow* cols = nullptr;
  bool max = true, include_pad = false, blocked_out = false;
};

// AveragePool's window size at (r, c): its taps inside the input, or inside the pads.
[[gnu::always_inline]] inline float divisor(const Job& j, const AxisWindow& r,
                                            const AxisWindow& c) {
  const int64_t taps =
      j.include_pad ? r.padded_taps * c.padded_taps : (r.last - r.first) * (c.last - c.first);
  return static_cast<float>(taps);
}

// acc = max(acc, v) (NaN never wins, as in the reference) or acc + v. A macro: vectors passed
// by value to a function the clones do not inline would cross ABIs.
#define KILN_POOL_ACCUMULATE(acc, v)   \
  do {                                 \
    if constexpr (kMax) {              \
      acc = (v) > (acc) ? (v) : (acc); \
    } else {                           \
      acc += (v);                      \
    }                                  \
  } while (0)

// Group g of 16 channels of image n, each pixel's 16 lanes one vector. An input whose lanes
// are not contiguous (plain, or the last group of fewer than 16 channels in nhwc) is first
// copied into `stage` as [H][W][16], and such an output computed there and copied out: the
// vector loads then never read lanes just stored one by one, which waits for those stores.
template <bool kMax>
[[gnu::always_inline]] inline void pool_group(const Job& j, int64_t n, int64_t g, float* stage) {
  const int64_t valid = std::min<int64_t>(kLanes, j.channels - g * kLanes);
  const bool whole_in = j.in.lanes_contiguous() && (valid == kLanes || j.in.pixel == kLanes);
  const bool whole_out = j.out.lanes_contiguous() && (valid == kLanes || j.blocked_out);
  const float* image = j.x + n * j.in.batch + g * j.in.group;
  Strides in = j.in;
  if (!whole_in) {
    for (int64_t h = 0; h < j.in_h; ++h) {
      for (int64_t w = 0; w < j.in_w; ++w) {
        const float* from = image + h * in.row + w * in.pixel;
        float* to = stage + (h * j.in_w + w) * kLanes;
        for (int64_t l = 0; l < valid; ++l) to[l] = from[l * in.lane];
      }
    }
    image = stage;
    in = Strides{0, 0, j.in_w * kLanes, kLanes, 1};
  }
  float* final_result = j.y + n * j.out.batch + g * j.out.group;
  float* result = whole_out ? final_result : stage + j.in_h * j.in_w * kLanes;
  const int64_t out_row = whole_out ? j.out.row : j.out_w * kLanes;
  const int64_t out_pixel = whole_out ? j.out.pixel : kLanes;
  const int64_t tap_h = j.dh * in.row, tap_w = j.dw * in.pixel;
  // A blocked output's padding lanes are written zero.
  Floats lane_index;
  for (int l = 0; l < kLanes; ++l) lane_index[l] = static_cast<float>(l);
  const Floats keep = lane_index < splat(static_cast<float>(valid)) ? splat(1.0f) : splat(0.0f);
  const bool zero_padding = whole_out && valid < kLanes;
  const Floats init = splat(kMax ? -std::numeric_limits<float>::infinity() : 0.0f);
  for (int64_t oh = 0; oh < j.out_h; ++oh) {
    const AxisWindow r = j.rows[oh];
    const float* in_row = image + r.start * in.row;
    for (int64_t ow = 0; ow < j.out_w; ++ow) {
      const AxisWindow c = j.cols[ow];
      const float* base = in_row + c.start * in.pixel;
      // Two chains of maxima or sums, over pairs of window rows: one chain would wait on
      // each vector operation's latency.
      Floats even = init, odd = init;
      int64_t kh = r.first;
      for (; kh + 1 < r.last; kh += 2) {
        const float* p = base + kh * tap_h;
        for (int64_t kw = c.first; kw < c.last; ++kw) {
          const Floats v0 = load(p + kw * tap_w);
          const Floats v1 = load(p + tap_h + kw * tap_w);
          KILN_POOL_ACCUMULATE(even, v0);
          KILN_POOL_ACCUMULATE(odd, v1);
        }
      }
      if (kh < r.last) {
        const float* p = base + kh * tap_h;
        for (int64_t kw = c.first; kw < c.last; ++kw) {
          const Floats v0 = load(p + kw * tap_w);
          KILN_POOL_ACCUMULATE(even, v0);
        }
      }
      Floats acc;
      if constexpr (kMax) {
        acc = odd > even ? odd : even;
      } else {
        acc = (even + odd) / splat(divisor(j, r, c));
      }
      if (zero_padding) acc = keep > splat(0.0f) ? acc : splat(0.0f);
      store(result + oh * out_row + ow * out_pixel, acc);
    }
  }
  if (whole_out) return;
  for (int64_t oh = 0; oh < j.out_h; ++oh) {
    for (int64_t ow = 0; ow < j.out_w; ++ow) {
      const float* from = result + (oh * j.out_w + ow) * kLanes;
      float* to = final_result + oh * j.out.row + ow * j.out.pixel;
      for (int64_t l = 0; l < valid; ++l) to[l * j.out.lane] = from[l];
    }
  }
}

// Items [begin, end) of (image, group of 16 channels), in any of the layouts; `stage` holds
// (in_h x in_w + out_h x out_w) x 16 floats.
KILN_VECTOR_CLONES void pool_groups(const Job& j, int64_t begin, int64_t end, float* stage) {
  for (int64_t item = begin; item < end; ++item) {
    if (j.max) {
      pool_group<true>(j, item / j.groups, item % j.groups, stage);
    } else {
      pool_group<false>(j, item / j.groups, item % j.groups, stage);
    }
  }
}

class PoolLoopsOp final : public CpuOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc, bool plain);

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override { return describe_; }
  std::string provider() const override { return "kiln"; }

  std::optional<NativeLayout> native_input_layout(size_t index) const override {
    if (index != 0 || native_ == Layout::Plain) return std::nullopt;
    return native_layout(memory::desc(to_dims(in_sizes_), memory::data_type::f32, tag_of(native_)));
  }
  std::optional<NativeLayout> native_output_layout(size_t index) const override {
    if (index != 0 || native_ == Layout::Plain) return std::nullopt;
    return native_layout(
        memory::desc(to_dims(outputs_[0].sizes), memory::data_type::f32, tag_of(native_)));
  }
  Status use_native_input(size_t index) override {
    if (index != 0 || native_ == Layout::Plain) return CpuOp::use_native_input(index);
    in_ = native_;
    return Status();
  }
  Status use_native_output(size_t index) override {
    if (index != 0 || native_ == Layout::Plain) return CpuOp::use_native_output(index);
    out_ = native_;
    return Status();
  }

  /// Each thread's staging, where an input or output is plain (or the last group of nhwc
  /// channels partial): a large map handed over natively needs none.
  Status finish() override {
    finished_ = true;
    const int64_t channels = in_sizes_[1];
    auto whole = [channels](Layout l) {
      return l == Layout::Blocked16 || (l == Layout::Nhwc && channels % kLanes == 0);
    };
    if (empty_ || (whole(in_) && whole(out_))) return Status();
    const int64_t pixels =
        in_sizes_[2] * in_sizes_[3] + outputs_[0].sizes[2] * outputs_[0].sizes[3];
    stage_.assign(static_cast<size_t>(num_threads_ * pixels * kLanes), 0.0f);
    return Status();
  }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    if (inputs.empty() || inputs[0] == nullptr || outputs.size() != 1 || outputs[0] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op '" + op_ + "' (" + describe_ + "): expected input 0 and one output");
    }
    if (empty_) return Status();
    if (!finished_) KILN_RETURN_IF_ERROR(finish());
    Job j;
    j.x = static_cast<const float*>(inputs[0]->data());
    j.y = static_cast<float*>(outputs[0]->mutable_data());
    const int64_t batch = in_sizes_[0];
    j.channels = in_sizes_[1];
    j.groups = (j.channels + kLanes - 1) / kLanes;
    j.in_h = in_sizes_[2], j.in_w = in_sizes_[3];
    j.out_h = outputs_[0].sizes[2], j.out_w = outputs_[0].sizes[3];
    j.in = strides_of(in_, j.channels, j.in_h, j.in_w);
    j.out = strides_of(out_, j.channels, j.out_h, j.out_w);
    j.dh = dilation_h_, j.dw = dilation_w_;
    j.rows = rows_.data(), j.cols = cols_.data();
    j.max = max_, j.include_pad = include_pad_, j.blocked_out = out_ == Layout::Blocked16;
    const int64_t items = batch * j.groups;
    const int parts = static_cast<int>(std::min<int64_t>(num_threads_, items));
    const int64_t stage_floats = (j.in_h * j.in_w + j.out_h * j.out_w) * kLanes;
    if (parts <= 1) {
      pool_groups(j, 0, items, stage_.data());
      return Status();
    }
#pragma omp parallel for num_threads(parts) schedule(static)
    for (int t = 0; t < parts; ++t) {
      pool_groups(j, items * t / parts, items * (t + 1) / parts,
                  stage_.empty() ? nullptr : stage_.data() + t * stage_floats);
    }
    return Status();
  }

 private:
  std::string op_, describe_;
  bool max_ = true, include_pad_ = false, empty_ = false;
  int num_threads_ = 1;
  int64_t dilation_h_ = 1, dilation_w_ = 1;
  std::vector<int64_t> in_sizes_;
  std::vector<TensorDesc> outputs_;
  std::vector<AxisWindow> rows_, cols_;
  std::vector<float> stage_;  // each thread's copies of a group's input and output (finish)
  bool finished_ = false;
  Layout native_ = Layout::Plain;  // the producer's layout, when the loops read it natively
  Layout in_ = Layout::Plain, out_ = Layout::Plain;
};

Result<std::unique_ptr<CpuOp>> PoolLoopsOp::create(const OpDesc& desc, bool plain) {
  KILN_RETURN_IF_ERROR(check_inputs(desc, 1, 1));
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  if ((desc.op != "MaxPool" && desc.op != "AveragePool") || x.size() != 4 || !all_float(desc) ||
      !desc.post_ops.empty() || desc.num_outputs != 1 || input_constant(desc, 0) != nullptr) {
    return error(desc, Error::NotSupported,
                 "not a 2-D f32 MaxPool or AveragePool of one output, no post-ops");
  }
  Layout native = Layout::Plain;
  if (auto hint = input_layout_hint(desc, 0, to_dims(x))) {
    for (Layout layout : {Layout::Blocked16, Layout::Nhwc}) {
      if (layout_bytes(*hint) ==
          layout_bytes(memory::desc(to_dims(x), memory::data_type::f32, tag_of(layout)))) {
        native = layout;
      }
    }
  }
  const double elements = static_cast<double>(x[0]) * static_cast<double>(x[1]) *
                          static_cast<double>(x[2]) * static_cast<double>(x[3]);
  if (native != Layout::Plain && elements > static_cast<double>(kMaxNativeElements) &&
      !desc.avoid_generated_code) {
    native = Layout::Plain;  // oneDNN's kernels are the faster ones (but generate code)
  }
  if (native == Layout::Plain && !plain) {
    return error(desc, Error::NotSupported,
                 "plain, or more elements than the loops are for (oneDNN's kernels are faster)");
  }
  Attrs attrs(desc);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, attrs.get_ints("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, attrs.get_ints("strides"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, attrs.get_ints("dilations"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, attrs.get_ints("pads"));
  KILN_ASSIGN_OR_RETURN(int64_t ceil_mode, attrs.get_int("ceil_mode", 0));
  KILN_ASSIGN_OR_RETURN(int64_t include_pad, attrs.get_int("count_include_pad", 0));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, attrs.get_string("auto_pad", "NOTSET"));
  auto parsed = kernels::parse_auto_pad(desc.op, auto_pad);
  if (!parsed.ok()) return error(desc, parsed.error(), parsed.status().message());
  if (kernel.size() != 2) {
    return error(desc, Error::InvalidArgument,
                 "attribute 'kernel_shape' has " + std::to_string(kernel.size()) +
                     " values (expected 2 for a 4-D input)");
  }
  auto window = kernels::internal::forward_window(desc.op, x, kernel, strides, dilations, pads,
                                                  *parsed, ceil_mode != 0);
  if (!window.ok()) return error(desc, window.error(), window.status().message());
  const kernels::internal::Window& w = *window;
  KILN_RETURN_IF_ERROR(
      check_planned_output(desc, 0, kernels::internal::window_output_shape(x[0], x[1], w)));
  auto op = std::make_unique<PoolLoopsOp>();
  op->op_ = desc.op;
  op->max_ = desc.op == "MaxPool";
  op->include_pad_ = include_pad != 0;
  op->num_threads_ = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
  op->in_sizes_ = x;
  const size_t h = w.slot(0), wd = w.slot(1);
  op->dilation_h_ = w.dilation[h];
  op->dilation_w_ = w.dilation[wd];
  op->outputs_ = {TensorDesc{runtime::ScalarType::Float32,
                             kernels::internal::window_output_shape(x[0], x[1], w)}};
  op->native_ = native;
  // An empty output (a dimension of 0) has nothing to compute, whatever its other dimensions
  // (a package's shapes may hold any): no windows nor staging are laid out for it, and it runs
  // no item. Otherwise its dimensions, checked with the plan's values, bound what is.
  const std::vector<int64_t>& y = op->outputs_[0].sizes;
  if (std::find(y.begin(), y.end(), 0) != y.end()) {
    op->empty_ = true;
  } else {
    op->rows_ = axis_windows(w, h);
    op->cols_ = axis_windows(w, wd);
  }
  op->describe_ = "kiln " + desc.op + " (own loops: 16 channels a vector" +
                  (op->native_ == Layout::Blocked16 ? ", nChw16c natively"
                   : op->native_ == Layout::Nhwc    ? ", nhwc natively"
                                                    : "") +
                  ")";
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_pool_loops(const OpDesc& desc, bool plain) {
  return PoolLoopsOp::create(desc, plain);
}

}  // namespace kiln::engine::cpu::dnnl_impl
