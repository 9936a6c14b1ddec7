// Resize's plan: the attribute parsers and the output sizes and scales for given scales or
// sizes, axes and keep_aspect_ratio_policy (the ONNX reference's rules).

#include <kiln/kernels/adapter.h>
#include <kiln/kernels/image_ops.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::Result;
using runtime::Span;
using runtime::Status;

namespace {

constexpr std::string_view kOp = "Resize";

template <typename Enum, size_t N>
Result<Enum> parse_choice(std::string_view attribute, std::string_view value,
                          const std::pair<std::string_view, Enum> (&choices)[N]) {
  std::string accepted;
  for (size_t i = 0; i < N; ++i) {
    if (choices[i].first == value) return choices[i].second;
    accepted += (i == 0 ? "'" : i + 1 == N ? " or '" : ", '") + std::string(choices[i].first) + "'";
  }
  return Status(Error::InvalidArgument, internal::action(kOp) + ": attribute '" +
                                            std::string(attribute) + "' is '" +
                                            std::string(value) + "' (expected " + accepted + ")");
}

}  // namespace

Result<ResizeMode> parse_resize_mode(std::string_view mode) {
  static constexpr std::pair<std::string_view, ResizeMode> kChoices[] = {
      {"nearest", ResizeMode::Nearest}, {"linear", ResizeMode::Linear},
      {"cubic", ResizeMode::Cubic}};
  return parse_choice("mode", mode, kChoices);
}

Result<ResizeCoordinates> parse_resize_coordinates(std::string_view mode) {
  static constexpr std::pair<std::string_view, ResizeCoordinates> kChoices[] = {
      {"half_pixel", ResizeCoordinates::HalfPixel},
      {"half_pixel_symmetric", ResizeCoordinates::HalfPixelSymmetric},
      {"pytorch_half_pixel", ResizeCoordinates::PytorchHalfPixel},
      {"align_corners", ResizeCoordinates::AlignCorners},
      {"asymmetric", ResizeCoordinates::Asymmetric},
      {"tf_crop_and_resize", ResizeCoordinates::TfCropAndResize},
      {"tf_half_pixel_for_nn", ResizeCoordinates::TfHalfPixelForNn}};
  return parse_choice("coordinate_transformation_mode", mode, kChoices);
}

Result<ResizeNearest> parse_resize_nearest(std::string_view mode) {
  static constexpr std::pair<std::string_view, ResizeNearest> kChoices[] = {
      {"round_prefer_floor", ResizeNearest::RoundPreferFloor},
      {"round_prefer_ceil", ResizeNearest::RoundPreferCeil},
      {"floor", ResizeNearest::Floor},
      {"ceil", ResizeNearest::Ceil}};
  return parse_choice("nearest_mode", mode, kChoices);
}

Result<ResizeAspect> parse_resize_aspect(std::string_view policy) {
  static constexpr std::pair<std::string_view, ResizeAspect> kChoices[] = {
      {"stretch", ResizeAspect::Stretch},
      {"not_larger", ResizeAspect::NotLarger},
      {"not_smaller", ResizeAspect::NotSmaller}};
  return parse_choice("keep_aspect_ratio_policy", policy, kChoices);
}

Result<ResizePlan> resize_plan(Span<const int64_t> input, const std::vector<double>* roi,
                               const std::vector<double>* scales,
                               const std::vector<int64_t>* sizes, const ResizeOptions& options) {
  const auto rank = static_cast<int64_t>(input.size());
  std::vector<int64_t> axes = options.axes;
  std::vector<bool> seen(input.size(), false);
  for (int64_t& axis : axes) {
    if (axis < -rank || axis >= rank || seen[static_cast<size_t>(axis < 0 ? axis + rank : axis)]) {
      return Status(Error::InvalidArgument,
                    "attribute 'axes' " + runtime::shape_to_string(options.axes) + " has " +
                        std::to_string(axis) + " (expected distinct axes in " +
                        std::to_string(-rank) + ".." + std::to_string(rank - 1) + ")");
    }
    if (axis < 0) axis += rank;
    seen[static_cast<size_t>(axis)] = true;
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  const size_t n = axes.size();
  if ((scales == nullptr) == (sizes == nullptr)) {
    return Status(Error::InvalidArgument, "scales and sizes are both " +
                                              std::string(scales ? "given" : "missing") +
                                              " (expected exactly one)");
  }
  const size_t given = scales ? scales->size() : sizes->size();
  if (given != n) {
    return Status(Error::InvalidArgument,
                  std::string(scales ? "scales" : "sizes") + " have " + std::to_string(given) +
                      " values (expected " + std::to_string(n) + ", one per axis of " +
                      (options.axes.empty() ? "input 0" : "attribute 'axes'") + ")");
  }
  ResizePlan plan;
  plan.sizes.assign(input.begin(), input.end());
  plan.scales.assign(input.size(), 1.0);
  for (size_t i = 0; i < n; ++i) {
    const auto d = static_cast<size_t>(axes[i]);
    const auto in = static_cast<double>(input[d]);
    if (scales != nullptr) {
      const double s = (*scales)[i];
      // floor(scale * in), as the reference; the bound keeps the size representable.
      if (!(s > 0) || !(s * in < 9.0e15)) {
        return Status(Error::InvalidArgument, "scales have " + std::to_string(s) +
                                                  " at position " + std::to_string(i) +
                                                  " (expected a finite scale > 0)");
      }
      plan.scales[d] = s;
      plan.sizes[d] = static_cast<int64_t>(std::floor(s * in));
    } else {
      const int64_t size = (*sizes)[i];
      if (size < 0 || (size > 0 && input[d] == 0)) {
        return Status(Error::InvalidArgument,
                      "sizes have " + std::to_string(size) + " at position " + std::to_string(i) +
                          " (expected a size >= 0, and 0 for axis " + std::to_string(d) +
                          " of size 0)");
      }
      plan.sizes[d] = size;
      plan.scales[d] = input[d] == 0 ? 1.0 : static_cast<double>(size) / in;
    }
  }
  if (sizes != nullptr && options.aspect != ResizeAspect::Stretch && !axes.empty()) {
    double scale = plan.scales[static_cast<size_t>(axes[0])];
    for (int64_t axis : axes) {
      const double s = plan.scales[static_cast<size_t>(axis)];
      scale = options.aspect == ResizeAspect::NotLarger ? std::min(scale, s) : std::max(scale, s);
    }
    for (int64_t axis : axes) {
      const auto d = static_cast<size_t>(axis);
      plan.scales[d] = scale;
      plan.sizes[d] = static_cast<int64_t>(scale * static_cast<double>(input[d]) + 0.5);
    }
  }
  for (size_t d = 0; d < input.size(); ++d) {
    if (plan.sizes[d] > 0 && !(plan.scales[d] > 0)) {
      return Status(Error::InvalidArgument, "sizes give axis " + std::to_string(d) +
                                                " the scale 0 (expected a scale > 0)");
    }
  }
  plan.roi.assign(input.size(), 0.0);
  plan.roi.resize(2 * input.size(), 1.0);
  if (options.coordinates == ResizeCoordinates::TfCropAndResize) {
    if (roi == nullptr || roi->size() != 2 * n) {
      return Status(Error::InvalidArgument,
                    "roi has " + std::to_string(roi ? roi->size() : 0) + " values (expected " +
                        std::to_string(2 * n) +
                        ", starts then ends of each axis, for coordinate_transformation_mode "
                        "'tf_crop_and_resize')");
    }
    for (size_t i = 0; i < n; ++i) {
      plan.roi[static_cast<size_t>(axes[i])] = (*roi)[i];
      plan.roi[input.size() + static_cast<size_t>(axes[i])] = (*roi)[n + i];
    }
  }
  return plan;
}

}  // namespace kiln::kernels
