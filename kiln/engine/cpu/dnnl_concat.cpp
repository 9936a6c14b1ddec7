// Concat of f32 tensors on oneDNN's concat primitive: each input in its producer's layout when
// it has one (OpDesc::input_layouts), the result in the layout oneDNN picks for them, so a
// Concat between Convs (SqueezeNet's fire modules) does not convert to plain and back.

#include <kiln/engine/cpu/dnnl_staged.h>

#include <algorithm>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

// A dense descriptor of `dims` with the dimension order of `like` (a permutation such as nhwc,
// no inner blocks), or nullopt for a blocked `like`.
std::optional<dnnl::memory::desc> same_order(const dnnl::memory::desc& like,
                                             const dnnl::memory::dims& dims) {
  const dnnl_memory_desc_t& d = like.data;
  if (d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0 ||
      d.ndims != static_cast<int>(dims.size())) {
    return std::nullopt;
  }
  std::vector<int> order(dims.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return d.format_desc.blocking.strides[a] > d.format_desc.blocking.strides[b];
  });
  dnnl::memory::dims strides(dims.size());
  int64_t stride = 1;
  for (size_t k = order.size(); k-- > 0;) {
    strides[static_cast<size_t>(order[k])] = stride;
    stride *= dims[static_cast<size_t>(order[k])];
  }
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

// A dense descriptor of `dims` in the blocked layout of `like` (its dimension order and inner
// blocks), or nullopt when `like` has no inner blocks. Dimensions of equal strides in `like`
// (those of extent 1 or of one block, e.g. the channels of a 16-channel nChw16c value) keep
// their natural order, so that 16-channel pieces make the nChw16c result a blocked Conv reads
// rather than an equivalent layout of another spelling, which would be converted to plain and
// back between them.
std::optional<dnnl::memory::desc> same_blocking(const dnnl::memory::desc& like,
                                                const dnnl::memory::dims& dims) {
  const dnnl_memory_desc_t& l = like.data;
  const int ndims = l.ndims;
  if (l.format_kind != dnnl_blocked || l.format_desc.blocking.inner_nblks == 0 ||
      ndims != static_cast<int>(dims.size())) {
    return std::nullopt;
  }
  dnnl_memory_desc_t d = l;
  dnnl_blocking_desc_t& b = d.format_desc.blocking;
  std::vector<int64_t> block(static_cast<size_t>(ndims), 1);
  int64_t inner = 1;
  for (int k = 0; k < b.inner_nblks; ++k) {
    block[static_cast<size_t>(b.inner_idxs[k])] *= b.inner_blks[k];
    inner *= b.inner_blks[k];
  }
  std::vector<int> order(static_cast<size_t>(ndims));
  for (int i = 0; i < ndims; ++i) {
    const auto n = static_cast<size_t>(i);
    order[n] = i;
    d.dims[i] = dims[n];
    d.padded_dims[i] = (dims[n] + block[n] - 1) / block[n] * block[n];
    d.padded_offsets[i] = 0;
  }
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    return l.format_desc.blocking.strides[x] > l.format_desc.blocking.strides[y];
  });
  int64_t stride = inner;
  for (size_t k = order.size(); k-- > 0;) {
    const int i = order[k];
    b.strides[i] = stride;
    stride *= d.padded_dims[i] / block[static_cast<size_t>(i)];
  }
  d.offset0 = 0;
  return dnnl::memory::desc(d);
}

// Whether inputs in layouts `want` are, in order, contiguous pieces of the result in layout
// `made`: every dimension before `axis` is 1, `axis` is the outermost dimension of the layout
// and is split into blocks (if at all) that divide every input's extent along it, and nothing
// is padded (e.g. nChw16c of one image, concatenated along channels of multiples of 16).
bool contiguous_pieces(const std::vector<dnnl::memory::desc>& want, const dnnl::memory::desc& made,
                       int64_t axis) {
  std::vector<dnnl::memory::desc> all = want;
  all.push_back(made);
  for (const dnnl::memory::desc& md : all) {
    const dnnl_memory_desc_t& d = md.data;
    if (d.format_kind != dnnl_blocked || format_of(md) != format_of(made) || d.offset0 != 0) {
      return false;
    }
    const dnnl_blocking_desc_t& b = d.format_desc.blocking;
    int64_t numel = 1;
    for (int i = 0; i < d.ndims; ++i) {
      numel *= d.dims[i];
      if (i < axis && d.dims[i] != 1) return false;
      if (i != axis && d.dims[i] > 1 && b.strides[i] > b.strides[axis]) return false;
      if (d.padded_dims[i] != d.dims[i]) return false;
    }
    for (int k = 0; k < b.inner_nblks; ++k) {
      if (b.inner_idxs[k] != axis || d.dims[axis] % b.inner_blks[k] != 0) return false;
    }
    if (md.get_size() != static_cast<size_t>(numel) * sizeof(float)) return false;
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_concat(const OpDesc& desc) {
  if (desc.inputs.empty()) return error(desc, Error::InvalidArgument, "has no inputs");
  KILN_RETURN_IF_ERROR(check_inputs(desc, 1, desc.inputs.size()));
  if (!desc.post_ops.empty()) return error(desc, Error::NotSupported, "has post-ops");
  Attrs attrs(desc);
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.get_int("axis", 0));
  const std::vector<int64_t>& first = desc.inputs[0].sizes;
  auto rank = static_cast<int64_t>(first.size());
  if (rank == 0) return error(desc, Error::NotSupported, "inputs are scalars");
  if (axis < -rank || axis >= rank) {
    return error(desc, Error::InvalidArgument,
                 "attribute 'axis' is " + std::to_string(axis) + " (expected in [" +
                     std::to_string(-rank) + ", " + std::to_string(rank - 1) + "])");
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> out = first;
  out[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < desc.inputs.size(); ++i) {
    if (!input_present(desc, i)) {
      return error(desc, Error::InvalidArgument, "input " + std::to_string(i) + " is absent");
    }
    if (input_constant(desc, i) != nullptr) {
      return error(desc, Error::NotSupported,
                   "input " + std::to_string(i) + " is a constant (the reference kernel takes it)");
    }
    const std::vector<int64_t>& s = desc.inputs[i].sizes;
    bool fits = s.size() == first.size();
    for (size_t d = 0; fits && d < s.size(); ++d) {
      fits = d == static_cast<size_t>(axis) || s[d] == first[d];
    }
    if (!fits) {
      return error(desc, Error::InvalidArgument,
                   "input " + std::to_string(i) + " has shape " + runtime::shape_to_string(s) +
                       " (expected " + runtime::shape_to_string(first) + " but along axis " +
                       std::to_string(axis) + ")");
    }
    if (s[static_cast<size_t>(axis)] == 0) {
      return error(desc, Error::NotSupported, "input " + std::to_string(i) + " is empty");
    }
    out[static_cast<size_t>(axis)] += s[static_cast<size_t>(axis)];
  }
  std::vector<dnnl::memory::desc> plain, want;
  std::vector<std::optional<dnnl::memory::desc>> hints;
  bool any_hint = false;
  for (size_t i = 0; i < desc.inputs.size(); ++i) {
    plain.push_back(plain_md(desc.inputs[i].sizes));
    hints.push_back(input_layout_hint(desc, i, plain.back().dims()));
    any_hint = any_hint || hints.back().has_value();
  }
  // Inputs in mixed layouts make oneDNN fall back to its slow reference concat: inputs without
  // a layout of their own convert into the first hinted one's dimension order (when it is a
  // permutation, e.g. nhwc), else every input stays plain.
  const dnnl::memory::desc* like = nullptr;
  for (const auto& hint : hints) {
    if (hint && like == nullptr) like = &*hint;
  }
  for (size_t i = 0; i < desc.inputs.size(); ++i) {
    std::optional<dnnl::memory::desc> reordered =
        like != nullptr ? same_order(*like, plain[i].dims()) : std::nullopt;
    if (hints[i] && (reordered || std::all_of(hints.begin(), hints.end(),
                                              [](const auto& h) { return h.has_value(); }))) {
      want.push_back(*hints[i]);
    } else {
      want.push_back(reordered.value_or(plain[i]));
    }
  }
  bool mixed = false;
  for (const auto& w : want) mixed = mixed || format_of(w) != format_of(want[0]);
  if (mixed) want = plain;
  any_hint = any_hint && !mixed;
  dnnl::memory::desc y_md = plain_md(out);
  // Blocked inputs make a result in their blocked layout; otherwise oneDNN picks the order.
  const dnnl::memory::desc y_any(y_md.dims(), dnnl::memory::data_type::f32,
                                 dnnl::memory::format_tag::any);
  std::optional<dnnl::memory::desc> blocked =
      any_hint ? same_blocking(want[0], y_md.dims()) : std::nullopt;
  auto make_pd = [&](const dnnl::memory::desc& y) {
    return dnnl::concat::primitive_desc(y, static_cast<int>(axis), want, cpu_engine(), base_attr());
  };
  std::optional<dnnl::concat::primitive_desc> made;
  try {
    made = make_pd(blocked ? *blocked : any_hint ? y_any : y_md);
  } catch (const dnnl::error&) {
    if (!blocked) throw;
    made = make_pd(y_any);  // no concat into that layout (pieces that split a block)
  }
  const dnnl::concat::primitive_desc& pd = *made;
  // Pieces that lie one after another in the result are copied in order; every input and the
  // result plain, row by row, on one thread up to a megabyte (above it oneDNN's concat splits
  // the copy over the op's threads). Either way the primitive is not made.
  const bool in_order = any_hint && contiguous_pieces(want, pd.dst_desc(), axis);
  int64_t rows = 1;
  for (int64_t d = 0; d < axis; ++d) rows *= out[static_cast<size_t>(d)];
  const bool by_rows = !any_hint && pd.dst_desc() == y_md && desc.small_ops_own_loops &&
                       (desc.num_threads == 1 || y_md.get_size() <= (size_t{1} << 20));
  auto op = std::make_unique<StagedOp>(
      desc, in_order || by_rows ? dnnl::primitive() : dnnl::concat(pd), pd, out);
  for (size_t i = 0; i < desc.inputs.size(); ++i) {
    op->bind_input(i, DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), plain[i], want[i]);
  }
  op->bind_output(DNNL_ARG_DST, y_md, pd.dst_desc());
  if (in_order) {
    op->copy_inputs_in_order();
  } else if (by_rows) {
    op->copy_rows_in_order(rows);
  }
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace kiln::engine::cpu::dnnl_impl
