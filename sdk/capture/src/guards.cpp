#include "kiln/capture/guards.h"

#include <bit>
#include <sstream>

#include "kiln/capture/autocast.h"
#include "kiln/capture/grad_mode.h"
#include "kiln/config/config.h"
#include "kiln/graph/error.h"

namespace kiln {

namespace {
int64_t device_code(Device d) { return static_cast<int64_t>(d.type) * 256 + d.index; }
Device device_of_code(int64_t c) { return Device{static_cast<DeviceType>(c / 256), static_cast<int>(c % 256)}; }
int64_t autocast_code() {
  const std::optional<DType> t = autocast_dtype();
  return t ? static_cast<int64_t>(*t) : -1;
}
std::string autocast_state(int64_t code) {
  return code < 0 ? "without autocast" : "under autocast(" + std::string(dtype_name(static_cast<DType>(code))) + ")";
}
const char* kind_name(ArgView::Kind k) {
  switch (k) {
    case ArgView::Kind::tensor: return "a tensor";
    case ArgView::Kind::int_: return "an integer";
    case ArgView::Kind::double_: return "a double";
    case ArgView::Kind::bool_: return "a bool";
  }
  return "?";
}
}  // namespace

GuardSet GuardSet::build(const Graph& graph, std::span<const ArgView> args,
                         std::span<const int32_t> tensor_arg_of_input, std::vector<std::string> arg_names,
                         uint64_t config_hash) {
  GuardSet set;
  set.arg_names_ = std::move(arg_names);
  set.num_symbols_ = graph.shapes().symbols().size();
  auto add = [&](Guard g) { set.guards_.push_back(std::move(g)); };
  for (size_t a = 0; a < args.size(); ++a) {
    const auto arg = static_cast<int32_t>(a);
    add({.kind = GuardKind::arg_kind, .arg = arg, .value = static_cast<int64_t>(args[a].kind)});
    switch (args[a].kind) {
      case ArgView::Kind::int_: add({.kind = GuardKind::int_eq, .arg = arg, .value = args[a].i}); break;
      case ArgView::Kind::double_: add({.kind = GuardKind::double_eq, .arg = arg, .dvalue = args[a].d}); break;
      case ArgView::Kind::bool_: add({.kind = GuardKind::bool_eq, .arg = arg, .value = args[a].b}); break;
      case ArgView::Kind::tensor: break;
    }
  }
  // Tensor guards come from the graph's input metas: what the trace assumed.
  std::vector<char> bound(set.num_symbols_, 0);
  for (size_t k = 0; k < graph.inputs().size(); ++k) {
    const TensorMeta& m = graph.node(graph.inputs()[k]).meta;
    const int32_t arg = tensor_arg_of_input[k];
    add({.kind = GuardKind::dtype, .arg = arg, .value = static_cast<int64_t>(m.dtype)});
    add({.kind = GuardKind::device, .arg = arg, .value = device_code(m.device)});
    add({.kind = GuardKind::rank, .arg = arg, .value = m.rank()});
    for (int32_t d = 0; d < m.rank(); ++d) {
      const SymInt& s = m.sizes[static_cast<size_t>(d)];
      if (s.is_static()) {
        add({.kind = GuardKind::size_eq, .arg = arg, .dim = d, .value = s.hint()});
        continue;
      }
      const SymExpr e = s.expr();
      KILN_CHECK(e.terms().size() == 1 && e.terms()[0].coeff == 1 && e.terms()[0].symbols.size() == 1,
                 "input ", k, " has a size expression ", e.str(), " where a plain symbol was expected");
      const SymbolInfo& info = graph.shapes().symbol(e.terms()[0].symbols[0]);
      add({.kind = GuardKind::size_symbol, .arg = arg, .dim = d, .symbol = info.id, .value = info.min, .max = info.max});
      bound[info.id] = 1;
    }
    if (m.is_contiguous()) {
      add({.kind = GuardKind::contiguous, .arg = arg});
    } else {
      for (int32_t d = 0; d < m.rank(); ++d) {
        const SymInt& st = m.strides[static_cast<size_t>(d)];
        // Strides of non-contiguous inputs are specialised: the trace saw these.
        add({.kind = GuardKind::stride_eq, .arg = arg, .dim = d, .value = st.hint()});
      }
    }
  }
  for (const ShapeFact& f : graph.shapes().facts())
    add({.kind = GuardKind::fact, .lhs = f.lhs, .rhs = f.rhs, .relation = f.relation, .reason = f.reason});
  add({.kind = GuardKind::config, .value = static_cast<int64_t>(config_hash)});
  // The trace inserted autocast's casts (or none) for the state it ran under.
  add({.kind = GuardKind::autocast, .value = autocast_code()});
  // It recorded autograd steps (or none) for the grad mode it ran under.
  add({.kind = GuardKind::grad_mode, .value = grad_enabled() ? 1 : 0});
  return set;
}

// The hot loop. Each case is a couple of loads and a compare.
bool GuardSet::check(std::span<const ArgView> args, int64_t* symbols) const {
  for (const Guard& g : guards_) {
    const ArgView* a = g.arg >= 0 ? &args[static_cast<size_t>(g.arg)] : nullptr;
    switch (g.kind) {
      case GuardKind::arg_kind:
        if (static_cast<int64_t>(a->kind) != g.value) return false;
        break;
      case GuardKind::dtype:
        if (static_cast<int64_t>(a->tensor->dtype) != g.value) return false;
        break;
      case GuardKind::device:
        if (device_code(a->tensor->device()) != g.value) return false;
        break;
      case GuardKind::rank:
        if (a->tensor->rank() != g.value) return false;
        break;
      case GuardKind::size_eq:
        if (a->tensor->sizes[static_cast<size_t>(g.dim)] != g.value) return false;
        break;
      case GuardKind::size_symbol: {
        const int64_t v = a->tensor->sizes[static_cast<size_t>(g.dim)];
        if (v < g.value || v > g.max) return false;
        symbols[g.symbol] = v;  // each symbol comes from exactly one input dim
        break;
      }
      case GuardKind::contiguous:
        if (!a->tensor->is_contiguous()) return false;
        break;
      case GuardKind::stride_eq:
        if (a->tensor->strides[static_cast<size_t>(g.dim)] != g.value) return false;
        break;
      case GuardKind::int_eq:
        if (a->i != g.value) return false;
        break;
      case GuardKind::double_eq:
        if (std::bit_cast<uint64_t>(a->d) != std::bit_cast<uint64_t>(g.dvalue)) return false;
        break;
      case GuardKind::bool_eq:
        if (a->b != (g.value != 0)) return false;
        break;
      case GuardKind::fact: {
        const std::span<const int64_t> bound(symbols, num_symbols_);
        if (!relation_holds(g.relation, g.lhs.evaluate(bound), g.rhs.evaluate(bound))) return false;
        break;
      }
      case GuardKind::config:
        if (static_cast<int64_t>(config::codegen_hash()) != g.value) return false;
        break;
      case GuardKind::autocast:
        if (autocast_code() != g.value) return false;
        break;
      case GuardKind::grad_mode:
        if ((grad_enabled() ? 1 : 0) != g.value) return false;
        break;
    }
  }
  return true;
}

int GuardSet::first_failure(std::span<const ArgView> args) const {
  // Each input dim has its own symbol, so checking guards one at a time in order is
  // the same as checking them all; relations between symbols are facts.
  std::vector<int64_t> symbols(num_symbols_ + 1, 0);
  GuardSet one;
  one.num_symbols_ = num_symbols_;
  one.guards_.resize(1);
  for (size_t i = 0; i < guards_.size(); ++i) {
    one.guards_[0] = guards_[i];
    if (!one.check(args, symbols.data())) return static_cast<int>(i);
  }
  return -1;
}

std::optional<std::string> GuardSet::failure(std::span<const ArgView> args) const {
  const int i = first_failure(args);
  if (i < 0) return std::nullopt;
  std::vector<int64_t> symbols(num_symbols_ + 1, 0);
  // Rebind the symbols the earlier guards saw, for messages about facts.
  GuardSet prefix;
  prefix.num_symbols_ = num_symbols_;
  prefix.guards_.assign(guards_.begin(), guards_.begin() + i);
  prefix.check(args, symbols.data());
  return explain(guards_[static_cast<size_t>(i)], args, symbols.data());
}

std::string GuardSet::arg_label(int32_t arg) const {
  std::string s = "input " + std::to_string(arg);
  if (arg >= 0 && static_cast<size_t>(arg) < arg_names_.size() && !arg_names_[static_cast<size_t>(arg)].empty())
    s += " (" + arg_names_[static_cast<size_t>(arg)] + ")";
  return s;
}

std::string GuardSet::explain(const Guard& g, std::span<const ArgView> args, const int64_t* symbols) const {
  const ArgView* a = g.arg >= 0 ? &args[static_cast<size_t>(g.arg)] : nullptr;
  const std::string who = arg_label(g.arg);
  std::ostringstream out;
  switch (g.kind) {
    case GuardKind::arg_kind:
      out << who << ": expected " << kind_name(static_cast<ArgView::Kind>(g.value)) << ", got " << kind_name(a->kind);
      break;
    case GuardKind::dtype:
      out << who << ": dtype mismatch: expected " << dtype_name(static_cast<DType>(g.value)) << ", got "
          << dtype_name(a->tensor->dtype);
      break;
    case GuardKind::device:
      out << who << ": device mismatch: expected " << device_of_code(g.value).str() << ", got "
          << a->tensor->device().str();
      break;
    case GuardKind::rank:
      out << who << ": rank mismatch: expected " << g.value << ", got " << a->tensor->rank();
      break;
    case GuardKind::size_eq:
      out << who << ": size mismatch at dim " << g.dim << ": expected " << g.value << ", got "
          << a->tensor->sizes[static_cast<size_t>(g.dim)];
      break;
    case GuardKind::size_symbol: {
      const int64_t v = a->tensor->sizes[static_cast<size_t>(g.dim)];
      if (v < g.value || v > g.max)
        out << who << ": size at dim " << g.dim << " is " << v << ", outside the range [" << g.value << ", " << g.max
            << "] of its dynamic size s" << g.symbol;
      else
        out << who << ": size at dim " << g.dim << " is " << v << ", but dynamic size s" << g.symbol
            << " was already bound to " << symbols[g.symbol] << " by an earlier input";
      break;
    }
    case GuardKind::contiguous:
      out << who << ": expected a contiguous tensor, got strides " << shape_str(static_shape(a->tensor->strides));
      break;
    case GuardKind::stride_eq:
      out << who << ": stride mismatch at dim " << g.dim << ": expected " << g.value << ", got "
          << a->tensor->strides[static_cast<size_t>(g.dim)];
      break;
    case GuardKind::int_eq:
      out << who << ": value mismatch: expected " << g.value << ", got " << a->i;
      break;
    case GuardKind::double_eq:
      out << who << ": value mismatch: expected " << g.dvalue << ", got " << a->d;
      break;
    case GuardKind::bool_eq:
      out << who << ": value mismatch: expected " << (g.value ? "true" : "false") << ", got "
          << (a->b ? "true" : "false");
      break;
    case GuardKind::fact: {
      const std::span<const int64_t> bound(symbols, num_symbols_);
      out << "shape relation " << g.lhs.str() << " " << relation_str(g.relation) << " " << g.rhs.str() << " no longer holds ("
          << g.lhs.evaluate(bound) << " vs " << g.rhs.evaluate(bound)
          << (g.reason.empty() ? "" : "; needed by " + g.reason) << ")";
      break;
    }
    case GuardKind::config:
      out << "config options that affect code generation changed since this graph was compiled";
      break;
    case GuardKind::autocast:
      out << "autocast changed: traced " << autocast_state(g.value) << ", called " << autocast_state(autocast_code());
      break;
    case GuardKind::grad_mode:
      out << "grad mode changed: traced with recording " << (g.value ? "on" : "off (kiln::NoGrad)") << ", called with it "
          << (grad_enabled() ? "on" : "off (kiln::NoGrad)");
      break;
  }
  return out.str();
}

std::string GuardSet::describe(const Guard& g) const {
  const std::string who = arg_label(g.arg);
  std::ostringstream out;
  switch (g.kind) {
    case GuardKind::arg_kind: out << who << " is " << kind_name(static_cast<ArgView::Kind>(g.value)); break;
    case GuardKind::dtype: out << who << " dtype == " << dtype_name(static_cast<DType>(g.value)); break;
    case GuardKind::device: out << who << " device == " << device_of_code(g.value).str(); break;
    case GuardKind::rank: out << who << " rank == " << g.value; break;
    case GuardKind::size_eq: out << who << " size[" << g.dim << "] == " << g.value; break;
    case GuardKind::size_symbol:
      out << who << " size[" << g.dim << "] == s" << g.symbol << " in [" << g.value << ", " << g.max << "]";
      break;
    case GuardKind::contiguous: out << who << " is contiguous"; break;
    case GuardKind::stride_eq: out << who << " stride[" << g.dim << "] == " << g.value; break;
    case GuardKind::int_eq: out << who << " == " << g.value; break;
    case GuardKind::double_eq: out << who << " == " << g.dvalue; break;
    case GuardKind::bool_eq: out << who << " == " << (g.value ? "true" : "false"); break;
    case GuardKind::fact: out << g.lhs.str() << " " << relation_str(g.relation) << " " << g.rhs.str(); break;
    case GuardKind::config: out << "codegen config hash == " << std::hex << static_cast<uint64_t>(g.value); break;
    case GuardKind::autocast: out << "autocast == " << (g.value < 0 ? "none" : dtype_name(static_cast<DType>(g.value))); break;
    case GuardKind::grad_mode: out << "grad mode == " << (g.value ? "on" : "off"); break;
  }
  return out.str();
}

std::string GuardSet::str() const {
  std::string s;
  for (const Guard& g : guards_) s += describe(g) + "\n";
  return s;
}

}  // namespace kiln
