#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "kiln/cpu/jit.h"
#include "kiln/cpu/thread_pool.h"
#include "kiln/graph/error.h"

using kiln::cpu::JitModule;

namespace {

// out[i] = a[i] + b[i] * 2 over [0, n)
const char* kAddKernel = R"(
define void @k(ptr %out, ptr %a, ptr %b, i64 %n) {
entry:
  %nonempty = icmp sgt i64 %n, 0
  br i1 %nonempty, label %loop, label %exit
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %pa = getelementptr inbounds float, ptr %a, i64 %i
  %pb = getelementptr inbounds float, ptr %b, i64 %i
  %va = load float, ptr %pa, align 4
  %vb = load float, ptr %pb, align 4
  %twice = fmul float %vb, 2.0
  %sum = fadd float %va, %twice
  %po = getelementptr inbounds float, ptr %out, i64 %i
  store float %sum, ptr %po, align 4
  %next = add nuw nsw i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
)";

// out[i] = exp(a[i]) + sin(a[i]) through the intrinsic and libm; @e and @s call expf / sinf.
const char* kMathKernel = R"(
declare float @llvm.exp.f32(float)
declare float @sinf(float)
declare float @expf(float)

define void @math(ptr noalias %out, ptr noalias %a, i64 %n) {
entry:
  %nonempty = icmp sgt i64 %n, 0
  br i1 %nonempty, label %loop, label %exit
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %pa = getelementptr inbounds float, ptr %a, i64 %i
  %x = load float, ptr %pa, align 4
  %e = call float @llvm.exp.f32(float %x)
  %s = call float @sinf(float %x)
  %r = fadd float %e, %s
  %po = getelementptr inbounds float, ptr %out, i64 %i
  store float %r, ptr %po, align 4
  %next = add nuw nsw i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}

define float @e(float %x) {
  %r = call float @expf(float %x)
  ret float %r
}

define float @s(float %x) {
  %r = call float @sinf(float %x)
  ret float %r
}
)";

std::string constant_function(const std::string& name, int value) {
  return "define i32 @" + name + "() {\n  ret i32 " + std::to_string(value) + "\n}\n";
}

// The codegen contract (docs/cpu-runtime.md): void kernel(i8** buffers, i64* sizes, i64 begin,
// i64 end). Here buffers = {out, a, b}, out[i] = a[i] * b[i] + 1 over [begin, end).
const char* kContractKernel = R"(
define void @kernel(ptr noalias %buffers, ptr noalias %sizes, i64 %begin, i64 %end) #0 {
entry:
  %out.p = getelementptr inbounds ptr, ptr %buffers, i64 0
  %a.p = getelementptr inbounds ptr, ptr %buffers, i64 1
  %b.p = getelementptr inbounds ptr, ptr %buffers, i64 2
  %out = load ptr, ptr %out.p, align 8
  %a = load ptr, ptr %a.p, align 8
  %b = load ptr, ptr %b.p, align 8
  %nonempty = icmp slt i64 %begin, %end
  br i1 %nonempty, label %loop, label %exit
loop:
  %i = phi i64 [ %begin, %entry ], [ %next, %loop ]
  %pa = getelementptr inbounds float, ptr %a, i64 %i
  %pb = getelementptr inbounds float, ptr %b, i64 %i
  %va = load float, ptr %pa, align 4
  %vb = load float, ptr %pb, align 4
  %m = fmul float %va, %vb
  %r = fadd float %m, 1.0
  %po = getelementptr inbounds float, ptr %out, i64 %i
  store float %r, ptr %po, align 4
  %next = add nsw i64 %i, 1
  %done = icmp eq i64 %next, %end
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
attributes #0 = { nounwind }
)";

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(jit)

BOOST_AUTO_TEST_CASE(pointwise_kernel_runs) {
  auto m = JitModule::compile(kAddKernel, "add");
  BOOST_TEST_MESSAGE("compile_seconds(add kernel, first compile in process) = " << m->compile_seconds());
  BOOST_TEST(m->compile_seconds() > 0.0);
  auto* k = m->function<void(float*, const float*, const float*, int64_t)>("k");
  const int n = 1000;
  std::vector<float> a(n), b(n), out(n, -1.0f);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.5f * i;
    b[i] = 1.0f - 0.25f * i;
  }
  k(out.data(), a.data(), b.data(), n);
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += out[i] != a[i] + b[i] * 2.0f;
  BOOST_TEST(wrong == 0);
  k(out.data(), a.data(), b.data(), 0);  // empty range is a no-op
}

BOOST_AUTO_TEST_CASE(compile_latency_is_measured) {
  // Warm (LLVM and the session are initialised): what one more pointwise module costs.
  std::vector<double> plain, kept;
  std::vector<kiln::cpu::CompileTimings> phases;
  for (int i = 0; i < 7; ++i) {
    auto m = JitModule::compile(kAddKernel, "add_warm");
    plain.push_back(m->compile_seconds());
    phases.push_back(m->timings());
    kiln::cpu::CompileOptions keep;
    keep.keep_optimized_ir = true;
    kept.push_back(JitModule::compile(kAddKernel, "add_warm_ir", 3, keep)->compile_seconds());
  }
  auto median_of = [&](double kiln::cpu::CompileTimings::*field) {
    std::vector<double> v;
    for (const auto& t : phases) v.push_back(t.*field);
    std::sort(v.begin(), v.end());
    return v[v.size() / 2] * 1e3;
  };
  BOOST_TEST_MESSAGE("phases (median ms): parse "
                     << median_of(&kiln::cpu::CompileTimings::parse) << ", optimise "
                     << median_of(&kiln::cpu::CompileTimings::optimise) << ", codegen "
                     << median_of(&kiln::cpu::CompileTimings::codegen) << ", link "
                     << median_of(&kiln::cpu::CompileTimings::link));
  std::sort(plain.begin(), plain.end());
  std::sort(kept.begin(), kept.end());
  BOOST_TEST_MESSAGE("compile_seconds(add kernel, O3) median of 7: "
                     << plain[3] * 1e3 << " ms (min " << plain[0] * 1e3
                     << "), keeping optimised IR: " << kept[3] * 1e3 << " ms");
  std::vector<double> levels;
  for (int level = 0; level <= 3; ++level)
    levels.push_back(JitModule::compile(kAddKernel, "add_level", level)->compile_seconds());
  BOOST_TEST_MESSAGE("compile_seconds(add kernel) at O0..O3: " << levels[0] * 1e3 << ", " << levels[1] * 1e3
                                                               << ", " << levels[2] * 1e3 << ", "
                                                               << levels[3] * 1e3 << " ms");
  BOOST_TEST(plain[3] < 5.0);  // sanity only; the budget is in docs/cpu-runtime.md
}

BOOST_AUTO_TEST_CASE(libm_and_intrinsics_resolve_from_the_process) {
  auto m = JitModule::compile(kMathKernel, "math");
  auto* e = m->function<float(float)>("e");
  auto* s = m->function<float(float)>("s");
  BOOST_TEST(e(1.0f) == std::exp(1.0f), boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(s(0.5f) == std::sin(0.5f), boost::test_tools::tolerance(1e-6f));
  auto* math = m->function<void(float*, const float*, int64_t)>("math");
  const int n = 1003;  // not a multiple of any vector width: the remainder loop runs too
  std::vector<float> a(n), out(n);
  for (int i = 0; i < n; ++i) a[i] = -4.0f + 8.0f * i / n;
  math(out.data(), a.data(), n);
  float worst = 0;  // relative error
  for (int i = 0; i < n; ++i) {
    const float want = std::exp(a[i]) + std::sin(a[i]);
    worst = std::max(worst, std::abs(out[i] - want) / std::max(1.0f, std::abs(want)));
  }
  BOOST_TEST_MESSAGE("exp + sin kernel: largest relative error " << worst);
  BOOST_TEST(worst <= 1e-5f);
}

BOOST_AUTO_TEST_CASE(vector_math_calls_libmvec) {
  // exp and sin through intrinsics only (no errno), so the loop vectorises; with libmvec the
  // vector loop calls its _ZGV* entry points, without it LLVM calls expf/sinf per lane.
  const char* ir = R"(
declare float @llvm.exp.f32(float)
declare float @llvm.sin.f32(float)
define void @vmath(ptr noalias %out, ptr noalias %a, i64 %n) {
entry:
  %nonempty = icmp sgt i64 %n, 0
  br i1 %nonempty, label %loop, label %exit
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %pa = getelementptr inbounds float, ptr %a, i64 %i
  %x = load float, ptr %pa, align 4
  %e = call float @llvm.exp.f32(float %x)
  %s = call float @llvm.sin.f32(float %x)
  %r = fadd float %e, %s
  %po = getelementptr inbounds float, ptr %out, i64 %i
  store float %r, ptr %po, align 4
  %next = add nuw nsw i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
)";
  const int n = 4099;
  std::vector<float> a(n);
  for (int i = 0; i < n; ++i) a[i] = -6.0f + 12.0f * i / n;
  for (bool vector_math : {true, false}) {
    kiln::cpu::CompileOptions options;
    options.keep_optimized_ir = true;
    options.vector_math = vector_math;
    auto m = JitModule::compile(ir, "vmath", 3, options);
    const bool calls_libmvec = contains(m->optimized_ir(), "_ZGV");
    BOOST_TEST(calls_libmvec == (vector_math && kiln::cpu::host_info().vector_math));
    std::vector<float> out(n);
    m->function<void(float*, const float*, int64_t)>("vmath")(out.data(), a.data(), n);
    float worst = 0;
    for (int i = 0; i < n; ++i) {
      const double want = std::exp(double(a[i])) + std::sin(double(a[i]));
      worst = std::max(worst, float(std::abs(out[i] - want) / std::max(1.0, std::abs(want))));
    }
    BOOST_TEST_MESSAGE("exp + sin, " << (calls_libmvec ? "libmvec" : "scalar libm")
                                     << ": largest relative error " << worst << ", compile "
                                     << m->compile_seconds() * 1e3 << " ms");
    BOOST_TEST(worst <= 2e-6f);
  }
}

BOOST_AUTO_TEST_CASE(o3_vectorises_a_simple_loop) {
  kiln::cpu::CompileOptions keep;
  keep.keep_optimized_ir = true;
  auto m = JitModule::compile(kAddKernel, "vectorise", 3, keep);
  const std::string& ir = m->optimized_ir();
  const bool vector =
      contains(ir, "<16 x float>") || contains(ir, "<8 x float>") || contains(ir, "<4 x float>");
  BOOST_TEST(vector, "no vector type in the O3 module:\n" << ir);
  BOOST_TEST(contains(ir, "target datalayout"));
  // Without the flag the text is not kept, and asking for it says so.
  auto plain = JitModule::compile(kAddKernel, "no_ir");
  BOOST_TEST(contains(error_of([&] { plain->optimized_ir(); }), "keep_optimized_ir"));
}

BOOST_AUTO_TEST_CASE(bad_ir_names_module_line_and_message) {
  const char* bad = "define i32 @f() {\n  %x = add i32 1, 2\n  ret i32 %y\n}\n";
  const std::string what = error_of([&] { JitModule::compile(bad, "bad_module"); });
  BOOST_TEST_MESSAGE("bad IR: " << what);
  BOOST_TEST(contains(what, "bad_module"));
  BOOST_TEST(contains(what, "bad_module:3:"));
  BOOST_TEST(contains(what, "%y"));
  // Parses but does not verify.
  const char* unverified = "define i32 @f() {\n  ret i64 0\n}\n";
  BOOST_TEST(!error_of([&] { JitModule::compile(unverified, "unverified"); }).empty());
  // A data layout of another machine.
  const std::string foreign =
      "target datalayout = \"E-m:e-p:32:32-i64:64-n32-S64\"\n" + constant_function("f", 1);
  BOOST_TEST(contains(error_of([&] { JitModule::compile(foreign, "foreign"); }), "data layout"));
  // An opt level out of range.
  BOOST_TEST(contains(error_of([&] { JitModule::compile(kAddKernel, "level", 7); }), "opt_level"));
}

BOOST_AUTO_TEST_CASE(unresolved_external_is_an_error) {
  const char* ir =
      "declare void @kiln_no_such_function()\n"
      "define void @f() {\n  call void @kiln_no_such_function()\n  ret void\n}\n";
  const std::string what = error_of([&] { JitModule::compile(ir, "unresolved"); });
  BOOST_TEST_MESSAGE("unresolved: " << what);
  BOOST_TEST(contains(what, "unresolved"));
  BOOST_TEST(contains(what, "kiln_no_such_function"));
}

// A plan or cache entry is native code: its kernels may call the math libraries and the
// compiler's helpers, not the rest of the process. Calls to system(), getenv() and puts()
// (each of which a plan file's kernel once ran) are unresolved symbols, and assembly is refused.
BOOST_AUTO_TEST_CASE(kernels_reach_only_math_and_compiler_helpers) {
  for (const char* fn : {"system", "getenv", "puts", "dlopen", "execve"}) {
    const std::string ir = std::string("declare i32 @") + fn + "(ptr)\n" +
                           "define i32 @f(ptr %p) {\n  %r = call i32 @" + fn + "(ptr %p)\n  ret i32 %r\n}\n";
    const std::string what = error_of([&] { JitModule::compile(ir, "hostile"); });
    BOOST_TEST(contains(what, fn), fn << ": " << what);
  }
  const char* asm_call =
      "define i64 @f() {\n  %r = call i64 asm sideeffect \"movq $$60, %rax\", \"={rax}\"()\n  ret i64 %r\n}\n";
  BOOST_TEST(contains(error_of([&] { JitModule::compile(asm_call, "asm"); }), "inline assembly"));
  const char* module_asm = "module asm \".globl g\"\ndefine void @f() {\n  ret void\n}\n";
  BOOST_TEST(contains(error_of([&] { JitModule::compile(module_asm, "asm"); }), "module-level assembly"));
  // What kernels do call still resolves: libm (and the helpers, through the f16 kernels of the
  // cpu target's own tests).
  const char* libm = "declare float @expf(float)\ndefine float @f(float %x) {\n  %r = call float @expf(float %x)\n  ret float %r\n}\n";
  BOOST_TEST(JitModule::compile(libm, "libm")->function<float(float)>("f")(0.0f) == 1.0f);
}

BOOST_AUTO_TEST_CASE(unknown_symbol_is_an_error) {
  auto m = JitModule::compile(constant_function("f", 3), "lookups");
  BOOST_TEST(m->function<int()>("f")() == 3);
  const std::string what = error_of([&] { m->lookup("g"); });
  BOOST_TEST(contains(what, "'g'"));
  BOOST_TEST(contains(what, "lookups"));
  BOOST_TEST(contains(what, "f"));
}

BOOST_AUTO_TEST_CASE(modules_with_the_same_function_name_coexist) {
  auto one = JitModule::compile(constant_function("f", 1), "same");
  auto two = JitModule::compile(constant_function("f", 2), "same");
  BOOST_TEST(one->function<int()>("f")() == 1);
  BOOST_TEST(two->function<int()>("f")() == 2);
  one.reset();  // frees its code; the other is untouched
  BOOST_TEST(two->function<int()>("f")() == 2);
  auto three = JitModule::compile(constant_function("f", 3), "same");
  BOOST_TEST(three->function<int()>("f")() == 3);
  BOOST_TEST(two->function<int()>("f")() == 2);
}

BOOST_AUTO_TEST_CASE(compiles_from_four_threads_at_once) {
  std::vector<int> results(4 * 5, -1);
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int r = 0; r < 5; ++r) {
          const int value = 100 * t + r;
          auto m = JitModule::compile(constant_function("value", value) + kAddKernel,
                                      "thread" + std::to_string(t));
          results[t * 5 + r] = m->function<int()>("value")();
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    BOOST_TEST(errors[t] == "");
    for (int r = 0; r < 5; ++r) BOOST_TEST(results[t * 5 + r] == 100 * t + r);
  }
}

BOOST_AUTO_TEST_CASE(contract_kernel_runs_on_the_pool) {
  auto m = JitModule::compile(kContractKernel, "contract");
  using Kernel = void(char**, int64_t*, int64_t, int64_t);
  Kernel* kernel = m->function<Kernel>("kernel");
  const int64_t n = 1 << 20;
  std::vector<float> out(n, 0.0f), a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 97);
    b[i] = 0.5f;
  }
  char* buffers[] = {reinterpret_cast<char*>(out.data()), reinterpret_cast<char*>(a.data()),
                     reinterpret_cast<char*>(b.data())};
  int64_t sizes[] = {n};
  kiln::cpu::ThreadPool::global().parallel_for(
      n, 4096, [&](int64_t begin, int64_t end) { kernel(buffers, sizes, begin, end); });
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += out[i] != a[i] * 0.5f + 1.0f;
  BOOST_TEST(wrong == 0);
}

BOOST_AUTO_TEST_SUITE_END()
