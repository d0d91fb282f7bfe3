// targets/cstyle: the C-style expression printer the GPU codegens share (CUDA C, GLSL).
//
// Takes: one kernel of the kernel IR (sdk/schedule) and a Dialect: the few things that differ
// between C-like languages (type names, literals, math function names, how f16/bf16 are loaded,
// stored and rounded, conversions). Gives: C statements computing the kernel's values, one
// `const T tN = ...;` per instruction and scope, and stores; the target's codegen writes the loop
// structure (threads, blocks, reductions) around them and asks for values by instruction.
//
// Numerics are the CPU codegen's: f16/bf16 computed in f32 and rounded where stored or cast
// (emulate_precision_casts rounds after every op), integers in 64 bits wrapped to their width
// after each op, NaN-propagating maximum/minimum, round half to even, true division of integers.
// Portable C++ (no GPU library), so it also runs in the browser.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/lower/reduction.h"
#include "kiln/schedule/kernel_ir.h"
#include "kiln/schedule/schedule.h"

namespace kiln::cstyle {

// The type a value is computed in (sdk/lower): f32 (f32, f16, bf16), f64, i64 (i32, i64) or b.
using lower::CT;
using lower::compute_type;
using lower::is_float;

struct Value {
  std::string v;  // an expression (a temporary's name or a literal)
  CT ct = CT::f32;
};

// What differs between languages. Every expression returned must be self-contained (wrapped in
// parentheses where precedence could matter).
struct Dialect {
  virtual ~Dialect() = default;
  virtual std::string type(CT c) const = 0;                      // "float", "long long", ...
  // An exact literal (no decimal rounding): true/false, int_literal, or the shortest decimal
  // that round-trips the float (with the language's suffixes), NaN and the infinities from
  // their bits.
  std::string literal(double v, CT c) const;
  virtual std::string int_literal(int64_t v) const = 0;          // i64 literal
  virtual std::string float_suffix(CT c) const = 0;              // "f" and "" in C, "" and "LF" in GLSL
  virtual std::string from_bits(uint64_t bits, CT c) const = 0;  // the f32 (low 32 bits) or f64 of these bits
  // x as type `to`: bools compared with zero, or chosen between 1 and 0; else cast().
  std::string convert(const std::string& x, CT from, CT to) const;
  virtual std::string cast(const std::string& x, CT to) const = 0;
  // f32/f64 math: fn is the C name of the double function ("exp", "log", "sqrt", "sin", "cos",
  // "tanh", "erf", "floor", "ceil", "rint", "fabs", "pow"); the dialect picks the f32 form.
  virtual std::string math(std::string_view fn, CT c, const std::vector<std::string>& args) const = 0;
  // Loads `buffer[index]` (index an i64 expression) of storage type t as its compute type.
  virtual std::string load(DType t, const std::string& buffer, const std::string& index) const = 0;
  // A statement storing compute value x (already of compute type of t) into buffer[index].
  virtual std::string store(DType t, const std::string& buffer, const std::string& index, const std::string& x) const = 0;
  // A statement adding x into buffer[index] atomically (t f32, f64, i32 or i64 where
  // native_atomic_add(t); a scatter's store).
  virtual bool native_atomic_add(DType) const { return true; }
  virtual std::string accumulate(DType t, const std::string& buffer, const std::string& index, const std::string& x) const = 0;
  // Any other atomic combine of a scatter's store is a compare-and-swap loop over the element's
  // bits (t f32, f64, i32 or i64): cas_begin opens a block that reads the element at `index`
  // into `kseen` and starts the loop, cas_seen is the value `kseen` holds (t's compute type), and
  // cas_end swaps in `next` (a compute value of t) where the element still holds kseen, and
  // loops until it did. The printer prints the combine between them.
  virtual std::string cas_begin(DType t, const std::string& buffer, const std::string& index) const = 0;
  virtual std::string cas_seen(DType t) const = 0;
  virtual std::string cas_end(DType t, const std::string& buffer, const std::string& next) const = 0;
  // x (f32) rounded to f16 or bf16 and back.
  virtual std::string round_to(DType t, const std::string& x) const = 0;
  // x (i64) wrapped to 32 bits and sign-extended back.
  virtual std::string wrap_i32(const std::string& x) const = 0;
  // x^y for i64 (integer power; negative exponents as the reference does).
  virtual std::string ipow(const std::string& x, const std::string& y) const = 0;
  virtual std::string isnan(const std::string& x, CT c) const = 0;
  // The op philox (kiln/graph/philox.h) of two i64 values, an i64: each target's prelude defines
  // kiln_philox(key, counter, word).
  virtual std::string philox(const std::string& key, const std::string& counter, int64_t word) const {
    return "kiln_philox(" + key + ", " + counter + ", " + std::to_string(word) + ")";
  }
  // x op y (op " < ", " >= ", ...) of two values of compute type c, as a bool.
  virtual std::string compare(const std::string& x, std::string_view op, const std::string& y, CT) const {
    return "(" + x + std::string(op) + y + ")";
  }
  // x / y of floats (c f32 or f64).
  virtual std::string divide(const std::string& x, const std::string& y, CT) const { return "(" + x + " / " + y + ")"; }
  // 1 / sqrt(x) of floats.
  virtual std::string reciprocal_sqrt(const std::string& x, CT c) const {
    return divide(literal(1, c), math("sqrt", c, {x}), c);
  }
  // The larger (max) or smaller of two floats, NaN when either is NaN (torch.maximum/minimum).
  virtual std::string extremum(bool max, const std::string& x, const std::string& y, CT c) const {
    return "((" + isnan(x, c) + " || " + isnan(y, c) + ") ? " + literal(NAN, c) + " : (" + x + (max ? " > " : " < ") + y +
           " ? " + x + " : " + y + "))";
  }
  // Reductions (reduction.h). Whether extremum() is one cheap NaN-propagating instruction for
  // c, so that a max/min reduction folds with it and keeps no NaN flag (CUDA's kiln_fmaxn, f32).
  virtual bool fast_extremum(CT) const { return false; }
  // A statement folding x into the running maximum (max) or minimum acc that keeps acc where x is
  // NaN (the reduction's NaN flag remembers it): a compare by default (GLSL's max and min are
  // undefined for NaN operands).
  virtual std::string extremum_skipping_nan(bool max, const std::string& acc, const std::string& x, CT) const {
    return "if (" + x + (max ? " > " : " < ") + acc + ") " + acc + " = " + x + ";";
  }
  // The statement `lhs = c ? x : y;`, its right side parenthesised as every expression is here.
  virtual std::string assign_select(const std::string& lhs, const std::string& c, const std::string& x,
                                    const std::string& y) const {
    return lhs + " = (" + c + " ? " + x + " : " + y + ");";
  }
  // The name of buffer b and of symbol s as the kernel sees them.
  virtual std::string buffer_name(int32_t b) const { return "b" + std::to_string(b); }
  virtual std::string symbol_name(SymbolId s) const { return "s" + std::to_string(s); }
};

// A scope of loop variables: one i64 expression per domain dim ("" where not bound), and the
// values already computed in it (reused by inner scopes).
struct Scope {
  std::vector<std::string> vars;
  std::map<int32_t, Value> memo;
  const Scope* parent = nullptr;
  const Value* find(int32_t i) const;
  Scope child() const;  // same vars, this as parent
};

class KernelPrinter {
 public:
  KernelPrinter(const schedule::Kernel& k, const schedule::Schedule& s, const Dialect& d,
                bool emulate_precision_casts = false);

  // Statements go to out() at the current indentation.
  std::ostringstream& out() { return out_; }
  void line(const std::string& text);
  void indent() { depth_ += 1; }
  void dedent() { depth_ -= 1; }
  std::string temp(const std::string& prefix = "t") { return prefix + std::to_string(tmp_++); }
  // `const T name = expr;` and returns name.
  std::string let(CT c, const std::string& expr);

  // A symbolic size as an i64 expression over the symbols.
  std::string sym(const SymInt& s) const;
  // An affine index over the scope's variables: an i64 expression, or, with narrow_indices and
  // unless it is a value (an index instruction's), a 32-bit `int` one (each variable taken as int).
  std::string affine(const schedule::Affine& a, const Scope& sc, bool value = false) const;
  // Set by a target's codegen where every index of the kernel and every partial sum of one is
  // below 2^31 (static sizes; the Vulkan target: 64-bit integer arithmetic is emulated on GPUs,
  // and a memory-bound kernel pays for it).
  bool narrow_indices = false;
  // The value of instruction i (emitting what it needs); reductions' results are read from
  // reduction_result(i), which the target's codegen binds.
  Value value(int32_t i, Scope& sc);
  void store(const schedule::Store& st, Scope& sc);
  // Converts to dtype t's compute type with t's rounding or wrapping.
  Value to_dtype(const Value& x, DType t);
  Value convert(const Value& x, CT to);

  // Per-row values: those that vary over no inner dim and need the results of the reductions
  // folded in loop `pass` (layer_norm's mean and 1 / sqrt(var + eps)), computed into scope `row`
  // once those results are bound, so that later passes read them instead of computing them again
  // for every element (which also costs NVRTC and shaderc time: one copy per unrolled element).
  void bind_row_values(int32_t pass, Scope& row);

  // Where the target keeps the result of reduction instruction i (an expression of its dtype's
  // compute type); must be set before a value depending on it is asked for.
  std::map<int32_t, std::string>& reduction_results() { return reductions_; }

  // Loads served from registers (the CUDA row reductions keep a thread's share of the row):
  // load_reads()[i] replaces every load of instruction i by that expression (of the buffer
  // dtype's compute type); load_records()[i] is an lvalue each fresh load of i is also written
  // to, and recorded() lists the instructions that were written so.
  std::map<int32_t, std::string>& load_reads() { return load_reads_; }
  std::map<int32_t, std::string>& load_records() { return load_records_; }
  const std::set<int32_t>& recorded() const { return recorded_; }

  const schedule::Kernel& kernel() const { return k_; }
  const schedule::Schedule& schedule() const { return s_; }
  const Dialect& dialect() const { return d_; }
  DType buffer_dtype(int32_t b) const { return s_.buffers[static_cast<size_t>(b)].dtype; }

 private:
  const schedule::Kernel& k_;
  const schedule::Schedule& s_;
  const Dialect& d_;
  bool emulate_;
  std::ostringstream out_;
  int depth_ = 1;
  int tmp_ = 0;
  std::map<int32_t, std::string> reductions_;
  std::map<int32_t, std::string> load_reads_, load_records_;
  std::set<int32_t> recorded_;

  Value narrow(const Value& x, DType t);
  Value pointwise(const schedule::Instr& in, Scope& sc);
  // Instruction in's op over the values a (of dtypes at).
  Value pointwise_of(const schedule::Instr& in, const std::vector<Value>& a, const std::vector<DType>& at);
};

}  // namespace kiln::cstyle
