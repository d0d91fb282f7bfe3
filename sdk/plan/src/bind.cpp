// plan::validate and plan::bind (bind.h).
#include "kiln/plan/bind.h"

#include "kiln/graph/memory_budget.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "kiln/graph/error.h"
#include "kiln/graph/graph.h"

namespace kiln::plan {

namespace {

constexpr const char* kBufferKinds[] = {"input", "constant", "output", "intermediate"};
constexpr const char* kKernelKinds[] = {"pointwise", "reduction", "matmul", "attention", "convolution", "reference", "custom"};

template <size_t N>
bool one_of(const std::string& s, const char* const (&names)[N]) {
  return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return s == n; });
}

template <size_t N>
std::string list_of(const char* const (&names)[N]) {
  std::string out;
  for (const char* n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

std::string at(std::string_view list, size_t i) { return std::string(list) + "[" + std::to_string(i) + "]"; }

std::string plural(size_t n, const std::string& noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

std::string ints_str(std::span<const int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The static checks, with messages located by the plan's JSON paths.
class Validator {
 public:
  Validator(const KernelPlan& p, std::string_view who) : p_(p), who_(who) {}

  void run() {
    for (size_t i = 0; i < p_.buffers.size(); ++i) buffer(i);
    inputs();
    bindings();
    for (size_t i = 0; i < p_.kernels.size(); ++i) kernel(i);
    for (size_t i = 0; i < p_.outputs.size(); ++i) ref(p_.outputs[i], "", at("outputs", i));
    checks();
  }

 private:
  const KernelPlan& p_;
  std::string who_;

  // The last checks.size() outputs are the checks' counts: 0-d i64 buffers the kernels write.
  void checks() const {
    if (p_.checks.size() > p_.outputs.size())
      fail_at("", "checks", "the plan has " + std::to_string(p_.checks.size()) + " checks and only " +
                                std::to_string(p_.outputs.size()) + " outputs to hold their counts");
    for (size_t c = 0; c < p_.checks.size(); ++c) {
      const size_t o = p_.outputs.size() - p_.checks.size() + c;
      const PlanBuffer& b = p_.buffers[static_cast<size_t>(p_.outputs[o])];
      if (b.kind != "output" || b.dtype != DType::i64 || !b.sizes.empty())
        fail_at(at("checks", c), "", "its count, outputs[" + std::to_string(o) + "] (buffer " + std::to_string(b.id) +
                                         "), must be a 0-d i64 output buffer");
    }
  }

  [[noreturn]] void fail_at(const std::string& where, std::string_view field, const std::string& message) const {
    std::string path = where;
    if (!field.empty()) path += (path.empty() ? "" : ".") + std::string(field);
    fail(who_, ": ", path.empty() ? "" : path + ": ", message);
  }
  void ref(int32_t b, const std::string& where, const std::string& field) const {
    if (b < 0 || static_cast<size_t>(b) >= p_.buffers.size())
      fail_at(where, field, "buffer " + std::to_string(b) + " does not exist (the plan has " + plural(p_.buffers.size(), "buffer") + ")");
  }
  void refs(const std::vector<int32_t>& bs, const std::string& where, const std::string& field) const {
    for (size_t i = 0; i < bs.size(); ++i) ref(bs[i], where, at(field, i));
  }
  const PlanBuffer& buf(int32_t b) const { return p_.buffers[static_cast<size_t>(b)]; }

  void buffer(size_t i) const {
    const std::string where = at("buffers", i);
    const PlanBuffer& b = p_.buffers[i];
    if (b.id != static_cast<int64_t>(i))
      fail_at(where, "id", "buffers must be listed with ids 0, 1, ... in order: expected " + std::to_string(i) + ", got " +
                               std::to_string(b.id));
    if (!one_of(b.kind, kBufferKinds))
      fail_at(where, "kind", "unknown buffer kind '" + b.kind + "' (valid kinds are " + list_of(kBufferKinds) + ")");
    if (b.strides.size() != b.sizes.size())
      fail_at(where, "strides", "has " + std::to_string(b.strides.size()) + " strides for a buffer of rank " +
                                    std::to_string(b.sizes.size()));
    if (b.index < -1) fail_at(where, "index", "expected a position (0 or more) or -1, got " + std::to_string(b.index));
    if ((b.kind == "input" || b.kind == "output") && b.index < 0)
      fail_at(where, "index", "an " + b.kind + " buffer needs its position among the graph's " + b.kind +
                                  "s (0 or more), got " + std::to_string(b.index));
    if (b.slot < -1 || b.slot >= static_cast<int64_t>(p_.slots.size()))
      fail_at(where, "slot", "slot " + std::to_string(b.slot) + " does not exist (the plan has " + plural(p_.slots.size(), "slot") + ")");
    if (b.kind == "intermediate" && b.slot < 0) fail_at(where, "slot", "an intermediate buffer needs a memory slot, got -1");
    if (b.kind == "constant") {
      if (!b.data) fail_at(where, "", "missing field 'data' (a constant buffer holds its data)");
      if (b.data->dtype != b.dtype)
        fail_at(where, "data.dtype", "the data is " + std::string(dtype_name(b.data->dtype)) + ", the buffer " +
                                         std::string(dtype_name(b.dtype)));
      if (!(static_shape(b.data->sizes) == b.sizes))
        fail_at(where, "data.shape", "the data has shape " + shape_str(static_shape(b.data->sizes)) + ", the buffer sizes " +
                                         shape_str(b.sizes));
      int64_t n = dtype_size(b.dtype);
      for (int64_t s : b.data->sizes)
        if (s < 0 || __builtin_mul_overflow(n, s, &n)) n = -1;
      if (n < 0 || static_cast<size_t>(n) != b.data->bytes.size())
        fail_at(where, "data", "holds " + std::to_string(b.data->bytes.size()) + " bytes; a " + std::string(dtype_name(b.dtype)) +
                                   " tensor of shape " + ints_str(b.data->sizes) + " needs " + std::to_string(n));
    } else if (b.data) {
      fail_at(where, "data", "only constant buffers hold data; this one is an " + b.kind + " buffer");
    }
  }

  // The graph inputs are buffers of kind input with positions 0..n-1, one each.
  void inputs() const {
    std::vector<int32_t> of;
    for (const PlanBuffer& b : p_.buffers) {
      if (b.kind != "input") continue;
      const size_t k = static_cast<size_t>(b.index);
      if (k >= p_.buffers.size())
        fail_at(at("buffers", static_cast<size_t>(b.id)), "index", "input position " + std::to_string(b.index) +
                                                                       " is out of range (the plan has " + plural(p_.buffers.size(), "buffer") + ")");
      if (of.size() <= k) of.resize(k + 1, -1);
      if (of[k] >= 0)
        fail_at(at("buffers", static_cast<size_t>(b.id)), "index", "input " + std::to_string(k) + " is already buffer " +
                                                                       std::to_string(of[k]));
      of[k] = b.id;
    }
    for (size_t k = 0; k < of.size(); ++k)
      if (of[k] < 0)
        fail_at("", "buffers", "no input buffer has index " + std::to_string(k) + ", but input " + std::to_string(of.size() - 1) +
                                   " has one (inputs are numbered 0, 1, ...)");
  }

  void bindings() const {
    std::vector<int64_t> bound_by(p_.symbols.size(), -1);
    for (size_t i = 0; i < p_.bindings.size(); ++i) {
      const std::string where = at("bindings", i);
      const SymbolBinding& sb = p_.bindings[i];
      if (sb.symbol >= p_.symbols.size())
        fail_at(where, "symbol", "unknown symbol 's" + std::to_string(sb.symbol) + "' (the plan declares " +
                                     std::to_string(p_.symbols.size()) + " symbols)");
      const std::string name = "s" + std::to_string(sb.symbol);
      if (bound_by[sb.symbol] >= 0)
        fail_at(where, "symbol", name + " is already bound by bindings[" + std::to_string(bound_by[sb.symbol]) + "]");
      bound_by[sb.symbol] = static_cast<int64_t>(i);
      auto it = std::find_if(p_.buffers.begin(), p_.buffers.end(),
                             [&](const PlanBuffer& pb) { return pb.kind == "input" && pb.index == sb.input; });
      if (it == p_.buffers.end()) fail_at(where, "input", "no input buffer has index " + std::to_string(sb.input));
      if (sb.dim < 0 || sb.dim >= static_cast<int64_t>(it->sizes.size()))
        fail_at(where, "dim", "dim " + std::to_string(sb.dim) + " is out of range for input " + std::to_string(sb.input) +
                                  " (buffer " + std::to_string(it->id) + ", of rank " + std::to_string(it->sizes.size()) + ")");
      const SymInt& size = it->sizes[static_cast<size_t>(sb.dim)];
      if (!(size == SymInt::symbol(sb.symbol, 0)))
        fail_at(where, "", "input " + std::to_string(sb.input) + " dim " + std::to_string(sb.dim) + " has size " + size.str() +
                               ", not " + name);
    }
    for (size_t s = 0; s < bound_by.size(); ++s)
      if (bound_by[s] < 0)
        fail_at("", "bindings", "symbol s" + std::to_string(s) + " has no binding, so the plan cannot learn its value");
  }

  void kernel(size_t i) const {
    const std::string where = at("kernels", i);
    const PlanKernel& k = p_.kernels[i];
    if (!one_of(k.kind, kKernelKinds))
      fail_at(where, "kind", "unknown kernel kind '" + k.kind + "' (valid kinds are " + list_of(kKernelKinds) + ")");
    if (k.grain < 1) fail_at(where, "grain", "the grain must be at least 1, got " + std::to_string(k.grain));
    if (k.gemm && k.kind != "matmul")
      fail_at(where, "gemm", "only matmul kernels run a gemm; this one is a " + k.kind + " kernel");
    if (!k.arg_values.empty() && k.arg_buffers.empty())
      fail_at(where, "arg_values", "arg_values needs arg_buffers (the buffers the kernel takes first)");
    refs(k.arg_buffers, where, "arg_buffers");
    refs(k.reads, where, "reads");
    refs(k.writes, where, "writes");
    // What a kernel writes is its own memory: never the caller's inputs or the plan's constants
    // (a generated kernel writes every buffer of `writes` it is handed).
    for (size_t j = 0; j < k.writes.size(); ++j) {
      const std::string& kind = buf(k.writes[j]).kind;
      if (kind == "input" || kind == "constant")
        fail_at(where, "writes[" + std::to_string(j) + "]",
                "the kernel writes buffer " + std::to_string(k.writes[j]) + (kind == "input" ? ", an" : ", a") + " " +
                    kind + " buffer");
    }
    if (k.gemm) gemm(*k.gemm, where + ".gemm");
    if (k.kind == "reference") reference(k, where);
    if (k.kind == "custom" && (!k.fixed_signature() || k.source.empty() || k.entry.empty()))
      fail_at(where, "", "a custom kernel (a custom op's own device kernel) needs a source, an entry and arg_buffers");
    if (k.convolution && k.kind != "convolution")
      fail_at(where, "convolution", "only convolution kernels convolve; this one is a " + k.kind + " kernel");
    if (k.kind == "convolution") {
      if (!k.convolution) fail_at(where, "", "missing field 'convolution' (what a convolution kernel computes)");
      convolution(*k.convolution, where + ".convolution");
    }
  }

  // What the runtime hands its library: x, w and y whole contiguous buffers of the dtype, whose
  // sizes are those of the op's shape rule for these attributes, and y apart from x and w.
  void convolution(const PlanConvolution& c, const std::string& where) const {
    ref(c.x, where, "x");
    ref(c.w, where, "w");
    ref(c.y, where, "y");
    if (c.x == c.w || c.x == c.y || c.w == c.y) fail_at(where, "", "x, w and y must be three different buffers");
    if (c.dtype != DType::f32 && c.dtype != DType::f16 && c.dtype != DType::bf16)
      fail_at(where, "dtype", "convolution kernels are f32, f16 or bf16, not " + std::string(dtype_name(c.dtype)));
    const char* fields[3] = {"x", "w", "y"};
    const int32_t ids[3] = {c.x, c.w, c.y};
    for (size_t j = 0; j < 3; ++j) {
      const PlanBuffer& b = buf(ids[j]);
      if (b.dtype != c.dtype)
        fail_at(where, fields[j], "the convolution is " + std::string(dtype_name(c.dtype)) + " but buffer " +
                                      std::to_string(b.id) + " is " + std::string(dtype_name(b.dtype)));
      SymInt expect = 1;
      for (size_t d = b.sizes.size(); d-- > 0;) {
        if (!(b.sizes[d] == 1) && (d >= b.strides.size() || !(b.strides[d] == expect)))
          fail_at(where, fields[j], "buffer " + std::to_string(b.id) + " is not contiguous (strides " + shape_str(b.strides) + ")");
        expect = expect * b.sizes[d];
      }
    }
    if (c.x_sizes.size() < 3 || c.x_sizes.size() > 5)
      fail_at(where, "x_sizes", "a convolution has 1 to 3 spatial dims, got rank " + std::to_string(c.x_sizes.size()));
    if (c.groups < 1) fail_at(where, "groups", "must be at least 1");
    if (!(buf(c.x).sizes == c.x_sizes))
      fail_at(where, "x_sizes", shape_str(c.x_sizes) + " are not the sizes of buffer " + std::to_string(c.x) + " " +
                                    shape_str(buf(c.x).sizes));
    if (!(buf(c.w).sizes == static_shape(c.w_sizes)))
      fail_at(where, "w_sizes", "are not the sizes of buffer " + std::to_string(c.w) + " " + shape_str(buf(c.w).sizes));
    // The buffer written (y, or a gradient's x or w) and the two read.
    const int32_t out = c.computes == ConvolutionComputes::x ? c.x : c.computes == ConvolutionComputes::w ? c.w : c.y;
    const std::string of(convolution_computes_name(c.computes));
    const std::string& yk = buf(out).kind;
    if (yk == "input" || yk == "constant")
      fail_at(where, of, "the convolution writes buffer " + std::to_string(out) + ", an " + yk + " buffer");
    for (int32_t b : {c.x, c.w, c.y})
      if (b != out && buf(b).slot >= 0 && buf(b).slot == buf(out).slot)
        fail_at(where, of, of + " shares memory with operand buffer " + std::to_string(b));
    const TensorMeta inferred = infer(c.channels_last ? OpId::convolution_channels_last : OpId::convolution, {c.x, c.w},
                                      Attrs{c.strides, c.pads, c.dilations, c.groups}, where);
    if (!(inferred.sizes == buf(c.y).sizes))
      fail_at(where, "y", "buffer " + std::to_string(c.y) + " has sizes " + shape_str(buf(c.y).sizes) + ", but the convolution gives " +
                              shape_str(inferred.sizes));
  }

  void gemm(const PlanGemm& g, const std::string& where) const {
    ref(g.a, where, "a");
    ref(g.b, where, "b");
    ref(g.c, where, "c");
    for (int32_t b : {g.a, g.b, g.c})
      if (buf(b).dtype != g.dtype)
        fail_at(where, "dtype", "the gemm is " + std::string(dtype_name(g.dtype)) + " but buffer " + std::to_string(b) + " is " +
                                    std::string(dtype_name(buf(b).dtype)));
    if (g.a_batch_strides.size() != g.batch.size() || g.b_batch_strides.size() != g.batch.size())
      fail_at(where, "batch", "needs one operand stride per batch dim (" + std::to_string(g.batch.size()) + ")");
    if (buf(g.c).kind == "input" || buf(g.c).kind == "constant")
      fail_at(where, "c", "the gemm writes buffer " + std::to_string(g.c) + ", an " + buf(g.c).kind + " buffer");
    if (g.epilogue.empty()) return;
    if (!gemm_epilogue_known(g.epilogue)) fail_at(where, "epilogue", "is \"bias\", \"gelu_bias\" or \"gelu\"");
    if (!gemm_epilogue_has_bias(g.epilogue)) {
      if (g.bias >= 0) fail_at(where, "bias", "is not given with epilogue \"" + g.epilogue + "\"");
      return;
    }
    ref(g.bias, where, "bias");
    if (buf(g.bias).dtype != g.dtype)
      fail_at(where, "bias", "the bias buffer must be of the gemm's dtype (" + std::string(dtype_name(g.dtype)) + ")");
  }

  // What the op's shape rule gives for these buffers' types and attributes (its error, if any,
  // at `where`).
  TensorMeta infer(OpId op, const std::vector<int32_t>& inputs, const Attrs& attrs, const std::string& where) const {
    Graph g;
    try {
      for (const SymbolInfo& s : p_.symbols) g.shapes().add_symbol(s);
      std::vector<NodeId> ins;
      for (int32_t b : inputs) {
        TensorMeta m;
        m.dtype = buf(b).dtype;
        m.sizes = buf(b).sizes;
        ins.push_back(g.add_input(std::move(m)));
      }
      return g.node(g.add(op, std::move(ins), attrs)).meta;
    } catch (const Error& e) {
      fail_at(where, "", e.what());
    }
  }

  // The op's shape rule on the input buffers' types must accept the attributes and give the
  // output buffer's type: what the reference interpreter will be asked to compute.
  void reference(const PlanKernel& k, const std::string& where) const {
    if (k.op == OpId::input) fail_at(where, "op", "a reference kernel cannot run 'input' (inputs are buffers)");
    const OpDef& def = op_def(k.op);
    const int given = static_cast<int>(std::min<size_t>(k.inputs.size(), 1u << 20));
    if (given < def.min_inputs || (def.max_inputs >= 0 && given > def.max_inputs)) {
      std::string want = def.max_inputs < 0 ? "at least " + std::to_string(def.min_inputs)
                         : def.min_inputs == def.max_inputs
                             ? std::to_string(def.min_inputs)
                             : std::to_string(def.min_inputs) + " to " + std::to_string(def.max_inputs);
      fail_at(where, "inputs", std::string(def.name) + " takes " + want + " input" + (want == "1" ? "" : "s") + ", got " +
                                   std::to_string(given));
    }
    refs(k.inputs, where, "inputs");
    ref(k.output, where, "output");
    const PlanBuffer& out = buf(k.output);
    if (out.kind == "input" || out.kind == "constant")
      fail_at(where, "output", "the kernel writes buffer " + std::to_string(k.output) + ", an " + out.kind + " buffer");
    const TensorMeta inferred = infer(k.op, k.inputs, k.attrs, where);
    if (inferred.dtype != out.dtype || !(inferred.sizes == out.sizes))
      fail_at(where, "output", "buffer " + std::to_string(k.output) + " is " + std::string(dtype_name(out.dtype)) +
                                   shape_str(out.sizes) + ", but " + std::string(op_name(k.op)) + " of the inputs gives " +
                                   std::string(dtype_name(inferred.dtype)) + shape_str(inferred.sizes));
  }
};

// s at the symbol values, nullopt when a product or sum overflows int64.
std::optional<int64_t> checked_evaluate(const SymInt& s, std::span<const int64_t> values) {
  if (s.is_static()) return s.hint();
  const SymExpr e = s.expr();  // a copy: terms() of the temporary would dangle
  int64_t total = 0;
  for (const SymTerm& t : e.terms()) {
    int64_t v = t.coeff;
    for (SymbolId id : t.symbols) {
      KILN_CHECK(id < values.size(), "size symbol s", id, " has no value bound");
      if (__builtin_mul_overflow(v, values[id], &v)) return std::nullopt;
    }
    if (__builtin_add_overflow(total, v, &total)) return std::nullopt;
  }
  return total;
}

// bind's arithmetic: every size evaluated and combined with overflow checks, every problem a
// kiln::Error naming the sizes it happened at. `what` makes the message's subject, only when
// there is a problem (bind runs on every call).
class Sizes {
 public:
  Sizes(std::string_view who, const std::vector<int64_t>& syms) : who_(who), syms_(syms) {}

  [[noreturn]] void fail_here(const std::string& what) const {
    std::string at;
    for (size_t i = 0; i < syms_.size(); ++i) at += (i ? ", s" : " (at s") + std::to_string(i) + " = " + std::to_string(syms_[i]);
    fail(who_, ": ", what, at.empty() ? "" : at + ")");
  }
  template <class What>
  int64_t eval(const SymInt& s, What&& what) const {
    const std::optional<int64_t> v = checked_evaluate(s, syms_);
    if (!v) fail_here(what() + " (" + s.str() + ") overflows 64-bit integers");
    return *v;
  }
  template <class What>
  int64_t mul(int64_t a, int64_t b, What&& what) const {
    int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) fail_here(what() + " overflows 64-bit integers");
    return r;
  }
  template <class What>
  int64_t add(int64_t a, int64_t b, What&& what) const {
    int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) fail_here(what() + " overflows 64-bit integers");
    return r;
  }
  template <class What>
  int64_t bytes(int64_t n, What&& what) const {
    if (n > kMaxBufferBytes) fail_here(what() + " needs " + std::to_string(n) + " bytes, more than a buffer may have (2^48)");
    return n;
  }
  // The element offsets a strided view reaches: [lo, hi] relative to its element 0; false when
  // it has no elements.
  template <class What>
  bool reach(std::span<const int64_t> sizes, std::span<const int64_t> strides, int64_t* lo, int64_t* hi, What&& what) const {
    *lo = *hi = 0;
    for (int64_t s : sizes)
      if (s == 0) return false;
    for (size_t d = 0; d < sizes.size(); ++d) {
      const int64_t e = mul(sizes[d] - 1, strides[d], what);
      if (e < 0) *lo = add(*lo, e, what);
      else *hi = add(*hi, e, what);
    }
    return true;
  }

 private:
  std::string who_;
  const std::vector<int64_t>& syms_;
};

std::string buffer_name(const PlanBuffer& b) {
  return "buffer " + std::to_string(b.id) + " (" + b.kind + " " + std::string(dtype_name(b.dtype)) + shape_str(b.sizes) + ")";
}

// A gemm's operands at these sizes: a (batch x m x k) and b (batch x k x n) as strided views,
// c (batch x m x n) contiguous from its buffer's start, the bias n elements; each inside the
// memory of its buffer (`holds`, in elements).
template <class Name>
void bind_gemm(const Sizes& z, const PlanGemm& g, Name&& kname, const std::vector<std::pair<int64_t, int64_t>>& holds) {
  auto what = [&] { return kname() + "'s gemm"; };
  const int64_t m = z.eval(g.m, what), n = z.eval(g.n, what), k = z.eval(g.k, what);
  if (m < 0 || n < 0 || k < 0)
    z.fail_here(what() + " has a negative size: m = " + std::to_string(m) + ", n = " + std::to_string(n) + ", k = " + std::to_string(k));
  std::vector<int64_t> batch;
  int64_t batches = 1;
  for (const SymInt& s : g.batch) {
    batch.push_back(z.eval(s, what));
    if (batch.back() < 0) z.fail_here(what() + " has a negative batch size " + std::to_string(batch.back()));
    batches = z.mul(batches, batch.back(), what);
  }
  if (m == 0 || n == 0 || batches == 0) return;  // nothing is read or written
  auto held = [&](int32_t b) {
    const auto [lo, hi] = holds[static_cast<size_t>(b)];
    return lo == 0 ? std::to_string(hi + 1) : "elements " + std::to_string(lo) + " to " + std::to_string(hi);
  };
  const int64_t c = z.mul(z.mul(batches, m, what), n, what);
  if (holds[static_cast<size_t>(g.c)].first > 0 || c - 1 > holds[static_cast<size_t>(g.c)].second)
    z.fail_here(what() + " writes " + std::to_string(c) + " elements of buffer " + std::to_string(g.c) + ", which holds " + held(g.c));
  if (g.bias >= 0 && (holds[static_cast<size_t>(g.bias)].first > 0 || n - 1 > holds[static_cast<size_t>(g.bias)].second))
    z.fail_here(what() + " reads " + std::to_string(n) + " bias elements of buffer " + std::to_string(g.bias) + ", which holds " +
                held(g.bias));
  auto operand = [&](const char* name, int32_t buffer, const SymInt& offset, const SymShape& batch_strides, int64_t rows,
                     int64_t cols, const SymInt& row_stride, const SymInt& col_stride) {
    std::vector<int64_t> shape = batch, st;
    for (const SymInt& s : batch_strides) st.push_back(z.eval(s, what));
    shape.insert(shape.end(), {rows, cols});
    st.insert(st.end(), {z.eval(row_stride, what), z.eval(col_stride, what)});
    int64_t lo = 0, hi = 0;
    if (!z.reach(shape, st, &lo, &hi, what)) return;
    const int64_t off = z.eval(offset, what);
    lo = z.add(lo, off, what);
    hi = z.add(hi, off, what);
    const auto [have_lo, have_hi] = holds[static_cast<size_t>(buffer)];
    if (lo < have_lo || hi > have_hi)
      z.fail_here(what() + " reads its " + name + " operand at elements " + std::to_string(lo) + " to " + std::to_string(hi) +
                  " of buffer " + std::to_string(buffer) + ", which holds " + held(buffer));
  };
  operand("a", g.a, g.a_offset, g.a_batch_strides, m, k, g.a_row_stride, g.a_col_stride);
  operand("b", g.b, g.b_offset, g.b_batch_strides, k, n, g.b_row_stride, g.b_col_stride);
}

}  // namespace

void validate(const KernelPlan& p, std::string_view who) { Validator(p, who).run(); }

std::vector<int32_t> input_buffers(const KernelPlan& p) {
  std::vector<int32_t> of;
  for (const PlanBuffer& b : p.buffers)
    if (b.kind == "input") {
      if (of.size() <= static_cast<size_t>(b.index)) of.resize(static_cast<size_t>(b.index) + 1, -1);
      of[static_cast<size_t>(b.index)] = b.id;
    }
  return of;
}

Binding bind(const KernelPlan& p, std::span<const TensorData> inputs, std::string_view who) {
  return Binder(p, std::string(who)).bind(inputs);
}

namespace {
// What one call allocates, slots and outputs, against the runtime's limit; a refusal names the
// largest allocation and the kernel (and its graph nodes) that writes it.
void check_memory_limit(const KernelPlan& p, const BoundSizes& z, const std::string& who, const MemoryLimit& limit) {
  // Each term is at most kMaxBufferBytes (2^48), so the sums stay far inside int64.
  int64_t slots = 0, outputs = 0;
  for (int64_t bytes : z.slot_bytes) slots += bytes;
  for (const PlanBuffer& b : p.buffers)
    if (b.kind == "output") outputs += z.buffer_bytes[static_cast<size_t>(b.id)];
  if (slots + outputs <= limit.bytes) return;
  // Over: name the largest allocation and what writes it.
  auto writer = [&](auto&& writes_it) {
    for (const PlanKernel& k : p.kernels) {
      const bool in = k.kind == "reference" ? writes_it(k.output)
                                            : std::any_of(k.writes.begin(), k.writes.end(), writes_it);
      if (!in) continue;
      std::string nodes;
      for (size_t i = 0; i < k.provenance.size() && i < 4; ++i) nodes += (i ? ", %" : "%") + std::to_string(k.provenance[i]);
      if (k.provenance.size() > 4) nodes += ", ...";
      return ", written by kernel '" + k.name + "'" + (nodes.empty() ? std::string() : " (nodes " + nodes + ")");
    }
    return std::string();
  };
  int64_t largest = -1;
  std::string what;
  for (size_t s = 0; s < z.slot_bytes.size(); ++s)
    if (z.slot_bytes[s] > largest) {
      largest = z.slot_bytes[s];
      what = "slot " + std::to_string(s) + " (intermediates" +
             writer([&](int32_t id) { return p.buffers[static_cast<size_t>(id)].kind == "intermediate" &&
                                             p.buffers[static_cast<size_t>(id)].slot == static_cast<int32_t>(s); }) +
             ")";
    }
  for (const PlanBuffer& b : p.buffers)
    if (b.kind == "output" && z.buffer_bytes[static_cast<size_t>(b.id)] > largest) {
      largest = z.buffer_bytes[static_cast<size_t>(b.id)];
      what = buffer_name(b) + writer([&](int32_t id) { return id == b.id; });
    }
  fail(who, ": a call at these sizes would allocate ", bytes_str(slots + outputs), " (intermediates ", bytes_str(slots),
       ", outputs ", bytes_str(outputs), "), more than ", limit.what, "; the largest is ", what, ", ",
       bytes_str(largest));
}
}  // namespace

Binding bind(const KernelPlan& p, std::span<const TensorData* const> inputs, std::string_view who) {
  return Binder(p, std::string(who)).bind(inputs);
}

MemoryLimit host_memory_limit() { return {memory_budget_bytes(), memory_budget_str()}; }

Binder::Binder(const KernelPlan& p, std::string who, std::function<MemoryLimit()> limit)
    : p_(&p),
      who_(std::move(who)),
      input_buffer_(plan::input_buffers(p)),
      written_whole_(p.buffers.size(), false),
      limit_(std::move(limit)) {
  for (const PlanKernel& k : p.kernels) {
    if (k.kind == "reference") {
      written_whole_[static_cast<size_t>(k.output)] = true;
    } else if (k.kind == "custom") {  // a custom op's own kernel reads its inputs and writes its output whole
      for (int32_t id : k.arg_buffers)
        if (id >= 0 && static_cast<size_t>(id) < written_whole_.size()) written_whole_[static_cast<size_t>(id)] = true;
    } else if (k.convolution) {  // read and written whole by the library
      for (int32_t id : {k.convolution->x, k.convolution->w, k.convolution->y}) written_whole_[static_cast<size_t>(id)] = true;
    }
  }
}

Binding Binder::bind(std::span<const TensorData> inputs) const {
  constexpr size_t kSmall = 16;
  const TensorData* small[kSmall];
  std::vector<const TensorData*> many;
  const TensorData** ptrs = small;
  if (inputs.size() > kSmall) {
    many.resize(inputs.size());
    ptrs = many.data();
  }
  for (size_t k = 0; k < inputs.size(); ++k) ptrs[k] = &inputs[k];
  return bind(std::span<const TensorData* const>(ptrs, inputs.size()));
}

Binding Binder::bind(std::span<const TensorData* const> inputs) const {
  const KernelPlan& p = *p_;
  const std::string& who = who_;
  KILN_CHECK(inputs.size() == input_buffer_.size(), who, ": the plan takes ", input_buffer_.size(), " inputs, got ", inputs.size());
  // Symbols first, then every input against the plan's sizes at them.
  std::vector<int64_t> syms(p.symbols.size(), 0);
  for (const SymbolBinding& b : p.bindings) {
    const TensorData& t = *inputs[static_cast<size_t>(b.input)];
    KILN_CHECK(b.dim < t.rank(), who, ": input ", b.input, " has rank ", t.rank(), ", but the plan reads dim ", b.dim, " of it");
    syms[b.symbol] = t.sizes[static_cast<size_t>(b.dim)];
  }
  for (const SymbolInfo& s : p.symbols)
    KILN_CHECK(syms[s.id] >= s.min && syms[s.id] <= s.max, who, ": size s", s.id, " = ", syms[s.id], " (", s.source,
               ") is outside the plan's range [", s.min, ", ", s.max, "]");
  Binding r;
  r.at = sizes_at(std::move(syms));
  const BoundSizes& z = *r.at;
  r.copy_input.assign(inputs.size(), false);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const PlanBuffer& b = p.buffers[static_cast<size_t>(input_buffer_[k])];
    const TensorData& t = *inputs[k];
    const size_t id = static_cast<size_t>(b.id), rank = b.sizes.size();
    const int64_t* want = z.sizes.data() + z.first[id];
    const int64_t* stride = z.strides.data() + z.first[id];
    KILN_CHECK(t.dtype == b.dtype, who, ": input ", k, " has dtype ", dtype_name(t.dtype), ", the plan expects ", dtype_name(b.dtype));
    KILN_CHECK(t.rank() == static_cast<int64_t>(rank), who, ": input ", k, " has rank ", t.rank(), ", the plan expects ", rank);
    for (size_t d = 0; d < rank; ++d)
      KILN_CHECK(t.sizes[d] == want[d], who, ": input ", k, " has sizes ", ints_str(t.sizes), ", but the plan needs ", want[d],
                 " at dim ", d, " (", b.sizes[d].str(), ")");
    bool strides_ok = true;
    for (size_t d = 0; d < rank && strides_ok; ++d) strides_ok = t.sizes[d] == 1 || t.strides[d] == stride[d];
    if (!strides_ok) {
      KILN_CHECK(b.strides == contiguous_strides(b.sizes), who, ": input ", k, " has strides ", ints_str(t.strides),
                 ", the plan was made for other strides");
      r.copy_input[k] = true;
    }
  }
  return r;
}

// The sizes at these symbol values: the last ones computed when they match (a call at the sizes
// of the one before, the common case), else evaluated and checked now.
std::shared_ptr<const BoundSizes> Binder::sizes_at(std::vector<int64_t> symbols) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (last_ && last_->symbols == symbols) return last_;
  }
  const KernelPlan& p = *p_;
  auto r = std::make_shared<BoundSizes>();
  r->symbols = std::move(symbols);
  const Sizes z(who_, r->symbols);
  // The shape facts the plan was made under (its kernels assume them: a broadcast dim equal to
  // another, a reshape's product), checked here so that no caller can skip them.
  for (const ShapeFact& f : p.facts) {
    if (!f.holds(r->symbols))
      z.fail_here("the sizes break the plan's shape fact " + f.str() + (f.reason.empty() ? "" : " (from " + f.reason + ")") +
                  ": " + std::to_string(f.lhs.evaluate(r->symbols)) + " " + relation_str(negation(f.relation)) + " " +
                  std::to_string(f.rhs.evaluate(r->symbols)));
  }
  // Every buffer's sizes and strides at these symbols, buffer after buffer in one array each.
  std::vector<int64_t>& all_sizes = r->sizes;
  std::vector<int64_t>& all_strides = r->strides;
  std::vector<size_t>& first = r->first;
  first.assign(p.buffers.size() + 1, 0);
  for (const PlanBuffer& b : p.buffers) {
    for (size_t d = 0; d < b.sizes.size(); ++d) {
      auto what = [&] { return buffer_name(b) + " dim " + std::to_string(d); };
      all_sizes.push_back(z.eval(b.sizes[d], what));
      all_strides.push_back(z.eval(b.strides[d], what));
      if (all_sizes.back() < 0) z.fail_here(what() + " has size " + std::to_string(all_sizes.back()));
    }
    first[static_cast<size_t>(b.id) + 1] = all_sizes.size();
  }
  auto sizes = [&](size_t id) { return std::span<const int64_t>(all_sizes).subspan(first[id], first[id + 1] - first[id]); };
  auto strides = [&](size_t id) { return std::span<const int64_t>(all_strides).subspan(first[id], first[id + 1] - first[id]); };
  // Slots, then the bytes each buffer reaches (its extent; the whole of it for outputs and what
  // reference kernels write, contiguously) against what its memory holds.
  for (size_t s = 0; s < p.slots.size(); ++s) {
    auto what = [&] { return "slot " + std::to_string(s); };
    const int64_t n = z.eval(p.slots[s], what);
    if (n < 0) z.fail_here(what() + " has a negative size, " + std::to_string(n) + " bytes");
    r->slot_bytes.push_back(z.bytes(n, what));
  }
  std::vector<std::pair<int64_t, int64_t>> holds(p.buffers.size());  // the elements each buffer's memory holds
  r->buffer_bytes.assign(p.buffers.size(), 0);
  for (const PlanBuffer& b : p.buffers) {
    const size_t id = static_cast<size_t>(b.id);
    auto what = [&] { return buffer_name(b); };
    const int64_t es = dtype_size(b.dtype);
    int64_t numel = 1;
    for (int64_t s : sizes(id)) numel = z.mul(numel, s, what);
    int64_t lo = 0, hi = 0;
    const bool any = z.reach(sizes(id), strides(id), &lo, &hi, what);
    // Element 0 is where the buffer starts, except for an input (the caller's tensor, which may be
    // a view with negative strides that reaches below its element 0).
    if (lo < 0 && b.kind != "input")
      z.fail_here(what() + " has negative strides " + ints_str(strides(id)) + ": it reaches before its first element");
    const int64_t extent = any ? z.add(z.add(hi, 1, what), -lo, what) : 0;  // elements from the lowest to one past the highest
    int64_t need = z.bytes(z.mul(extent, es, what), what);
    if (b.kind == "output" || written_whole_[id]) need = std::max(need, z.bytes(z.mul(numel, es, what), what));
    int64_t have = need;  // inputs: the input itself, or its contiguous copy, holds its extent; outputs get what they need
    if (b.kind == "constant") have = static_cast<int64_t>(b.data->bytes.size());
    if (b.kind == "intermediate") have = r->slot_bytes[static_cast<size_t>(b.slot)];
    if (need > have)
      z.fail_here(what() + " reaches " + std::to_string(need) + " bytes, but " +
                  (b.kind == "intermediate" ? "its slot " + std::to_string(b.slot) + " holds " : "its data holds ") +
                  std::to_string(have));
    r->buffer_bytes[id] = need;
    holds[id] = {lo, lo + have / es - 1};
  }
  if (limit_) check_memory_limit(p, *r, who_, limit_());
  // Kernels: extents, and every gemm's operands inside their buffers.
  for (size_t ki = 0; ki < p.kernels.size(); ++ki) {
    const PlanKernel& k = p.kernels[ki];
    auto kname = [&] { return "kernel " + std::to_string(ki) + " (" + k.name + ")"; };
    const int64_t extent = z.eval(k.parallel_extent, [&] { return kname() + "'s parallel extent"; });
    if (extent < 0) z.fail_here(kname() + " has a negative parallel extent, " + std::to_string(extent));
    r->extents.push_back(extent);
    if (k.gemm) bind_gemm(z, *k.gemm, kname, holds);
  }
  std::lock_guard<std::mutex> lock(mu_);
  last_ = r;
  return r;
}

void finish_outputs(const KernelPlan& p, std::vector<TensorData>& outs,
                    const std::function<TensorData(const TensorData&)>& to_host, std::string_view who) {
  if (p.checks.empty()) return;
  KILN_INTERNAL_CHECK(outs.size() == p.outputs.size(), who, ": ", outs.size(), " outputs for a plan of ", p.outputs.size());
  const size_t first = outs.size() - p.checks.size();
  for (size_t c = 0; c < p.checks.size(); ++c) {
    const TensorData count = to_host(outs[first + c]);
    int64_t n = 0;
    std::memcpy(&n, count.data(), sizeof n);
    if (n != 0) fail(who, ": ", p.checks[c], " (", n, n == 1 ? " of them)" : " of them)");
  }
  outs.resize(first);
}

}  // namespace kiln::plan
