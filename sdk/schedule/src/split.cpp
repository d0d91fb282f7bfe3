// split_reductions: a reduction over everything (one outer point) cannot be spread over threads,
// so a large one runs in two kernels: the first reduces S slices of the input in parallel into
// S partial results, the second folds the partials and runs the rest (the epilogue). The inner
// loop variable r becomes s * (N / S) + r' (N static and divisible by S), which keeps every index
// affine. Only single-pass kernels with sum/prod/max/min split (argmax needs the index too).
#include <algorithm>
#include <set>

#include "internal.h"

namespace kiln::schedule::detail {

namespace {

bool splittable(const Kernel& k, int64_t min_elements, int64_t& n) {
  if (k.kind != KernelKind::reduction || k.num_outer != 0 || k.domain.size() != 1) return false;
  if (!k.domain[0].is_static()) return false;
  n = k.domain[0].hint();
  if (n < min_elements) return false;
  for (const Instr& in : k.instrs) {
    if (in.kind == InstrKind::reduce) {
      if (in.pass != 1) return false;
      if (in.reduce == ReduceKind::argmax || in.reduce == ReduceKind::argmin) return false;
    }
  }
  for (const Store& s : k.stores)
    if (k.instrs[static_cast<size_t>(s.value)].inner) return false;
  return true;
}

}  // namespace

void split_reductions(Schedule& s, const Target& target) {
  std::vector<Kernel> out;
  for (Kernel& k : s.kernels) {
    int64_t n = 0;
    if (!splittable(k, target.min_split_elements, n)) {
      out.push_back(std::move(k));
      continue;
    }
    int64_t parts = 0;
    for (int64_t p : target.split_parts)
      if (p > 1 && n % p == 0 && n / p >= target.min_split_chunk) {
        parts = p;
        break;
      }
    if (parts == 0) {
      out.push_back(std::move(k));
      continue;
    }
    const int64_t chunk = n / parts;
    // Stage 1: domain [parts | chunk]; each reduction stores its partial per slice.
    Kernel a;
    a.name = k.name + "_partial";
    a.kind = KernelKind::reduction;
    a.domain = {SymInt(parts), SymInt(chunk)};
    a.num_outer = 1;
    a.provenance = k.provenance;
    std::vector<int32_t> map(k.instrs.size(), -1);
    std::vector<int32_t> partial_of(k.instrs.size(), -1);
    for (size_t i = 0; i < k.instrs.size(); ++i) {
      const Instr& in = k.instrs[i];
      if (in.pass != 0 && in.kind != InstrKind::reduce) continue;  // the epilogue: stage 2
      Instr c = in;
      for (int32_t& arg : c.args) arg = map[static_cast<size_t>(arg)];
      if (c.kind == InstrKind::load || c.kind == InstrKind::index) {
        const SymInt cr = in.index.coeffs[0];
        c.index.coeffs = {cr * SymInt(chunk), cr};
      }
      map[i] = static_cast<int32_t>(a.instrs.size());
      a.instrs.push_back(std::move(c));
      if (in.kind == InstrKind::reduce) {
        Buffer b;
        b.id = static_cast<int32_t>(s.buffers.size());
        b.kind = BufferKind::intermediate;
        b.dtype = in.dtype;
        b.sizes = {SymInt(parts)};
        b.strides = {SymInt(1)};
        s.buffers.push_back(b);
        partial_of[i] = b.id;
        Affine at;
        at.coeffs = {SymInt(1), SymInt(0)};
        a.stores.push_back(Store{b.id, at, map[i]});
      }
    }
    // Stage 2: domain [| parts]; fold the partials, then the original epilogue and stores.
    Kernel b;
    b.name = k.name;
    b.kind = KernelKind::reduction;
    b.domain = {SymInt(parts)};
    b.num_outer = 0;
    b.provenance = k.provenance;
    std::vector<int32_t> map2(k.instrs.size(), -1);
    for (size_t i = 0; i < k.instrs.size(); ++i) {
      const Instr& in = k.instrs[i];
      if (in.inner) continue;
      if (in.kind == InstrKind::reduce) {
        Instr ld;
        ld.kind = InstrKind::load;
        ld.dtype = in.dtype;
        ld.buffer = partial_of[i];
        ld.index.coeffs = {SymInt(1)};
        b.instrs.push_back(ld);
        Instr r = in;
        r.args = {static_cast<int32_t>(b.instrs.size() - 1)};
        map2[i] = static_cast<int32_t>(b.instrs.size());
        b.instrs.push_back(r);
        continue;
      }
      Instr c = in;
      for (int32_t& arg : c.args) arg = map2[static_cast<size_t>(arg)];
      if (c.kind == InstrKind::load || c.kind == InstrKind::index) c.index.coeffs = {SymInt(0)};
      map2[i] = static_cast<int32_t>(b.instrs.size());
      b.instrs.push_back(std::move(c));
    }
    for (const Store& st : k.stores) {
      Store c = st;
      c.value = map2[static_cast<size_t>(st.value)];
      c.index.coeffs = {SymInt(0)};
      b.stores.push_back(c);
    }
    finish_kernel(a);
    finish_kernel(b);
    out.push_back(std::move(a));
    out.push_back(std::move(b));
  }
  s.kernels = std::move(out);
}

}  // namespace kiln::schedule::detail
