// kiln::compile: wraps a function over Tensors so that its first call traces it into a
// Graph, compiles it with a backend and caches it behind guards; later calls whose
// arguments pass the guards run the compiled entry without running the function.
// Arguments: Tensors and scalars (int64_t, double, bool; guarded by value), and pytrees of
// them: std::vector, std::array, std::tuple, std::pair, std::optional, std::map with string
// keys, and user structs registered with KILN_PYTREE (a model's parameters pass as inputs,
// never baked into the graph). A container's length, a map's keys and an optional's presence
// are guarded like scalars. Results: a Tensor, or any pytree of Tensors and scalars (a struct of
// Tensors, a tuple, a vector, ...): its Tensors are the graph's outputs, and the rest of it (a
// vector's length, a scalar member) is what the trace returned, kept with the compiled entry.
// Graph breaks (item(), to_vector(), bool(tensor), graph_break()) split the function into
// segments; with fullgraph = true they are errors naming the op and the caller's line.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/capture/capture.h"
#include "kiln/tensor.h"

namespace kiln {

namespace detail {

using Outputs = std::vector<Tensor>;

// A non-owning reference to a callable, so the hot path allocates nothing.
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  template <class F>
  FunctionRef(F& f) : obj_(&f), call_([](void* o, A... a) -> R { return (*static_cast<F*>(o))(a...); }) {}  // NOLINT
  R operator()(A... a) const { return call_(obj_, a...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

template <class T>
struct is_tensor_tuple : std::false_type {};
template <class... T>
struct is_tensor_tuple<std::tuple<T...>> : std::bool_constant<(std::is_same_v<T, Tensor> && ...)> {};
template <class A, class B>
struct is_tensor_tuple<std::pair<A, B>> : std::bool_constant<std::is_same_v<A, Tensor> && std::is_same_v<B, Tensor>> {};

}  // namespace detail

// A user struct as a pytree node: `members` lists the pointers to its members that hold Tensors,
// scalars or other pytrees, in the order they are traced. KILN_PYTREE(Type, &Type::a, &Type::b)
// (at global scope) defines it; the struct must be copyable.
template <class T>
struct Pytree;

#define KILN_PYTREE(Type, ...)                                       \
  template <>                                                        \
  struct kiln::Pytree<Type> {                                        \
    static constexpr auto members = std::make_tuple(__VA_ARGS__);    \
    static constexpr std::string_view member_list = #__VA_ARGS__;   \
  }

namespace detail {

template <class T>
struct is_std_vector : std::false_type {};
template <class T, class Alloc>
struct is_std_vector<std::vector<T, Alloc>> : std::true_type {};
template <class T>
struct is_std_array : std::false_type {};
template <class T, size_t N>
struct is_std_array<std::array<T, N>> : std::true_type {};
template <class T>
struct is_tuple_like : std::false_type {};
template <class... T>
struct is_tuple_like<std::tuple<T...>> : std::true_type {};
template <class A, class B>
struct is_tuple_like<std::pair<A, B>> : std::true_type {};
template <class T>
struct is_std_optional : std::false_type {};
template <class T>
struct is_std_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_string_map : std::false_type {};
template <class V, class Cmp, class Alloc>
struct is_string_map<std::map<std::string, V, Cmp, Alloc>> : std::true_type {};
template <class T>
concept registered_pytree = requires { Pytree<T>::members; };

// A Tensor or a scalar: one argument of the compiled core.
template <class A>
inline constexpr bool is_leaf = std::is_same_v<A, Tensor> || std::is_arithmetic_v<A>;

// The leaves of a pytree argument, in order, as the compiled core sees them: each Tensor and
// scalar, and before a container's elements an integer leaf for what shapes it (a vector's
// length, a map's keys, an optional's presence), which the guards compare like any scalar.
struct Leaves {
  std::vector<ArgView> views;
  std::vector<const std::vector<DimMark>*> marks;
};
// FNV-1a over each key's length and bytes, one key at a time from kMapKeysHashStart.
inline constexpr uint64_t kMapKeysHashStart = 1469598103934665603ull;
uint64_t map_keys_hash(uint64_t h, std::string_view key);

template <class A>
ArgView arg_view(const A& a);
template <class A>
const std::vector<DimMark>* arg_marks(const A& a);

template <class A>
void collect_leaves(const A& a, Leaves& out) {
  auto shape_leaf = [&out](int64_t v) {
    out.views.push_back(ArgView{.kind = ArgView::Kind::int_, .i = v});
    out.marks.push_back(nullptr);
  };
  if constexpr (is_leaf<A>) {
    out.views.push_back(arg_view(a));
    out.marks.push_back(arg_marks(a));
  } else if constexpr (is_std_vector<A>::value) {
    shape_leaf(static_cast<int64_t>(a.size()));
    for (const auto& x : a) collect_leaves(x, out);
  } else if constexpr (is_std_array<A>::value) {
    for (const auto& x : a) collect_leaves(x, out);
  } else if constexpr (is_tuple_like<A>::value) {
    std::apply([&](const auto&... x) { (collect_leaves(x, out), ...); }, a);
  } else if constexpr (is_std_optional<A>::value) {
    shape_leaf(a.has_value() ? 1 : 0);
    if (a) collect_leaves(*a, out);
  } else if constexpr (is_string_map<A>::value) {
    uint64_t h = kMapKeysHashStart;
    for (const auto& [k, v] : a) h = map_keys_hash(h, k);
    shape_leaf(static_cast<int64_t>(h));
    for (const auto& [k, v] : a) collect_leaves(v, out);
  } else if constexpr (registered_pytree<A>) {
    std::apply([&](auto... m) { (collect_leaves(a.*m, out), ...); }, Pytree<A>::members);
  } else {
    static_assert(sizeof(A) == 0,
                  "compiled functions take Tensors, scalars (int64_t, double, bool) and pytrees of them "
                  "(std::vector, std::array, std::tuple, std::pair, std::optional, std::map<std::string, T>, "
                  "structs registered with KILN_PYTREE)");
  }
}

// The name of member i in a KILN_PYTREE list ("&State::h, &State::c", 1 -> "c").
std::string pytree_member_name(std::string_view member_list, size_t i);

// The path of each leaf of `a` from `path` (what collect_leaves gives, in its order), for guard
// messages: "xs[1]", "params[\"w\"]", "state.h", "opt.value()"; the leaves that shape a container
// read "len(xs)", "keys(params)", "has_value(opt)". Only a trace calls it.
template <class A>
void leaf_paths(const A& a, const std::string& path, std::vector<std::string>& out) {
  if constexpr (is_leaf<A>) {
    out.push_back(path);
  } else if constexpr (is_std_vector<A>::value || is_std_array<A>::value) {
    if constexpr (is_std_vector<A>::value) out.push_back("len(" + path + ")");
    for (size_t i = 0; i < a.size(); ++i) leaf_paths(a[i], path + "[" + std::to_string(i) + "]", out);
  } else if constexpr (is_tuple_like<A>::value) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      (leaf_paths(std::get<I>(a), path + "[" + std::to_string(I) + "]", out), ...);
    }(std::make_index_sequence<std::tuple_size_v<A>>{});
  } else if constexpr (is_std_optional<A>::value) {
    out.push_back("has_value(" + path + ")");
    if (a) leaf_paths(*a, path + ".value()", out);
  } else if constexpr (is_string_map<A>::value) {
    out.push_back("keys(" + path + ")");
    for (const auto& [k, v] : a) leaf_paths(v, path + "[\"" + k + "\"]", out);
  } else if constexpr (registered_pytree<A>) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      auto member = [&](size_t i) {
        if constexpr (requires { Pytree<A>::member_list; }) return path + "." + pytree_member_name(Pytree<A>::member_list, i);
        else return path + "." + std::to_string(i);
      };
      (leaf_paths(a.*std::get<I>(Pytree<A>::members), member(I), out), ...);
    }(std::make_index_sequence<std::tuple_size_v<std::decay_t<decltype(Pytree<A>::members)>>>{});
  }
}

// `a` with each Tensor leaf replaced by the next of `traced` (the traced inputs, by leaf).
template <class A>
A rebuild_pytree(const A& a, const std::vector<Tensor>& traced, size_t& next) {
  if constexpr (std::is_same_v<A, Tensor>) {
    return traced[next++];
  } else if constexpr (is_leaf<A>) {
    ++next;
    return a;
  } else if constexpr (is_std_vector<A>::value) {
    ++next;
    A out;
    out.reserve(a.size());
    for (const auto& x : a) out.push_back(rebuild_pytree(x, traced, next));
    return out;
  } else if constexpr (is_std_array<A>::value) {
    A out = a;
    for (auto& x : out) x = rebuild_pytree(x, traced, next);
    return out;
  } else if constexpr (is_tuple_like<A>::value) {
    // Braced initialisation evaluates its elements in order.
    return std::apply([&](const auto&... x) { return A{rebuild_pytree(x, traced, next)...}; }, a);
  } else if constexpr (is_std_optional<A>::value) {
    ++next;
    return a ? A(rebuild_pytree(*a, traced, next)) : A();
  } else if constexpr (is_string_map<A>::value) {
    ++next;
    A out;
    for (const auto& [k, v] : a) out.emplace_hint(out.end(), k, rebuild_pytree(v, traced, next));
    return out;
  } else {
    A out = a;
    std::apply([&](auto... m) { ((out.*m = rebuild_pytree(a.*m, traced, next)), ...); }, Pytree<A>::members);
    return out;
  }
}

template <class A>
ArgView arg_view(const A& a) {
  if constexpr (std::is_same_v<A, Tensor>) {
    ArgView v;
    v.kind = ArgView::Kind::tensor;
    v.tensor = a.is_traced() ? nullptr : &a.data();
    v.requires_grad = a.requires_grad();
    if (v.requires_grad) v.grad_owner = a.impl();
    return v;
  } else if constexpr (std::is_same_v<A, bool>) {
    return ArgView{.kind = ArgView::Kind::bool_, .b = a};
  } else if constexpr (std::is_integral_v<A>) {
    return ArgView{.kind = ArgView::Kind::int_, .i = static_cast<int64_t>(a)};
  } else if constexpr (std::is_floating_point_v<A>) {
    return ArgView{.kind = ArgView::Kind::double_, .d = static_cast<double>(a)};
  } else {
    static_assert(sizeof(A) == 0, "compiled functions take Tensors and scalars (int64_t, double, bool)");
  }
}

template <class A>
const std::vector<DimMark>* arg_marks(const A& a) {
  if constexpr (std::is_same_v<A, Tensor>) return a.defined() ? &a.impl()->marks : nullptr;
  else return nullptr;
}

template <class A>
const A& pick(const A& a, const Outputs& traced, size_t index) {
  if constexpr (std::is_same_v<A, Tensor>) return traced[index];
  else return a;
}

// Results. The Tensor leaves of a result pytree, in order.
template <class A>
void result_tensors(const A& a, Outputs& out) {
  if constexpr (std::is_same_v<A, Tensor>) {
    out.push_back(a);
  } else if constexpr (is_leaf<A> || std::is_same_v<A, std::string>) {
  } else if constexpr (is_std_vector<A>::value || is_std_array<A>::value) {
    for (const auto& x : a) result_tensors(x, out);
  } else if constexpr (is_tuple_like<A>::value) {
    std::apply([&](const auto&... x) { (result_tensors(x, out), ...); }, a);
  } else if constexpr (is_std_optional<A>::value) {
    if (a) result_tensors(*a, out);
  } else if constexpr (is_string_map<A>::value) {
    for (const auto& [k, v] : a) result_tensors(v, out);
  } else if constexpr (registered_pytree<A>) {
    std::apply([&](auto... m) { (result_tensors(a.*m, out), ...); }, Pytree<A>::members);
  } else {
    static_assert(sizeof(A) == 0,
                  "a compiled function returns a Tensor or a pytree of Tensors and scalars (std::vector, "
                  "std::array, std::tuple, std::pair, std::optional, std::map<std::string, T>, structs "
                  "registered with KILN_PYTREE)");
  }
}

// Each Tensor leaf of `a` in turn set to outputs[next++] (an undefined Tensor: cleared).
template <class A>
void fill_result(A& a, Outputs* outputs, size_t& next) {
  if constexpr (std::is_same_v<A, Tensor>) {
    a = outputs ? std::move((*outputs)[next++]) : Tensor();
  } else if constexpr (is_leaf<A> || std::is_same_v<A, std::string>) {
  } else if constexpr (is_std_vector<A>::value || is_std_array<A>::value) {
    for (auto& x : a) fill_result(x, outputs, next);
  } else if constexpr (is_tuple_like<A>::value) {
    std::apply([&](auto&... x) { (fill_result(x, outputs, next), ...); }, a);
  } else if constexpr (is_std_optional<A>::value) {
    if (a) fill_result(*a, outputs, next);
  } else if constexpr (is_string_map<A>::value) {
    for (auto& [k, v] : a) fill_result(v, outputs, next);
  } else {
    std::apply([&](auto... m) { (fill_result(a.*m, outputs, next), ...); }, Pytree<A>::members);
  }
}

// A result's Tensors as the compiled core's outputs; `structure` (when the result is more than
// Tensors) receives the result with its Tensors cleared, to rebuild it from outputs later.
template <class R>
inline constexpr bool tensors_only_result =
    std::is_same_v<R, Tensor> || std::is_same_v<R, std::vector<Tensor>> || is_tensor_tuple<R>::value;

template <class R>
Outputs flatten(R&& r, std::shared_ptr<const void>* structure = nullptr) {
  using T = std::decay_t<R>;
  if constexpr (std::is_same_v<T, Tensor>) {
    return {std::forward<R>(r)};
  } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
    return Outputs(r.begin(), r.end());
  } else if constexpr (is_tensor_tuple<T>::value) {
    return std::apply([](auto&&... t) { return Outputs{t...}; }, r);
  } else {
    Outputs out;
    result_tensors(r, out);
    if (structure) {
      auto skeleton = std::make_shared<T>(std::forward<R>(r));
      size_t next = 0;
      fill_result(*skeleton, nullptr, next);
      *structure = std::move(skeleton);
    }
    return out;
  }
}

template <class R>
R unflatten(Outputs&& out, const std::shared_ptr<const void>& structure) {
  if constexpr (std::is_same_v<R, Tensor>) {
    return std::move(out.at(0));
  } else if constexpr (std::is_same_v<R, std::vector<Tensor>>) {
    return std::move(out);
  } else if constexpr (is_tensor_tuple<R>::value) {
    return [&]<size_t... I>(std::index_sequence<I...>) { return R{std::move(out.at(I))...}; }(
        std::make_index_sequence<std::tuple_size_v<R>>{});
  } else {
    R r = *std::static_pointer_cast<const R>(structure);
    size_t next = 0;
    fill_result(r, &out, next);
    return r;
  }
}

// The non-template core of a compiled call: the fast path, misses, tracing, segments. For a
// result that is more than Tensors, `structure` is where run_eager and run_traced leave its
// structure and where the call puts the structure of the entry that ran (null otherwise).
// `leaf_names` names each of `args` in guard messages and graph inputs (called only to trace;
// null: the options' arg_names).
Outputs call_compiled(FunctionCache& cache, std::span<const ArgView> args,
                      std::span<const std::vector<DimMark>* const> marks, FunctionRef<Outputs()> run_eager,
                      FunctionRef<Outputs(const Outputs&)> run_traced, std::shared_ptr<const void>* structure,
                      const FunctionRef<std::vector<std::string>()>* leaf_names = nullptr);
// The name of top-level argument k in leaf paths: options.arg_names[k] where given, else "argK".
std::string argument_name(const CompileOptions& options, size_t k);
std::string function_label(const std::source_location& loc);
bool any_traced_arg(std::span<const ArgView> args);

}  // namespace detail

template <class F>
class CompiledFunction {
 public:
  CompiledFunction(F fn, CompileOptions options, std::string name)
      : fn_(std::move(fn)), cache_(std::make_shared<FunctionCache>(std::move(options), std::move(name))) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
    std::shared_ptr<const void> structure;
    std::shared_ptr<const void>* slot = detail::tensors_only_result<R> ? nullptr : &structure;
    auto eager = [&]() -> detail::Outputs { return detail::flatten(fn_(args...), slot); };
    if constexpr ((detail::is_leaf<Args> && ...)) {
      // Tensors and scalars only: one leaf each, nothing allocated.
      std::array<ArgView, sizeof...(Args)> views{detail::arg_view(args)...};
      std::array<const std::vector<DimMark>*, sizeof...(Args)> marks{detail::arg_marks(args)...};
      auto traced = [&](const detail::Outputs& t) -> detail::Outputs {
        return [&]<size_t... I>(std::index_sequence<I...>) {
          return detail::flatten(fn_(detail::pick(args, t, I)...), slot);
        }(std::index_sequence_for<Args...>{});
      };
      return detail::unflatten<R>(detail::call_compiled(*cache_, views, marks, eager, traced, slot), structure);
    } else {
      detail::Leaves leaves;
      (detail::collect_leaves(args, leaves), ...);
      auto traced = [&](const detail::Outputs& t) -> detail::Outputs {
        size_t next = 0;
        // A braced list evaluates in order, so each argument takes the leaves after the last.
        return std::apply([&](const auto&... a) { return detail::flatten(fn_(a...), slot); },
                          std::tuple<Args...>{detail::rebuild_pytree(args, t, next)...});
      };
      auto names = [&] {
        std::vector<std::string> out;
        size_t k = 0;
        (detail::leaf_paths(args, detail::argument_name(cache_->options(), k++), out), ...);
        return out;
      };
      const detail::FunctionRef<std::vector<std::string>()> names_ref(names);
      return detail::unflatten<R>(
          detail::call_compiled(*cache_, leaves.views, leaves.marks, eager, traced, slot, &names_ref), structure);
    }
  }

  CompileStats stats() const { return cache_->stats(); }
  const CompileOptions& options() const { return cache_->options(); }
  // Forgets this function's compiled entries.
  void reset() const { cache_->clear(); }

 private:
  F fn_;
  std::shared_ptr<FunctionCache> cache_;
};

template <class F>
CompiledFunction<std::decay_t<F>> compile(F&& fn, CompileOptions options = {},
                                          std::source_location loc = std::source_location::current()) {
  return CompiledFunction<std::decay_t<F>>(std::forward<F>(fn), std::move(options), detail::function_label(loc));
}

// What tracing `fn` on these arguments finds, without caching anything, and what the "kiln"
// backend's CPU compiler makes of it (graph passes and fusion; nothing is compiled or run).
struct ExplainOutput {
  int64_t graph_count = 0;
  int64_t graph_break_count = 0;
  int64_t op_count = 0;
  // Fused kernels the "kiln" backend produces on the CPU for all the graphs (0 without a CPU
  // target, and for graphs that run on the reference target: other devices, empty tensors).
  int64_t kernel_count = 0;
  std::vector<std::string> break_reasons;
  std::vector<std::string> graphs;  // readable form of each graph
  // One line per kernel, in execution order: name, kind and the ops it computes with the
  // composites they come from, "k0 reduction: max, sub, exp, sum, div (softmax)"; prefixed
  // "graph N: " when there are several graphs.
  std::vector<std::string> kernels;
  std::string str() const;
};
std::ostream& operator<<(std::ostream& out, const ExplainOutput& e);

namespace detail {
ExplainOutput explain_impl(std::span<const ArgView> args, FunctionRef<Outputs(const Outputs&)> run_traced);
}

template <class F, class... Args>
ExplainOutput explain(F&& fn, const Args&... args) {
  detail::Leaves leaves;
  (detail::collect_leaves(args, leaves), ...);
  auto traced = [&](const detail::Outputs& t) -> detail::Outputs {
    size_t next = 0;
    std::shared_ptr<const void> structure;
    return std::apply([&](const auto&... a) { return detail::flatten(fn(a...), &structure); },
                      std::tuple<Args...>{detail::rebuild_pytree(args, t, next)...});
  };
  return detail::explain_impl(leaves.views, traced);
}

// Forgets every compiled function's entries and the process-wide recompile count.
void reset();
std::vector<std::string> list_backends();
void register_backend(const std::string& name, Backend backend);
// True while a function is being traced on this thread.
bool is_compiling();
// Ends the current graph here (an error under fullgraph); a no-op outside tracing.
void graph_break(std::source_location loc = std::source_location::current());
// Makes dim `dim` of `x` symbolic in the next compile, with the size range [min, max].
void mark_dynamic(const Tensor& x, int64_t dim, int64_t min = 2,
                  int64_t max = std::numeric_limits<int64_t>::max());
// Keeps dim `dim` of `x` static even when automatic dynamic shapes would not.
void mark_static(const Tensor& x, int64_t dim);

// A module scope: while `auto s = kiln::scope("encoder");` (and, nested in it, "layer.0") lives
// on this thread, each op traced is named after the scopes and the op, "encoder/layer.0/matmul",
// as torch's module hierarchy names an exported model's nodes. The names travel with the graph
// (its JSON, KILN_DEBUG_DIR's graph.json), where the inspector page groups the graph by them; they
// enter no cache key or guard, and eager calls ignore them. nn::Sequential names its layers
// "0", "1", ... so. A name is non-empty and holds no '/' (else kiln::Error); scopes end in the
// reverse order of their making (the guard's lifetime).
class ScopeGuard {
 public:
  explicit ScopeGuard(std::string name);
  ~ScopeGuard();
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;
};
[[nodiscard]] inline ScopeGuard scope(std::string name) { return ScopeGuard(std::move(name)); }

}  // namespace kiln
