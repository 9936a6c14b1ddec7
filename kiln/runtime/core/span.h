#pragma once

#include <span>

namespace kiln::runtime {

/// A non-owning view of contiguous elements; the caller keeps the elements alive.
template <typename T>
using Span = std::span<T>;

}  // namespace kiln::runtime
