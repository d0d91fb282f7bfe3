// The kernel IR's helpers: passes and inner-ness of instructions, dim collapsing, printing.
#include "kiln/schedule/kernel_ir.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "kiln/graph/error.h"

namespace kiln::schedule {

std::string Affine::str() const {
  std::ostringstream os;
  bool first = true;
  for (size_t k = 0; k < coeffs.size(); ++k) {
    if (coeffs[k] == 0) continue;
    if (!first) os << " + ";
    first = false;
    if (!(coeffs[k] == 1)) os << (coeffs[k].is_static() ? coeffs[k].str() : "(" + coeffs[k].str() + ")") << "*";
    os << "i" << k;
  }
  if (!(offset == 0) || first) {
    if (!first) os << " + ";
    os << offset.str();
  }
  return os.str();
}

std::string_view reduce_kind_name(ReduceKind k) {
  switch (k) {
    case ReduceKind::sum: return "sum";
    case ReduceKind::prod: return "prod";
    case ReduceKind::max: return "max";
    case ReduceKind::min: return "min";
    case ReduceKind::argmax: return "argmax";
    case ReduceKind::argmin: return "argmin";
  }
  return "?";
}

std::string_view kernel_kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::pointwise: return "pointwise";
    case KernelKind::reduction: return "reduction";
    case KernelKind::matmul: return "matmul";
    case KernelKind::attention: return "attention";
    case KernelKind::convolution: return "convolution";
    case KernelKind::reference: return "reference";
  }
  return "?";
}

OpId combine_op(Combine c) {
  switch (c) {
    case Combine::add: return OpId::add;
    case Combine::max: return OpId::maximum;
    case Combine::min: return OpId::minimum;
    case Combine::mul: return OpId::mul;
    case Combine::none: break;
  }
  KILN_INTERNAL_CHECK(false, "a plain store combines nothing");
  return OpId::add;
}

namespace {

const char* combine_symbol(Combine c) {
  switch (c) {
    case Combine::none: return "=";
    case Combine::add: return "+=";
    case Combine::max: return "max=";
    case Combine::min: return "min=";
    case Combine::mul: return "*=";
  }
  return "?";
}

bool inner_index(const Affine& a, int32_t num_outer) {
  for (size_t v = static_cast<size_t>(num_outer); v < a.coeffs.size(); ++v)
    if (a.depends_on(v)) return true;
  return false;
}

void check_affine(const Kernel& k, const Affine& a, std::string_view what) {
  KILN_INTERNAL_CHECK(a.coeffs.size() == k.domain.size(), "kernel ", k.name, ": ", what, " has ", a.coeffs.size(),
             " coefficients for a domain of rank ", k.domain.size());
}

}  // namespace

void finish_kernel(Kernel& k) {
  for (size_t i = 0; i < k.instrs.size(); ++i) {
    Instr& in = k.instrs[i];
    for (int32_t a : in.args)
      KILN_INTERNAL_CHECK(a >= 0 && static_cast<size_t>(a) < i, "kernel ", k.name, ": instruction ", i,
                 " uses instruction ", a, ", which does not precede it");
    in.inner = false;
    in.pass = 0;
    switch (in.kind) {
      case InstrKind::load:
      case InstrKind::index:
        check_affine(k, in.index, "an index");
        in.inner = inner_index(in.index, k.num_outer);
        KILN_INTERNAL_CHECK(in.kind == InstrKind::load ? in.args.size() == size_t{in.masked} + size_t{in.gathered}
                                              : in.args.empty(),
                   "kernel ", k.name, ": instruction ", i, " has operands its kind does not take");
        for (int32_t a : in.args) {  // a masked or gathered load varies with its mask and offset
          in.inner = in.inner || k.instrs[static_cast<size_t>(a)].inner;
          in.pass = std::max(in.pass, k.instrs[static_cast<size_t>(a)].pass);
        }
        break;
      case InstrKind::constant:
      case InstrKind::size: break;
      case InstrKind::pointwise:
        for (int32_t a : in.args) {
          in.inner = in.inner || k.instrs[static_cast<size_t>(a)].inner;
          in.pass = std::max(in.pass, k.instrs[static_cast<size_t>(a)].pass);
        }
        break;
      case InstrKind::reduce:
        KILN_INTERNAL_CHECK(in.args.size() == 1, "kernel ", k.name, ": a reduction takes one value");
        KILN_INTERNAL_CHECK(static_cast<size_t>(k.num_outer) < k.domain.size(), "kernel ", k.name,
                   ": a reduction needs inner dims");
        in.pass = k.instrs[static_cast<size_t>(in.args[0])].pass + 1;
        break;
    }
  }
  for (const Store& s : k.stores) {
    check_affine(k, s.index, "a store index");
    KILN_INTERNAL_CHECK(s.value >= 0 && static_cast<size_t>(s.value) < k.instrs.size(), "kernel ", k.name,
               ": a store of an unknown value");
    if (!s.plain()) {
      KILN_INTERNAL_CHECK(k.kind == KernelKind::pointwise, "kernel ", k.name, ": a scatter's store in a ",
                          kernel_kind_name(k.kind), " kernel");
      const DType t = k.instrs[static_cast<size_t>(s.value)].dtype;
      KILN_INTERNAL_CHECK(s.combine == Combine::none || t == DType::f32 || t == DType::f64 || t == DType::i32 ||
                              t == DType::i64,
                          "kernel ", k.name, " combines ", dtype_name(t),
                          " values atomically; targets combine f32, f64, i32 or i64");
      KILN_INTERNAL_CHECK(s.offset < 0 || (static_cast<size_t>(s.offset) < k.instrs.size() &&
                                           k.instrs[static_cast<size_t>(s.offset)].dtype == DType::i64),
                          "kernel ", k.name, ": a store's offset must be an i64 value");
    }

  }
}

int recompute_cost(OpId op) {
  switch (op) {
    case OpId::exp: case OpId::log: case OpId::sin: case OpId::cos: case OpId::tanh: case OpId::erf:
    case OpId::pow: case OpId::sigmoid: case OpId::gelu: case OpId::silu: return 4;
    default: return 1;
  }
}

std::vector<int32_t> values_reused_across_passes(const Kernel& k, int min_cost) {
  const size_t n = k.instrs.size();
  // Cost of computing each inner value from the loads and the per-row values it reads.
  std::vector<int> cost(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Instr& in = k.instrs[i];
    if (!in.inner || in.kind != InstrKind::pointwise) continue;
    cost[i] = recompute_cost(in.op);
    for (int32_t a : in.args) cost[i] += cost[static_cast<size_t>(a)];
  }
  std::vector<bool> kept(n, false), seen(n, false);
  // A value an instruction of sweep `sweep` reads; values of earlier sweeps are kept when dear,
  // else recomputed here, so their own operands are looked at in turn.
  std::function<void(int32_t, int32_t)> visit = [&](int32_t a, int32_t sweep) {
    const Instr& v = k.instrs[static_cast<size_t>(a)];
    if (!v.inner || v.pass >= sweep || seen[static_cast<size_t>(a)]) return;
    seen[static_cast<size_t>(a)] = true;
    if (v.kind == InstrKind::pointwise && cost[static_cast<size_t>(a)] >= min_cost) {
      kept[static_cast<size_t>(a)] = true;
      return;
    }
    for (int32_t b : v.args) visit(b, sweep);
  };
  for (int32_t sweep = 1; sweep < k.num_passes(); ++sweep) {
    std::fill(seen.begin(), seen.end(), false);
    for (size_t j = 0; j < n; ++j) {
      const Instr& in = k.instrs[j];
      // Reductions folded in sweep s have pass s + 1; inner values are computed in their pass.
      const bool in_sweep = in.kind == InstrKind::reduce ? in.pass - 1 == sweep : (in.inner && in.pass == sweep);
      if (in_sweep)
        for (int32_t a : in.args) visit(a, sweep);
    }
  }
  std::vector<int32_t> r;
  for (size_t i = 0; i < n; ++i)
    if (kept[i]) r.push_back(static_cast<int32_t>(i));
  return r;
}

int32_t Kernel::num_passes() const {
  if (static_cast<size_t>(num_outer) == domain.size()) return 0;
  int32_t n = 0;
  for (const Instr& in : instrs)
    if (in.kind == InstrKind::reduce) n = std::max(n, in.pass);  // loop in.pass - 1, so in.pass loops
  for (const Store& s : stores)
    if (store_is_inner(s)) n = std::max(n, instrs[static_cast<size_t>(s.value)].pass + 1);
  return n;
}

bool Kernel::store_is_inner(const Store& s) const {
  return instrs[static_cast<size_t>(s.value)].inner || inner_index(s.index, num_outer);
}

SymInt Kernel::outer_extent() const {
  SymInt n = 1;
  for (int32_t d = 0; d < num_outer; ++d) n = n * domain[static_cast<size_t>(d)];
  return n;
}

std::vector<int32_t> Kernel::reads() const {
  std::vector<int32_t> r;
  for (const Instr& in : instrs)
    if (in.kind == InstrKind::load) r.push_back(in.buffer);
  if (gemm) {
    r.push_back(gemm->a);
    r.push_back(gemm->b);
  }
  if (reference) r.insert(r.end(), reference->inputs.begin(), reference->inputs.end());
  if (attention) r.insert(r.end(), {attention->q, attention->k, attention->v});
  if (attention && attention->mask >= 0) r.push_back(attention->mask);
  if (convolution) {
    const std::array<int32_t, 2> ops = convolution->operands();
    r.insert(r.end(), ops.begin(), ops.end());
  }
  for (const Store& s : stores)
    if (s.combine != Combine::none) r.push_back(s.buffer);
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

std::array<int32_t, 2> Convolution::operands() const {
  switch (computes) {
    case ConvolutionComputes::x: return {y, w};
    case ConvolutionComputes::w: return {x, y};
    case ConvolutionComputes::y: break;
  }
  return {x, w};
}

int32_t Convolution::result() const {
  switch (computes) {
    case ConvolutionComputes::x: return x;
    case ConvolutionComputes::w: return w;
    case ConvolutionComputes::y: break;
  }
  return y;
}

std::vector<int32_t> Kernel::writes() const {
  std::vector<int32_t> w;
  for (const Store& s : stores) w.push_back(s.buffer);
  if (gemm) w.push_back(gemm->c);
  if (reference) w.push_back(reference->output);
  if (attention) w.push_back(attention->out);
  if (convolution) w.push_back(convolution->result());
  std::sort(w.begin(), w.end());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  return w;
}

bool Gemm::last_batch_is_rows() const {
  return !batch.empty() && b_batch_strides.back() == 0 && a_col_stride == 1 &&
         (batch.back() == 1 || a_batch_strides.back() == m * a_row_stride);
}

void Gemm::fold_last_batch() {
  KILN_INTERNAL_CHECK(last_batch_is_rows(), "schedule: a gemm's last batch dim is not more rows");
  m = m * batch.back();
  batch.pop_back();
  a_batch_strides.pop_back();
  b_batch_strides.pop_back();
}

void Gemm::merge_batch_dims() {
  // A batch dim of size 1 steps nowhere, whatever its strides say (the group dim of a 1x1
  // convolution's gradient: batch [64, 1] ran as 64 calls of one product each).
  for (size_t d = batch.size(); d-- > 0;)
    if (batch[d] == 1)
      for (SymShape* v : {&batch, &a_batch_strides, &b_batch_strides}) v->erase(v->begin() + static_cast<std::ptrdiff_t>(d));
  for (size_t d = batch.size(); d-- > 1;) {
    const SymInt inner = batch[d];
    if (!(a_batch_strides[d - 1] == a_batch_strides[d] * inner) || !(b_batch_strides[d - 1] == b_batch_strides[d] * inner))
      continue;
    batch[d - 1] = batch[d - 1] * inner;
    a_batch_strides[d - 1] = a_batch_strides[d];
    b_batch_strides[d - 1] = b_batch_strides[d];
    for (SymShape* v : {&batch, &a_batch_strides, &b_batch_strides}) v->erase(v->begin() + static_cast<std::ptrdiff_t>(d));
  }
}

namespace {

// A matmul kernel's domain is its gemm's [batch..., m, n] and stays so: the gemm's last batch
// dims become rows (Gemm::fold_last_batch) only where every index of the kernel folds them into
// the row dim too. (A GPU's library call may fold more: lower::plan_gemm.)
void merge_gemm_batch(Kernel& k, const std::vector<Affine*>& all) {
  Gemm& g = *k.gemm;
  while (g.last_batch_is_rows() && k.domain.size() == g.batch.size() + 2) {
    const size_t e = k.domain.size() - 3, d = e + 1;  // the last batch dim, the row dim
    const bool same_side = (static_cast<int32_t>(d) < k.num_outer) == (static_cast<int32_t>(e) < k.num_outer);
    if (!same_side || !(k.domain[e] == g.batch.back())) return;
    if (!(k.domain[e] == 1))
      for (const Affine* a : all)
        if (!(a->coeffs[e] == a->coeffs[d] * k.domain[d])) return;
    k.domain[d] = k.domain[e] * k.domain[d];
    k.domain.erase(k.domain.begin() + static_cast<std::ptrdiff_t>(e));
    for (Affine* a : all) a->coeffs.erase(a->coeffs.begin() + static_cast<std::ptrdiff_t>(e));
    if (static_cast<int32_t>(e) < k.num_outer) --k.num_outer;
    g.fold_last_batch();
  }
}

}  // namespace

void collapse_dims(Kernel& k) {
  if (k.reference || k.attention || k.convolution) return;
  std::vector<Affine*> all;
  for (Instr& in : k.instrs)
    if (in.kind == InstrKind::load || in.kind == InstrKind::index) all.push_back(&in.index);
  for (Store& s : k.stores) all.push_back(&s.index);
  if (k.gemm) {
    merge_gemm_batch(k, all);
    return;
  }
  auto erase_dim = [&](size_t d) {
    k.domain.erase(k.domain.begin() + static_cast<std::ptrdiff_t>(d));
    for (Affine* a : all) a->coeffs.erase(a->coeffs.begin() + static_cast<std::ptrdiff_t>(d));
    if (static_cast<int32_t>(d) < k.num_outer) --k.num_outer;
  };
  // Dims of extent 1 contribute nothing to any index.
  for (size_t d = k.domain.size(); d-- > 0;) {
    const bool last_inner = static_cast<int32_t>(d) >= k.num_outer &&
                            k.domain.size() - static_cast<size_t>(k.num_outer) == 1;
    if (k.domain[d] == 1 && k.domain.size() > 1 && !last_inner) erase_dim(d);
  }
  for (size_t d = k.domain.size(); d-- > 1;) {
    const size_t e = d - 1;  // try to merge e and d
    const bool same_side = (static_cast<int32_t>(d) < k.num_outer) == (static_cast<int32_t>(e) < k.num_outer);
    if (!same_side) continue;
    bool ok = true;
    for (const Affine* a : all)
      if (!(a->coeffs[e] == a->coeffs[d] * k.domain[d])) {
        ok = false;
        break;
      }
    if (!ok) continue;
    k.domain[e] = k.domain[e] * k.domain[d];
    for (Affine* a : all) a->coeffs[e] = a->coeffs[d];
    erase_dim(d);
  }
}

void order_dims_for_stores(Kernel& k) {
  if (k.kind != KernelKind::pointwise || k.stores.empty() || k.gemm || k.reference || k.attention || k.convolution) return;
  const Affine& first = k.stores.front().index;
  std::vector<size_t> order(k.domain.size());
  for (size_t d = 0; d < order.size(); ++d) {
    if (!first.coeffs[d].is_static()) return;
    order[d] = d;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return first.coeffs[a].hint() > first.coeffs[b].hint(); });
  if (std::is_sorted(order.begin(), order.end())) return;
  auto permute = [&](std::vector<SymInt>& v) {
    std::vector<SymInt> p;
    for (size_t d : order) p.push_back(v[d]);
    v = std::move(p);
  };
  permute(k.domain);
  for (Instr& in : k.instrs)
    if (in.kind == InstrKind::load || in.kind == InstrKind::index) permute(in.index.coeffs);
  for (Store& s : k.stores) permute(s.index.coeffs);
  collapse_dims(k);
}

std::string Kernel::str() const {
  std::ostringstream os;
  os << "kernel " << name << " (" << kernel_kind_name(kind) << ") domain " << shape_str(domain);
  if (static_cast<size_t>(num_outer) < domain.size()) os << ", " << num_outer << " outer";
  os << ", nodes";
  for (NodeId n : provenance) os << " %" << n;
  os << "\n";
  if (gemm)
    os << "  gemm: b" << gemm->c << "[" << shape_str(gemm->batch) << " x " << gemm->m.str() << " x "
       << gemm->n.str() << "] = b" << gemm->a << " @ b" << gemm->b << " (k = " << gemm->k.str() << ")\n";
  if (attention) {
    const std::string mask = attention->mask < 0 ? ""
                             : (attention->mask_dtype == DType::bool_ ? " where b" : " + b") + std::to_string(attention->mask);
    os << "  attention: b" << attention->out << "[" << shape_str(attention->batch) << " x " << attention->lq.str()
       << " x " << attention->dv << "] = softmax(b" << attention->q << " @ b" << attention->k << "^T * "
       << attention->scale << mask << ") @ b" << attention->v
       << " (lk = " << attention->lk.str() << ", d = " << attention->d << (attention->causal ? ", causal" : "") << ")\n";
  }
  if (convolution) {
    const Convolution& c = *convolution;
    auto list = [](const std::vector<int64_t>& v) {
      std::string t;
      for (size_t i = 0; i < v.size(); ++i) t += (i ? "," : "") + std::to_string(v[i]);
      return t;
    };
    os << "  convolution: b" << c.y << " = conv(b" << c.x << shape_str(c.x_sizes) << ", b" << c.w << "[" << list(c.w_sizes)
       << "]) strides " << list(c.strides) << " pads " << list(c.pads) << " dilations " << list(c.dilations) << " groups "
       << c.groups << (c.channels_last ? " channels last" : "");
    if (c.computes != ConvolutionComputes::y)
      os << ", computes b" << c.result() << " = d/d" << convolution_computes_name(c.computes) << " from b" << c.y;
    os << "\n";
  }
  if (reference) {
    os << "  reference " << op_name(reference->op) << "(";
    for (size_t i = 0; i < reference->inputs.size(); ++i) os << (i ? ", b" : "b") << reference->inputs[i];
    os << ") -> b" << reference->output << "\n";
  }
  for (size_t i = 0; i < instrs.size(); ++i) {
    const Instr& in = instrs[i];
    os << "  v" << i << " = ";
    switch (in.kind) {
      case InstrKind::load:
        os << "load b" << in.buffer << "[" << in.index.str();
        if (in.gathered) os << " + v" << in.gather_offset();
        os << "]";
        if (in.masked) os << " if v" << in.mask();
        break;
      case InstrKind::constant: os << "constant " << in.value; break;
      case InstrKind::size: os << "size " << in.size.str(); break;
      case InstrKind::index: os << "index " << in.index.str(); break;
      case InstrKind::pointwise: {
        os << op_name(in.op) << "(";
        for (size_t a = 0; a < in.args.size(); ++a) os << (a ? ", v" : "v") << in.args[a];
        os << ")";
        break;
      }
      case InstrKind::reduce: os << reduce_kind_name(in.reduce) << "(v" << in.args[0] << ")"; break;
    }
    os << " : " << dtype_name(in.dtype);
    if (in.inner) os << " inner";
    if (in.pass > 0) os << " pass " << in.pass;
    os << "\n";
  }
  for (const Store& s : stores)
    os << "  store b" << s.buffer << "[" << s.index.str() << (s.offset >= 0 ? " + v" + std::to_string(s.offset) : "")
       << "] " << combine_symbol(s.combine) << " v" << s.value << "\n";
  return os.str();
}

}  // namespace kiln::schedule
