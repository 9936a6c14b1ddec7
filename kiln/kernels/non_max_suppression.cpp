// NonMaxSuppression, as onnxruntime computes it (the ONNX reference is a port of it). The
// number of selected boxes depends on the data, so the adapter resizes its output to
// [num_selected, 3] after the selection: the exporter plans such an output as an unbounded
// tensor, whose storage grows at run time.

#include <kiln/kernels/image_common.h>
#include <kiln/kernels/image_ops.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "NonMaxSuppression";

struct Box {
  double x_min, y_min, x_max, y_max;
};

Box make_box(const double* v, bool center_point_box) {
  if (center_point_box) {  // [x_center, y_center, width, height]
    return Box{v[0] - v[2] / 2, v[1] - v[3] / 2, v[0] + v[2] / 2, v[1] + v[3] / 2};
  }
  // [y1, x1, y2, x2], either corner first
  return Box{std::min(v[1], v[3]), std::min(v[0], v[2]), std::max(v[1], v[3]),
             std::max(v[0], v[2])};
}

bool suppresses(const Box& a, const Box& b, double iou_threshold) {
  const double ix_min = std::max(a.x_min, b.x_min);
  const double ix_max = std::min(a.x_max, b.x_max);
  const double iy_min = std::max(a.y_min, b.y_min);
  const double iy_max = std::min(a.y_max, b.y_max);
  if (ix_max <= ix_min || iy_max <= iy_min) return false;
  const double intersection = (ix_max - ix_min) * (iy_max - iy_min);
  const double area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const double area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const double union_area = area_a + area_b - intersection;
  if (area_a <= 0 || area_b <= 0 || union_area <= 0) return false;
  return intersection / union_area > iou_threshold;
}

template <typename T>
std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  const T* data = t.data_ptr<T>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(load(data[i]));
  return out;
}

// One optional scalar input: absent or empty gives `fallback`.
Result<double> scalar_input(Span<runtime::EValue* const> inputs, size_t index,
                            std::string_view name, double fallback) {
  if (internal::is_absent(inputs, index)) return fallback;
  KILN_ASSIGN_OR_RETURN(auto values, internal::read_float_list(kOp, inputs, index, name));
  if (values.size() > 1) {
    return internal::invalid_argument(kOp, "input " + std::to_string(index) + " (" +
                                               std::string(name) + ") has " +
                                               std::to_string(values.size()) +
                                               " elements (expected 1)");
  }
  return values.empty() ? fallback : values[0];
}

Status non_max_suppression_kernel(runtime::KernelContext& context,
                                  Span<runtime::EValue* const> inputs,
                                  Span<runtime::EValue* const> outputs,
                                  const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 5, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* boxes, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* scores, internal::input_tensor(kOp, inputs, 1));
  NmsOptions options;
  KILN_ASSIGN_OR_RETURN(int64_t center, internal::int_attribute(kOp, attributes, "center_point_box", 0));
  if (center != 0 && center != 1) {
    return internal::invalid_argument(kOp, "attribute 'center_point_box' is " +
                                               std::to_string(center) + " (expected 0 or 1)");
  }
  options.center_point_box = center == 1;
  if (!internal::is_absent(inputs, 2)) {
    KILN_ASSIGN_OR_RETURN(auto values,
                          internal::read_int_list(kOp, inputs, 2, "max_output_boxes_per_class"));
    if (values.size() > 1) {
      return internal::invalid_argument(
          kOp, "input 2 (max_output_boxes_per_class) has " + std::to_string(values.size()) +
                   " elements (expected 1)");
    }
    if (!values.empty()) options.max_output_boxes_per_class = values[0];
  }
  KILN_ASSIGN_OR_RETURN(options.iou_threshold, scalar_input(inputs, 3, "iou_threshold", 0.0));
  if (!internal::is_absent(inputs, 4)) {
    KILN_ASSIGN_OR_RETURN(double threshold, scalar_input(inputs, 4, "score_threshold", 0.0));
    options.score_threshold = threshold;
  }
  KILN_ASSIGN_OR_RETURN(auto selected, non_max_suppression(*boxes, *scores, options));
  KILN_ASSIGN_OR_RETURN(runtime::EValue * out,
                        internal::output_tensor_of_dtype(kOp, outputs, 0, ScalarType::Int64));
  const int64_t rows = static_cast<int64_t>(selected.size()) / 3;
  const int64_t sizes[2] = {rows, 3};
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, sizes));
  Tensor& result = out->to_tensor();
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, result, ScalarType::Int64, sizes));
  std::copy(selected.begin(), selected.end(), result.mutable_data_ptr<int64_t>());
  return Status();
}

const runtime::KernelRegistration kRegisterNonMaxSuppression("NonMaxSuppression",
                                                             non_max_suppression_kernel);

}  // namespace

Result<std::vector<int64_t>> non_max_suppression(const Tensor& boxes, const Tensor& scores,
                                                 const NmsOptions& options) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0 (boxes)", boxes.dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(
      internal::check_same_dtype(kOp, "input 1 (scores)", scores.dtype(), boxes.dtype()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0 (boxes)", boxes));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1 (scores)", scores));
  if (boxes.dim() != 3 || boxes.size(2) != 4 || scores.dim() != 3 ||
      scores.size(0) != boxes.size(0) || scores.size(2) != boxes.size(1)) {
    return internal::invalid_argument(
        kOp, "input 0 (boxes) has shape " + runtime::shape_to_string(boxes.sizes()) +
                 " and input 1 (scores) " + runtime::shape_to_string(scores.sizes()) +
                 " (expected [B, S, 4] and [B, K, S])");
  }
  if (!(options.iou_threshold >= 0 && options.iou_threshold <= 1)) {
    return internal::invalid_argument(kOp, "input 3 (iou_threshold) is " +
                                               std::to_string(options.iou_threshold) +
                                               " (expected 0..1)");
  }
  std::vector<double> box_values, score_values;
  KILN_RETURN_IF_ERROR(dispatch<DtypeGroup::Float>(kOp, "input 0", boxes.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    box_values = to_doubles<T>(boxes);
    score_values = to_doubles<T>(scores);
    return Status();
  }));
  const int64_t batches = boxes.size(0);
  const int64_t spatial = boxes.size(1);
  const int64_t classes = scores.size(1);
  const int64_t limit = std::max<int64_t>(options.max_output_boxes_per_class, 0);
  std::vector<int64_t> selected;
  std::vector<int64_t> order;
  std::vector<Box> kept;
  for (int64_t b = 0; b < batches && limit > 0; ++b) {
    for (int64_t k = 0; k < classes; ++k) {
      const double* class_scores = score_values.data() + (b * classes + k) * spatial;
      order.clear();
      for (int64_t i = 0; i < spatial; ++i) {
        // A nan score is never selected (and would break the sort).
        if (std::isnan(class_scores[i])) continue;
        if (!options.score_threshold || class_scores[i] > *options.score_threshold) {
          order.push_back(i);
        }
      }
      std::stable_sort(order.begin(), order.end(), [&](int64_t lhs, int64_t rhs) {
        return class_scores[lhs] > class_scores[rhs];
      });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= limit) break;
        const Box box = make_box(box_values.data() + (b * spatial + i) * 4,
                                 options.center_point_box);
        bool keep = true;
        for (const Box& other : kept) {
          if (suppresses(other, box, options.iou_threshold)) {
            keep = false;
            break;
          }
        }
        if (!keep) continue;
        kept.push_back(box);
        selected.insert(selected.end(), {b, k, i});
      }
    }
  }
  return selected;
}

}  // namespace kiln::kernels
