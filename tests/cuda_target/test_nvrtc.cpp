// NVRTC through targets/cuda/runtime: a module compiles to a cubin for sm_80 and sm_90 and to PTX;
// a module with an error gives a kiln::Error naming the program and architecture, with NVRTC's
// log and the numbered source; the prelude of generated kernels compiles on its own.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "kiln/cuda/codegen.h"
#include "kiln/cuda/executable.h"
#include "kiln/cuda/nvrtc.h"
#include "kiln/graph/error.h"
#include "kiln/graph/graph.h"
#include "kiln/schedule/schedule.h"
#include "kiln_test_util.h"

using namespace kiln;

BOOST_AUTO_TEST_SUITE(nvrtc)

BOOST_AUTO_TEST_CASE(compiles_to_cubin_and_ptx) {
  const std::string src = std::string(cuda::prelude()) +
                          "extern \"C\" __global__ void add(const float* a, float* b, long long n) {\n"
                          "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
                          "  if (i < n) b[i] = a[i] + kiln_bf2f(kiln_f2bf(1.5f));\n"
                          "}\n";
  for (int arch : {80, 90}) {
    const cuda::NvrtcOutput c = cuda::nvrtc_compile(src, "add", arch, true);
    BOOST_TEST(c.cubin);
    BOOST_REQUIRE(c.image.size() > 4);
    BOOST_TEST(c.image.substr(1, 3) == "ELF");  // a cubin is an ELF image
    const cuda::NvrtcOutput p = cuda::nvrtc_compile(src, "add", arch, false);
    BOOST_TEST(p.image.find(".entry add") != std::string::npos);
    BOOST_TEST(p.image.find(".target sm_" + std::to_string(arch)) != std::string::npos);
  }
  BOOST_TEST(!cuda::nvrtc_version().empty());
  const std::vector<int> archs = cuda::nvrtc_supported_archs();
  BOOST_TEST((std::find(archs.begin(), archs.end(), 90) != archs.end()));
}

BOOST_AUTO_TEST_CASE(errors_name_the_program_with_log_and_source) {
  const std::string src = "extern \"C\" __global__ void k(float* a) {\n  a[0] = undefined_thing;\n}\n";
  const std::string e = kiln_test_util::error_of([&] { cuda::nvrtc_compile(src, "broken_kernel", 80); });
  BOOST_TEST(kiln_test_util::contains(e, "NVRTC: program 'broken_kernel' does not compile for sm_80"), e);
  BOOST_TEST(kiln_test_util::contains(e, "undefined_thing"), e);
  BOOST_TEST(kiln_test_util::contains(e, "    2 |   a[0] = undefined_thing;"), e);
  const std::string bad_arch = kiln_test_util::error_of([&] { cuda::nvrtc_compile(src, "k", 8); });
  BOOST_TEST(kiln_test_util::contains(bad_arch, "compute capability 8 for program 'k' is not one"), bad_arch);
}

// The runtime's process cache of images: a second compile of a source is a hit (no NVRTC time),
// and after forget_modules (what `kiln bench` does before a compiled mode's first call) NVRTC
// runs again. Needs no device.
BOOST_AUTO_TEST_CASE(process_cache_hits_until_forgotten) {
  const std::string src = "extern \"C\" __global__ void kiln_cache_probe(float* a) { a[threadIdx.x] *= 3.f; }\n";
  const cuda::CompiledModule first = cuda::compile_module(src, 90, "probe");
  const cuda::CompiledModule again = cuda::compile_module(src, 90, "probe");
  BOOST_TEST(again.seconds == 0.0);
  BOOST_TEST(again.image == first.image);
  cuda::forget_modules();
  const cuda::CompiledModule cold = cuda::compile_module(src, 90, "probe");
  BOOST_TEST(cold.seconds > 0.0);
  BOOST_TEST(cold.image.size() == first.image.size());
}

// The flash attention kernels of the common configurations are built with the library
// (targets/cuda/runtime/src/prebuilt.h): the suite's attention program loads its prebuilt image
// for sm_90 and, on an sm_86 device, the sm_80 one; NVRTC compiles it for sm_75 (no prebuilt
// image runs there), and a program that differs by one character is never taken for it. The
// plan for an sm_90 device (the wgmma kernel) has its own image.
BOOST_AUTO_TEST_CASE(flash_kernels_are_prebuilt) {
  Graph g;
  auto input = [&](const char* name) {
    return g.add_input(TensorMeta{DType::bf16, Device::cuda(0), SymShape{4, 16, 2048, 64}, {}}, name);
  };
  const NodeId q = input("q"), k = input("k"), v = input("v");
  g.set_outputs({g.add(OpId::scaled_dot_product_attention, {q, k, v}, {0.125})});
  const plan::KernelPlan p = cuda::generate(schedule::schedule_graph(g, cuda::schedule_target()), cuda::CodegenOptions{});
  BOOST_REQUIRE_EQUAL(p.kernels.size(), 1u);
  BOOST_REQUIRE(p.kernels[0].fixed_signature());
  const std::string src = p.kernel_program(0);
  cuda::forget_modules();
  const cuda::CompiledModule m90 = cuda::compile_module(src, 90, "flash");
  BOOST_TEST(m90.prebuilt);
  BOOST_TEST(m90.arch == 90);
  BOOST_TEST(m90.seconds == 0.0);
  // The same bytes NVRTC makes of it now.
  BOOST_TEST((m90.image == cuda::nvrtc_compile(src, "flash", 90).image));
  const cuda::CompiledModule m86 = cuda::compile_module(src, 86, "flash");
  BOOST_TEST(m86.prebuilt);
  BOOST_TEST(m86.arch == 80);
  const cuda::CompiledModule m75 = cuda::compile_module(src, 75, "flash");
  BOOST_TEST(!m75.prebuilt);
  BOOST_TEST(m75.seconds > 0.0);
  const cuda::CompiledModule other = cuda::compile_module(src + "\n", 90, "flash");
  BOOST_TEST(!other.prebuilt);
  BOOST_TEST(other.seconds > 0.0);

  // The plan for an sm_90 device has the wgmma kernel: prebuilt for sm_90 (as sm_90a) too.
  cuda::CodegenOptions hopper;
  hopper.arch = 90;
  const plan::KernelPlan p90 = cuda::generate(schedule::schedule_graph(g, cuda::schedule_target()), hopper);
  BOOST_REQUIRE_EQUAL(p90.kernels.size(), 1u);
  BOOST_TEST(p90.kernels[0].entry.rfind("kiln_flash_sm90_", 0) == 0, p90.kernels[0].entry);
  const std::string src90 = p90.kernel_program(0);
  const cuda::CompiledModule w90 = cuda::compile_module(src90, 90, "flash_sm90");
  BOOST_TEST(w90.prebuilt);
  BOOST_TEST((w90.image == cuda::nvrtc_compile(src90, "flash_sm90", 90).image));

  // Masked ones too (BERT's padding, broadcast otherwise than the prebuilt graph's: the
  // program is the same), for any device and for sm_90.
  Graph mg;
  auto min = [&](const char* name, DType t, SymShape s) { return mg.add_input(TensorMeta{t, Device::cuda(0), s, {}}, name); };
  const NodeId mq = min("q", DType::f16, {3, 12, 100, 64}), mk = min("k", DType::f16, {3, 12, 100, 64}),
               mv = min("v", DType::f16, {3, 12, 100, 64}), mm = min("mask", DType::f16, {3, 1, 100, 100});
  mg.set_outputs({mg.add(OpId::scaled_dot_product_attention, {mq, mk, mv, mm}, {0.125})});
  for (int arch : {0, 90}) {
    cuda::CodegenOptions o;
    o.arch = arch;
    const plan::KernelPlan mp = cuda::generate(schedule::schedule_graph(mg, cuda::schedule_target()), o);
    BOOST_REQUIRE_EQUAL(mp.kernels.size(), 1u);
    BOOST_TEST(mp.kernels[0].entry.ends_with("_madd"), mp.kernels[0].entry);
    BOOST_TEST(cuda::compile_module(mp.kernel_program(0), 90, "flash_masked").prebuilt, "arch " << arch);
  }
}

BOOST_AUTO_TEST_SUITE_END()
