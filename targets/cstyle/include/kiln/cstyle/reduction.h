// targets/cstyle: the reductions of a kernel as the C-style targets (CUDA C, GLSL) print them:
// each reduction's rule (sdk/lower/reduction.h: its state's components, identity, the state an
// element contributes, the fold of one state into another, the finish) printed as C
// expressions and statements, and the running state of a thread and its steps. The rules are
// written once in sdk/lower; this file decides only names and C's forms (compound
// assignments, the dialect's extremum statements, `if (take) { ... }`).
// Portable C++.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/cstyle/printer.h"
#include "kiln/lower/reduction.h"

namespace kiln::cstyle {

// One variable of a reduction's state.
struct Component {
  CT ct;
  std::string name;
};

class Reductions {
 public:
  explicit Reductions(KernelPrinter& p) : p_(p) {}

  // Whether max/min or argmax/argmin reduction r keeps a "NaN seen" flag beside its value.
  bool nan_flag(int32_t r) const;
  // Whether sum r keeps a compensation beside its value (a long float sum, lower::Caps).
  bool compensated(int32_t r) const;
  // The running state of reduction r (its components), each named prefix + "_acc" / "_val",
  // "_idx", "_nan", "_cmp".
  std::vector<Component> state(int32_t r, const std::string& prefix) const;
  // The state's identity, one expression per component.
  std::vector<std::string> initial(int32_t r) const;
  // The state element x (at inner position j, an i64 expression) contributes.
  std::vector<std::string> element(int32_t r, const Value& x, const std::string& j) const;
  // Statements folding state `b` (expressions) into state `a` (variables).
  void merge(int32_t r, const std::vector<Component>& a, const std::vector<std::string>& b) const;
  // The reduction's value (of its dtype's compute type) from its final state.
  std::string finish(int32_t r, const std::vector<std::string>& st) const;

  // The running state `a<r>_*` of a thread (an invocation), declared at its identity.
  std::vector<Component> running(int32_t r) const { return state(r, "a" + std::to_string(r)); }
  void declare(int32_t r) const;
  // One step of pass `pass` at the inner point of scope sc (inner flat position j): each of its
  // reductions `reds` folds its argument's value, then the pass's inner stores.
  void step(int32_t pass, const std::vector<int32_t>& reds, Scope& sc, const std::string& j) const;
  // The fold of reduction r's argument at sc into the running state (step without the stores).
  void fold(int32_t r, Scope& sc, const std::string& j) const;

 private:
  KernelPrinter& p_;
  // Names the expressions of a rule refer to: the states folded into (a) and in (b), the
  // element and its position.
  struct Env {
    const std::vector<std::string>* a = nullptr;
    const std::vector<std::string>* b = nullptr;
    std::string x, j;
  };
  lower::Rule rule(int32_t r) const;
  std::string print(const lower::Rule& rl, int32_t n, const Env& env, bool top = false) const;
  const schedule::Instr& at(int32_t i) const { return p_.kernel().instrs[static_cast<size_t>(i)]; }
};

}  // namespace kiln::cstyle
