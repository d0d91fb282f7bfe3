// The LLVM IR printer's flavours: the same op printed for the CPU and for NVPTX, where they
// differ (math functions, approximations, NaN-propagating maximum, bf16 rounding, fold flags).
#include <cmath>

#include <kiln/graph/error.h>
#include <kiln/render/llvm.h>

#include <boost/test/unit_test.hpp>

using namespace kiln;
namespace rl = kiln::render::llvm;

namespace {

struct Probe : rl::Printer {
  using Printer::Printer;
  std::string text() const { return body_.str(); }
  bool declared(const std::string& d) const { return decls_.count(d) > 0; }
  bool has_helper(const std::string& name) const {
    for (const std::string& h : helpers_)
      if (h.find(name) != std::string::npos) return true;
    return false;
  }
};

schedule::Instr pointwise(OpId op, DType out, size_t arity) {
  schedule::Instr in;
  in.kind = schedule::InstrKind::pointwise;
  in.op = op;
  in.dtype = out;
  for (size_t k = 0; k < arity; ++k) in.args.push_back(static_cast<int32_t>(k));
  return in;
}

// Prints op over operands %a (and %b) of dtype t with flavour f; returns the body.
std::string print(const rl::Flavour& f, OpId op, DType t, size_t arity, bool invariant_divisor = false) {
  Probe p(f, "k");
  std::vector<rl::Val> a{{"%a", rl::ct_of(t)}, {"%b", rl::ct_of(t)}};
  a.resize(arity);
  p.pointwise(pointwise(op, t, arity), a, std::vector<DType>(arity, t), false, invariant_divisor);
  return p.text();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(render_llvm)

BOOST_AUTO_TEST_CASE(literals_are_exact) {
  BOOST_TEST(rl::literal(0.1, rl::CT::f32) == "0x3FB99999A0000000");  // 0.1f widened
  BOOST_TEST(rl::literal(0.1, rl::CT::f64) == "0x3FB999999999999A");
  BOOST_TEST(rl::literal(-3, rl::CT::i64) == "-3");
  BOOST_TEST(rl::literal(2, rl::CT::b) == "true");
}

BOOST_AUTO_TEST_CASE(exp_per_flavour) {
  BOOST_TEST(contains(print(rl::cpu(), OpId::exp, DType::f32, 1), "call float @kiln_expf(float %a)"));
  BOOST_TEST(contains(print(rl::cpu(), OpId::exp, DType::f64, 1), "call double @llvm.exp.f64(double %a)"));
  const std::string fast = print(rl::nvptx(false), OpId::exp, DType::f32, 1);
  BOOST_TEST(contains(fast, "fmul float %a, 0x3FF7154760000000"));
  BOOST_TEST(contains(fast, "@llvm.nvvm.ex2.approx.f("));
  Probe precise(rl::nvptx(true), "k");
  precise.pointwise(pointwise(OpId::exp, DType::f32, 1), {{"%a", rl::CT::f32}}, {DType::f32}, false);
  BOOST_TEST(contains(precise.text(), "call float @__nv_expf(float %a)"));
  BOOST_TEST(precise.declared("declare float @__nv_expf(float)"));
}

BOOST_AUTO_TEST_CASE(division_per_flavour) {
  BOOST_TEST(contains(print(rl::cpu(), OpId::div, DType::f32, 2), "fdiv float %a, %b"));
  // A row divided by its sum: one reciprocal in f64, a product per element.
  const std::string row = print(rl::cpu(), OpId::div, DType::f32, 2, true);
  BOOST_TEST(contains(row, "fdiv double 1.0, "));
  BOOST_TEST(!contains(row, "fdiv float"));
  BOOST_TEST(contains(print(rl::nvptx(false), OpId::div, DType::f32, 2), "div.full.f32"));
  BOOST_TEST(contains(print(rl::nvptx(true), OpId::div, DType::f32, 2), "fdiv float %a, %b"));
  BOOST_TEST(contains(print(rl::nvptx(false), OpId::div, DType::f64, 2), "fdiv double %a, %b"));
}

BOOST_AUTO_TEST_CASE(maximum_propagates_nan) {
  const std::string cpu = print(rl::cpu(), OpId::maximum, DType::f32, 2);
  BOOST_TEST(contains(cpu, "fcmp uno float %a, %b"));
  BOOST_TEST(contains(cpu, rl::literal(NAN, rl::CT::f32)));
  Probe gpu(rl::nvptx(false), "k");
  gpu.pointwise(pointwise(OpId::maximum, DType::f32, 2), {{"%a", rl::CT::f32}, {"%b", rl::CT::f32}},
                {DType::f32, DType::f32}, false);
  BOOST_TEST(contains(gpu.text(), "call float @llvm.maximum.f32(float %a, float %b)"));
  BOOST_TEST(gpu.declared("declare float @llvm.maximum.f32(float, float)"));
  // No max.NaN.f64 in PTX: compares and selects.
  BOOST_TEST(contains(print(rl::nvptx(false), OpId::maximum, DType::f64, 2), "fcmp uno double %a, %b"));
}

BOOST_AUTO_TEST_CASE(bf16_rounding) {
  Probe cpu(rl::cpu(), "k");
  cpu.narrow({"%a", rl::CT::f32}, DType::bf16);
  BOOST_TEST(contains(cpu.text(), "call float @kiln_round_bf16(float %a)"));
  Probe gpu(rl::nvptx(false), "k");
  const rl::Val r = gpu.narrow({"%a", rl::CT::f32}, DType::bf16);
  BOOST_TEST(contains(gpu.text(), "call i16 @kiln_bf16_bits(float %a)"));
  BOOST_TEST(contains(gpu.text(), "shl i32"));
  BOOST_TEST(gpu.has_helper("define internal i16 @kiln_bf16_bits"));
  BOOST_TEST((r.ct == rl::CT::f32));
}

// A reduction's rule (sdk/lower) printed over a state in memory: each flavour's fold instructions.
BOOST_AUTO_TEST_CASE(reduction_rules_print_each_flavours_folds) {
  using schedule::ReduceKind;
  auto rule = [](const rl::Flavour& f, ReduceKind k, DType t) {
    const lower::CT c = lower::compute_type(t);
    return lower::reduction_rule(k, c, k == ReduceKind::argmax || k == ReduceKind::argmin ? DType::i64 : t,
                                 {f.nan_extremum(lower::CT::f32), f.nan_extremum(lower::CT::f64)});
  };
  Probe cpu(rl::cpu(), "k");
  cpu.fold_into(rule(rl::cpu(), ReduceKind::sum, DType::f32), {"%acc"}, {"%x"});
  BOOST_TEST(contains(cpu.text(), "fadd reassoc float %t0, %x"));
  BOOST_TEST(contains(cpu.text(), "store float %t1, ptr %acc"));
  // The CPU's float max skips NaN (a fold that vectorises) beside a NaN flag.
  const lower::Rule max = rule(rl::cpu(), ReduceKind::max, DType::f32);
  BOOST_TEST(max.has_nan_flag());
  const std::vector<std::string> el = cpu.element_state(max, {"%y", rl::CT::f32}, "%j");
  cpu.fold_into(max, {"%m", "%n"}, el);
  BOOST_TEST(contains(cpu.text(), "fcmp uno float %y, %y"));
  BOOST_TEST(contains(cpu.text(), "call nnan nsz float @llvm.maxnum.f32(float"));
  BOOST_TEST(contains(cpu.text(), "or i1"));
  cpu.fold_into(rule(rl::cpu(), ReduceKind::max, DType::i64), {"%acc"}, {"%x"});
  BOOST_TEST(contains(cpu.text(), "icmp sgt i64 %x, "));
  // NVPTX has a NaN-propagating f32 minimum: no flag.
  Probe gpu(rl::nvptx(false), "k");
  const lower::Rule min = rule(rl::nvptx(false), ReduceKind::min, DType::f32);
  BOOST_TEST(!min.has_nan_flag());
  gpu.fold_into(min, {"%acc"}, {"%x"});
  BOOST_TEST(contains(gpu.text(), "call float @llvm.minimum.f32(float %t0, float %x)"));
  gpu.fold_into(rule(rl::nvptx(false), ReduceKind::sum, DType::f32), {"%acc"}, {"%x"});
  BOOST_TEST(contains(gpu.text(), "fadd float"));
  // Identities and an arg reduction's finish (its position).
  Probe id(rl::cpu(), "k");
  const lower::Rule am = rule(rl::cpu(), ReduceKind::argmin, DType::f64);
  id.store_identity(am, {"%v", "%i", "%n"});
  BOOST_TEST(contains(id.text(), "store double " + rl::literal(INFINITY, rl::CT::f64) + ", ptr %v"));
  BOOST_TEST(contains(id.text(), "store i64 9223372036854775807, ptr %i"));
  BOOST_TEST(contains(id.text(), "store i1 false, ptr %n"));
  BOOST_TEST(id.finish_state(am, {"%a", "%b", "%c"}, DType::i64).v == "%b");
}

BOOST_AUTO_TEST_CASE(integer_ops_wrap_and_float_only_ops_fail) {
  // i32 arithmetic in i64, wrapped back to 32 bits.
  const std::string add = print(rl::cpu(), OpId::add, DType::i32, 2);
  BOOST_TEST(contains(add, "add i64 %a, %b"));
  BOOST_TEST(contains(add, "trunc i64"));
  BOOST_TEST(contains(add, "sext i32"));
  try {
    print(rl::nvptx(false), OpId::exp, DType::i64, 1);
    BOOST_FAIL("exp of an i64 printed");
  } catch (const kiln::Error& e) {
    BOOST_TEST(contains(e.what(), "cuda codegen: exp has no integer form (kernel k)"));
  }
}

BOOST_AUTO_TEST_SUITE_END()
