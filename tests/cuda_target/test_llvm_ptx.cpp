// LLVM IR -> PTX (LLVM 16's NVPTX backend, libdevice linked in) -> cubin (nvJitLink), without a
// GPU: a small kernel with vector loads and libdevice calls compiles for sm_80 and sm_90 (the
// per-stage medians are printed); bad IR, IR the NVPTX backend cannot lower and bad PTX give
// kiln::Errors naming the program and the place; architectures LLVM 16 does not know are refused;
// the CPU target's JIT and this path compile side by side on two threads.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/cpu/jit.h"
#include "kiln/cuda/llvm_ptx.h"
#include "kiln/graph/error.h"

using namespace kiln;

namespace {

// out[i] = f(a[i]) + g(b[i]) over n4 float4s, one float4 per thread, read with <4 x float> loads:
// what a codegen for the NVPTX target prints. By default f and g are libdevice's tanhf and sinf.
std::string tanh_sin_kernel_ir(const std::string& f = "__nv_tanhf", const std::string& g = "__nv_sinf") {
  std::string lanes;
  for (int l = 0; l < 4; ++l) {
    const std::string i = std::to_string(l), prev = l == 0 ? "undef" : "%r" + std::to_string(l - 1);
    lanes += "  %a" + i + " = extractelement <4 x float> %va, i32 " + i + "\n" +
             "  %b" + i + " = extractelement <4 x float> %vb, i32 " + i + "\n" +
             "  %t" + i + " = call float @" + f + "(float %a" + i + ")\n" +
             "  %s" + i + " = call float @" + g + "(float %b" + i + ")\n" +
             "  %y" + i + " = fadd float %t" + i + ", %s" + i + "\n" +
             "  %r" + i + " = insertelement <4 x float> " + prev + ", float %y" + i + ", i32 " + i + "\n";
  }
  return R"(target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare float @)" + f + R"((float)
)" + (g == f ? "" : "declare float @" + g + "(float)\n") + R"(declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()

define void @tanh_sin(ptr %a, ptr %b, ptr %out, i64 %n4) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %first = mul i32 %ctaid, %ntid
  %i32 = add i32 %first, %tid
  %i = zext i32 %i32 to i64
  %inside = icmp slt i64 %i, %n4
  br i1 %inside, label %body, label %done
body:
  %pa = getelementptr <4 x float>, ptr %a, i64 %i
  %pb = getelementptr <4 x float>, ptr %b, i64 %i
  %po = getelementptr <4 x float>, ptr %out, i64 %i
  %va = load <4 x float>, ptr %pa, align 16
  %vb = load <4 x float>, ptr %pb, align 16
)" + lanes + R"(  store <4 x float> %r3, ptr %po, align 16
  br label %done
done:
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{ptr @tanh_sin, !"kernel", i32 1}
)";
}

// "parse 0.41 ms, libdevice 0.52 ms, opt 1.10 ms, codegen 0.83 ms" -> {0.41, 0.52, 1.10, 0.83}.
std::vector<double> stage_ms(const std::string& timing) {
  std::vector<double> ms(4, -1);
  std::sscanf(timing.c_str(), "parse %lf ms, libdevice %lf ms, opt %lf ms, codegen %lf ms", &ms[0], &ms[1], &ms[2],
              &ms[3]);
  return ms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "(no kiln::Error)";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(llvm_ptx)

BOOST_AUTO_TEST_CASE(kernel_with_libdevice_calls_compiles_to_ptx_and_cubin) {
  const std::string ir = tanh_sin_kernel_ir();
  for (int arch : {80, 90}) {
    const cuda::PtxOutput out = cuda::ptx_from_llvm_ir(ir, arch, "tanh_sin");
    BOOST_TEST_MESSAGE("sm_" << arch << ": PTX in " << out.seconds * 1e3 << " ms (" << out.timing << ")");
    BOOST_TEST(out.ptx.find(".visible .entry tanh_sin(") != std::string::npos);
    BOOST_TEST(out.ptx.find(".target sm_" + std::to_string(arch)) != std::string::npos);
    BOOST_TEST(out.ptx.find(".version 7.8") != std::string::npos);
    BOOST_TEST(out.ptx.find("ld.global.v4.f32") != std::string::npos);  // the vector loads, from global memory
    // libdevice's bodies were linked and inlined: nothing is left to resolve.
    BOOST_TEST(out.ptx.find("__nv_") == std::string::npos);
    BOOST_TEST(out.ptx.find("__nvvm_reflect") == std::string::npos);
    double link_seconds = 0;
    const std::string cubin = cuda::cubin_from_ptx(out.ptx, arch, "tanh_sin", &link_seconds);
    BOOST_TEST_MESSAGE("sm_" << arch << ": cubin (" << cubin.size() << " bytes) in " << link_seconds * 1e3 << " ms");
    BOOST_REQUIRE(cubin.size() > 4);
    BOOST_TEST(cubin.compare(0, 4, "\x7f" "ELF") == 0);
  }
}

BOOST_AUTO_TEST_CASE(per_stage_times) {
  const std::string ir = tanh_sin_kernel_ir();
  constexpr int kCalls = 9;
  std::vector<std::vector<double>> stages(5);
  for (int c = 0; c < kCalls; ++c) {
    const cuda::PtxOutput out = cuda::ptx_from_llvm_ir(ir, 90, "tanh_sin");
    const std::vector<double> ms = stage_ms(out.timing);
    for (int s = 0; s < 4; ++s) stages[s].push_back(ms[s]);
    double link_seconds = 0;
    cuda::cubin_from_ptx(out.ptx, 90, "tanh_sin", &link_seconds);
    stages[4].push_back(link_seconds * 1e3);
  }
  const char* names[] = {"parse", "libdevice", "opt", "codegen", "nvJitLink"};
  std::string line;
  for (int s = 0; s < 5; ++s) {
    BOOST_TEST(median(stages[s]) >= 0);
    char part[64];
    std::snprintf(part, sizeof part, "%s%s %.2f ms", s ? ", " : "", names[s], median(stages[s]));
    line += part;
  }
  BOOST_TEST_MESSAGE("tanh_sin for sm_90, median of " << kCalls << " calls: " << line);
  // Without libdevice calls nothing is linked.
  const cuda::PtxOutput out = cuda::ptx_from_llvm_ir(tanh_sin_kernel_ir("llvm.sqrt.f32", "llvm.fabs.f32"), 90, "sqrt");
  BOOST_TEST(stage_ms(out.timing)[1] < 0.05, out.timing);
  BOOST_TEST(out.ptx.find("sqrt.rn.f32") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_ir_names_the_program_and_the_line) {
  // A parse error on line 3.
  const std::string bad_syntax = "target triple = \"nvptx64-nvidia-cuda\"\n"
                                 "define void @k(ptr %p) {\n"
                                 "  %x = fadd float %p, \n"
                                 "  ret void\n"
                                 "}\n";
  const std::string m1 = message_of([&] { cuda::ptx_from_llvm_ir(bad_syntax, 80, "broken"); });
  BOOST_TEST(m1.find("'broken'") != std::string::npos, m1);
  BOOST_TEST(m1.find("broken.ll:3:") != std::string::npos, m1);
  // Parses, but the verifier refuses it (a value used where its definition does not dominate).
  const std::string bad_ssa = "define void @k(i1 %c) {\n"
                              "entry:\n"
                              "  br i1 %c, label %a, label %b\n"
                              "a:\n"
                              "  %x = add i32 1, 2\n"
                              "  br label %b\n"
                              "b:\n"
                              "  %y = add i32 %x, 1\n"
                              "  ret void\n"
                              "}\n";
  const std::string m2 = message_of([&] { cuda::ptx_from_llvm_ir(bad_ssa, 80, "undominated"); });
  BOOST_TEST(m2.find("'undominated'") != std::string::npos, m2);
  BOOST_TEST(m2.find("dominate") != std::string::npos, m2);
  // Another target's module; a libdevice function that does not exist; garbage.
  const std::string m3 = message_of([] {
    cuda::ptx_from_llvm_ir("target triple = \"x86_64-pc-linux-gnu\"\n", 80, "host_module");
  });
  BOOST_TEST(m3.find("'host_module'") != std::string::npos, m3);
  BOOST_TEST(m3.find("x86_64") != std::string::npos, m3);
  const std::string m4 = message_of([] { cuda::ptx_from_llvm_ir("\x01\xff garbage {{{", 80, "garbage"); });
  BOOST_TEST(m4.find("garbage.ll:1:") != std::string::npos, m4);
  // Valid IR that LLVM 16's NVPTX backend would abort the process on.
  const std::pair<std::string, std::string> unlowerable[] = {
      {"define i128 @k(i128 %a, i128 %b) {\n  %c = sdiv i128 %a, %b\n  ret i128 %c\n}\n", "wider than 64 bits"},
      {"declare float @llvm.exp.f32(float)\n"
       "define float @k(float %x) {\n  %y = call float @llvm.exp.f32(float %x)\n  ret float %y\n}\n",
       "libdevice"},
      {"define fp128 @k(fp128 %a) {\n  %c = fadd fp128 %a, %a\n  ret fp128 %c\n}\n", "128"},
      {"define bfloat @k(float %a) {\n  %c = fptrunc float %a to bfloat\n  ret bfloat %c\n}\n", "bfloat"},
      {"declare double @llvm.maximum.f64(double, double)\n"
       "define double @k(double %a, double %b) {\n"
       "  %c = call double @llvm.maximum.f64(double %a, double %b)\n  ret double %c\n}\n",
       "max.NaN"},
  };
  for (const auto& [ir, why] : unlowerable) {
    const std::string m = message_of([&] { cuda::ptx_from_llvm_ir(ir, 90, "unlowerable"); });
    BOOST_TEST(m.find("'unlowerable'") != std::string::npos, m);
    BOOST_TEST(m.find(why) != std::string::npos, m);
  }
  // Bad PTX: nvJitLink's log comes back.
  const std::string m5 = message_of([] {
    cuda::cubin_from_ptx(".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry k() { bogus; }\n", 80,
                         "bad_ptx");
  });
  BOOST_TEST(m5.find("'bad_ptx'") != std::string::npos, m5);
  BOOST_TEST(m5.find("bogus") != std::string::npos, m5);
}

BOOST_AUTO_TEST_CASE(architectures_llvm_16_does_not_know_are_refused) {
  for (int arch : {80, 86, 87, 89, 90}) BOOST_TEST(cuda::llvm_ptx_supports(arch), "sm_" << arch);
  for (int arch : {75, 100, 103, 120, 0, -1}) BOOST_TEST(!cuda::llvm_ptx_supports(arch), "sm_" << arch);
  for (int arch = cuda::kLlvmNewestArch + 1; arch < 200; ++arch) BOOST_TEST(!cuda::llvm_ptx_supports(arch), "sm_" << arch);
  const std::string m = message_of([] { cuda::ptx_from_llvm_ir(tanh_sin_kernel_ir(), 120, "blackwell"); });
  BOOST_TEST(m.find("'blackwell'") != std::string::npos, m);
  BOOST_TEST(m.find("sm_120") != std::string::npos, m);
}

// The CPU target's JIT (which initialises LLVM's host target) and the NVPTX path in one process,
// at the same time on two threads.
BOOST_AUTO_TEST_CASE(compiles_beside_the_cpu_jit_on_two_threads) {
  const std::string cpu_ir = "define i32 @add1(i32 %x) {\n  %y = add i32 %x, 1\n  ret i32 %y\n}\n";
  const std::string gpu_ir = tanh_sin_kernel_ir();
  std::string gpu_ptx, cpu_error, gpu_error;
  int cpu_result = 0;
  std::thread cpu([&] {
    try {
      for (int i = 0; i < 3; ++i) {
        auto module = cpu::JitModule::compile(cpu_ir, "add1");
        cpu_result = module->function<int(int)>("add1")(41);
      }
    } catch (const std::exception& e) {
      cpu_error = e.what();
    }
  });
  std::thread gpu([&] {
    try {
      for (int i = 0; i < 3; ++i) gpu_ptx = cuda::ptx_from_llvm_ir(gpu_ir, 86, "tanh_sin").ptx;
    } catch (const std::exception& e) {
      gpu_error = e.what();
    }
  });
  cpu.join();
  gpu.join();
  BOOST_TEST(cpu_error.empty(), cpu_error);
  BOOST_TEST(gpu_error.empty(), gpu_error);
  BOOST_TEST(cpu_result == 42);
  BOOST_TEST(gpu_ptx.find(".target sm_86") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
