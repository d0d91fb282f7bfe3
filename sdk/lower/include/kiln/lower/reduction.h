// sdk/lower: the rules of a reduction, written once for every target (issue 25: "reductions
// expanded once"). A reduction's running state is a few components (its value, and for some
// kinds a position and a "NaN seen" flag); the rule gives, as small expressions over those
// components, the identity the state starts from, the state one element contributes, the fold of
// one state into another (the same for an element, a neighbour lane in a warp or subgroup, a
// shared-memory entry or another thread's partial) and the finish that turns the final state
// into the reduction's value. Every codegen prints these expressions (targets/cstyle as C
// expressions, targets/render/llvm as LLVM IR) and decides only where states live and which
// states meet (loops, lanes, shared memory).
//
// The rules are those of the reference interpreter (sdk/eval):
// - sum and prod accumulate in the result's compute type;
// - max and min propagate NaN: with the target's NaN-propagating instruction (Caps) the value
//   alone; otherwise beside a "NaN seen" flag, the value folding with a NaN-skipping extremum
//   and the finish NaN when the flag is set;
// - argmax and argmin keep the value and its inner position; ties go to the smaller position,
//   and where NaN is possible (floats) a NaN wins over every number, the first NaN over later
//   ones. Bools are compared as the integers 0 and 1.
// Takes: a reduce kind and compute types. Gives: a Rule. Portable C++ (no target library).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/graph/dtype.h"
#include "kiln/schedule/kernel_ir.h"

namespace kiln::lower {

// The type a value is computed in: f32 (for f32, f16, bf16: rounded where stored or cast), f64,
// i64 (for i32 and i64: wrapped where stored or cast) or b (bool). Every target computes so.
enum class CT { f32, f64, i64, b };
CT compute_type(DType t);
inline bool is_float(CT c) { return c == CT::f32 || c == CT::f64; }

// One node of a rule's expressions (a small DAG: nodes refer to earlier nodes by index, and a
// node used twice is one value).
struct Node {
  enum class Op {
    a,         // component `index` of the state folded into (the running state)
    b,         // component `index` of the state folded in (an element's, or another partial)
    x,         // the element, converted to the state's first component type
    j,         // the element's inner position (i64)
    literal,   // of type ct: `value` (floats; booleans 0 or 1) or `integer` (i64)
    add, mul,  // of two operands of type ct
    max, min,  // of two operands; floats: NaN-propagating where `propagate_nan`, else NaN-skipping
    gt, lt, eq,               // compares of two operands of type `operand` (ct is b)
    land, lor, lnot,          // booleans
    isnan,                    // of an operand of type `operand`
    select,                   // args[0] ? args[1] : args[2]
  };
  Op op;
  CT ct;                  // the node's type
  int32_t args[3] = {-1, -1, -1};
  int32_t index = 0;      // a, b: the component
  double value = 0;       // literal of a float or bool type
  int64_t integer = 0;    // literal of i64
  CT operand = CT::f32;   // compares and isnan: the operands' type
  bool propagate_nan = false;  // max, min of floats
};

// What a rule depends on in the target.
struct Caps {
  // Whether the target has a cheap NaN-propagating maximum and minimum for f32 / f64 (then a
  // max or min reduction keeps no NaN flag).
  bool nan_extremum_f32 = false;
  bool nan_extremum_f64 = false;
  // Whether a long float sum (inner extent symbolic or over kLongSum) keeps a compensation
  // beside its value (Neumaier's compensated summation). GPU threads each fold their share of a
  // row in a row (a 2^22-element partial on lavapipe was off by 1.5e-4 relative); the CPU
  // blocks its sums instead (targets/cpu/codegen).
  bool compensate_long_sums = false;
};

// The inner extent above which a float sum is long (Caps::compensate_long_sums).
inline constexpr int64_t kLongSum = 65536;

struct Rule {
  enum class Role { value, position, nan_seen, compensation };
  struct Component {
    CT ct;
    Role role;
  };
  std::vector<Component> state;
  std::vector<Node> nodes;
  std::vector<int32_t> identity;  // per component: a literal node
  std::vector<int32_t> element;   // per component: over x and j
  // The fold of state b into state a: where `take` (a node; -1: always) holds, each component
  // a[i] becomes fold[i] (over a and b), all computed from the old a.
  int32_t take = -1;
  std::vector<int32_t> fold;
  int32_t finish = -1;  // over a: the reduction's value, in the compute type of ...
  CT finish_ct = CT::f32;  // ... this (the codegen converts it to the result's dtype)

  const Node& at(int32_t i) const { return nodes[static_cast<size_t>(i)]; }
  bool has_nan_flag() const { return !state.empty() && state.back().role == Role::nan_seen; }
  // A compensated sum (compensated_sum): its second component is the running error.
  bool compensated() const { return state.size() > 1 && state[1].role == Role::compensation; }
};

// The rule of a reduction of kind k over an argument of compute type `arg` with result dtype
// `result`; `long_sum`: a float sum is long (compensated where caps say so).
Rule reduction_rule(schedule::ReduceKind k, CT arg, DType result, const Caps& caps, bool long_sum = false);
// ... of reduction instruction r of kernel k.
Rule reduction_rule(const schedule::Kernel& k, int32_t r, const Caps& caps);

}  // namespace kiln::lower
