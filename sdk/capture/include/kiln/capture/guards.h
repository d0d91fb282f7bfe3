// Guards: the checks a call's arguments must pass to reuse a compiled graph. They are
// data, not code: a flat list evaluated in one tight loop, printable, and each failure
// explained in a sentence ("input 0 (x): size mismatch at dim 0: expected 1024, got 2048").
//
// Takes: a traced Graph (its input metas, symbols with ranges, and shape facts) plus a
// description of the call's arguments. Gives: a GuardSet that checks ArgViews and binds
// the size symbols' values as a side effect.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/graph/tensor_data.h"

namespace kiln {

// One argument of a call, as the guards see it (no copies, no allocation).
struct ArgView {
  enum class Kind : uint8_t { tensor, int_, double_, bool_ };
  Kind kind = Kind::tensor;
  const TensorData* tensor = nullptr;
  bool requires_grad = false;  // the tensor requires gradients (autograd; not guarded: the graph is the same)
  int64_t i = 0;
  double d = 0.0;
  bool b = false;
  // The frontend's tensor, where it requires gradients (its backward's input).
  std::shared_ptr<void> grad_owner = nullptr;
};

enum class GuardKind : uint8_t {
  arg_kind,       // value: ArgView::Kind
  dtype,          // value: DType
  device,         // value: DeviceType*256 + index
  rank,           // value: rank
  size_eq,        // dim: sizes[dim] == value
  size_symbol,    // dim, symbol: binds the symbol on first sight (checking [value, max]), then compares
  contiguous,     // the tensor is contiguous
  stride_eq,      // dim: strides[dim] == value
  int_eq,         // scalar argument == value
  double_eq,      // scalar argument == dvalue (bitwise, so NaN matches NaN)
  bool_eq,        // scalar argument == (value != 0)
  fact,           // lhs == rhs (or !=) over bound symbols
  config,         // the config options that change codegen hash to `value`
  autocast,       // the thread's autocast type (autocast.h) is `value` (a DType; -1: none)
  grad_mode,      // autograd recording (grad_mode.h) is on (`value` 1) or off (0)
};

struct Guard {
  GuardKind kind;
  int32_t arg = -1;
  int32_t dim = -1;
  SymbolId symbol = 0;
  int64_t value = 0;
  int64_t max = 0;
  double dvalue = 0.0;
  SymExpr lhs, rhs;  // facts only
  Relation relation = Relation::eq;
  std::string reason;  // facts only: what needed the fact ("size() at model.cpp:42", "reshape")
};

class GuardSet {
 public:
  // Guards for a graph traced from these arguments: graph input k came from tensor argument
  // tensor_args[k]; scalar arguments are guarded by value.
  static GuardSet build(const Graph& graph, std::span<const ArgView> example_args,
                        std::span<const int32_t> tensor_arg_of_input, std::vector<std::string> arg_names,
                        uint64_t config_hash);

  // True when every guard passes; fills `symbols` (size >= num_symbols()).
  bool check(std::span<const ArgView> args, int64_t* symbols) const;
  // The first failing guard as a sentence, or nullopt if all pass.
  std::optional<std::string> failure(std::span<const ArgView> args) const;
  // Index of the first failing guard, or -1.
  int first_failure(std::span<const ArgView> args) const;

  const std::vector<Guard>& guards() const { return guards_; }
  size_t num_symbols() const { return num_symbols_; }
  std::string arg_label(int32_t arg) const;  // "input 0 (x)"
  std::string str() const;                   // one guard a line

 private:
  std::vector<Guard> guards_;
  size_t num_symbols_ = 0;
  std::vector<std::string> arg_names_;
  std::string describe(const Guard& g) const;
  std::string explain(const Guard& g, std::span<const ArgView> args, const int64_t* symbols) const;
};

}  // namespace kiln
