// targets/render/llvm: the LLVM IR printer of a kernel's scalar computation, shared by the CPU
// codegen (targets/cpu/codegen, ORC JIT) and the CUDA codegen's NVPTX modules
// (targets/cuda/codegen/src/nvptx.cpp).
//
// Takes: values of the kernel IR (sdk/schedule) as the codegen asks for them. Gives: LLVM IR
// text in an IR function body: compute types and constants, a loaded element's conversion from
// its storage type and back, each pointwise op's math, casts with f16/bf16 rounding and i32
// wrapping, NaN-propagating maximum/minimum, size and index arithmetic, and the expressions of
// reductions' rules (sdk/lower/reduction.h) over states in memory. The codegen derives from Printer and writes the loop or thread
// structure around these values (loops, grids, warps, shared memory, vector accesses, gemm).
// A Flavour says what differs between the targets: math functions (LLVM intrinsics and libm on
// the CPU, libdevice and PTX approximations on NVPTX), fast-math flags, helper functions.
// It prints text only (no LLVM library), so it also builds to WebAssembly.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/lower/reduction.h"
#include "kiln/schedule/kernel_ir.h"

namespace kiln::render::llvm {

// The type a value is computed in (sdk/lower): float (f32, f16, bf16), double (f64), i64 (i32,
// i64) or i1 (CT::b, bool). Loads convert from the storage type, stores back.
using lower::CT;
using lower::is_float;
inline CT ct_of(DType t) { return lower::compute_type(t); }
const char* type_of(CT c);           // "float", "double", "i64", "i1"
const char* suffix_of(CT c);         // an intrinsic's suffix: "f32" or "f64"
const char* storage_type(DType t);   // an element in memory: half, i16 (bf16 bits), i8 (bool), ...
// Exact literals: LLVM's hexadecimal double form for floats (an f32 constant a float widened).
std::string literal(double v, CT c);

struct Val {
  std::string v;  // a register or a literal
  CT ct = CT::f32;
};

// Math functions whose form a flavour decides.
enum class Fn { abs, exp, log, sqrt, rsqrt, sin, cos, tanh, erf, floor, ceil, round, pow };

class Printer;

// What differs between the targets that print LLVM IR: data, and hooks that print through the
// printer they are given.
struct Flavour {
  virtual ~Flavour() = default;
  const char* codegen = "";        // prefixes messages: "cpu codegen"
  const char* index_div = "sdiv";  // dividing indices into their dims (unflatten)
  const char* index_rem = "srem";
  const char* fold_flags = "";     // fast-math flags of a reduction's float sum and product fold
  const char* extremum_flags = ""; // ... of its NaN-skipping maximum / minimum fold
  bool compensate_long_sums = false;  // lower::Caps: GPU threads compensate long sums (the CPU blocks them)
  const char* round_bf16 = nullptr;  // a function rounding an f32 to bf16 precision; null: inline
  // The order of CUDA C's expressions (cuda_c.cpp), which NVPTX keeps so both round alike: gelu's
  // cubic term as 0.044715 * x * x * x after the tanh, an integer sign as two selects.
  bool c_order = false;

  virtual Val math(Printer& p, Fn fn, CT c, const std::vector<std::string>& x) const = 0;
  // a / b; `invariant_divisor`: b is the same along the innermost loop (a row's sum).
  virtual Val divide(Printer& p, CT c, const std::string& a, const std::string& b, bool invariant_divisor) const;
  // Whether the target has NaN-propagating maximum and minimum instructions for c.
  virtual bool nan_extremum(CT) const { return false; }
};
// The CPU's: LLVM intrinsics (libm and libmvec behind them), f64 erf and tanh from libm, f32 exp,
// tanh and erf from the polynomials of the CPU module's prelude (kiln_expf, kiln_tanhf,
// kiln_erff), reassociating reductions (vectorised folds).
const Flavour& cpu();
// The CPU module prelude's part for these values: declarations of the intrinsics and libm
// functions they call, and the definitions of kiln_expf, kiln_tanhf, kiln_erff, kiln_bf16_bits,
// kiln_round_bf16, kiln_ipow and kiln_philox.
const char* cpu_declarations();
const char* cpu_helpers();
// The definition of kiln_philox(i64 key, i64 counter, i32 word) -> i64, the op philox.
const std::string& philox_helper();
// NVPTX's: libdevice's __nv_ functions (which the runtime links in), f32 exp, division and rsqrt
// as Triton's approximations unless precise_math, and LLVM 16's workarounds (round half to even
// by cvt.rni, IEEE sqrt by the intrinsic, f64 maximum by compares).
const Flavour& nvptx(bool precise_math);

class Printer {
 public:
  Printer(const Flavour& f, std::string kernel) : flavour_(f), kernel_(std::move(kernel)) {}
  virtual ~Printer() = default;

  // ---- emission ----
  std::string tmp() { return "%t" + std::to_string(tmp_++); }
  std::string label(const char* prefix) { return std::string(prefix) + std::to_string(label_++); }
  template <class... A>
  std::string op(A&&... parts) {  // "%tN = <parts>" in the body; returns %tN
    const std::string r = tmp();
    body_ << "  " << r << " = ";
    (body_ << ... << parts);
    body_ << "\n";
    return r;
  }
  template <class... A>
  void line(A&&... parts) {
    body_ << "  ";
    (body_ << ... << parts);
    body_ << "\n";
  }
  void block(const std::string& l) { body_ << l << ":\n"; }
  std::string alloca(const char* type);  // in the entry block
  // A module-level declaration this function needs (printed by codegens whose modules declare
  // what they use; the CPU's prelude declares everything).
  void declare(const std::string& d) { decls_.insert(d); }
  // `call <flags> T fn(T a, ...)` with fn declared as taking and giving c.
  Val call(const std::string& fn, CT c, const std::vector<std::string>& args, const char* flags = "");
  // Helper functions (defined in the module where declarations are; kiln_bf16_bits, kiln_ipow,
  // kiln_philox).
  std::string bf16_bits(const std::string& x);  // i16: an f32 rounded to bf16, NaN kept quiet
  std::string ipow(const std::string& b, const std::string& e);
  std::string philox(const std::string& key, const std::string& counter, int64_t word, int64_t seed);  // i64

  // ---- sizes and indices ----
  // A size as an i64 operand, computed once in the entry block.
  std::string sym(const SymInt& s);
  // The value of a plan symbol (a kernel parameter %s<id> unless the codegen says otherwise).
  virtual std::string symbol(SymbolId id) { return "%s" + std::to_string(id); }
  std::string affine(const schedule::Affine& a, const std::vector<std::string>& vars);
  // Splits `flat` over dims [first, last) of `extents` (row-major) into vars.
  void unflatten(const std::string& flat, const std::vector<SymInt>& extents, size_t first, size_t last,
                 std::vector<std::string>& vars);

  // ---- values ----
  Val convert(const Val& x, CT to);
  Val narrow(const Val& x, DType t);  // made exactly representable in t (rounding, wrapping)
  Val to_dtype(const Val& x, DType t) { return narrow(convert(x, ct_of(t)), t); }
  Val from_storage(DType t, const std::string& raw);  // a loaded element as its compute type
  std::string to_storage(DType t, const Val& x);       // ... and a value as t's element
  // An element of storage type t loaded only where `mask` (an i1) holds, 0 elsewhere: a branch
  // around `load` (which prints the load and returns its register) through a slot.
  std::string masked_load(DType t, const std::string& mask, const std::function<std::string()>& load);
  Val select(const std::string& cond, CT c, const std::string& a, const std::string& b);
  Val fbin(const char* o, CT c, const std::string& a, const std::string& b);
  Val extremum(bool max, CT c, const std::string& a, const std::string& b);  // NaN-propagating
  // Pointwise instruction `in` over its operands' values `a` (of dtypes `at`); `emulate`: round
  // to the output dtype after the op (emulate_precision_casts); `invariant_divisor`: as divide's.
  Val pointwise(const schedule::Instr& in, const std::vector<Val>& a, const std::vector<DType>& at, bool emulate,
                bool invariant_divisor = false);
  // A scatter's store of x into the element of dtype t (f32, f64, i32 or i64) at pointer p, whose
  // type `ptr_type` is ("ptr", "ptr addrspace(1)"), combined with what it holds atomically: an
  // atomicrmw add, or a compare-and-swap loop around the combine's own op (pointwise), so that
  // max/min keep NaN and products wrap as the ops do.
  void atomic_combine(schedule::Combine c, DType t, const std::string& ptr_type, const std::string& p, const Val& x);

  // ---- reductions ----
  // Node n of a reduction's rule (sdk/lower/reduction.h) as a value; `leaf` gives the rule's
  // leaves (the states' components a and b, the element x, its position j) as registers or
  // literals. `memo` keeps each node's value, so a node used twice is computed once; pass the
  // same one for the nodes of one fold.
  Val rule_value(const lower::Rule& r, int32_t n, const std::function<std::string(const lower::Node&)>& leaf,
                 std::map<int32_t, Val>& memo);
  // A reduction's state kept in memory, one pointer (an alloca or an element of one) per
  // component of its rule: the identity stored there; the state an element x at inner position
  // j contributes (x converted to the state's type); state b (values) folded into it, every new
  // component computed from the old state before the stores; the reduction's value from a final
  // state (values), as `result`'s compute type.
  // The rule of reduction instruction r of kernel k with this flavour's NaN-propagating
  // extremum, and its identity as one value per component.
  lower::Rule reduction_rule(const schedule::Kernel& k, int32_t r) const;
  std::vector<std::string> identity_values(const lower::Rule& r);
  void store_identity(const lower::Rule& r, const std::vector<std::string>& slots);
  std::vector<std::string> element_state(const lower::Rule& r, const Val& x, const std::string& j);
  void fold_into(const lower::Rule& r, const std::vector<std::string>& slots, const std::vector<std::string>& b);
  Val finish_state(const lower::Rule& r, const std::vector<std::string>& a, DType result);

 protected:
  const Flavour& flavour_;
  std::string kernel_;
  std::ostringstream entry_, body_;
  std::set<std::string> decls_, helpers_;
  std::map<std::string, std::string> syms_;  // hoisted size expressions
  int tmp_ = 0, label_ = 0;
};

}  // namespace kiln::render::llvm
