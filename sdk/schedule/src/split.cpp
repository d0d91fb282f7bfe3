// split_reductions: a reduction with few outputs cannot be spread over threads, so a large one
// runs in two kernels: the first reduces S slices of the input in parallel into S partial
// results per output, the second folds the partials and runs the rest (the epilogue). The
// inner loop variable r becomes s * (N / S) + r' (N static and divisible by S), which keeps every
// index affine. A full reduction (one output) splits; so does one whose outputs would run in
// fewer thread blocks than Target::split_blocks_below (a batch norm's per-channel sums over
// N * H * W rows: 64-256 outputs, 2-8 blocks of 32 columns, would keep as many SMs busy), its
// first reduced dim split (N where channels first keeps N and H * W apart) into the fewest parts
// that give that many blocks. Values of the inner loop that the kernel stores are stored by the
// partial kernel of the pass that computes them, unless they need the last pass's results (a
// normalisation fused with its statistics): those move to a pointwise kernel after the folds. A kernel of several passes
// (a variance: the mean, then the squared deviations from it) splits pass by pass, each pass's
// folded results stored for the next pass's partial kernel to read. sum/prod/max/min split;
// argmax does not (its partials would need their indices too).
#include <algorithm>
#include <functional>
#include <set>

#include "internal.h"
#include "kiln/schedule/strategy.h"
#include "kiln/graph/error.h"

namespace kiln::schedule::detail {

namespace {

// Thread blocks a reduction of `outputs` outputs takes: one per output, or column_lanes side by
// side in the column strategy.
int64_t blocks_of(int64_t outputs, bool column, const Target& target) {
  return column ? (outputs + target.column_lanes - 1) / target.column_lanes : outputs;
}

// Whether k splits: n is its first reduced dim's extent (the one split), rest the product of the
// other reduced dims' (each loop of a slice runs over chunk x rest).
bool splittable(const Kernel& k, const Target& target, int64_t& n, int64_t& rest) {
  if (k.kind != KernelKind::reduction || k.num_outer > 1 || k.domain.size() <= static_cast<size_t>(k.num_outer)) return false;
  if (k.num_outer == 1 && !(k.domain[0].is_static() &&
                            blocks_of(k.domain[0].hint(), uses_column_strategy(k), target) < target.split_blocks_below))
    return false;
  rest = 1;
  for (size_t d = static_cast<size_t>(k.num_outer); d < k.domain.size(); ++d) {
    if (!k.domain[d].is_static()) return false;
    if (d > static_cast<size_t>(k.num_outer)) rest *= k.domain[d].hint();
  }
  // A full reduction splits only where its dims merged into one.
  if (k.num_outer == 0 && k.domain.size() != 1) return false;
  n = k.domain[static_cast<size_t>(k.num_outer)].hint();
  const int64_t outputs = k.num_outer == 1 ? k.domain[0].hint() : 1;
  if (n * rest * outputs < target.min_split_elements) return false;
  for (const Instr& in : k.instrs)
    if (in.kind == InstrKind::reduce && (in.reduce == ReduceKind::argmax || in.reduce == ReduceKind::argmin)) return false;
  return true;
}

}  // namespace

void split_reductions(Schedule& s, const Target& target) {
  std::vector<Kernel> out;
  for (Kernel& k : s.kernels) {
    int64_t n = 0, rest = 1;
    if (!splittable(k, target, n, rest)) {
      out.push_back(std::move(k));
      continue;
    }
    // A full reduction takes the most parts whose slices stay min_split_chunk long; one with
    // outputs the fewest that fill split_blocks_below blocks (else the most), so its fold stays
    // short. A block of the column strategy reads column_lanes outputs' slices.
    const bool column = uses_column_strategy(k);
    const int64_t outputs_hint = k.num_outer == 1 ? k.domain[0].hint() : 1;
    const int64_t side_by_side = column ? std::min(outputs_hint, target.column_lanes) : 1;
    int64_t parts = 0;
    for (int64_t p : target.split_parts) {
      if (p <= 1 || n % p != 0 || n / p * rest * side_by_side < target.min_split_chunk) continue;
      if (parts == 0 || (k.num_outer == 1 && blocks_of(p * outputs_hint, column, target) >= target.split_blocks_below)) parts = p;
      if (k.num_outer == 0) break;
    }
    if (parts == 0) {
      out.push_back(std::move(k));
      continue;
    }
    const int64_t chunk = n / parts;
    // The outputs (none: a full reduction) stay outer in every kernel: partials [parts, outputs].
    const bool has_outer = k.num_outer == 1;
    const SymInt outputs = has_outer ? k.domain[0] : SymInt(1);
    const size_t first = static_cast<size_t>(k.num_outer);  // the split dim
    const size_t inner_dims = k.domain.size() - first;
    // An index over k's domain [(o), r, rest...] as one over the partial kernel's
    // [s, (o), r', rest...], r = s * chunk + r'.
    auto in_slices = [&](const Affine& x) {
      Affine r = x;
      const SymInt cr = x.coeffs[first];
      r.coeffs = {cr * SymInt(chunk)};
      if (has_outer) r.coeffs.push_back(x.coeffs[0]);
      r.coeffs.insert(r.coeffs.end(), x.coeffs.begin() + static_cast<std::ptrdiff_t>(first), x.coeffs.end());
      return r;
    };
    // An index over the partial kernel's domain [parts, (outputs), chunk, rest dims...] of
    // `prefix` (the coefficients of parts and the outputs) then zeros over the reduced dims.
    auto over_slices = [&](std::vector<SymInt> prefix) {
      prefix.resize(prefix.size() + inner_dims, SymInt(0));
      return prefix;
    };
    auto new_buffer = [&](DType t, SymShape sizes, std::vector<SymInt> strides) {
      Buffer b;
      b.id = static_cast<int32_t>(s.buffers.size());
      b.kind = BufferKind::intermediate;
      b.dtype = t;
      b.sizes = std::move(sizes);
      b.strides = std::move(strides);
      s.buffers.push_back(b);
      return b.id;
    };
    auto affine = [](std::vector<SymInt> coeffs) {
      Affine a;
      a.coeffs = std::move(coeffs);
      return a;
    };
    // A load of `buffer` (a partial or folded result) standing for a reduction's value.
    auto load = [](DType t, int32_t buffer, Affine index) {
      Instr ld;
      ld.kind = InstrKind::load;
      ld.dtype = t;
      ld.buffer = buffer;
      ld.index = std::move(index);
      return ld;
    };
    int32_t passes = 0;
    for (const Instr& in : k.instrs) passes = std::max(passes, in.kind == InstrKind::reduce ? in.pass : 0);
    // Values of the inner loop stored. One that needs the last pass's results (a batch norm's
    // normalised output, computed in the kernel that reduces its statistics) waits for the
    // folds: a pointwise kernel over the whole domain stores it last, reading the folded results.
    // One computed before (an activation's gradient beside the bias gradient summing it) is
    // stored by the partial kernel of its pass, which visits every point once: no second read.
    auto stored_by_partial = [&](const Store& st) {
      return k.store_is_inner(st) && k.instrs[static_cast<size_t>(st.value)].pass < passes;
    };
    bool inner_stores = false;  // some stored after the folds
    for (const Store& st : k.stores) inner_stores = inner_stores || (k.store_is_inner(st) && !stored_by_partial(st));
    // folded[i]: the buffer [outputs] holding reduction i's result once its pass is folded.
    std::vector<int32_t> folded(k.instrs.size(), -1);
    for (int32_t q = 1; q <= passes; ++q) {
      // Stage 1 of pass q: domain [parts, (outputs) | chunk]; each of the pass's reductions
      // stores its partial per slice. The values it needs are copied on demand, the results of
      // earlier passes loaded from their folded buffers.
      Kernel a;
      a.name = k.name + (passes > 1 ? "_pass" + std::to_string(q) : "") + "_partial";
      a.kind = KernelKind::reduction;
      a.domain = {SymInt(parts)};
      if (has_outer) a.domain.push_back(outputs);
      a.domain.push_back(SymInt(chunk));
      a.domain.insert(a.domain.end(), k.domain.begin() + static_cast<std::ptrdiff_t>(first) + 1, k.domain.end());
      a.num_outer = has_outer ? 2 : 1;
      a.provenance = k.provenance;
      std::vector<int32_t> map(k.instrs.size(), -1);
      std::function<int32_t(size_t)> copy1 = [&](size_t i) -> int32_t {
        if (map[i] >= 0) return map[i];
        const Instr& in = k.instrs[i];
        Instr c = in;
        if (in.kind == InstrKind::reduce && in.pass < q) {  // an earlier pass's result
          c = load(in.dtype, folded[i], affine(over_slices(has_outer ? std::vector<SymInt>{0, 1} : std::vector<SymInt>{0})));
        } else {
          for (int32_t& arg : c.args) arg = copy1(static_cast<size_t>(arg));
          if (c.kind == InstrKind::load || c.kind == InstrKind::index) c.index = in_slices(in.index);
        }
        map[i] = static_cast<int32_t>(a.instrs.size());
        a.instrs.push_back(std::move(c));
        return map[i];
      };
      std::vector<int32_t> partial_of(k.instrs.size(), -1);
      for (size_t i = 0; i < k.instrs.size(); ++i) {
        const Instr& in = k.instrs[i];
        if (in.kind != InstrKind::reduce || in.pass != q) continue;
        const int32_t v = copy1(i);
        SymShape sizes{SymInt(parts)};
        std::vector<SymInt> strides{outputs};
        if (has_outer) {
          sizes.push_back(outputs);
          strides.push_back(SymInt(1));
        }
        partial_of[i] = new_buffer(in.dtype, sizes, strides);
        a.stores.push_back(Store{partial_of[i], affine(over_slices(has_outer ? std::vector<SymInt>{outputs, 1} : std::vector<SymInt>{1})), v});
      }
      for (const Store& st : k.stores) {
        if (!stored_by_partial(st) || k.instrs[static_cast<size_t>(st.value)].pass != q - 1) continue;
        Store c = st;
        c.value = copy1(static_cast<size_t>(st.value));
        c.index = in_slices(st.index);
        a.stores.push_back(c);
      }
      // Stage 2 of pass q: domain [(outputs) | parts]; fold the partials. The last pass then runs
      // the original epilogue and stores (their indices keep the outputs' coefficient, the
      // reduced dim's is gone); an earlier one stores its results for the passes after it.
      Kernel b;
      b.name = passes > 1 && q < passes ? k.name + "_pass" + std::to_string(q) : k.name;
      b.kind = KernelKind::reduction;
      if (has_outer) b.domain.push_back(outputs);
      b.domain.push_back(SymInt(parts));
      b.num_outer = has_outer ? 1 : 0;
      b.provenance = k.provenance;
      auto outer_only = [&](const Affine& x) {  // [(o), reduced dims...] -> [(o), 0]
        Affine r = x;
        r.coeffs.resize(first);
        r.coeffs.push_back(SymInt(0));
        return r;
      };
      const Affine at_output = affine(has_outer ? std::vector<SymInt>{1, 0} : std::vector<SymInt>{0});
      std::vector<int32_t> map2(k.instrs.size(), -1);
      std::function<int32_t(size_t)> copy2 = [&](size_t i) -> int32_t {
        if (map2[i] >= 0) return map2[i];
        const Instr& in = k.instrs[i];
        KILN_INTERNAL_CHECK(!in.inner || (in.kind == InstrKind::reduce && in.pass <= q), "split_reductions: kernel ", k.name,
                            " stores a value of its inner loop");
        Instr c = in;
        if (in.kind == InstrKind::reduce && in.pass == q) {
          b.instrs.push_back(load(in.dtype, partial_of[i], affine(has_outer ? std::vector<SymInt>{1, outputs} : std::vector<SymInt>{1})));
          c.args = {static_cast<int32_t>(b.instrs.size() - 1)};
        } else if (in.kind == InstrKind::reduce) {
          c = load(in.dtype, folded[i], at_output);
        } else {
          for (int32_t& arg : c.args) arg = copy2(static_cast<size_t>(arg));
          if (c.kind == InstrKind::load || c.kind == InstrKind::index) c.index = outer_only(c.index);
        }
        map2[i] = static_cast<int32_t>(b.instrs.size());
        b.instrs.push_back(std::move(c));
        return map2[i];
      };
      if (q < passes || inner_stores) {
        for (size_t i = 0; i < k.instrs.size(); ++i) {
          const Instr& in = k.instrs[i];
          if (in.kind != InstrKind::reduce || in.pass != q) continue;
          const int32_t v = copy2(i);
          folded[i] = new_buffer(in.dtype, {outputs}, {SymInt(1)});
          b.stores.push_back(Store{folded[i], at_output, v});
        }
      }
      if (q == passes) {
        for (const Store& st : k.stores) {
          if (k.store_is_inner(st)) continue;  // a partial kernel's or the apply kernel's
          Store c = st;
          c.value = copy2(static_cast<size_t>(st.value));
          c.index = outer_only(c.index);
          b.stores.push_back(c);
        }
      }
      finish_kernel(a);
      finish_kernel(b);
      out.push_back(std::move(a));
      out.push_back(std::move(b));
    }
    if (!inner_stores) continue;
    Kernel c;
    c.name = k.name + "_apply";
    c.kind = KernelKind::pointwise;
    c.domain = k.domain;
    c.num_outer = static_cast<int32_t>(k.domain.size());
    c.provenance = k.provenance;
    std::vector<int32_t> map3(k.instrs.size(), -1);
    std::function<int32_t(size_t)> copy3 = [&](size_t i) -> int32_t {
      if (map3[i] >= 0) return map3[i];
      const Instr& in = k.instrs[i];
      Instr cp = in;
      if (in.kind == InstrKind::reduce) {
        std::vector<SymInt> at(k.domain.size(), SymInt(0));
        if (has_outer) at[0] = SymInt(1);
        cp = load(in.dtype, folded[i], affine(std::move(at)));
      } else {
        for (int32_t& arg : cp.args) arg = copy3(static_cast<size_t>(arg));
      }
      map3[i] = static_cast<int32_t>(c.instrs.size());
      c.instrs.push_back(std::move(cp));
      return map3[i];
    };
    for (const Store& st : k.stores) {
      if (!k.store_is_inner(st) || stored_by_partial(st)) continue;
      Store cs = st;
      cs.value = copy3(static_cast<size_t>(st.value));
      c.stores.push_back(cs);
    }
    order_dims_for_stores(c);  // the reduction's loop order need not be the stores' memory order
    finish_kernel(c);
    out.push_back(std::move(c));
  }
  s.kernels = std::move(out);
}

}  // namespace kiln::schedule::detail
