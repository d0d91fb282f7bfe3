#include "op_cases.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>

#include "kiln/eval/interpreter.h"
#include "kiln/graph/custom_ops.h"
#include "kiln/graph/error.h"

namespace cpu_test {

bool full_mode() {
  static const bool full = [] {
    const char* e = std::getenv("KILN_CPU_TARGET_FULL");
    return e && *e && std::string(e) != "0";
  }();
  return full;
}

// ---- running batches ------------------------------------------------------------------------

namespace {

constexpr int64_t kMaxSize = std::numeric_limits<int64_t>::max();

int symbols_used(const OpCase& c) {
  int n = 0;
  for (const Arg& a : c.args)
    for (int64_t s : a.sizes)
      if (s < 0) n = std::max(n, static_cast<int>(-s));
  return n;
}

std::vector<int64_t> eval_sizes(const Arg& a, const std::vector<int64_t>& symbols) {
  std::vector<int64_t> s;
  for (int64_t d : a.sizes) s.push_back(d < 0 ? symbols.at(static_cast<size_t>(-d - 1)) : d);
  return s;
}

// The inputs of one case at one run. `copy_path`: inputs declared contiguous are passed as
// transposed views (the runtime must copy them).
std::vector<TensorData> case_inputs(const OpCase& c, const std::vector<int64_t>& symbols, uint64_t seed, bool copy_path) {
  std::mt19937_64 rng(seed);
  std::vector<TensorData> out;
  for (const Arg& a : c.args) {
    const std::vector<int64_t> sizes = eval_sizes(a, symbols);
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    std::vector<double> v;
    if (a.index_bound > 0) {
      for (int64_t k = 0; k < n; ++k) v.push_back(static_cast<double>(rng() % static_cast<uint64_t>(a.index_bound)));
    } else {
      v = random_values(a.dtype, n, a.domain, rng);
    }
    Layout l = a.layout;
    if (l == Layout::contiguous && copy_path && sizes.size() >= 2) l = Layout::permuted;
    out.push_back(laid_out(a.dtype, sizes, v, l));
  }
  return out;
}

std::vector<SymInt> make_symbols(Graph& g, int n, const std::vector<int64_t>& examples) {
  std::vector<SymInt> s;
  for (int k = 0; k < n; ++k)
    s.push_back(g.shapes().create_symbol(examples.at(static_cast<size_t>(k)), 2, kMaxSize, "s" + std::to_string(k), false));
  return s;
}

// Adds the case's inputs (metas from the run-0 tensors) and its value to g.
NodeId add_case(Graph& g, const OpCase& c, const std::vector<SymInt>& syms, std::span<const TensorData> ins) {
  std::vector<NodeId> ids;
  for (size_t k = 0; k < c.args.size(); ++k) {
    const Arg& a = c.args[k];
    TensorMeta m;
    m.dtype = a.dtype;
    for (int64_t d : a.sizes) m.sizes.push_back(d < 0 ? syms.at(static_cast<size_t>(-d - 1)) : SymInt(d));
    if (a.declare_strides && !ins[k].is_contiguous()) {
      BOOST_REQUIRE(shape_is_static(m.sizes));
      for (int64_t s : ins[k].strides) m.strides.push_back(s);
    }
    ids.push_back(g.add_input(m, "x" + std::to_string(ids.size())));
  }
  return c.build(g, ids, syms);
}

std::string case_title(const Graph& g, NodeId out, const OpCase& c, size_t first_input = 0) {
  std::ostringstream os;
  os << op_name(g.node(out).op) << " -> " << g.node(out).meta.str() << " of (";
  for (size_t k = 0; k < c.args.size(); ++k) {
    const Node& in = g.node(static_cast<NodeId>(g.inputs()[first_input + k]));
    os << (k ? ", " : "") << in.meta.str();
    if (c.args[k].layout != Layout::contiguous)
      os << " " << layout_name(c.args[k].layout) << (c.args[k].declare_strides ? "" : " (declared contiguous)");
    if (c.args[k].domain != Domain::normal) os << " " << domain_name(c.args[k].domain);
  }
  os << ")";
  if (!c.note.empty()) os << " [" << c.note << "]";
  return os.str();
}

Tolerance case_tolerance(const OpCase& c, const Graph& g, NodeId out) {
  return c.tol_set ? c.tol : tolerance_for(g.node(out).meta.dtype);
}

}  // namespace

// Delta debugging: a smallest subset of `items` for which `fails` holds (fails(items) must).
std::vector<size_t> ddmin(std::vector<size_t> items, const std::function<bool(const std::vector<size_t>&)>& fails) {
  size_t n = 2;
  while (items.size() >= 2) {
    const size_t chunk = (items.size() + n - 1) / n;
    bool reduced = false;
    for (size_t start = 0; start < items.size() && !reduced; start += chunk) {
      std::vector<size_t> part(items.begin() + static_cast<std::ptrdiff_t>(start),
                               items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), start + chunk)));
      std::vector<size_t> rest(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(start));
      rest.insert(rest.end(), items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), start + chunk)), items.end());
      if (fails(part)) {
        items = part;
        n = 2;
        reduced = true;
      } else if (n > 2 && fails(rest)) {
        items = rest;
        n = std::max<size_t>(n - 1, 2);
        reduced = true;
      }
    }
    if (reduced) continue;
    if (n >= items.size()) break;
    n = std::min(items.size(), 2 * n);
  }
  return items;
}

Batch matmul_shape_cases(const std::string& name, const std::vector<int64_t>& ms, const std::vector<int64_t>& ns,
                         int64_t k) {
  Batch b;
  b.name = name;
  for (int64_t m : ms)
    for (int64_t n : ns) {
      OpCase c;
      c.note = std::to_string(m) + "x" + std::to_string(k) + " @ " + std::to_string(k) + "x" + std::to_string(n);
      c.args = {Arg{DType::f32, {m, k}}, Arg{DType::f32, {k, n}}};
      c.build = [](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
        return g.add(OpId::matmul, {in[0], in[1]});
      };
      b.cases.push_back(std::move(c));
    }
  return b;
}

BatchStats run_batch(const Batch& b, uint64_t seed) {
  BatchStats st;
  const bool symbolic = !b.runs.empty();
  const std::vector<std::vector<int64_t>> runs = symbolic ? b.runs : std::vector<std::vector<int64_t>>{{}};
  const auto case_seed = [&](size_t ci, size_t run, bool copy) {
    return seed * 1000003u + ci * 7919u + run * 104729u + (copy ? 17u : 0u);
  };

  // Accepted cases: the op takes these dtypes and shapes and the reference runs them.
  std::vector<size_t> accepted;
  for (size_t ci = 0; ci < b.cases.size(); ++ci) {
    const OpCase& c = b.cases[ci];
    Graph g;
    try {
      const int n = symbols_used(c);
      BOOST_REQUIRE_MESSAGE(n == 0 || symbolic, b.name << ": a symbolic case in a static batch");
      const std::vector<SymInt> syms = make_symbols(g, n, runs[0]);
      const std::vector<TensorData> ins = case_inputs(c, runs[0], case_seed(ci, 0, false), false);
      g.set_outputs({add_case(g, c, syms, ins)});
      eval::run_graph(g, ins);
      accepted.push_back(ci);
    } catch (const kiln::Error& e) {
      ++st.rejected;
      st.rejected_notes.push_back((c.args.empty() ? std::string("()") : std::string(dtype_name(c.args[0].dtype))) + ": " +
                                  std::string(e.what()).substr(0, 100));
    }
  }
  st.cases = static_cast<int>(accepted.size());
  if (accepted.empty()) return st;

  // A graph of some of the cases, one output each, in the order given.
  struct Sub {
    Graph g;
    std::vector<Tolerance> tols;
  };
  auto build = [&](const std::vector<size_t>& cases) {
    Sub s;
    int nsyms = 0;
    for (size_t ci : cases) nsyms = std::max(nsyms, symbols_used(b.cases[ci]));
    const std::vector<SymInt> syms = make_symbols(s.g, nsyms, runs[0]);
    std::vector<NodeId> outs;
    for (size_t ci : cases) {
      const std::vector<TensorData> ins = case_inputs(b.cases[ci], runs[0], case_seed(ci, 0, false), false);
      const NodeId o = add_case(s.g, b.cases[ci], syms, ins);
      outs.push_back(o);
      s.tols.push_back(case_tolerance(b.cases[ci], s.g, o));
    }
    s.g.set_outputs(outs);
    return s;
  };
  auto inputs_of = [&](const std::vector<size_t>& cases, size_t run, bool copy) {
    std::vector<TensorData> in;
    for (size_t ci : cases) {
      std::vector<TensorData> x = case_inputs(b.cases[ci], runs[run], case_seed(ci, run, copy), copy);
      in.insert(in.end(), x.begin(), x.end());
    }
    return in;
  };
  auto symbols_of = [&](const std::vector<size_t>& cases, size_t run) {
    int n = 0;
    for (size_t ci : cases) n = std::max(n, symbols_used(b.cases[ci]));
    return std::vector<int64_t>(runs[run].begin(), runs[run].begin() + n);
  };
  auto title_of = [&](const Sub& s, const std::vector<size_t>& cases) {
    std::string t = b.name + ": ";
    size_t first = 0;
    for (size_t k = 0; k < cases.size(); ++k) {
      t += (k ? " + " : "") + case_title(s.g, s.g.outputs()[k], b.cases[cases[k]], first);
      first += b.cases[cases[k]].args.size();
    }
    return t;
  };

  // Compile the batch; cases that break the compile only together with others (fusion across
  // cases) are reduced to the smallest such set, reported, and then run alone.
  std::vector<size_t> batch = accepted, alone_cases;
  Compiled compiled;
  for (int attempt = 0;; ++attempt) {
    if (batch.empty()) break;
    compiled = compile(build(batch).g, b.options);
    if (compiled.error.empty()) break;
    if (attempt == 8) {  // too many: run everything alone
      alone_cases.insert(alone_cases.end(), batch.begin(), batch.end());
      batch.clear();
      break;
    }
    const std::vector<size_t> min = ddmin(batch, [&](const std::vector<size_t>& sub) {
      return !compile(build(sub).g, b.options).error.empty() || false;
    });
    const Sub s = build(min);
    const std::string err = compile(s.g, b.options).error;
    if (min.size() == 1) {
      alone_cases.push_back(min[0]);  // fails alone: reported when run alone below
    } else {
      ++st.failures;
      BOOST_ERROR(failure_report(title_of(s, min) + ": these cases compile alone but not in one graph", s.g,
                                 inputs_of(min, 0, false), symbols_of(min, 0), "compile failed: " + err + "\n"));
      alone_cases.push_back(min.back());
    }
    batch.erase(std::find(batch.begin(), batch.end(), alone_cases.back()));
  }

  // Runs a compiled graph of `cases` at every run; returns the cases whose output failed, and
  // reports the failures of single-case graphs.
  auto run_all = [&](const std::vector<size_t>& cases, const Compiled& c, bool report) {
    std::vector<std::pair<size_t, size_t>> bad_runs;  // (index into cases, run)
    std::vector<bool> seen(cases.size(), false);
    const std::vector<Tolerance> tols = build(cases).tols;
    for (size_t run = 0; run < runs.size(); ++run) {
      for (bool copy : {false, true}) {
        if (copy && symbolic) continue;  // static batches also check the runtime's copy of strided inputs
        const std::vector<TensorData> in = inputs_of(cases, run, copy);
        ++st.runs;
        std::vector<size_t> bad;
        const std::string details = run_and_compare(c, in, tols, &bad);
        if (details.empty()) continue;
        if (bad.empty()) {
          ++st.failures;
          BOOST_ERROR(failure_report(b.name + ": run " + std::to_string(run), c.graph, in, symbols_of(cases, run), details));
          continue;
        }
        for (size_t k : bad) {
          ++st.failures;
          if (seen[k]) continue;
          seen[k] = true;
          bad_runs.emplace_back(k, run);
          if (report)
            BOOST_ERROR(failure_report(title_of(Sub{c.graph, {}}, cases) + (copy ? " (inputs passed as strided views of other storage)" : ""),
                                       c.graph, in, symbols_of(cases, run), details));
        }
      }
    }
    return bad_runs;
  };

  // The batch, then any failing case alone; a case that passes alone is reduced with the
  // smallest set of other cases it fails with.
  std::vector<size_t> failing_in_batch;
  std::map<size_t, size_t> failing_run;
  if (!batch.empty())
    for (const auto& [k, run] : run_all(batch, compiled, false)) {
      failing_in_batch.push_back(batch[k]);
      failing_run[batch[k]] = run;
    }
  for (size_t ci : alone_cases) failing_in_batch.push_back(ci);
  for (size_t ci : failing_in_batch) {
    const std::vector<size_t> one{ci};
    const Compiled c = compile(build(one).g, b.options);
    if (!c.error.empty()) {
      ++st.failures;
      const std::vector<TensorData> in = inputs_of(one, 0, false);
      BOOST_ERROR(failure_report(title_of(build(one), one), c.graph, in, symbols_of(one, 0), "compile failed: " + c.error + "\n"));
      continue;
    }
    if (!run_all(one, c, true).empty()) continue;
    if (!failing_run.count(ci)) continue;  // ran alone because of the compile: passes
    // Fails only with other cases: reduce them.
    const size_t run = failing_run[ci];
    std::vector<size_t> others;
    for (size_t x : batch)
      if (x != ci) others.push_back(x);
    auto fails_with = [&](const std::vector<size_t>& sub) {
      std::vector<size_t> cases = sub;
      cases.push_back(ci);
      const Sub s = build(cases);
      const Compiled cc = compile(s.g, b.options);
      if (!cc.error.empty()) return false;
      std::vector<size_t> bad;
      for (bool copy : {false, true}) {
        run_and_compare(cc, inputs_of(cases, run, copy), s.tols, &bad);
        if (std::find(bad.begin(), bad.end(), cases.size() - 1) != bad.end()) return true;
      }
      return false;
    };
    std::vector<size_t> min = fails_with(others) ? ddmin(others, fails_with) : others;
    min.push_back(ci);
    const Sub s = build(min);
    const Compiled cc = compile(s.g, b.options);
    const std::vector<TensorData> in = inputs_of(min, run, false);
    ++st.failures;
    BOOST_ERROR(failure_report(title_of(s, min) + ": the last case fails only together with the others (alone it passes)",
                               s.g, in, symbols_of(min, run), run_and_compare(cc, in, s.tols)));
  }
  return st;
}

// ---- the cases -------------------------------------------------------------------------------

namespace {

using D = DType;
using Ints = std::vector<int64_t>;
const std::vector<DType> kAll = {D::f32, D::f64, D::f16, D::bf16, D::i32, D::i64, D::bool_};
const std::vector<DType> kFloats = {D::f32, D::f64, D::f16, D::bf16};
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

// Symbol values the symbolic batches run at (the first is the example): sizes next to 1,
// primes, and one larger than a vector.
const std::vector<std::vector<int64_t>> kSymRuns = {{3, 5, 2}, {2, 7, 13}, {129, 3, 7}, {13, 129, 3}, {5, 2, 129}};

Arg A(D t, Ints s, Domain d = Domain::normal, Layout l = Layout::contiguous) { return Arg{t, std::move(s), d, l}; }
Arg undeclared(Arg a) {
  a.declare_strides = false;
  return a;
}

BuildFn op_of(OpId op, Attrs attrs = {}) {
  return [op, attrs](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) { return g.add(op, in, attrs); };
}

OpCase C(std::vector<Arg> args, BuildFn f, std::string note = {}) {
  OpCase c;
  c.args = std::move(args);
  c.build = std::move(f);
  c.note = std::move(note);
  return c;
}
OpCase C(std::vector<Arg> args, BuildFn f, Tolerance tol, std::string note = {}) {
  OpCase c = C(std::move(args), std::move(f), std::move(note));
  c.tol = tol;
  c.tol_set = true;
  return c;
}

OpCase core(OpCase c) {
  c.core = true;
  return c;
}
// Results near zero compared relatively: no absolute slack beyond a few subnormal units.
OpCase precise(OpCase c) {
  c.tol.atol = subnormal_atol(c.out);
  return c;
}
// Only the core cases unless `all`.
std::vector<OpCase> tier(std::vector<OpCase> cases, bool all) {
  if (all || full_mode()) return cases;
  std::vector<OpCase> out;
  for (OpCase& c : cases)
    if (c.core) out.push_back(std::move(c));
  return out;
}
Batch static_batch(std::string name, std::vector<OpCase> cases, bool all = true) {
  return Batch{std::move(name), tier(std::move(cases), all), {}, {}};
}
Batch symbolic_batch(std::string name, std::vector<OpCase> cases, bool all = true) {
  Batch b{std::move(name), tier(std::move(cases), all), kSymRuns, {}};
  b.options.small_grains = true;  // kernels run in many slices
  return b;
}

std::string bname(OpId op, DType t, const char* what) {
  return std::string(op_name(op)) + " " + std::string(dtype_name(t)) + " " + what;
}

// Transcendental ops: the cpu uses polynomials / libmvec, a little looser than correctly rounded.
bool loose_op(OpId op) {
  switch (op) {
    case OpId::exp: case OpId::log: case OpId::sin: case OpId::cos: case OpId::tanh: case OpId::sigmoid:
    case OpId::gelu: case OpId::silu: case OpId::erf: case OpId::pow: case OpId::rsqrt: case OpId::logsumexp:
    case OpId::softmax: case OpId::log_softmax: case OpId::layer_norm: case OpId::rms_norm: case OpId::var:
    case OpId::scaled_dot_product_attention: case OpId::batch_norm: case OpId::group_norm:
      return true;
    default: return false;
  }
}

DType float_of(DType t) { return is_floating(t) ? t : D::f32; }

// Tolerance of an op whose result has dtype `out`.
Tolerance tol_of(OpId op, DType out) {
  Tolerance t = tolerance_for(out, loose_op(op));
  switch (op) {
    case OpId::sum: case OpId::mean: case OpId::matmul: case OpId::linear: case OpId::convolution:
    case OpId::convolution_channels_last: case OpId::avg_pool: case OpId::convolution_input_grad:
    case OpId::convolution_weight_grad:
    case OpId::cumsum:  // a matmul by a triangle of ones: a sum per element
      t.rtol *= 4;
      t.scale_by_abs_run = true;
      break;
    case OpId::prod: case OpId::cumprod:
      t.rtol *= 8;
      break;
    case OpId::var: case OpId::logsumexp: case OpId::softmax: case OpId::log_softmax: case OpId::layer_norm:
    case OpId::rms_norm: case OpId::batch_norm: case OpId::group_norm:
      t.rtol *= 4;
      t.scale_by_max = true;
      break;
    case OpId::scaled_dot_product_attention:  // two products around a softmax; the output's scale
      t.rtol *= 8;
      t.scale_by_max = true;
      break;
    default: break;
  }
  return t;
}

// A case whose tolerance follows the op and its result dtype (known after building it).
OpCase Cop(OpId op, std::vector<Arg> args, Attrs attrs, std::string note = {}) {
  OpCase c = C(std::move(args), op_of(op, attrs), std::move(note));
  // The result dtype: build on a scratch graph.
  Graph g;
  std::vector<NodeId> ids;
  try {
    for (const Arg& a : c.args) {
      TensorMeta m;
      m.dtype = a.dtype;
      for (int64_t d : a.sizes) m.sizes.push_back(d < 0 ? SymInt(3) : SymInt(d));
      ids.push_back(g.add_input(m));
    }
    const NodeId o = g.add(op, ids, attrs);
    c.out = g.node(o).meta.dtype;
    c.tol = tol_of(op, c.out);
    c.tol_set = true;
  } catch (const kiln::Error&) {
    // rejected later, when the batch builds it
  }
  return c;
}

// ---- unary --------------------------------------------------------------------------------------

Domain unary_domain(OpId op) {
  switch (op) {
    case OpId::log: case OpId::sqrt: case OpId::rsqrt: return Domain::positive;
    case OpId::reciprocal: return Domain::nonzero;
    default: return Domain::normal;
  }
}

std::vector<Batch> unary_cases(OpId op) {
  std::vector<Batch> out;
  const Domain dom = unary_domain(op);
  const Attrs attrs = op == OpId::gelu ? Attrs{std::string("none")} : Attrs{};
  for (DType t : kAll) {
    const bool all = t == D::f32;
    const Domain odd = is_floating(t) ? Domain::special : dom;
    std::vector<OpCase> cs = {
        Cop(op, {A(t, {}, dom)}, attrs, "rank 0"),
        Cop(op, {A(t, {1}, dom)}, attrs),
        Cop(op, {A(t, {13, 129}, dom)}, attrs),
        core(Cop(op, {A(t, {7, 13}, odd, Layout::permuted)}, attrs)),
        Cop(op, {A(t, {6, 7}, Domain::wide, Layout::sliced)}, attrs, "large magnitudes"),
        Cop(op, {A(t, {4, 5}, Domain::grid, Layout::expanded)}, attrs, "halves: ties"),
        Cop(op, {undeclared(A(t, {2, 9}, dom, Layout::permuted))}, attrs),
    };
    if (is_floating(t)) {
      cs.push_back(Cop(op, {A(t, {37}, Domain::special)}, attrs, "NaN, inf, -0"));
      if (dom == Domain::normal || dom == Domain::nonzero)
        cs.push_back(core(precise(Cop(op, {A(t, {41}, Domain::tiny)}, attrs, "tiny and subnormal, relative"))));
      cs.push_back(Cop(op, {A(t, {3, 9}, dom, Layout::reversed)}, attrs));
    }
    if (t == D::i64 || t == D::i32) cs.push_back(core(Cop(op, {A(t, {23}, Domain::wide)}, attrs, "large integers")));
    if (op == OpId::gelu) cs.push_back(core(Cop(op, {A(t, {5, 33}, Domain::wide)}, {std::string("tanh")}, "approximate tanh")));
    out.push_back(static_batch(bname(op, t, "static"), std::move(cs), all));
    out.push_back(symbolic_batch(bname(op, t, "symbolic"), {
                                     Cop(op, {A(t, {-1}, dom)}, attrs),
                                     core(Cop(op, {A(t, {-2, 3, -1}, dom)}, attrs)),
                                 }, all));
  }
  return out;
}

std::vector<Batch> cast_cases(OpId op) {
  std::vector<Batch> out;
  for (DType from : kAll) {
    std::vector<OpCase> cs, sym;
    for (DType to : kAll) {
      const Attrs a{to};
      // Floats to integers: values that fit (float -> int of NaN/inf/out of range is undefined).
      const Domain d = is_floating(from) && !is_floating(to) && to != D::bool_ ? Domain::wide
                       : is_floating(from) && to == D::bool_                    ? Domain::special
                       : is_integral(from)                                        ? Domain::wide
                                                                                  : Domain::normal;
      const bool all = from == D::f32 || to == D::f32;
      cs.push_back(Cop(op, {A(from, {}, d)}, a));
      cs.push_back(core(Cop(op, {A(from, {29, 3}, d, Layout::permuted)}, a)));
      if (is_floating(from) && to != D::bool_ && is_floating(to)) cs.push_back(core(Cop(op, {A(from, {23}, Domain::special)}, a, "NaN, inf")));
      if (is_floating(from) && is_integral(to)) cs.push_back(core(Cop(op, {A(from, {17}, Domain::grid)}, a, "truncation of halves")));
      if (is_floating(from) && is_floating(to)) cs.push_back(core(precise(Cop(op, {A(from, {31}, Domain::tiny)}, a, "tiny and subnormal"))));
      if (from == D::f32 && is_floating(to)) cs.push_back(core(precise(Cop(op, {A(from, {64}, Domain::halfway)}, a, "rounding ties"))));
      if (!all) cs = tier(std::move(cs), false);
      if (all || to == D::i64) sym.push_back(Cop(op, {A(from, {-1, -2}, d)}, a));
    }
    out.push_back(static_batch(std::string("cast from ") + std::string(dtype_name(from)), std::move(cs)));
    out.push_back(symbolic_batch(std::string("cast from ") + std::string(dtype_name(from)) + " symbolic", std::move(sym)));
  }
  return out;
}

// ---- binary -------------------------------------------------------------------------------------

std::pair<Domain, Domain> binary_domains(OpId op, DType t) {
  switch (op) {
    case OpId::div: return {Domain::normal, Domain::nonzero};
    case OpId::pow: return is_floating(t) ? std::pair{Domain::positive, Domain::exponent} : std::pair{Domain::normal, Domain::exponent};
    case OpId::eq: case OpId::ne: case OpId::lt: case OpId::le: case OpId::gt: case OpId::ge:
    case OpId::maximum: case OpId::minimum:
      return {Domain::grid, Domain::grid};
    default: return {Domain::normal, Domain::normal};
  }
}

std::vector<Batch> binary_cases(OpId op) {
  std::vector<Batch> out;
  for (DType t : kAll) {
    const auto [da, db] = binary_domains(op, t);
    const bool all = t == D::f32;
    std::vector<OpCase> cs = {
        Cop(op, {A(t, {}, da), A(t, {}, db)}, {}, "rank 0"),
        Cop(op, {A(t, {3, 1}, da), A(t, {4}, db)}, {}, "broadcast"),
        Cop(op, {A(t, {2, 1, 5}, da), A(t, {3, 1}, db)}, {}, "broadcast both"),
        Cop(op, {A(t, {}, da), A(t, {13}, db)}, {}, "0-d with 1-d"),
        Cop(op, {A(t, {1}, da), A(t, {1, 1}, db)}, {}),
        Cop(op, {A(t, {5, 6}, da, Layout::permuted), A(t, {5, 6}, db, Layout::sliced)}, {}, "strided"),
        Cop(op, {A(t, {4, 6}, da, Layout::expanded), A(t, {6}, db)}, {}, "stride 0"),
        core(Cop(op, {A(t, {3, 4, 5}, da, Layout::permuted), A(t, {4, 1}, db)}, {}, "strided and broadcast")),
        Cop(op, {undeclared(A(t, {6, 5}, da, Layout::permuted)), A(t, {6, 5}, db)}, {}),
        Cop(op, {A(t, {13, 129}, da), A(t, {13, 1}, db)}, {}),
    };
    if (is_floating(t)) {
      cs.push_back(core(Cop(op, {A(t, {41}, Domain::special), A(t, {41}, Domain::special)}, {}, "NaN, inf, 0")));
      if (op == OpId::pow) cs.push_back(Cop(op, {A(t, {43}, Domain::grid), A(t, {43}, Domain::grid)}, {}, "0, negative bases"));
    }
    if ((t == D::i32 || t == D::i64) && (op == OpId::add || op == OpId::sub || op == OpId::mul || op == OpId::maximum))
      cs.push_back(core(Cop(op, {A(t, {31}, Domain::wide), A(t, {31}, Domain::wide)}, {}, "wraps")));
    if (is_floating(t) && op != OpId::pow)
      cs.push_back(core(precise(Cop(op, {A(t, {37}, Domain::tiny), A(t, {37}, op == OpId::div ? Domain::nonzero : Domain::tiny)}, {},
                                    "tiny and subnormal, relative"))));
    if (op == OpId::div && !is_floating(t)) cs.push_back(core(Cop(op, {A(t, {25}, Domain::grid), A(t, {25}, Domain::grid)}, {}, "division by 0")));
    cs.push_back(Cop(op, {A(t, {2, 3, 1, 4, 1}, da), A(t, {3, 5, 1, 5}, db)}, {}, "rank 5 broadcast"));
    if (t == D::f32 || t == D::f16) {
      cs.push_back(Cop(op, {A(t, {5, 7}, da, Layout::reversed), A(t, {7}, db, Layout::reversed)}, {}, "negative strides"));
      cs.push_back(Cop(op, {A(t, {257, 300}, da), A(t, {300}, db)}, {}, "large: several launch chunks"));
    }
    out.push_back(static_batch(bname(op, t, "static"), std::move(cs), all));
    out.push_back(symbolic_batch(bname(op, t, "symbolic"), {
                                     Cop(op, {A(t, {-1, -2}, da), A(t, {-2}, db)}, {}),
                                     core(Cop(op, {A(t, {-1, 1}, da), A(t, {-2}, db)}, {}, "broadcast")),
                                     Cop(op, {A(t, {-1}, da), A(t, {}, db)}, {}),
                                     Cop(op, {A(t, {-2, 3, -1}, da), A(t, {-2, 1, -1}, db)}, {}),
                                 }, all));
  }
  // Mixed dtypes: promotion.
  const std::vector<std::pair<DType, DType>> pairs = {{D::i32, D::f32}, {D::f16, D::bf16}, {D::f32, D::f64},
                                                      {D::i32, D::i64}, {D::bool_, D::i32}, {D::i64, D::f16},
                                                      {D::bf16, D::f32}, {D::bool_, D::f64}};
  std::vector<OpCase> mixed;
  // A 0-d operand of another dtype (torch: it does not widen the other within its category).
  mixed.push_back(core(Cop(op, {A(D::bf16, {4}), A(D::f16, {})}, {}, "0-d of another dtype")));
  mixed.push_back(core(Cop(op, {A(D::f16, {4}), A(D::f64, {})}, {}, "0-d of another dtype")));
  for (const auto& [x, y] : pairs) {
    const auto [da, db] = binary_domains(op, y);
    const Domain dx = op == OpId::pow && is_floating(y) && !is_floating(x) ? Domain::positive : da;
    mixed.push_back(core(Cop(op, {A(x, {5, 3}, dx), A(y, {3}, db)}, {})));
    mixed.push_back(Cop(op, {A(y, {4}, dx), A(x, {}, db)}, {}, "0-d of another dtype"));
    mixed.push_back(Cop(op, {A(x, {}, dx), A(y, {}, db)}, {}));
  }
  mixed.push_back(core(Cop(op, {A(D::f32, {6}, Domain::positive), A(D::f64, {}, Domain::exponent)}, {}, "f64 0-d does not widen")));
  mixed.push_back(core(Cop(op, {A(D::i32, {6}, Domain::positive), A(D::f64, {}, Domain::exponent)}, {}, "f64 0-d lifts ints")));
  out.push_back(static_batch(std::string(op_name(op)) + " mixed dtypes", std::move(mixed), false));
  return out;
}

std::vector<Batch> where_cases(OpId op) {
  std::vector<Batch> out;
  for (DType t : kAll) {
    const bool all = t == D::f32;
    out.push_back(static_batch(bname(op, t, "static"), {
        Cop(op, {A(D::bool_, {}), A(t, {}), A(t, {})}, {}, "rank 0"),
        Cop(op, {A(D::bool_, {3, 1}), A(t, {4}), A(t, {})}, {}, "broadcast"),
        Cop(op, {A(D::bool_, {5}), A(t, {2, 1, 5}), A(t, {3, 1})}, {}, "broadcast"),
        core(Cop(op, {A(D::bool_, {6, 5}, Domain::normal, Layout::permuted), A(t, {6, 5}, Domain::special, Layout::sliced),
                      A(t, {6, 5}, Domain::normal, Layout::expanded)},
                 {}, "strided")),
        Cop(op, {A(D::bool_, {13, 129}), A(t, {13, 129}), A(t, {129})}, {}),
        core(Cop(op, {A(D::bool_, {4}), A(t, {4}), A(D::f32, {4})}, {}, "promotes")),
        Cop(op, {A(D::bool_, {4}), A(D::i32, {4}), A(t, {})}, {}, "0-d"),
    }, all));
    out.push_back(symbolic_batch(bname(op, t, "symbolic"), {
        core(Cop(op, {A(D::bool_, {-1, -2}), A(t, {-2}), A(t, {-1, 1})}, {})),
        Cop(op, {A(D::bool_, {-1}), A(t, {}), A(t, {-1})}, {}),
    }, all));
  }
  return out;
}

// ---- reductions ---------------------------------------------------------------------------------

Attrs red(OpId op, Ints dims, bool keep, int64_t correction = 1) {
  if (op == OpId::var) return {std::move(dims), keep, correction};
  return {std::move(dims), keep};
}

std::vector<Batch> reduction_cases(OpId op) {
  std::vector<Batch> out;
  const bool one_dim = op == OpId::argmax || op == OpId::argmin;
  const Domain dom = op == OpId::prod ? Domain::near_one : Domain::normal;
  // Every subset of the dims of a rank-r tensor that the op takes.
  auto dim_sets = [&](int64_t r) {
    std::vector<Ints> s;
    for (int64_t mask = 0; mask < (int64_t{1} << r); ++mask) {
      Ints d;
      for (int64_t k = 0; k < r; ++k)
        if (mask >> k & 1) d.push_back(k);
      if (one_dim && d.size() > 1) continue;
      s.push_back(d);
    }
    return s;
  };
  for (DType t : kAll) {
    std::vector<OpCase> cs, big, sym;
    const bool all = t == D::f32;
    // [4, 7, 13] over every subset of dims (keepdim alternating; both with KILN_CPU_TARGET_FULL):
    // innermost, outer, middle, several and all dims. The other dtypes take dims {0, 2}.
    int64_t corr = 0;
    for (const Ints& d : dim_sets(3)) {
      const bool keep = corr++ % 2;
      OpCase c = Cop(op, {A(t, {4, 7, 13}, dom)}, red(op, d, keep, keep));
      c.core = d == (one_dim ? Ints{0} : Ints{0, 2});
      cs.push_back(std::move(c));
      if (full_mode()) cs.push_back(Cop(op, {A(t, {4, 7, 13}, dom)}, red(op, d, !keep, !keep)));
    }
    cs.push_back(Cop(op, {A(t, {}, dom)}, red(op, {}, false), "rank 0"));
    cs.push_back(Cop(op, {A(t, {}, dom)}, red(op, {}, true), "rank 0, keepdim"));
    cs.push_back(Cop(op, {A(t, {129}, dom)}, red(op, {0}, false)));
    cs.push_back(Cop(op, {A(t, {1, 7}, dom)}, red(op, {0}, false), "size-1 dim"));
    cs.push_back(Cop(op, {A(t, {7, 1}, dom)}, red(op, {1}, true), "size-1 dim"));
    cs.push_back(Cop(op, {A(t, {129, 3}, dom)}, red(op, {0}, false), "outer dim: column"));
    cs.push_back(Cop(op, {A(t, {13, 7, 5}, dom)}, red(op, one_dim ? Ints{1} : Ints{0, 1}, true), "outer dims"));
    cs.push_back(Cop(op, {A(t, {3, 1500}, dom)}, red(op, {0}, false), "column, more than one block"));
    // Rows too long for registers and of odd length (no vector accesses): CUDA's loop that loads
    // a thread's next elements ahead of their use (nvptx.cpp, loop_loading_ahead), with a rest.
    if (op != OpId::prod) cs.push_back(Cop(op, {A(t, {3, 9001}, dom)}, red(op, {1}, false), "long rows of odd length"));
    cs.push_back(Cop(op, {A(t, {5, 6, 7}, dom, Layout::permuted)}, red(op, {0}, false), "strided"));
    cs.push_back(core(Cop(op, {A(t, {5, 6, 7}, dom, Layout::permuted)}, red(op, {2}, true), "strided")));
    cs.push_back(Cop(op, {A(t, {6, 9}, dom, Layout::sliced)}, red(op, {1}, false), "sliced"));
    cs.push_back(Cop(op, {A(t, {4, 5}, dom, Layout::expanded)}, red(op, {0}, false), "stride 0"));
    cs.push_back(Cop(op, {undeclared(A(t, {5, 8}, dom, Layout::permuted))}, red(op, {1}, false)));
    cs.push_back(Cop(op, {A(t, {5, 7}, dom, Layout::reversed)}, red(op, {1}, false), "negative strides"));
    for (const Ints& d : std::vector<Ints>{{1, 3}, {0, 2, 4}, {5}})
      if (!one_dim || d.size() == 1) cs.push_back(Cop(op, {A(t, {2, 3, 1, 4, 5, 3}, dom)}, red(op, d, d.size() == 2), "rank 6"));
    if (op == OpId::var)
      for (int64_t c : {2, 3}) cs.push_back(core(Cop(op, {A(t, {4, 2})}, red(op, {1}, false, c), "correction >= N")));
    if (t == D::i64 && (op == OpId::sum || op == OpId::prod || op == OpId::max))
      cs.push_back(core(Cop(op, {A(t, {5, 9}, Domain::wide)}, red(op, {1}, false), "large integers: wraps")));
    if (is_floating(t))
      for (const Ints& d : std::vector<Ints>{{1}, {0}, {}}) {
        OpCase c = Cop(op, {A(t, {5, 9}, Domain::special)}, red(op, d, false), "NaN, inf");
        c.core = d.size() == 1 && d[0] == 1;
        cs.push_back(std::move(c));
      }
    cs.push_back(Cop(op, {A(t, {6, 8}, Domain::grid)}, red(op, {1}, false), "ties"));
    // Over a broadcast value (expand), with an epilogue over the full shape: e + op(e).
    cs.push_back(core(C({A(t, {3, 1}, dom)}, [op](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
      const NodeId e = g.add(OpId::expand, {in[0]}, {SymShape{3, 4}});
      const NodeId r = g.add(op, {e}, red(op, {1}, true));
      return g.add(g.node(e).meta.dtype == D::bool_ ? OpId::logical_or : OpId::add, {e, r});
    }, tol_of(op, is_floating(t) ? t : D::f32), "over a broadcast value, with an epilogue")));
    OpCase ties = Cop(op, {A(t, {9, 8}, Domain::grid)}, red(op, {}, false), "ties");
    ties.core = !is_floating(t);
    cs.push_back(std::move(ties));
    // Large full reductions: split in two kernels when divisible by 64/48/32/16/8.
    for (int64_t n : {65600, 70000, 65537})
      big.push_back(Cop(op, {A(t, {n}, op == OpId::prod ? Domain::near_one : Domain::normal)}, red(op, {}, false),
                        n == 65537 ? "large prime: one kernel" : "large: split reduction"));
    big.push_back(Cop(op, {A(t, {256, 512}, dom)}, red(op, {}, true), "large 2-d: split"));
    big.push_back(Cop(op, {A(t, {300, 257}, dom)}, red(op, {0}, false), "large column"));
    // Few outputs over many rows (a batch norm's per-channel sums, channels last): on a GPU the
    // reduced dim splits as a full reduction's does (a variance pass by pass). (f64 logsumexp
    // here caught lavapipe miscompiling the looped polynomial of the shaders' f64 exp.)
    big.push_back(Cop(op, {A(t, {16384, 3, 8}, dom)}, red(op, one_dim ? Ints{0} : Ints{0, 1}, false), "large columns: rows split"));
    if (!one_dim)  // channels first: [C | N, H * W], N split
      big.push_back(Cop(op, {A(t, {64, 3, 20, 20}, dom)}, red(op, Ints{0, 2, 3}, false), "per channel, channels first: batch split"));
    // Symbolic sizes.
    for (const Ints& d : std::vector<Ints>{{0}, {1}, {2}, {0, 2}, {}}) {
      if (one_dim && d.size() > 1) continue;
      OpCase c = Cop(op, {A(t, {-1, -2, -3}, dom)}, red(op, d, d.size() == 1));
      c.core = d == Ints{2};
      sym.push_back(std::move(c));
    }
    if (op == OpId::var) sym.push_back(core(Cop(op, {A(t, {-1, 2}, dom)}, red(op, {0}, false, 3), "correction >= N at some sizes")));
    sym.push_back(Cop(op, {A(t, {-1, 1}, dom)}, red(op, {0}, false)));
    sym.push_back(Cop(op, {A(t, {-1}, dom)}, red(op, {0}, true)));
    out.push_back(static_batch(bname(op, t, "static"), std::move(cs), all));
    // Large reductions: f32, and f16 (largest finite value 65504) for the sums.
    const bool f16_sum = t == D::f16 && (op == OpId::sum || op == OpId::mean || op == OpId::var);
    out.push_back(static_batch(bname(op, t, "large"), std::move(big), all || f16_sum));
    out.push_back(symbolic_batch(bname(op, t, "symbolic"), std::move(sym), all));
  }
  return out;
}

// ---- layout -------------------------------------------------------------------------------------

// The view alone (its values stored as an output), and the view read by a pointwise op (folded
// into the op's load indices).
BuildFn then_pointwise(BuildFn view) {
  return [view](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>& s) {
    const NodeId v = view(g, in, s);
    return g.node(v).meta.dtype == D::bool_ ? g.add(OpId::logical_not, {v}) : g.add(OpId::abs, {v});
  };
}
BuildFn layout_fn(OpId op, std::function<Attrs(const std::vector<SymInt>&)> attrs) {
  return [op, attrs](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>& s) { return g.add(op, in, attrs(s)); };
}

void add_both(std::vector<OpCase>& cs, std::vector<Arg> args, BuildFn view, std::string note = {}) {
  cs.push_back(C(args, view, note));
  cs.push_back(C(args, then_pointwise(view), note.empty() ? "read by abs" : note + ", read by abs"));
}

std::vector<Batch> layout_cases(OpId op) {
  std::vector<Batch> out;
  auto fixed = [op](Attrs a) { return layout_fn(op, [a](const std::vector<SymInt>&) { return a; }); };
  for (DType t : kAll) {
    std::vector<OpCase> cs, sym;
    const Domain dom = Domain::normal;
    switch (op) {
      case OpId::reshape: {
        add_both(cs, {A(t, {4, 6})}, fixed({SymShape{24}}));
        add_both(cs, {A(t, {4, 6})}, fixed({SymShape{2, 12}}));
        add_both(cs, {A(t, {4, 6})}, fixed({SymShape{3, 2, 4}}));
        add_both(cs, {A(t, {24})}, fixed({SymShape{2, 3, 4}}));
        add_both(cs, {A(t, {})}, fixed({SymShape{1, 1}}), "rank 0");
        add_both(cs, {A(t, {1, 1})}, fixed({SymShape{}}), "to rank 0");
        add_both(cs, {A(t, {4, 6}, dom, Layout::permuted)}, fixed({SymShape{24}}), "strided: no view");
        add_both(cs, {A(t, {4, 6}, dom, Layout::permuted)}, fixed({SymShape{2, 2, 6}}), "strided");
        add_both(cs, {A(t, {6, 10}, dom, Layout::sliced)}, fixed({SymShape{3, 2, 10}}), "sliced: a view");
        add_both(cs, {A(t, {6, 10}, dom, Layout::sliced)}, fixed({SymShape{60}}), "sliced: no view");
        add_both(cs, {A(t, {4, 6}, dom, Layout::expanded)}, fixed({SymShape{2, 12}}), "stride 0");
        add_both(cs, {A(t, {7, 13})}, fixed({SymShape{13, 7}}));
        add_both(sym, {A(t, {-1, 6})}, layout_fn(op, [](const std::vector<SymInt>& s) { return Attrs{SymShape{s[0] * SymInt(6)}}; }));
        add_both(sym, {A(t, {-1, 6})}, layout_fn(op, [](const std::vector<SymInt>& s) { return Attrs{SymShape{s[0], 2, 3}}; }));
        add_both(sym, {A(t, {-1, 2, 3})}, layout_fn(op, [](const std::vector<SymInt>& s) { return Attrs{SymShape{s[0], 6}}; }));
        add_both(sym, {A(t, {-1, -2})}, layout_fn(op, [](const std::vector<SymInt>& s) { return Attrs{SymShape{s[0] * s[1]}}; }));
        add_both(sym, {A(t, {-1, -2, 3})}, layout_fn(op, [](const std::vector<SymInt>& s) { return Attrs{SymShape{s[0], s[1] * SymInt(3)}}; }));
        add_both(sym, {A(t, {4, -1})}, layout_fn(op, [](const std::vector<SymInt>& s) { return Attrs{SymShape{2, 2, s[0]}}; }));
        if (t != D::bool_) {  // a value computed in the kernel: read through a split of its dims, stored before a merge
          auto of_neg = [](std::function<SymShape(const std::vector<SymInt>&)> shape) -> BuildFn {
            return [shape](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>& s) {
              return g.add(OpId::reshape, {g.add(OpId::neg, {in[0]})}, {shape(s)});
            };
          };
          add_both(cs, {A(t, {24})}, of_neg([](const std::vector<SymInt>&) { return SymShape{2, 3, 4}; }), "computed, split");
          add_both(cs, {A(t, {4, 6})}, of_neg([](const std::vector<SymInt>&) { return SymShape{4, 1, 2, 3}; }), "computed, split");
          add_both(cs, {A(t, {4, 6})}, of_neg([](const std::vector<SymInt>&) { return SymShape{24}; }), "computed, merged");
          add_both(sym, {A(t, {-1, 6})}, of_neg([](const std::vector<SymInt>& s) { return SymShape{s[0], 2, 3}; }), "computed, split");
          add_both(sym, {A(t, {-1, 6})}, of_neg([](const std::vector<SymInt>& s) { return SymShape{s[0] * SymInt(6)}; }), "computed, merged");
        }
        break;
      }
      case OpId::permute: {
        for (const Ints& p : std::vector<Ints>{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}})
          add_both(cs, {A(t, {2, 3, 4})}, fixed({p}));
        add_both(cs, {A(t, {13, 129})}, fixed({Ints{1, 0}}));
        add_both(cs, {A(t, {})}, fixed({Ints{}}), "rank 0");
        add_both(cs, {A(t, {3, 4, 5}, dom, Layout::permuted)}, fixed({Ints{2, 0, 1}}), "strided");
        add_both(cs, {A(t, {1, 5, 1, 3})}, fixed({Ints{3, 2, 0, 1}}), "size-1 dims");
        add_both(sym, {A(t, {-1, -2, 3})}, fixed({Ints{2, 0, 1}}));
        add_both(sym, {A(t, {-1, -2})}, fixed({Ints{1, 0}}));
        break;
      }
      case OpId::transpose: {
        for (const auto& [a, b] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {0, 2}, {1, 2}, {1, 1}, {2, 0}})
          add_both(cs, {A(t, {2, 3, 4})}, fixed({a, b}));
        add_both(cs, {A(t, {5, 6}, dom, Layout::sliced)}, fixed({int64_t{0}, int64_t{1}}), "sliced");
        add_both(sym, {A(t, {-1, -2})}, fixed({int64_t{0}, int64_t{1}}));
        break;
      }
      case OpId::expand: {
        add_both(cs, {A(t, {3, 1})}, fixed({SymShape{3, 4}}));
        add_both(cs, {A(t, {4})}, fixed({SymShape{2, 3, 4}}));
        add_both(cs, {A(t, {1})}, fixed({SymShape{5}}));
        add_both(cs, {A(t, {})}, fixed({SymShape{3, 2}}), "rank 0");
        add_both(cs, {A(t, {1, 1})}, fixed({SymShape{7, 13}}));
        add_both(cs, {A(t, {2, 1, 3})}, fixed({SymShape{2, 129, 3}}));
        add_both(cs, {A(t, {3, 1}, dom, Layout::sliced)}, fixed({SymShape{2, 3, 5}}), "sliced");
        add_both(cs, {A(t, {4, 5}, dom, Layout::expanded)}, fixed({SymShape{3, 4, 5}}), "stride 0");
        add_both(sym, {A(t, {-1, 1})}, layout_fn(op, [](const std::vector<SymInt>& s) { return Attrs{SymShape{s[0], 5}}; }));
        add_both(sym, {A(t, {-1, 1}), A(t, {-2})}, [](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>& s) {
          const NodeId e = g.add(OpId::expand, {in[0]}, {SymShape{s[0], s[1]}});
          return g.add(OpId::where, {g.add(OpId::cast, {in[1]}, {D::bool_}), e, e});
        });
        add_both(sym, {A(t, {-1})}, layout_fn(op, [](const std::vector<SymInt>& s) { return Attrs{SymShape{3, s[0]}}; }));
        break;
      }
      case OpId::squeeze: {
        for (const Ints& d : std::vector<Ints>{{0, 2}, {0}, {2}, {}}) add_both(cs, {A(t, {1, 3, 1})}, fixed({d}));
        add_both(cs, {A(t, {1})}, fixed({Ints{0}}), "to rank 0");
        add_both(cs, {A(t, {4, 1, 5}, dom, Layout::permuted)}, fixed({Ints{1}}), "strided");
        add_both(sym, {A(t, {-1, 1, -2})}, fixed({Ints{1}}));
        break;
      }
      case OpId::unsqueeze: {
        for (int64_t d : {0, 1, 2}) add_both(cs, {A(t, {3, 4})}, fixed({d}));
        add_both(cs, {A(t, {})}, fixed({int64_t{0}}), "rank 0");
        add_both(cs, {A(t, {3, 4}, dom, Layout::permuted)}, fixed({int64_t{1}}), "strided");
        add_both(sym, {A(t, {-1, -2})}, fixed({int64_t{1}}));
        break;
      }
      case OpId::slice: {
        auto sl = [&](int64_t d, int64_t s, int64_t e, int64_t st) { return fixed({d, s, e, st}); };
        add_both(cs, {A(t, {10})}, sl(0, 1, 8, 3));
        add_both(cs, {A(t, {10})}, sl(0, -3, kEnd, 1));
        add_both(cs, {A(t, {10})}, sl(0, -100, 2, 1));
        add_both(cs, {A(t, {10})}, sl(0, 2, -5, 2));
        add_both(cs, {A(t, {10})}, sl(0, 8, 100, 5));
        add_both(cs, {A(t, {4, 9})}, sl(1, 0, kEnd, 2));
        add_both(cs, {A(t, {4, 9})}, sl(0, 1, 3, 1));
        add_both(cs, {A(t, {5, 7, 6})}, sl(2, 1, kEnd, 3));
        add_both(cs, {A(t, {5, 7, 6})}, sl(1, 2, 6, 2));
        add_both(cs, {A(t, {13, 129})}, sl(1, 3, 128, 1));
        add_both(cs, {A(t, {6, 8}, dom, Layout::permuted)}, sl(0, 1, 5, 2), "strided");
        add_both(cs, {A(t, {6, 8}, dom, Layout::sliced)}, sl(1, 1, kEnd, 3), "sliced");
        add_both(sym, {A(t, {-1, 7})}, sl(1, 1, 6, 2));
        add_both(sym, {A(t, {-1, 7})}, sl(0, 0, kEnd, 1));
        add_both(sym, {A(t, {7, -1})}, sl(1, 0, kEnd, 1));
        break;
      }
      case OpId::unfold: {
        auto uf = [&](int64_t d, int64_t size, int64_t step) { return fixed({d, size, step}); };
        add_both(cs, {A(t, {10})}, uf(0, 3, 1), "overlapping windows");
        add_both(cs, {A(t, {10})}, uf(0, 4, 3), "one element left over");
        add_both(cs, {A(t, {10})}, uf(0, 10, 1), "one window");
        add_both(cs, {A(t, {5, 7, 6})}, uf(1, 2, 2));
        add_both(cs, {A(t, {4, 9})}, uf(0, 2, 1));
        add_both(cs, {A(t, {6, 8}, dom, Layout::permuted)}, uf(1, 3, 2), "strided");
        add_both(cs, {A(t, {6, 8}, dom, Layout::sliced)}, uf(0, 2, 1), "sliced");
        add_both(sym, {A(t, {-1, 7})}, uf(1, 3, 1));
        break;
      }
      case OpId::cat: {
        add_both(cs, {A(t, {1}), A(t, {2}), A(t, {3})}, fixed({int64_t{0}}));
        add_both(cs, {A(t, {2, 1}), A(t, {2, 2}), A(t, {2, 1})}, fixed({int64_t{1}}));
        add_both(cs, {A(t, {2, 3}), A(t, {1, 3})}, fixed({int64_t{0}}));
        add_both(cs, {A(t, {4})}, fixed({int64_t{0}}), "one input");
        add_both(cs, {A(t, {3, 4}, dom, Layout::permuted), A(t, {3, 2}, dom, Layout::sliced)}, fixed({int64_t{1}}), "strided");
        add_both(cs, {A(t, {3}), A(D::i32, {2})}, fixed({int64_t{0}}), "promotes");
        add_both(sym, {A(t, {-1, 3}), A(t, {-1, 2})}, fixed({int64_t{1}}));
        add_both(sym, {A(t, {-1, 3}), A(t, {-2, 3})}, fixed({int64_t{0}}));
        add_both(sym, {A(t, {2, -1}), A(t, {2, 3}), A(t, {2, -1})}, fixed({int64_t{1}}), "one symbol twice");
        break;
      }
      case OpId::pad: {
        add_both(cs, {A(t, {3})}, fixed({Ints{1, 2}, 0.0}));
        add_both(cs, {A(t, {3})}, fixed({Ints{-1, 1}, 9.0}), "crop");
        add_both(cs, {A(t, {2, 2})}, fixed({Ints{1, 0, 0, 1}, -1.0}));
        add_both(cs, {A(t, {2, 2})}, fixed({Ints{0, 1, -1, 0}, 7.0}));
        add_both(cs, {A(t, {3, 5}, dom, Layout::permuted)}, fixed({Ints{2, 2}, 0.5}), "strided");
        add_both(sym, {A(t, {-1, 4})}, fixed({Ints{1, 1}, 2.0}));
        add_both(sym, {A(t, {-1, 4})}, fixed({Ints{0, 0, 2, 1}, 3.0}), "symbolic dim padded");
        add_both(sym, {A(t, {-1, 4})}, fixed({Ints{-1, 2, 1, -1}, 0.0}), "crop and pad");
        break;
      }
      case OpId::index_select: {
        auto idx = [](DType it, int64_t n, int64_t bound) {
          Arg a = A(it, {n});
          a.index_bound = bound;
          return a;
        };
        add_both(cs, {A(t, {5, 3}), idx(D::i64, 4, 5)}, fixed({int64_t{0}}));
        add_both(cs, {A(t, {5, 3}), idx(D::i32, 7, 3)}, fixed({int64_t{1}}));
        add_both(cs, {A(t, {4, 5, 6}, dom, Layout::permuted), idx(D::i64, 3, 5)}, fixed({int64_t{1}}), "strided");
        add_both(sym, {A(t, {-1, 3}), idx(D::i64, 4, 2)}, fixed({int64_t{0}}));
        // A constant index compiles to a gathering load (an input index runs on the reference).
        auto constant_index = [](Ints v, int64_t d) -> BuildFn {
          return [v, d](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
            auto c = std::make_shared<ConstantData>();
            c->dtype = D::i64;
            c->sizes = {static_cast<int64_t>(v.size())};
            c->bytes.resize(v.size() * sizeof(int64_t));
            std::memcpy(c->bytes.data(), v.data(), c->bytes.size());
            const NodeId i = g.add(OpId::constant, {}, {std::shared_ptr<const ConstantData>(c)});
            return g.add(OpId::index_select, {in[0], i}, {d});
          };
        };
        add_both(cs, {A(t, {5, 3})}, constant_index({4, 0, 0, 2}, 0), "constant index");
        add_both(cs, {A(t, {4, 5, 6}, dom, Layout::permuted)}, constant_index({1, 4}, 1), "constant index, strided");
        add_both(sym, {A(t, {-1, 3})}, constant_index({2, 0, 1, 1}, 1), "constant index");
        break;
      }
      case OpId::gather: {
        auto idx = [](DType it, Ints sizes, int64_t bound) {
          Arg a = A(it, std::move(sizes));
          a.index_bound = bound;
          return a;
        };
        add_both(cs, {A(t, {5, 3}), idx(D::i64, {4, 3}, 5)}, fixed({int64_t{0}}));
        add_both(cs, {A(t, {5, 3}), idx(D::i32, {2, 7}, 3)}, fixed({int64_t{1}}), "index smaller than x");
        add_both(cs, {A(t, {4, 5, 6}, dom, Layout::permuted), idx(D::i64, {3, 8, 2}, 5)}, fixed({int64_t{1}}), "strided");
        add_both(cs, {A(t, {4, 5, 6}), idx(D::i64, {4, 5, 3}, 6)}, fixed({int64_t{2}}), "last dim");
        add_both(sym, {A(t, {-1, 4}), idx(D::i64, {-1, 6}, 4)}, fixed({int64_t{1}}), "symbolic batch");
        add_both(sym, {A(t, {-1, 3}), idx(D::i64, {2, 3}, 2)}, fixed({int64_t{0}}), "along a symbolic dim");
        break;
      }
      case OpId::scatter: {
        // One write per element (where two positions write one element, either may land): an
        // index of one row along dim, or a constant index distinct along it.
        auto idx = [](DType it, Ints sizes, int64_t bound) {
          Arg a = A(it, std::move(sizes));
          a.index_bound = bound;
          return a;
        };
        add_both(cs, {A(t, {5, 3}), idx(D::i64, {1, 3}, 5), A(t, {1, 3})}, fixed({int64_t{0}}));
        add_both(cs, {A(t, {4, 6}, dom, Layout::permuted), idx(D::i32, {4, 1}, 6), A(t, {4, 1})}, fixed({int64_t{1}}), "strided");
        const BuildFn constant_index = [](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          const std::vector<int64_t> v{4, 0, 1, 0, 2, 4};
          auto c = std::make_shared<ConstantData>();
          c->dtype = D::i64;
          c->sizes = {2, 3};
          c->bytes.resize(v.size() * sizeof(int64_t));
          std::memcpy(c->bytes.data(), v.data(), c->bytes.size());
          const NodeId i = g.add(OpId::constant, {}, {std::shared_ptr<const ConstantData>(c)});
          return g.add(OpId::scatter, {in[0], i, in[1]}, {int64_t{0}});
        };
        add_both(cs, {A(t, {5, 3}), A(t, {2, 3})}, constant_index, "constant index");
        add_both(sym, {A(t, {-1, 4}), idx(D::i64, {-1, 1}, 4), A(t, {-1, 1})}, fixed({int64_t{1}}), "symbolic batch");
        break;
      }
      case OpId::scatter_add: {
        if (t == D::bool_) break;  // (numbers only)
        auto idx = [](DType it, Ints sizes, int64_t bound) {
          Arg a = A(it, std::move(sizes));
          a.index_bound = bound;
          return a;
        };
        // Repeated indices add up: 4 x 3 updates into 5 rows.
        add_both(cs, {A(t, {5, 3}), idx(D::i64, {4, 3}, 5), A(t, {4, 3})}, fixed({int64_t{0}}));
        add_both(cs, {A(t, {5, 3}), idx(D::i32, {2, 7}, 3), A(t, {2, 7})}, fixed({int64_t{1}}), "index smaller than x");
        add_both(cs, {A(t, {4, 5, 6}, dom, Layout::permuted), idx(D::i64, {3, 8, 2}, 5), A(t, {3, 8, 2}, dom, Layout::permuted)},
                 fixed({int64_t{1}}), "strided");
        add_both(cs, {A(t, {4, 5, 6}), idx(D::i64, {4, 5, 9}, 6), A(t, {4, 5, 9})}, fixed({int64_t{2}}), "last dim");
        add_both(cs, {A(t, {3, 2}), idx(D::i64, {0, 2}, 3), A(t, {0, 2})}, fixed({int64_t{0}}), "no updates");
        add_both(sym, {A(t, {-1, 4}), idx(D::i64, {-1, 6}, 4), A(t, {-1, 6})}, fixed({int64_t{1}}), "symbolic batch");
        add_both(sym, {A(t, {-1, 3}), idx(D::i64, {2, 3}, 2), A(t, {2, 3})}, fixed({int64_t{0}}), "along a symbolic dim");
        break;
      }
      case OpId::scatter_reduce: {
        if (t == D::bool_) break;  // (numbers only)
        auto idx = [](DType it, Ints sizes, int64_t bound) {
          Arg a = A(it, std::move(sizes));
          a.index_bound = bound;
          return a;
        };
        // Repeated indices combine (atomically, in any order on devices): 6 x 3 updates into 4
        // rows, so most rows take two or more.
        for (const char* reduce : {"amax", "amin", "prod"}) {
          const Attrs along0{int64_t{0}, std::string(reduce)}, along1{int64_t{1}, std::string(reduce)};
          const std::string r(reduce);
          add_both(cs, {A(t, {4, 3}), idx(D::i64, {6, 3}, 4), A(t, {6, 3})}, fixed(along0), r);
          add_both(cs, {A(t, {5, 3}), idx(D::i32, {2, 7}, 3), A(t, {2, 7})}, fixed(along1), r + ", index smaller than x");
          add_both(sym, {A(t, {-1, 4}), idx(D::i64, {-1, 6}, 4), A(t, {-1, 6})}, fixed(along1), r + ", symbolic batch");
        }
        const Attrs amax2{int64_t{2}, std::string("amax")}, prod1{int64_t{1}, std::string("prod")};
        add_both(cs, {A(t, {4, 5, 6}, dom, Layout::permuted), idx(D::i64, {3, 8, 2}, 5), A(t, {3, 8, 2}, dom, Layout::permuted)},
                 fixed(prod1), "prod, strided");
        add_both(cs, {A(t, {4, 5, 6}), idx(D::i64, {4, 5, 9}, 6), A(t, {4, 5, 9})}, fixed(amax2), "amax, last dim");
        add_both(cs, {A(t, {3, 2}), idx(D::i64, {0, 2}, 3), A(t, {0, 2})}, fixed({int64_t{0}, std::string("amin")}),
                 "amin, no updates");
        add_both(sym, {A(t, {-1, 3}), idx(D::i64, {2, 3}, 2), A(t, {2, 3})}, fixed({int64_t{0}, std::string("prod")}),
                 "prod along a symbolic dim");
        break;
      }
      case OpId::flatten: {
        for (const auto& [a, b] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}, {0, 2}, {2, 2}})
          add_both(cs, {A(t, {2, 3, 4})}, fixed({a, b}));
        add_both(cs, {A(t, {})}, fixed({int64_t{0}, int64_t{0}}), "rank 0");
        add_both(cs, {A(t, {2, 3, 4}, dom, Layout::permuted)}, fixed({int64_t{0}, int64_t{1}}), "strided");
        add_both(sym, {A(t, {-1, -2, 3})}, fixed({int64_t{1}, int64_t{2}}));
        add_both(sym, {A(t, {-1, -2, 3})}, fixed({int64_t{0}, int64_t{1}}));
        break;
      }
      default: break;
    }
    // Other dtypes than f32: the first view alone (static) and read by a pointwise op (symbolic).
    if (!cs.empty()) cs[0].core = true;
    if (sym.size() > 1) sym[1].core = true;
    out.push_back(static_batch(bname(op, t, "static"), std::move(cs), t == D::f32));
    if (!sym.empty()) out.push_back(symbolic_batch(bname(op, t, "symbolic"), std::move(sym), t == D::f32));
  }
  return out;
}

// ---- sources --------------------------------------------------------------------------------------

std::shared_ptr<const ConstantData> constant_data(DType t, Ints sizes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  const TensorData d = tensor(t, sizes, random_values(t, n, Domain::normal, rng));
  auto c = std::make_shared<ConstantData>();
  c->dtype = t;
  c->sizes = sizes;
  const auto* b = static_cast<const std::byte*>(d.data());
  c->bytes.assign(b, b + n * dtype_size(t));
  return c;
}

// A source op alone, and added to an input of its shape (so the graph has an input to bind).
BuildFn source(OpId op, Attrs a) { return [op, a](Graph& g, const std::vector<NodeId>&, const std::vector<SymInt>&) { return g.add(op, {}, a); }; }
BuildFn source_plus_input(OpId op, std::function<Attrs(const std::vector<SymInt>&)> a) {
  return [op, a](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>& s) {
    return g.add(OpId::add, {in[0], g.add(op, {}, a(s))});
  };
}

std::vector<Batch> source_cases(OpId op) {
  std::vector<Batch> out;
  std::vector<OpCase> cs, sym;
  const Tolerance exact{};
  for (DType t : kAll) {
    const Tolerance tt = tolerance_for(t);
    switch (op) {
      case OpId::input: {
        cs.push_back(C({A(t, {3, 4})}, [](Graph&, const std::vector<NodeId>& in, const std::vector<SymInt>&) { return in[0]; }, "graph output is an input"));
        cs.push_back(C({A(t, {5})}, [](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          return g.add(OpId::eq, {in[0], in[0]});
        }, "input read twice"));
        sym.push_back(C({A(t, {-1, 3})}, [](Graph&, const std::vector<NodeId>& in, const std::vector<SymInt>&) { return in[0]; }));
        break;
      }
      case OpId::constant: {
        for (const Ints& s : std::vector<Ints>{{}, {7}, {2, 3}}) {
          const auto c = constant_data(t, s, 11 + s.size());
          cs.push_back(C({}, source(op, {c}), tt));
          cs.push_back(C({A(t, s)}, source_plus_input(op, [c](const std::vector<SymInt>&) { return Attrs{c}; }), tt));
        }
        break;
      }
      case OpId::full: {
        for (double v : {2.5, -1.0, 0.0}) {
          if (v != 2.5 && t != D::f32 && !full_mode()) continue;
          cs.push_back(C({}, source(op, {SymShape{}, v, t}), tt));
          cs.push_back(C({}, source(op, {SymShape{3, 5}, v, t}), tt));
          cs.push_back(C({A(t, {7})}, source_plus_input(op, [v, t](const std::vector<SymInt>&) { return Attrs{SymShape{7}, v, t}; }), tt));
          sym.push_back(C({A(t, {-1, 3})}, source_plus_input(op, [v, t](const std::vector<SymInt>& s) { return Attrs{SymShape{s[0], 3}, v, t}; }), tt));
          sym.push_back(C({A(t, {-1})}, [v, t](Graph& g, const std::vector<NodeId>&, const std::vector<SymInt>& s) {
            return g.add(OpId::full, {}, {SymShape{2, s[0]}, v, t});
          }, tt, "full alone, symbolic"));
        }
        break;
      }
      case OpId::arange: {
        if (t == D::bool_) break;
        const bool ints = is_integral(t);
        for (const std::array<double, 3>& r : std::vector<std::array<double, 3>>{
                 {0, 5, 1}, {1, 2, 0.25}, {5, 0, -2}, {0.5, 13, 1.5}, {0, 129, 1}, {-3, 3, 0.5}, {10, -10, -3}}) {
          if (ints && (r[0] != std::floor(r[0]) || r[2] != std::floor(r[2]))) continue;
          if (t != D::f32 && !full_mode() && r[1] != 13 && r[0] != 10) continue;
          const Attrs a{r[0], r[1], r[2], t};
          cs.push_back(C({}, source(op, a), tt));
          Graph probe;
          const int64_t n = probe.node(probe.add(op, {}, a)).meta.sizes[0].hint();
          cs.push_back(C({A(t, {3, n})}, source_plus_input(op, [a](const std::vector<SymInt>&) { return a; }), tt, "broadcast"));
        }
        break;
      }
      case OpId::iota: {
        if (t == D::bool_) break;
        cs.push_back(C({}, source(op, {SymShape{5}, int64_t{0}, t}), tt));
        cs.push_back(C({}, source(op, {SymShape{3, 129}, int64_t{1}, t}), tt));
        cs.push_back(C({}, source(op, {SymShape{130, 3}, int64_t{0}, t}), tt));
        cs.push_back(C({A(t, {2, 3, 4})}, source_plus_input(op, [t](const std::vector<SymInt>&) { return Attrs{SymShape{2, 3, 4}, int64_t{1}, t}; }), tt, "middle dim"));
        sym.push_back(C({A(t, {-1, 3})}, source_plus_input(op, [t](const std::vector<SymInt>& s) { return Attrs{SymShape{s[0], 3}, int64_t{0}, t}; }), tt, "along a symbolic dim"));
        sym.push_back(C({A(t, {-1, 3})}, source_plus_input(op, [t](const std::vector<SymInt>& s) { return Attrs{SymShape{s[0], 3}, int64_t{1}, t}; }), tt));
        break;
      }
      default: break;
    }
  }
  out.push_back(static_batch(std::string(op_name(op)) + " static", std::move(cs)));
  if (!sym.empty()) out.push_back(symbolic_batch(std::string(op_name(op)) + " symbolic", std::move(sym)));
  return out;
}

// ---- composites and matmul ---------------------------------------------------------------------

// The custom op the `custom` cases call (kiln/graph/custom_ops.h): y = a * x + b for config "a b",
// computed in f64 and rounded to x's dtype (bool is rejected by its shape rule).
Attrs scale_shift(double a, double b) {
  static const bool registered = [] {
    CustomOpDef d;
    d.name = "cases::scale_shift";
    d.version = "1";
    d.infer = [](std::span<const TensorMeta* const> in, const std::string&, ShapeEnv&) {
      KILN_CHECK(in[0]->dtype != DType::bool_, "x must be a number tensor, got bool");
      return TensorMeta{in[0]->dtype, in[0]->device, in[0]->sizes, {}};
    };
    d.compute = [](std::span<const TensorData> in, const std::string& config, const TensorData& out) {
      double a = 0, b = 0;
      std::istringstream(config) >> a >> b;
      TensorData x = eval::convert(in[0], DType::f64);
      for (int64_t i = 0; i < x.numel(); ++i) x.data_as<double>()[i] = a * x.data_as<double>()[i] + b;
      const TensorData y = eval::convert(x, out.dtype);
      std::memcpy(out.data(), y.data(), static_cast<size_t>(out.numel()) * dtype_size(out.dtype));
    };
    register_custom_op(std::move(d));
    return true;
  }();
  (void)registered;
  std::ostringstream config;
  config << a << " " << b;
  return Attrs{std::string("cases::scale_shift"), std::string("1"), config.str()};
}

std::vector<Batch> composite_cases(OpId op) {
  std::vector<Batch> out;
  for (DType t : {D::f32, D::f64, D::f16, D::bf16, D::i32, D::i64, D::bool_}) {
    std::vector<OpCase> cs, sym;
    switch (op) {
      case OpId::softmax:
      case OpId::log_softmax: {
        for (int64_t d : {0, 1, 2}) cs.push_back(Cop(op, {A(t, {4, 7, 13})}, {d}));
        cs.back().core = true;
        cs.push_back(Cop(op, {A(t, {})}, {int64_t{0}}, "rank 0"));
        cs.push_back(Cop(op, {A(t, {129})}, {int64_t{0}}));
        cs.push_back(Cop(op, {A(t, {1, 5})}, {int64_t{0}}, "size-1 dim"));
        cs.push_back(Cop(op, {A(t, {5, 6}, Domain::normal, Layout::permuted)}, {int64_t{0}}, "strided"));
        cs.push_back(Cop(op, {A(t, {5, 6}, Domain::normal, Layout::permuted)}, {int64_t{1}}, "strided"));
        cs.push_back(Cop(op, {A(t, {3, 1500})}, {int64_t{0}}, "column"));
        cs.push_back(Cop(op, {A(t, {3, 1500})}, {int64_t{1}}));
        cs.push_back(Cop(op, {A(t, {3, 9001})}, {int64_t{1}}, "long rows of odd length"));
        if (is_floating(t)) {
          cs.push_back(Cop(op, {A(t, {6, 5}, Domain::wide)}, {int64_t{1}}, "large magnitudes"));
          cs.push_back(core(Cop(op, {A(t, {6, 5}, Domain::special)}, {int64_t{1}}, "NaN, inf (masked rows)")));
        }
        // One element of each normalised row broadcast back over the row (an epilogue that does
        // not vary along the reduced dim).
        cs.push_back(core(C({A(t, {2, 1})}, [op](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          return g.add(op, {g.add(OpId::expand, {in[0]}, {SymShape{2, 4}})}, {int64_t{1}});
        }, tol_of(op, float_of(t)), "over a broadcast value")));
        cs.push_back(core(C({A(t, {4, 5})}, [op](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          const NodeId s = g.add(op, {in[0]}, {int64_t{1}});
          const NodeId e = g.add(OpId::slice, {s}, {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{1}});
          return g.add(OpId::expand, {e}, {SymShape{4, 5}});
        }, tol_of(op, float_of(t)), "a row's element broadcast back")));
        if (t == D::f32) {  // split reductions (static, >= 2^16 elements) with their epilogue
          cs.push_back(Cop(op, {A(t, {65600})}, {int64_t{0}}, "large: split reduction"));
          cs.push_back(Cop(op, {A(t, {2, 65600})}, {int64_t{1}}, "large rows"));
        }
        sym.push_back(core(Cop(op, {A(t, {-1, -2})}, {int64_t{1}})));
        sym.push_back(Cop(op, {A(t, {-1, -2})}, {int64_t{0}}));
        sym.push_back(Cop(op, {A(t, {-1, 3, -2})}, {int64_t{1}}));
        break;
      }
      case OpId::convolution: {
        if (!is_floating(t)) break;
        using V = std::vector<int64_t>;
        auto conv = [&](std::vector<Arg> args, V strides, V pads, V dil, int64_t groups, const char* note = "") {
          return Cop(op, std::move(args), {std::move(strides), std::move(pads), std::move(dil), groups}, note);
        };
        cs.push_back(core(conv({A(t, {2, 4, 8, 8}), A(t, {6, 4, 3, 3})}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, "3x3, pad 1")));
        cs.push_back(core(conv({A(t, {2, 4, 8, 8}), A(t, {6, 4, 3, 3}), A(t, {6})}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, "bias")));
        cs.push_back(conv({A(t, {1, 3, 9, 8}), A(t, {4, 3, 3, 3})}, {2, 2}, {1, 0, 0, 1}, {1, 1}, 1, "stride 2, asymmetric pads"));
        cs.push_back(conv({A(t, {1, 4, 9, 9}), A(t, {6, 2, 3, 3})}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 2, "groups 2, dilation 2"));
        cs.push_back(core(conv({A(t, {2, 6, 7, 7}), A(t, {6, 1, 3, 3})}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6, "depthwise, stride 2")));
        cs.push_back(conv({A(t, {2, 3, 8, 8}), A(t, {6, 1, 5, 5}), A(t, {6})}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 3,
                          "depthwise 5x5, 2 per channel, bias"));
        cs.push_back(conv({A(t, {2, 8, 5, 5}), A(t, {3, 8, 1, 1})}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "1x1"));
        cs.push_back(conv({A(t, {2, 8, 5, 5}), A(t, {3, 8, 1, 1}), A(t, {3})}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, "1x1, stride 2, bias"));
        cs.push_back(conv({A(t, {2, 4, 10}), A(t, {4, 1, 4})}, {1}, {3, 0}, {1}, 4, "1-D depthwise, causal pads"));
        cs.push_back(conv({A(t, {1, 3, 6, 6}), A(t, {3, 1, 3, 3})}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 3, "depthwise, dilation 2"));
        cs.push_back(conv({A(t, {1, 2, 9, 9}), A(t, {2, 1, 9, 9})}, {1, 1}, {4, 4, 4, 4}, {1, 1}, 2, "depthwise 9x9 (im2col)"));
        cs.push_back(conv({A(t, {1, 2, 10, 10}), A(t, {3, 2, 7, 7})}, {1, 1}, {3, 3, 3, 3}, {1, 1}, 1, "7x7, 49 taps"));
        cs.push_back(conv({A(t, {2, 3, 10}), A(t, {4, 3, 3}), A(t, {4})}, {2}, {1, 1}, {1}, 1, "1-D"));
        cs.push_back(conv({A(t, {1, 2, 4, 5, 4}), A(t, {3, 2, 2, 3, 2})}, {1, 1, 1}, {0, 1, 0, 0, 1, 0}, {1, 1, 1}, 1, "3-D"));
        cs.push_back(conv({A(t, {2, 4, 6, 6}, Domain::normal, Layout::permuted), A(t, {5, 4, 3, 3})}, {1, 1}, {0, 0, 0, 0},
                          {1, 1}, 1, "strided input"));
        // Windows that tile x (kernel = stride, no pads): a linear layer over x's patches.
        cs.push_back(core(conv({A(t, {2, 3, 8, 8}), A(t, {5, 3, 4, 4}), A(t, {5})}, {4, 4}, {0, 0, 0, 0}, {1, 1}, 1,
                               "4x4, stride 4: a patch embedding")));
        cs.push_back(conv({A(t, {1, 4, 9, 7}), A(t, {6, 4, 2, 2})}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1,
                          "2x2, stride 2, the last row and column outside every window"));
        cs.push_back(conv({A(t, {2, 3, 6, 8}), A(t, {4, 3, 3, 2}), A(t, {4})}, {3, 2}, {0, 0, 0, 0}, {1, 1}, 1, "3x2, stride 3x2"));
        cs.push_back(conv({A(t, {2, 3, 11}), A(t, {4, 3, 5})}, {5}, {0, 0}, {1}, 1, "1-D, stride 5 = kernel"));
        cs.push_back(conv({A(t, {1, 2, 4, 4, 5}), A(t, {3, 2, 2, 2, 2})}, {2, 2, 2}, {0, 0, 0, 0, 0, 0}, {1, 1, 1}, 1,
                          "3-D, 2x2x2 windows tiling x"));
        cs.push_back(conv({A(t, {2, 3, 8, 8}, Domain::normal, Layout::permuted), A(t, {5, 3, 2, 2})}, {2, 2}, {0, 0, 0, 0},
                          {1, 1}, 1, "tiling windows of a strided input"));
        sym.push_back(conv({A(t, {-1, 3, 8, 8}), A(t, {5, 3, 4, 4}), A(t, {5})}, {4, 4}, {0, 0, 0, 0}, {1, 1}, 1,
                           "tiling windows, symbolic batch"));
        sym.push_back(core(conv({A(t, {-1, 4, 6, 6}), A(t, {5, 4, 3, 3}), A(t, {5})}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1,
                                "symbolic batch")));
        sym.push_back(conv({A(t, {-1, 4, 6, 6}), A(t, {4, 1, 3, 3})}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4, "depthwise, symbolic batch"));
        break;
      }
      case OpId::convolution_channels_last: {  // x [N, *S, C], w [M, *K, C/groups]
        if (!is_floating(t)) break;
        using V = std::vector<int64_t>;
        auto conv = [&](std::vector<Arg> args, V strides, V pads, V dil, int64_t groups, const char* note = "") {
          return Cop(op, std::move(args), {std::move(strides), std::move(pads), std::move(dil), groups}, note);
        };
        cs.push_back(core(conv({A(t, {2, 8, 8, 4}), A(t, {6, 3, 3, 4}), A(t, {6})}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, "3x3, pad 1, bias")));
        cs.push_back(conv({A(t, {1, 9, 8, 3}), A(t, {4, 3, 3, 3})}, {2, 2}, {1, 0, 0, 1}, {1, 1}, 1, "stride 2, asymmetric pads"));
        cs.push_back(conv({A(t, {1, 9, 9, 4}), A(t, {6, 3, 3, 2})}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 2, "groups 2, dilation 2"));
        cs.push_back(core(conv({A(t, {2, 7, 7, 6}), A(t, {6, 3, 3, 1})}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6, "depthwise, stride 2")));
        cs.push_back(conv({A(t, {2, 8, 8, 3}), A(t, {6, 5, 5, 1}), A(t, {6})}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 3,
                          "depthwise 5x5, 2 per channel, bias"));
        cs.push_back(core(conv({A(t, {2, 5, 5, 8}), A(t, {3, 1, 1, 8}), A(t, {3})}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "1x1: a linear")));
        cs.push_back(conv({A(t, {2, 5, 5, 8}), A(t, {3, 1, 1, 8})}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, "1x1, stride 2"));
        cs.push_back(conv({A(t, {2, 10, 3}), A(t, {4, 3, 3}), A(t, {4})}, {2}, {1, 1}, {1}, 1, "1-D"));
        cs.push_back(conv({A(t, {1, 4, 5, 4, 2}), A(t, {3, 2, 3, 2, 2})}, {1, 1, 1}, {0, 1, 0, 0, 1, 0}, {1, 1, 1}, 1, "3-D"));
        cs.push_back(core(conv({A(t, {2, 8, 8, 3}), A(t, {5, 4, 4, 3}), A(t, {5})}, {4, 4}, {0, 0, 0, 0}, {1, 1}, 1,
                               "4x4, stride 4: a patch embedding")));
        cs.push_back(conv({A(t, {1, 9, 7, 4}), A(t, {6, 2, 2, 4})}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1,
                          "2x2, stride 2, the last row and column outside every window"));
        cs.push_back(conv({A(t, {2, 11, 3}), A(t, {4, 5, 3})}, {5}, {0, 0}, {1}, 1, "1-D, stride 5 = kernel"));
        sym.push_back(conv({A(t, {-1, 8, 8, 3}), A(t, {5, 4, 4, 3}), A(t, {5})}, {4, 4}, {0, 0, 0, 0}, {1, 1}, 1,
                           "tiling windows, symbolic batch"));
        sym.push_back(core(conv({A(t, {-1, 6, 6, 4}), A(t, {5, 3, 3, 4}), A(t, {5})}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1,
                                "symbolic batch")));
        sym.push_back(conv({A(t, {-1, 6, 6, 4}), A(t, {4, 3, 3, 1})}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4, "depthwise, symbolic batch"));
        sym.push_back(conv({A(t, {-1, 6, 6, 4}), A(t, {5, 1, 1, 4})}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "1x1, symbolic batch"));
        break;
      }
      case OpId::convolution_input_grad:    // (gy, w) -> gx
      case OpId::convolution_weight_grad: {  // (x, gy) -> gw
        if (!is_floating(t)) break;
        using V = std::vector<int64_t>;
        const bool data = op == OpId::convolution_input_grad;
        // One convolution x[N, C, *S] (*) w[M, C/g, *K] -> y[N, M, *O] (channels-first sizes), as
        // the gradient op of each kind takes it: the two operands and the sizes attribute.
        auto grad = [&](V x, V w, V y, V strides, V pads, V dil, int64_t groups, bool last, const char* note) {
          auto shaped = [&](const V& s) {
            if (!last) return s;
            V l{s[0]};
            l.insert(l.end(), s.begin() + 2, s.end());
            l.push_back(s[1]);
            return l;
          };
          const V sizes = data ? V(x.begin() + 2, x.end()) : V(w.begin() + 2, w.end());
          std::vector<Arg> args = data ? std::vector<Arg>{A(t, shaped(y)), A(t, shaped(w))} : std::vector<Arg>{A(t, shaped(x)), A(t, shaped(y))};
          return Cop(op, std::move(args), {std::move(strides), std::move(pads), std::move(dil), groups, sizes, last}, note);
        };
        for (bool last : {false, true}) {
          cs.push_back(core(grad({2, 4, 8, 8}, {6, 4, 3, 3}, {2, 6, 8, 8}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, last, "3x3, pad 1")));
          cs.push_back(core(grad({2, 3, 9, 8}, {4, 3, 3, 3}, {2, 4, 5, 4}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, last, "stride 2, remainder")));
          cs.push_back(grad({1, 4, 9, 9}, {6, 2, 3, 3}, {1, 6, 9, 9}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 2, last, "groups 2, dilation 2"));
          cs.push_back(grad({2, 6, 7, 7}, {6, 1, 3, 3}, {2, 6, 4, 4}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6, last, "depthwise, stride 2"));
          cs.push_back(grad({2, 3, 6, 6}, {6, 1, 3, 3}, {2, 6, 6, 6}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, last, "depthwise, 2 per channel"));
          cs.push_back(grad({2, 8, 5, 5}, {3, 8, 1, 1}, {2, 3, 5, 5}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, last, "1x1"));
          cs.push_back(grad({2, 8, 5, 5}, {3, 8, 1, 1}, {2, 3, 3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, last, "1x1, stride 2"));
          cs.push_back(grad({1, 3, 10, 10}, {4, 3, 7, 7}, {1, 4, 5, 5}, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1, last, "7x7 stride 2 (a stem)"));
          cs.push_back(grad({2, 3, 10}, {4, 3, 3}, {2, 4, 5}, {2}, {1, 0}, {1}, 1, last, "1-D, asymmetric pads"));
          cs.push_back(grad({1, 2, 4, 5, 4}, {3, 2, 2, 3, 2}, {1, 3, 3, 5, 3}, {1, 1, 1}, {0, 1, 0, 0, 1, 0}, {1, 1, 1}, 1, last, "3-D"));
        }
        break;
      }
      case OpId::max_pool:
      case OpId::avg_pool: {
        if (!is_floating(t)) break;
        using V = std::vector<int64_t>;
        const bool avg = op == OpId::avg_pool;
        auto pool = [&](Arg x, V kernel, V strides, V pads, V dil, bool ceil_mode, bool include_pad, const char* note) {
          Attrs a{std::move(kernel), std::move(strides), std::move(pads), std::move(dil), ceil_mode};
          if (avg) a.values.push_back(include_pad);
          return Cop(op, {std::move(x)}, std::move(a), note);
        };
        cs.push_back(core(pool(A(t, {2, 3, 9, 9}), {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false, "3x3 stride 2, pad 1")));
        cs.push_back(pool(A(t, {2, 3, 9, 9}), {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, true, "pads counted"));
        cs.push_back(core(pool(A(t, {1, 2, 8, 7}), {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true, false, "2x2, ceil_mode")));
        cs.push_back(pool(A(t, {1, 2, 7, 6}), {3, 2}, {2, 1}, {1, 0, 0, 1}, {1, 2}, true, true, "asymmetric, dilation, ceil"));
        cs.push_back(pool(A(t, {2, 4, 10}), {4}, {3}, {1, 1}, {1}, false, false, "1-D"));
        cs.push_back(pool(A(t, {1, 2, 4, 5, 4}), {2, 2, 2}, {2, 2, 1}, {0, 1, 0, 0, 0, 1}, {1, 1, 1}, true, false, "3-D"));
        cs.push_back(pool(A(t, {2, 3, 6, 6}, Domain::normal, Layout::permuted), {2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false,
                          false, "strided input"));
        if (!avg) cs.push_back(pool(A(t, {1, 2, 5, 5}, Domain::special), {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, false,
                                    "NaN, inf"));
        sym.push_back(core(pool(A(t, {-1, 3, 8, 8}), {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false, "symbolic batch")));
        sym.push_back(pool(A(t, {-1, -2, 6, 5}), {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, false,
                           "symbolic batch and channels"));
        break;
      }
      case OpId::batch_norm: {
        if (!is_floating(t)) break;
        const Arg var = A(t, {5}, Domain::positive);
        cs.push_back(core(Cop(op, {A(t, {2, 5, 4, 3}), A(t, {5}), var, A(t, {5}), A(t, {5})}, {1e-5}, "affine")));
        cs.push_back(Cop(op, {A(t, {2, 5, 4, 3}), A(t, {5}), var}, {1e-3}, "statistics only"));
        cs.push_back(Cop(op, {A(t, {3, 5}), A(t, {5}), var, A(t, {5})}, {1e-5}, "[N, C], weight"));
        cs.push_back(Cop(op, {A(t, {2, 5, 7}), A(D::f32, {5}), A(D::f32, {5}, Domain::positive), A(D::f32, {5}),
                              A(D::f32, {5})}, {1e-5}, "f32 statistics"));
        sym.push_back(core(Cop(op, {A(t, {-1, 5, 3, 3}), A(t, {5}), var, A(t, {5}), A(t, {5})}, {1e-5}, "symbolic batch")));
        break;
      }
      case OpId::group_norm: {
        if (!is_floating(t)) break;
        cs.push_back(core(Cop(op, {A(t, {2, 6, 4, 3}), A(t, {6}), A(t, {6})}, {int64_t{3}, 1e-5}, "3 groups, affine")));
        cs.push_back(Cop(op, {A(t, {2, 6, 4, 3})}, {int64_t{1}, 1e-5}, "one group"));
        cs.push_back(Cop(op, {A(t, {2, 6, 5}), A(t, {6})}, {int64_t{6}, 1e-5}, "instance norm, weight"));
        cs.push_back(Cop(op, {A(t, {1, 4, 2, 3, 2}), A(t, {4}), A(t, {4})}, {int64_t{2}, 1e-5}, "3-D"));
        sym.push_back(core(Cop(op, {A(t, {-1, 6, 4, 4}), A(t, {6}), A(t, {6})}, {int64_t{2}, 1e-5}, "symbolic batch")));
        sym.push_back(Cop(op, {A(t, {2, 4, -1})}, {int64_t{2}, 1e-5}, "symbolic length"));
        break;
      }
      case OpId::layer_norm:
      case OpId::rms_norm: {
        for (int64_t nd : {1, 2, 3}) cs.push_back(Cop(op, {A(t, {4, 7, 13})}, {nd, 1e-5}));
        cs.push_back(core(Cop(op, {A(t, {4, 7, 13}), A(t, {13})}, {int64_t{1}, 1e-5}, "weight")));
        cs.push_back(Cop(op, {A(t, {4, 7, 13}), A(t, {7, 13})}, {int64_t{2}, 1e-5}, "weight"));
        if (op == OpId::layer_norm) cs.push_back(Cop(op, {A(t, {4, 7, 13}), A(t, {13}), A(t, {13})}, {int64_t{1}, 1e-5}, "weight, bias"));
        cs.push_back(Cop(op, {A(t, {129})}, {int64_t{1}, 1e-6}));
        cs.push_back(Cop(op, {A(t, {3, 1})}, {int64_t{1}, 1e-6}, "one element"));
        cs.push_back(Cop(op, {A(t, {6, 9}, Domain::normal, Layout::permuted)}, {int64_t{1}, 1e-5}, "strided"));
        cs.push_back(Cop(op, {A(t, {2, 2000})}, {int64_t{1}, 1e-5}, "long rows"));
        cs.push_back(Cop(op, {A(t, {5, 8}), A(D::f32, {8})}, {int64_t{1}, 1e-5}, "f32 weight"));
        if (t == D::f32) cs.push_back(Cop(op, {A(t, {65600}), A(t, {65600})}, {int64_t{1}, 1e-5}, "large: split reduction"));
        sym.push_back(Cop(op, {A(t, {-1, -2})}, {int64_t{1}, 1e-5}));
        sym.push_back(core(Cop(op, {A(t, {-1, -2}), A(t, {-2})}, {int64_t{1}, 1e-5}, "weight")));
        sym.push_back(Cop(op, {A(t, {-1, -2, -3})}, {int64_t{2}, 1e-5}));
        break;
      }
      case OpId::linear: {
        cs.push_back(Cop(op, {A(t, {5, 7}), A(t, {3, 7})}, {}));
        cs.push_back(Cop(op, {A(t, {5, 7}), A(t, {3, 7}), A(t, {3})}, {}, "bias"));
        cs.push_back(core(Cop(op, {A(t, {2, 4, 7}), A(t, {3, 7}), A(t, {3})}, {}, "batched")));
        cs.push_back(Cop(op, {A(t, {7}), A(t, {3, 7})}, {}, "1-d"));
        cs.push_back(core(Cop(op, {A(t, {5, 1}), A(t, {3, 1}), A(t, {3})}, {}, "one input feature")));
        cs.push_back(Cop(op, {A(t, {13, 129}), A(t, {17, 129}), A(t, {17})}, {}));
        cs.push_back(Cop(op, {A(t, {5, 7}, Domain::normal, Layout::permuted), A(t, {3, 7}, Domain::normal, Layout::permuted)}, {}, "strided"));
        sym.push_back(core(Cop(op, {A(t, {-1, 7}), A(t, {3, 7}), A(t, {3})}, {})));
        sym.push_back(Cop(op, {A(t, {-1, -2}), A(t, {-3, -2})}, {}));
        break;
      }
      case OpId::scaled_dot_product_attention: {
        // Fused on CUDA for f16/bf16 with head dims multiples of 16 up to 128 (blocks of 64 or 128
        // query rows, key tiles of 32 or 64): rows and keys that fill no tile, several key
        // tiles, both head-dim limits, a v head dim unlike q's; everything else decomposed.
        auto qkv = [&](Ints q, Ints k, Ints v) { return std::vector<Arg>{A(t, q), A(t, k), A(t, v)}; };
        cs.push_back(core(Cop(op, qkv({2, 3, 16, 16}, {2, 3, 16, 16}, {2, 3, 16, 16}), {0.25})));
        cs.push_back(core(Cop(op, qkv({1, 37, 32}, {1, 50, 32}, {1, 50, 48}), {0.2}, "partial tiles, dv != d")));
        cs.push_back(core(Cop(op, qkv({2, 130, 64}, {2, 70, 64}, {2, 70, 64}), {0.125}, "several query blocks and key tiles")));
        cs.push_back(core(Cop(op, qkv({1, 2, 33, 128}, {1, 2, 65, 128}, {1, 2, 65, 128}), {0.09}, "head dim 128")));
        cs.push_back(core(Cop(op, qkv({5, 16}, {7, 16}, {7, 16}), {1.0}, "rank 2, scale 1")));
        cs.push_back(core(Cop(op, qkv({2, 20, 16}, {2, 40, 16}, {2, 40, 16}), {-0.3}, "negative scale")));
        cs.push_back(core(Cop(op, qkv({2, 5, 16}, {2, 9, 16}, {2, 9, 16}), {0.0}, "scale 0 (decomposed)")));
        cs.push_back(core(Cop(op, qkv({3, 4, 8}, {3, 6, 8}, {3, 6, 8}), {0.35}, "head dim 8 (decomposed)")));
        cs.push_back(core(Cop(op, qkv({3, 16}, {0, 16}, {0, 16}), {0.25}, "no keys")));
        cs.push_back(core(Cop(op, {A(t, {12, 16}, Domain::normal, Layout::permuted), A(t, {9, 16}), A(t, {9, 16})}, {0.25},
                              "q without a unit stride along its head dim")));
        if (is_floating(t))
          cs.push_back(core(Cop(op, {A(t, {2, 24, 16}, Domain::special), A(t, {2, 20, 16}), A(t, {2, 20, 16})}, {0.25},
                                "NaN, inf")));
        // Heads split off a [batch, seq, heads * d] projection: strided batch dims and rows.
        cs.push_back(core(C({A(t, {2, 40, 3 * 32}), A(t, {2, 24, 3 * 32}), A(t, {2, 24, 3 * 16})},
                            [op](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          auto heads = [&](NodeId x, int64_t d) {
            const SymShape& s = g.node(x).meta.sizes;
            const NodeId r = g.add(OpId::reshape, {x}, {SymShape{s[0], s[1], 3, d}});
            return g.add(OpId::permute, {r}, {Ints{0, 2, 1, 3}});
          };
          return g.add(op, {heads(in[0], 32), heads(in[1], 32), heads(in[2], 16)}, {0.2});
        }, tol_of(op, float_of(t)), "heads as views of projections")));
        // q k^T v where k and v are one tensor, k the same buffer as q.
        cs.push_back(core(C({A(t, {2, 20, 32})}, [op](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          return g.add(op, {in[0], in[0], in[0]}, {0.15});
        }, tol_of(op, float_of(t)), "self attention over one tensor")));
        if (t == D::f16 || t == D::bf16)
          cs.push_back(core(Cop(op, qkv({1, 4, 300, 64}, {1, 4, 300, 64}, {1, 4, 300, 64}), {0.125}, "long rows")));
        // Masks (fused on CUDA as above, read at any strides): bool over [Lq, Lk] for every head,
        // floating per batch, per key (BERT's padding), per query row (broadcast along the keys),
        // of another dtype than q's (cast first, as the op does).
        cs.push_back(core(Cop(op, {A(t, {2, 3, 16, 16}), A(t, {2, 3, 16, 16}), A(t, {2, 3, 16, 16}), A(D::bool_, {16, 16})},
                              {0.25}, "bool mask")));
        cs.push_back(core(Cop(op, {A(t, {2, 3, 5, 16}), A(t, {2, 3, 9, 16}), A(t, {2, 3, 9, 16}), A(float_of(t), {2, 1, 5, 9})},
                              {0.25}, "additive mask")));
        cs.push_back(core(Cop(op, {A(t, {2, 4, 70, 64}), A(t, {2, 4, 150, 64}), A(t, {2, 4, 150, 64}), A(float_of(t), {2, 1, 1, 150})},
                              {0.125}, "additive mask per key, several key tiles")));
        cs.push_back(core(Cop(op, {A(t, {2, 20, 32}), A(t, {2, 33, 32}), A(t, {2, 33, 32}), A(D::bool_, {2, 1, 33})},
                              {0.2}, "bool mask per key")));
        cs.push_back(Cop(op, {A(t, {3, 5, 16}), A(t, {3, 9, 16}), A(t, {3, 9, 16}), A(float_of(t), {5, 1})}, {0.25},
                         "additive mask per query row"));
        if (t != D::f32)
          cs.push_back(core(Cop(op, {A(t, {2, 6, 16}), A(t, {2, 9, 16}), A(t, {2, 9, 16}), A(D::f32, {6, 9})}, {0.25},
                                "f32 mask")));
        // Rows the mask keeps nowhere: a bool mask makes them zeros (torch's safe softmax); an
        // additive one at the dtype's lowest value (torch's finfo.min) gives them equal weights
        // (not in f16: its lowest, -65504, rounds the scores away in f16 arithmetic, not in the
        // fused kernel's f32, so the weights are equal only in the decomposition).
        auto keep_below_diagonal = [](Graph& g, SymInt lq, SymInt lk) {  // key < row - 5: rows 0-5 keep none
          const NodeId rows = g.add(OpId::iota, {}, {SymShape{lq, lk}, int64_t{0}, D::i64});
          const NodeId cols = g.add(OpId::iota, {}, {SymShape{lq, lk}, int64_t{1}, D::i64});
          return g.add(OpId::lt, {g.add(OpId::add, {cols, g.add(OpId::full, {}, {SymShape{}, 5.0, D::i64})}), rows});
        };
        cs.push_back(core(C({A(t, {2, 3, 24, 16}), A(t, {2, 3, 40, 16}), A(t, {2, 3, 40, 16})},
                            [op, keep_below_diagonal](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          return g.add(op, {in[0], in[1], in[2], keep_below_diagonal(g, 24, 40)}, {0.25});
        }, tol_of(op, float_of(t)), "bool mask, rows kept nowhere")));
        if (is_floating(t) && t != D::f16)
          cs.push_back(core(C({A(t, {2, 3, 24, 16}), A(t, {2, 3, 40, 16}), A(t, {2, 3, 40, 16})},
                              [op, t, keep_below_diagonal](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
            const NodeId zero = g.add(OpId::full, {}, {SymShape{}, 0.0, t});
            const double low = t == D::bf16 ? -3.3895313892515355e38
                             : t == D::f32 ? static_cast<double>(std::numeric_limits<float>::lowest()) : std::numeric_limits<double>::lowest();
            const NodeId lowest = g.add(OpId::full, {}, {SymShape{}, low, t});
            const NodeId m = g.add(OpId::where, {keep_below_diagonal(g, 24, 40), zero, lowest});
            return g.add(op, {in[0], in[1], in[2], m}, {0.25});
          }, tol_of(op, t), "additive mask, rows at the lowest value")));
        if (t == D::f16 || t == D::bf16)  // the causal mask of a decoder over rows of several blocks
          cs.push_back(core(C({A(t, {1, 2, 200, 64}), A(t, {1, 2, 200, 64}), A(t, {1, 2, 200, 64})},
                              [op](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
            const NodeId rows = g.add(OpId::iota, {}, {SymShape{200, 200}, int64_t{0}, D::i64});
            const NodeId cols = g.add(OpId::iota, {}, {SymShape{200, 200}, int64_t{1}, D::i64});
            return g.add(op, {in[0], in[1], in[2], g.add(OpId::le, {cols, rows})}, {0.125});
          }, tol_of(op, t), "causal mask, long rows")));
        // Masks that hide every key after the query's row (schedule: Attention::causal; the CUDA
        // kernel skips a block's keys after its last row): an exporter's additive causal mask at
        // the dtype's lowest value, and a sliding window over more queries than keys, whose last
        // rows keep no key.
        if (t == D::bf16)
          cs.push_back(core(C({A(t, {1, 2, 260, 64}), A(t, {1, 2, 260, 64}), A(t, {1, 2, 260, 64})},
                              [op, t](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
            const NodeId rows = g.add(OpId::iota, {}, {SymShape{260, 260}, int64_t{0}, D::i64});
            const NodeId cols = g.add(OpId::iota, {}, {SymShape{260, 260}, int64_t{1}, D::i64});
            const NodeId m = g.add(OpId::where, {g.add(OpId::le, {cols, rows}), g.add(OpId::full, {}, {SymShape{}, 0.0, t}),
                                                 g.add(OpId::full, {}, {SymShape{}, -3.3895313892515355e38, t})});
            return g.add(op, {in[0], in[1], in[2], m}, {0.125});
          }, tol_of(op, t), "additive causal mask at the lowest value, long rows")));
        if (t == D::f16 || t == D::bf16)
          cs.push_back(core(C({A(t, {1, 2, 300, 64}), A(t, {1, 2, 200, 64}), A(t, {1, 2, 200, 64})},
                              [op](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
            const NodeId rows = g.add(OpId::iota, {}, {SymShape{300, 200}, int64_t{0}, D::i64});
            const NodeId cols = g.add(OpId::iota, {}, {SymShape{300, 200}, int64_t{1}, D::i64});
            const NodeId after = g.add(OpId::add, {cols, g.add(OpId::full, {}, {SymShape{}, 100.0, D::i64})});
            const NodeId window = g.add(OpId::logical_and, {g.add(OpId::le, {cols, rows}), g.add(OpId::gt, {after, rows})});
            return g.add(op, {in[0], in[1], in[2], window}, {0.125});
          }, tol_of(op, t), "sliding window, more queries than keys, last rows keep none")));
        // The causal mask from iotas over symbolic lengths.
        sym.push_back(core(C({A(t, {2, -1, 16}), A(t, {2, -1, 16}), A(t, {2, -1, 16})},
                             [op](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          const SymInt l = g.node(in[0]).meta.sizes[1];
          const NodeId rows = g.add(OpId::iota, {}, {SymShape{l, l}, int64_t{0}, D::i64});
          const NodeId cols = g.add(OpId::iota, {}, {SymShape{l, l}, int64_t{1}, D::i64});
          return g.add(op, {in[0], in[1], in[2], g.add(OpId::le, {cols, rows})}, {0.25});
        }, tol_of(op, float_of(t)), "causal mask")));
        sym.push_back(core(Cop(op, qkv({-1, -2, 16}, {-1, -3, 16}, {-1, -3, 16}), {0.25})));
        sym.push_back(core(Cop(op, qkv({2, -1, 32}, {2, -2, 32}, {2, -2, 64}), {0.2})));
        break;
      }
      case OpId::sort:
      case OpId::argsort: {  // exact: a permutation of x (ties and NaN included)
        const Tolerance exact{};
        auto a = [](int64_t d, bool descending) { return Attrs{d, descending}; };
        const Domain dups = is_floating(t) ? Domain::grid : Domain::normal;  // many equal values
        cs.push_back(core(C({A(t, {5, 16}, dups)}, op_of(op, a(1, false)), exact, "rows of 16")));
        cs.push_back(C({A(t, {5, 16}, dups)}, op_of(op, a(1, true)), exact, "descending"));
        cs.push_back(core(C({A(t, {7, 3})}, op_of(op, a(0, false)), exact, "along dim 0, padded to 8")));
        cs.push_back(C({A(t, {3, 13, 2}, dups)}, op_of(op, a(1, true)), exact, "middle dim, padded to 16"));
        cs.push_back(C({A(t, {1})}, op_of(op, a(0, false)), exact, "one element"));
        cs.push_back(C({A(t, {})}, op_of(op, a(0, false)), exact, "rank 0"));
        cs.push_back(C({A(t, {4, 100}, Domain::normal, Layout::permuted)}, op_of(op, a(1, false)), exact, "strided, 100"));
        if (is_floating(t)) {
          cs.push_back(core(C({A(t, {6, 41}, Domain::special)}, op_of(op, a(1, false)), exact, "NaN, inf, 0, -0")));
          cs.push_back(C({A(t, {6, 41}, Domain::special)}, op_of(op, a(1, true)), exact, "NaN, inf, descending"));
        }
        sym.push_back(C({A(t, {-1, 12}, dups)}, op_of(op, a(1, false)), exact, "symbolic rows"));
        sym.push_back(C({A(t, {9, -1}, dups)}, op_of(op, a(0, true)), exact, "symbolic columns, along dim 0"));
        // Along a symbolic dim: the counting sort.
        sym.push_back(core(C({A(t, {3, -1}, dups)}, op_of(op, a(1, false)), exact, "along a symbolic dim")));
        sym.push_back(C({A(t, {-1, 4}, dups)}, op_of(op, a(0, true)), exact, "along a symbolic dim 0, descending"));
        if (is_floating(t))
          sym.push_back(core(C({A(t, {4, -1}, Domain::special)}, op_of(op, a(1, true)), exact,
                               "along a symbolic dim: NaN, inf, 0, -0, descending")));
        break;
      }
      case OpId::cumsum: {
        auto a = [](int64_t d, bool exclusive, bool reverse) { return Attrs{d, exclusive, reverse}; };
        cs.push_back(core(Cop(op, {A(t, {4, 7})}, a(1, false, false))));
        cs.push_back(Cop(op, {A(t, {4, 7})}, a(0, false, false)));
        cs.push_back(Cop(op, {A(t, {3, 5, 6})}, a(1, true, false), "exclusive"));
        cs.push_back(Cop(op, {A(t, {3, 5, 6})}, a(2, false, true), "reverse"));
        cs.push_back(Cop(op, {A(t, {3, 5, 6})}, a(0, true, true), "exclusive reverse"));
        cs.push_back(Cop(op, {A(t, {})}, a(0, false, false), "rank 0"));
        cs.push_back(core(Cop(op, {A(t, {130})}, a(0, false, false), "long")));
        // Blocks of 64 and the running totals of the blocks, in two and three levels.
        cs.push_back(core(Cop(op, {A(t, {3, 1000})}, a(1, true, true), "long, exclusive reverse")));
        cs.push_back(Cop(op, {A(t, {700, 2})}, a(0, false, true), "long, along dim 0, reverse"));
        cs.push_back(Cop(op, {A(t, {9000})}, a(0, true, false), "three levels of blocks"));
        if (is_floating(t)) cs.push_back(core(Cop(op, {A(t, {4, 300}, Domain::special)}, a(1, false, false), "NaN, inf")));
        cs.push_back(core(Cop(op, {A(t, {5, 6}, Domain::normal, Layout::permuted)}, a(1, false, false), "strided")));
        sym.push_back(core(Cop(op, {A(t, {-1, 5})}, a(0, false, false), "along a symbolic dim")));
        sym.push_back(Cop(op, {A(t, {-1, 5})}, a(1, false, true)));
        break;
      }
      case OpId::cumprod: {  // factors near 1 keep long products in range; zeros and NaNs in "special"
        auto a = [](int64_t d, bool exclusive, bool reverse) { return Attrs{d, exclusive, reverse}; };
        cs.push_back(core(Cop(op, {A(t, {4, 7}, Domain::near_one)}, a(1, false, false))));
        cs.push_back(Cop(op, {A(t, {4, 7})}, a(0, false, false)));
        cs.push_back(Cop(op, {A(t, {3, 5, 6}, Domain::near_one)}, a(1, true, false), "exclusive"));
        cs.push_back(Cop(op, {A(t, {3, 5, 6}, Domain::near_one)}, a(2, false, true), "reverse"));
        cs.push_back(Cop(op, {A(t, {3, 5, 6}, Domain::near_one)}, a(0, true, true), "exclusive reverse"));
        cs.push_back(Cop(op, {A(t, {})}, a(0, false, false), "rank 0"));
        cs.push_back(core(Cop(op, {A(t, {3, 6}, Domain::special)}, a(1, false, false), "special values")));
        cs.push_back(core(Cop(op, {A(t, {70}, Domain::near_one)}, a(0, false, false), "long")));
        cs.push_back(core(Cop(op, {A(t, {3, 600}, Domain::near_one)}, a(1, true, true), "blocks, exclusive reverse")));
        if (is_floating(t)) cs.push_back(Cop(op, {A(t, {2, 300}, Domain::special)}, a(1, false, false), "blocks, special values"));
        cs.push_back(core(Cop(op, {A(t, {5, 6}, Domain::near_one, Layout::permuted)}, a(1, false, false), "strided")));
        sym.push_back(core(Cop(op, {A(t, {-1, 5}, Domain::near_one)}, a(0, false, false), "along a symbolic dim")));
        sym.push_back(Cop(op, {A(t, {-1, 5}, Domain::near_one)}, a(1, false, true)));
        break;
      }
      case OpId::tril:
      case OpId::triu: {
        for (int64_t d : {0, -1, 2}) cs.push_back(Cop(op, {A(t, {4, 5})}, {d}));
        cs.back().core = true;
        cs.push_back(core(Cop(op, {A(t, {2, 3, 6, 4})}, {int64_t{1}}, "batched")));
        cs.push_back(Cop(op, {A(t, {3, 7})}, {int64_t{-9}}, "diagonal past the matrix"));
        cs.push_back(core(Cop(op, {A(t, {5, 6}, Domain::normal, Layout::permuted)}, {int64_t{0}}, "strided")));
        sym.push_back(core(Cop(op, {A(t, {-1, -2})}, {int64_t{0}})));
        sym.push_back(Cop(op, {A(t, {3, -1, 5})}, {int64_t{-1}}));
        break;
      }
      case OpId::custom: {  // a host kernel between generated ones (scale_shift above)
        cs.push_back(core(Cop(op, {A(t, {4, 5})}, scale_shift(2, 1))));
        cs.push_back(Cop(op, {A(t, {})}, scale_shift(-1, 0.5), "rank 0"));
        cs.push_back(core(Cop(op, {A(t, {5, 6}, Domain::normal, Layout::permuted)}, scale_shift(3, -2), "strided")));
        cs.push_back(core(C({A(t, {3, 4})}, [](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          const NodeId y = g.add(OpId::custom, {g.add(OpId::abs, {in[0]})}, scale_shift(0.5, 0));
          return g.add(OpId::add, {g.add(OpId::neg, {y}), in[0]});
        }, "between pointwise ops")));
        sym.push_back(core(Cop(op, {A(t, {-1, 5})}, scale_shift(2, 1), "symbolic")));
        break;
      }
      case OpId::matmul: {
        cs.push_back(Cop(op, {A(t, {2, 3}), A(t, {3, 4})}, {}));
        cs.push_back(core(Cop(op, {A(t, {7, 13}), A(t, {13, 129})}, {})));
        cs.push_back(Cop(op, {A(t, {1, 5}), A(t, {5, 1})}, {}));
        cs.push_back(Cop(op, {A(t, {5}), A(t, {5, 3})}, {}, "1-d left"));
        cs.push_back(Cop(op, {A(t, {3, 5}), A(t, {5})}, {}, "1-d right"));
        cs.push_back(Cop(op, {A(t, {5}), A(t, {5})}, {}, "dot"));
        cs.push_back(Cop(op, {A(t, {2, 3, 4}), A(t, {4, 5})}, {}, "batched"));
        cs.push_back(core(Cop(op, {A(t, {2, 1, 3, 4}), A(t, {3, 4, 2})}, {}, "batch broadcast")));
        if (t == D::i64) cs.push_back(core(Cop(op, {A(t, {3, 40}, Domain::wide), A(t, {40, 2}, Domain::grid)}, {}, "large integers")));
        cs.push_back(Cop(op, {A(t, {3, 4}), A(t, {2, 4, 5})}, {}, "matrix @ batch"));
        cs.push_back(Cop(op, {A(t, {4}), A(t, {2, 4, 3})}, {}, "1-d @ batch"));
        cs.push_back(core(Cop(op, {A(t, {5, 6}, Domain::normal, Layout::permuted), A(t, {6, 3})}, {}, "transposed left")));
        cs.push_back(Cop(op, {A(t, {5, 6}), A(t, {6, 3}, Domain::normal, Layout::permuted)}, {}, "transposed right"));
        cs.push_back(Cop(op, {A(t, {5, 6}, Domain::normal, Layout::sliced), A(t, {6, 3}, Domain::normal, Layout::sliced)}, {}, "sliced"));
        cs.push_back(Cop(op, {A(t, {4, 6}, Domain::normal, Layout::expanded), A(t, {6, 3})}, {}, "stride 0"));
        cs.push_back(Cop(op, {A(t, {65, 130}), A(t, {130, 33})}, {}));
        // K = 100 and N = 1001 leave rows that are not 16-byte aligned: CUDA (cuda.pad_matmuls;
        // test_cuda_target always) pads such a large f16/bf16 product to aligned sizes and slices
        // the result back (Target::gemm_row_alignment).
        if (is_floating(t)) cs.push_back(core(Cop(op, {A(t, {2, 96, 100}), A(t, {100, 1001})}, {}, "unaligned rows")));
        cs.push_back(Cop(op, {A(t, {192, 100}), A(t, {100, 1001}, Domain::normal, Layout::permuted)}, {}, "unaligned rows, transposed right"));
        // A tied weight and a value each read by two unaligned products through views: the LM head
        // x @ cast(e^T) and its backward's dl @ cast(e^T)^T and x^T @ dl reshaped (GPT-2's vocabulary
        // path). CUDA pads the value beneath the views and casts once for both products.
        if (is_floating(t))
          cs.push_back(core(C({A(t, {2, 96, 128}), A(D::f32, {1001, 128})}, [t](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
            const NodeId w = g.add(OpId::cast, {g.add(OpId::transpose, {in[1]}, {int64_t{0}, int64_t{1}})}, Attrs{t});
            const NodeId logits = g.add(OpId::matmul, {in[0], w});
            const NodeId dl = g.add(OpId::mul, {logits, g.add(OpId::full, {}, {SymShape{}, 0.03, t})});
            const NodeId dx = g.add(OpId::matmul, {dl, g.add(OpId::transpose, {w}, {int64_t{0}, int64_t{1}})});
            const NodeId rows = g.add(OpId::reshape, {in[0]}, {SymShape{192, 128}});
            const NodeId dw = g.add(OpId::matmul, {g.add(OpId::transpose, {rows}, {int64_t{0}, int64_t{1}}), g.add(OpId::reshape, {dl}, {SymShape{192, 1001}})});
            auto flat = [&](NodeId v) {
              int64_t n = 1;
              for (const SymInt& d : g.node(v).meta.sizes) n *= d.hint();
              return g.add(OpId::reshape, {v}, {SymShape{n}});
            };
            return g.add(OpId::cat, {flat(logits), flat(dx), flat(dw)}, {int64_t{0}});
          }, tol_of(op, t), "unaligned rows, a tied weight and a gradient read through views by two products")));
        for (const auto& [a, b] : std::vector<std::pair<Ints, Ints>>{{{3, 1}, {3, 2}}, {{1, 3}, {1, 4}}}) {
          // transpose(x) @ y with a size-1 dim in x.
          cs.push_back(core(C({A(t, a), A(t, b)}, [](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
            return g.add(OpId::matmul, {g.add(OpId::transpose, {in[0]}, {int64_t{0}, int64_t{1}}), in[1]});
          }, tol_of(op, t), "transposed operand with a size-1 dim")));
        }
        cs.push_back(core(C({A(t, {3, 1})}, [](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          return g.add(OpId::matmul, {in[0], g.add(OpId::transpose, {in[0]}, {int64_t{0}, int64_t{1}})});
        }, tol_of(op, t), "x @ x^T, inner size 1")));
        // Epilogues: relu(a @ b + bias), (a @ b) * column, transpose(a @ b) + 1, batched + bias.
        const Tolerance mt = tol_of(op, t);
        // gelu(a @ b + bias) and (a @ b) * 0.125, whose product a later kernel reads again (a
        // training step's backward: the row sums here): a gemm may do such an epilogue itself
        // (CUDA: cuBLASLt's GELU_BIAS, alpha) only where it still writes the product.
        for (const bool gelu : {true, false})
          if (is_floating(t)) cs.push_back(core(C({A(t, {6, 5}), A(t, {5, 7}), A(t, {7})}, [gelu](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
            const NodeId p = g.add(OpId::matmul, {in[0], in[1]});
            const DType dt = g.node(p).meta.dtype;
            const NodeId e = gelu ? g.add(OpId::gelu, {g.add(OpId::add, {p, in[2]})}, {std::string("tanh")})
                                  : g.add(OpId::mul, {p, g.add(OpId::full, {}, {SymShape{}, 0.125, dt})});
            return g.add(OpId::add, {e, g.add(OpId::sum, {p}, Attrs{Ints{1}, true})});
          }, mt, gelu ? "epilogue gelu(mm + bias), the product read again" : "epilogue mm * 0.125, the product read again")));
        cs.push_back(core(C({A(t, {6, 5}), A(t, {5, 7}), A(t, {7})}, [](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          return g.add(OpId::relu, {g.add(OpId::add, {g.add(OpId::matmul, {in[0], in[1]}), in[2]})});
        }, mt, "epilogue relu(mm + bias)")));
        cs.push_back(C({A(t, {6, 5}), A(t, {5, 7}), A(t, {6, 1})}, [](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          return g.add(OpId::mul, {g.add(OpId::matmul, {in[0], in[1]}), in[2]});
        }, mt, "epilogue times a column"));
        cs.push_back(C({A(t, {6, 5}), A(t, {5, 7})}, [t](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          const NodeId mm = g.add(OpId::matmul, {in[0], in[1]});
          return g.add(OpId::add, {g.add(OpId::transpose, {mm}, {int64_t{0}, int64_t{1}}), g.add(OpId::full, {}, {SymShape{}, 1.0, t})});
        }, mt, "transposed epilogue"));
        cs.push_back(C({A(t, {3, 4, 5}), A(t, {3, 5, 2}), A(t, {2})}, [](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          return g.add(OpId::add, {g.add(OpId::matmul, {in[0], in[1]}), in[2]});
        }, mt, "batched, epilogue bias"));
        sym.push_back(core(Cop(op, {A(t, {-1, -2}), A(t, {-2, -3})}, {})));
        if (t == D::f32) {
          cs.push_back(Cop(op, {A(t, {5, 6}, Domain::normal, Layout::reversed), A(t, {6, 3})}, {}, "negative strides"));
          for (DType u : {D::f16, D::bf16, D::i32, D::f64}) {
            cs.push_back(core(Cop(op, {A(t, {4, 5}), A(u, {5, 3})}, {}, "mixed dtypes")));
            cs.push_back(core(Cop(op, {A(u, {4, 5}), A(t, {5, 3})}, {}, "mixed dtypes")));
          }
        }
        sym.push_back(Cop(op, {A(t, {-1, 5}), A(t, {5, -2})}, {}));
        sym.push_back(Cop(op, {A(t, {-3, -1, 4}), A(t, {4, -2})}, {}, "batched"));
        sym.push_back(Cop(op, {A(t, {-1, -2}), A(t, {-2})}, {}, "matrix-vector"));
        break;
      }
      default: break;
    }
    out.push_back(static_batch(bname(op, t, "static"), std::move(cs), t == D::f32));
    if (!sym.empty()) out.push_back(symbolic_batch(bname(op, t, "symbolic"), std::move(sym), t == D::f32));
  }
  return out;
}

// philox over keys and counters of the whole i64 range (broadcast, i32, a flat iota of several
// launch chunks), every word; rand and randn alone, added to an input, over symbolic shapes and
// with a run-time key. Integers are exact; randn's logf and cosf may differ by an ulp.
std::vector<Batch> random_cases(OpId op) {
  std::vector<Batch> out;
  std::vector<OpCase> cs, sym;
  const Tolerance exact{};
  if (op == OpId::philox) {
    for (int64_t word = 0; word < 4; ++word)
      for (int64_t seed : {int64_t{0}, int64_t{42}, (int64_t{1} << 32) + 1, int64_t{-1}}) {
        const Attrs a{word, seed};
        cs.push_back(C({A(D::i64, {}, Domain::wide), A(D::i64, {3, 129}, Domain::wide)}, op_of(op, a), exact, "broadcast key"));
        if (seed != 42) continue;
        cs.push_back(C({A(D::i32, {5, 1}, Domain::wide), A(D::i64, {7}, Domain::wide, Layout::reversed)}, op_of(op, a), exact));
        cs.push_back(core(C({A(D::i64, {})}, [a](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>&) {
          const NodeId c = g.add(OpId::iota, {}, {SymShape{257 * 300}, int64_t{0}, D::i64});
          return g.add(OpId::philox, {in[0], g.add(OpId::reshape, {c}, {SymShape{257, 300}})}, a);
        }, exact, "a flat iota counter, large")));
        sym.push_back(C({A(D::i64, {-1, 1}, Domain::wide), A(D::i64, {-2}, Domain::wide)}, op_of(op, a), exact));
      }
  } else {
    for (DType t : {D::f32, D::f64, D::f16, D::bf16}) {
      // randn is computed in f32 (logf, cosf) whatever its dtype.
      const Tolerance tt = op == OpId::rand ? exact : tol_of(OpId::cos, t == D::f64 ? D::f32 : t);
      for (int64_t seed : {int64_t{0}, int64_t{42}, (int64_t{1} << 32) + 1}) {
        if (t != D::f32 && seed != 42 && !full_mode()) continue;
        cs.push_back(C({}, source(op, {SymShape{7}, seed, t}), tt));
        cs.push_back(C({}, source(op, {SymShape{3, 129}, seed, t}), tt));
        cs.push_back(C({}, source(op, {SymShape{}, seed, t}), tt));
        cs.push_back(C({A(t, {2, 5})}, source_plus_input(op, [seed, t](const std::vector<SymInt>&) { return Attrs{SymShape{2, 5}, seed, t}; }), tt));
        cs.push_back(C({A(D::i64, {}, Domain::wide)}, op_of(op, {SymShape{4, 33}, seed, t}), tt, "run-time key"));
        cs.push_back(C({A(D::i32, {}, Domain::wide)}, op_of(op, {SymShape{}, seed, t}), tt, "run-time i32 key, 0-d"));
        sym.push_back(C({A(t, {-1, 3})}, source_plus_input(op, [seed, t](const std::vector<SymInt>& s) { return Attrs{SymShape{s[0], 3}, seed, t}; }), tt));
        sym.push_back(C({A(D::i64, {}, Domain::wide), A(t, {-1, -2})}, [seed, t, op](Graph& g, const std::vector<NodeId>& in, const std::vector<SymInt>& s) {
          return g.add(OpId::mul, {in[1], g.add(op, {in[0]}, {SymShape{s[0], s[1]}, seed, t})});
        }, tt, "run-time key, symbolic shape"));
      }
    }
  }
  out.push_back(static_batch(std::string(op_name(op)) + " static", std::move(cs)));
  if (!sym.empty()) out.push_back(symbolic_batch(std::string(op_name(op)) + " symbolic", std::move(sym)));
  return out;
}

}  // namespace

Tolerance op_tolerance(OpId op, DType out) { return tol_of(op, out); }

const std::map<OpId, OpCaseFn>& op_case_table() {
  static const std::map<OpId, OpCaseFn> table = [] {
    std::map<OpId, OpCaseFn> t;
    for (OpId op : {OpId::input, OpId::constant, OpId::full, OpId::arange, OpId::iota}) t[op] = source_cases;
    for (OpId op : {OpId::randn, OpId::rand, OpId::philox}) t[op] = random_cases;
    for (OpId op : {OpId::neg, OpId::abs, OpId::exp, OpId::log, OpId::sqrt, OpId::rsqrt, OpId::reciprocal, OpId::sin,
                    OpId::cos, OpId::tanh, OpId::sigmoid, OpId::relu, OpId::gelu, OpId::silu, OpId::erf, OpId::floor,
                    OpId::ceil, OpId::round, OpId::sign, OpId::logical_not, OpId::isnan})
      t[op] = unary_cases;
    t[OpId::cast] = cast_cases;
    for (OpId op : {OpId::add, OpId::sub, OpId::mul, OpId::div, OpId::pow, OpId::maximum, OpId::minimum, OpId::eq,
                    OpId::ne, OpId::lt, OpId::le, OpId::gt, OpId::ge, OpId::logical_and, OpId::logical_or})
      t[op] = binary_cases;
    t[OpId::where] = where_cases;
    for (OpId op : {OpId::sum, OpId::mean, OpId::max, OpId::min, OpId::prod, OpId::argmax, OpId::argmin, OpId::var,
                    OpId::logsumexp})
      t[op] = reduction_cases;
    for (OpId op : {OpId::reshape, OpId::permute, OpId::transpose, OpId::expand, OpId::squeeze, OpId::unsqueeze,
                    OpId::slice, OpId::unfold, OpId::cat, OpId::pad, OpId::index_select, OpId::gather, OpId::scatter_add,
                    OpId::scatter, OpId::scatter_reduce, OpId::flatten})
      t[op] = layout_cases;
    for (OpId op : {OpId::softmax, OpId::log_softmax, OpId::layer_norm, OpId::rms_norm, OpId::linear,
                    OpId::scaled_dot_product_attention, OpId::convolution, OpId::convolution_channels_last,
                    OpId::convolution_input_grad, OpId::convolution_weight_grad, OpId::max_pool, OpId::avg_pool,
                    OpId::cumsum, OpId::cumprod, OpId::sort, OpId::argsort, OpId::tril, OpId::triu, OpId::batch_norm,
                    OpId::group_norm, OpId::matmul, OpId::custom})
      t[op] = composite_cases;
    return t;
  }();
  return table;
}

}  // namespace cpu_test
