#include <kiln/kernels/index_ops.h>
#include <kiln/kernels/index_util.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Einsum";
// Labels 0..51 are the letters A-Z, a-z (so sorting ids sorts by ASCII, as the implicit output
// requires); ellipsis dimension k gets label kEllipsis + k.
constexpr int kEllipsis = 52;

// An equation resolved against its inputs' shapes.
struct Contraction {
  std::vector<std::vector<int>> terms;  // per input, the label of each dimension
  std::vector<int> output;              // label of each output dimension
  std::vector<int> summed;              // labels absent from the output
  std::vector<int64_t> size;            // per label (after broadcasting size-1 dimensions)
};

Status equation_error(std::string_view equation, const std::string& problem) {
  return Status(Error::InvalidArgument, "equation '" + std::string(equation) + "' " + problem);
}

int label_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

std::string label_name(int label) {
  if (label >= kEllipsis) return "... dimension " + std::to_string(label - kEllipsis);
  return std::string(1, static_cast<char>(label < 26 ? 'A' + label : 'a' + (label - 26)));
}

// One term's letters, with kEllipsis standing for "..." (at most once).
Result<std::vector<int>> parse_term(std::string_view equation, std::string_view term) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term.substr(i, 3) == "...") {
      if (ellipsis)
        return equation_error(equation, "has '...' twice in term '" + std::string(term) + "'");
      ellipsis = true;
      labels.push_back(kEllipsis);
      i += 2;
      continue;
    }
    const int label = label_of(term[i]);
    if (label < 0) {
      return equation_error(equation, "has '" + std::string(1, term[i]) + "' in term '" +
                                          std::string(term) + "' (expected letters and '...')");
    }
    labels.push_back(label);
  }
  return labels;
}

Status bind_size(std::string_view equation, Contraction& c, int label, int64_t size, size_t input) {
  int64_t& bound = c.size[static_cast<size_t>(label)];
  if (bound < 0 || bound == 1) {
    if (bound < 0 || size != 1) bound = size;
    return Status();
  }
  if (size == 1 || size == bound) return Status();
  return equation_error(equation, "gives label " + label_name(label) + " size " +
                                      std::to_string(bound) + " and size " + std::to_string(size) +
                                      " in input " + std::to_string(input) +
                                      " (expected equal sizes or 1)");
}

Result<Contraction> resolve(std::string_view equation, Span<const Tensor* const> inputs) {
  std::string text;
  for (char ch : equation) {
    if (ch != ' ') text += ch;
  }
  const size_t arrow = text.find("->");
  const std::string lhs = text.substr(0, arrow);
  std::vector<std::string> raw_terms(1);
  for (char ch : lhs) {
    if (ch == ',') {
      raw_terms.emplace_back();
    } else {
      raw_terms.back() += ch;
    }
  }
  if (raw_terms.size() != inputs.size()) {
    return equation_error(equation, "has " + std::to_string(raw_terms.size()) +
                                        " input terms (expected " + std::to_string(inputs.size()) +
                                        ", one per input)");
  }
  Contraction c;
  c.size.assign(kEllipsis + 64, -1);
  int ellipsis_rank = 0;
  std::vector<std::vector<int>> parsed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(auto labels, parse_term(equation, raw_terms[i]));
    const bool has_ellipsis = std::count(labels.begin(), labels.end(), kEllipsis) > 0;
    const auto letters = static_cast<int64_t>(labels.size()) - (has_ellipsis ? 1 : 0);
    const int64_t rank = inputs[i]->dim();
    if (has_ellipsis ? rank < letters : rank != letters) {
      return equation_error(equation, "term '" + raw_terms[i] + "' has " + std::to_string(letters) +
                                          " labels for input " + std::to_string(i) + " of rank " +
                                          std::to_string(rank));
    }
    if (has_ellipsis) ellipsis_rank = std::max(ellipsis_rank, static_cast<int>(rank - letters));
    parsed.push_back(std::move(labels));
  }
  if (ellipsis_rank > 64) return equation_error(equation, "covers more than 64 dimensions");
  // Expand "..." into right-aligned ellipsis labels and bind every label's size.
  std::vector<int> uses(c.size.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int> term;
    const int64_t letters = static_cast<int64_t>(parsed[i].size()) -
                            std::count(parsed[i].begin(), parsed[i].end(), kEllipsis);
    for (int label : parsed[i]) {
      if (label != kEllipsis) {
        term.push_back(label);
        continue;
      }
      const int e = static_cast<int>(inputs[i]->dim() - letters);
      for (int k = ellipsis_rank - e; k < ellipsis_rank; ++k) term.push_back(kEllipsis + k);
    }
    for (size_t d = 0; d < term.size(); ++d) {
      KILN_RETURN_IF_ERROR(
          bind_size(equation, c, term[d], inputs[i]->size(static_cast<int64_t>(d)), i));
      ++uses[static_cast<size_t>(term[d])];
    }
    c.terms.push_back(std::move(term));
  }
  for (int k = 0; k < ellipsis_rank; ++k) {
    if (c.size[static_cast<size_t>(kEllipsis + k)] < 0)
      c.size[static_cast<size_t>(kEllipsis + k)] = 1;
  }
  std::vector<bool> in_output(c.size.size(), false);
  if (arrow != std::string::npos) {
    const std::string rhs = text.substr(arrow + 2);
    KILN_ASSIGN_OR_RETURN(auto labels, parse_term(equation, rhs));
    for (int label : labels) {
      if (label == kEllipsis) {
        for (int k = 0; k < ellipsis_rank; ++k) {
          c.output.push_back(kEllipsis + k);
          in_output[static_cast<size_t>(kEllipsis + k)] = true;
        }
        continue;
      }
      if (uses[static_cast<size_t>(label)] == 0 || in_output[static_cast<size_t>(label)]) {
        return equation_error(
            equation,
            "has output label " + label_name(label) +
                (uses[static_cast<size_t>(label)] == 0 ? " that no input term has" : " twice") +
                " (expected each output label once, from the inputs)");
      }
      in_output[static_cast<size_t>(label)] = true;
      c.output.push_back(label);
    }
  } else {
    for (int k = 0; k < ellipsis_rank; ++k) {
      c.output.push_back(kEllipsis + k);
      in_output[static_cast<size_t>(kEllipsis + k)] = true;
    }
    for (int label = 0; label < kEllipsis; ++label) {
      if (uses[static_cast<size_t>(label)] == 1) {
        c.output.push_back(label);
        in_output[static_cast<size_t>(label)] = true;
      }
    }
  }
  // Labels missing from the output (ellipsis dimensions too, when the output has no "...") are
  // summed.
  for (size_t label = 0; label < c.size.size(); ++label) {
    if (uses[label] > 0 && !in_output[label]) c.summed.push_back(static_cast<int>(label));
  }
  return c;
}

std::vector<int64_t> output_shape(const Contraction& c) {
  std::vector<int64_t> shape;
  for (int label : c.output) shape.push_back(c.size[static_cast<size_t>(label)]);
  return shape;
}

// Per input, the element stride of each label in `labels` (0 where the input lacks the label
// or broadcasts it; the sum of strides where a label repeats, which walks the diagonal).
std::vector<std::vector<int64_t>> label_strides(const Contraction& c,
                                                Span<const Tensor* const> inputs,
                                                const std::vector<int>& labels) {
  std::vector<std::vector<int64_t>> strides(inputs.size(), std::vector<int64_t>(labels.size(), 0));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto dense = internal::dense_strides(inputs[i]->sizes());
    for (size_t d = 0; d < c.terms[i].size(); ++d) {
      if (inputs[i]->size(static_cast<int64_t>(d)) == 1) continue;
      for (size_t l = 0; l < labels.size(); ++l) {
        if (labels[l] == c.terms[i][d]) strides[i][l] += dense[d];
      }
    }
  }
  return strides;
}

// a[..., i, j] x b[..., j, k] -> out[..., i, k] with one shared batch label list: a matmul.
bool is_plain_matmul(const Contraction& c) {
  if (c.terms.size() != 2) return false;
  const auto& a = c.terms[0];
  const auto& b = c.terms[1];
  if (a.size() < 2 || a.size() != b.size() || c.output.size() != a.size()) return false;
  const size_t n = a.size();
  const int i = a[n - 2], j = a[n - 1], k = b[n - 1];
  if (b[n - 2] != j || i == j || j == k || i == k) return false;
  for (size_t d = 0; d + 2 < n; ++d) {
    if (a[d] != b[d] || c.output[d] != a[d] || a[d] == i || a[d] == j || a[d] == k) return false;
  }
  for (size_t d = 0; d + 2 < n; ++d) {
    for (size_t e = d + 1; e + 2 < n; ++e) {
      if (a[d] == a[e]) return false;
    }
  }
  return c.output[n - 2] == i && c.output[n - 1] == k;
}

template <typename T>
void contract(const Contraction& c, Span<const Tensor* const> inputs, Tensor& out) {
  using Accumulator = std::conditional_t<std::is_integral_v<ComputeType<T>>, int64_t, double>;
  const auto out_strides = label_strides(c, inputs, c.output);
  const auto sum_strides = label_strides(c, inputs, c.summed);
  std::vector<int64_t> sum_sizes;
  for (int label : c.summed) sum_sizes.push_back(c.size[static_cast<size_t>(label)]);
  const int64_t sum_count = internal::product(sum_sizes, 0, sum_sizes.size());
  std::vector<int64_t> out_position(c.output.size(), 0), sum_position(c.summed.size(), 0);
  std::vector<int64_t> base(inputs.size()), offset(inputs.size());
  T* target = out.mutable_data_ptr<T>();
  for (int64_t o = 0; o < out.numel(); ++o) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      base[i] = 0;
      for (size_t l = 0; l < c.output.size(); ++l) base[i] += out_position[l] * out_strides[i][l];
      offset[i] = base[i];
    }
    Accumulator total = 0;
    std::fill(sum_position.begin(), sum_position.end(), 0);
    for (int64_t s = 0; s < sum_count; ++s) {
      Accumulator term = 1;
      for (size_t i = 0; i < inputs.size(); ++i) {
        // Integer products wrap rather than overflow.
        const auto factor = static_cast<Accumulator>(load(inputs[i]->data_ptr<T>()[offset[i]]));
        if constexpr (std::is_integral_v<Accumulator>) {
          term = static_cast<int64_t>(static_cast<uint64_t>(term) * static_cast<uint64_t>(factor));
        } else {
          term *= factor;
        }
      }
      if constexpr (std::is_integral_v<Accumulator>) {
        total = static_cast<int64_t>(static_cast<uint64_t>(total) + static_cast<uint64_t>(term));
      } else {
        total += term;
      }
      for (size_t l = sum_position.size(); l-- > 0;) {
        for (size_t i = 0; i < inputs.size(); ++i) offset[i] += sum_strides[i][l];
        if (++sum_position[l] < sum_sizes[l]) break;
        for (size_t i = 0; i < inputs.size(); ++i) offset[i] -= sum_sizes[l] * sum_strides[i][l];
        sum_position[l] = 0;
      }
    }
    target[o] = store<T>(static_cast<ComputeType<T>>(total));
    for (size_t l = out_position.size(); l-- > 0;) {
      if (++out_position[l] < c.size[static_cast<size_t>(c.output[l])]) break;
      out_position[l] = 0;
    }
  }
}

Status einsum_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 64, 1));
  auto equation = attributes.get_string("equation", "");
  if (!equation.ok()) return equation.status().with_context(internal::action(kOp));
  if (!attributes.has("equation")) {
    return internal::invalid_argument(kOp, "attribute 'equation' is missing (expected a string)");
  }
  std::vector<const Tensor*> tensors;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor* tensor, internal::input_tensor(kOp, inputs, i));
    tensors.push_back(tensor);
  }
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", tensors[0]->dtype(), kFloatAndIntDtypes));
  auto shape = einsum_shape(*equation, tensors);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor(kOp, outputs, 0, tensors[0]->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return einsum(*equation, tensors, out->to_tensor());
}

const runtime::KernelRegistration kRegisterEinsum("Einsum", einsum_kernel);

}  // namespace

Result<std::vector<int64_t>> einsum_shape(std::string_view equation,
                                          Span<const Tensor* const> inputs) {
  KILN_ASSIGN_OR_RETURN(Contraction c, resolve(equation, inputs));
  return output_shape(c);
}

Status einsum(std::string_view equation, Span<const Tensor* const> inputs, Tensor& out) {
  if (inputs.empty()) return internal::invalid_argument(kOp, "got no inputs (expected 1 or more)");
  const runtime::ScalarType dtype = inputs[0]->dtype();
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", dtype, kFloatAndIntDtypes));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string subject = "input " + std::to_string(i);
    KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, subject, inputs[i]->dtype(), dtype));
    KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, subject, *inputs[i]));
  }
  auto c = resolve(equation, inputs);
  if (!c.ok()) return c.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, dtype, output_shape(*c)));
  if (is_plain_matmul(*c) && dtype != runtime::ScalarType::Int32 &&
      dtype != runtime::ScalarType::Int64) {
    auto shape = matmul_shape(inputs[0]->sizes(), inputs[1]->sizes());
    if (shape.ok() && *shape == output_shape(*c)) return matmul(*inputs[0], *inputs[1], out);
  }
  return dispatch<DtypeGroup::FloatAndInt>(kOp, "input 0", dtype, [&](auto tag) {
    contract<typename decltype(tag)::type>(*c, inputs, out);
    return Status();
  });
}

}  // namespace kiln::kernels
