// kiln/cuda/llvm_ptx.h: LLVM IR -> PTX through the CUDA target's LLVM module (loaded at first use,
// src/llvm_ptx_module.h), PTX -> cubin through nvJitLink (loaded at first use, src/toolkit_api.h).
#include "kiln/cuda/llvm_ptx.h"

#include <nvJitLink.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "background.h"
#include "kiln/config/modules.h"
#include "kiln/graph/error.h"
#include "llvm_ptx_module.h"
#include "toolkit_api.h"

namespace kiln::cuda {
namespace {

using Clock = std::chrono::steady_clock;

std::string sm(int arch) { return "sm_" + std::to_string(arch); }

const detail::PtxTable& ptx_module() {
  static const detail::PtxTable& table = *[] {
    using Entry = const detail::PtxTable* (*)();
    return reinterpret_cast<Entry>(modules::entry("kiln_cuda_llvm", "kiln_cuda_llvm_table", "the cuda target's LLVM compiler"))();
  }();
  return table;
}

}  // namespace

bool llvm_ptx_supports(int arch) { return ptx_module().supports(arch); }

PtxOutput ptx_from_llvm_ir(const std::string& ir, int arch, const std::string& name) {
  return ptx_from_llvm_ir(std::vector<std::string>{ir}, arch, name);
}

PtxOutput ptx_from_llvm_ir(const std::vector<std::string>& modules, int arch, const std::string& name) {
  return ptx_module().compile(modules, arch, name);
}

namespace {

struct JitLink {
  nvJitLinkHandle handle = nullptr;
  ~JitLink() {
    if (handle) detail::nvjitlink_api().nvJitLinkDestroy(&handle);
  }
};

// "error 4 (PTX compile error)"; named are the codes every nvJitLink 12 and 13 has.
std::string result_text(nvJitLinkResult r) {
  const char* what = "";
  switch (r) {
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION: what = " (unrecognized option)"; break;
    case NVJITLINK_ERROR_MISSING_ARCH: what = " (no -arch)"; break;
    case NVJITLINK_ERROR_INVALID_INPUT: what = " (invalid input)"; break;
    case NVJITLINK_ERROR_PTX_COMPILE: what = " (PTX compile error)"; break;
    case NVJITLINK_ERROR_INTERNAL: what = " (internal error)"; break;
    default: break;
  }
  return "error " + std::to_string(static_cast<int>(r)) + what;
}

std::string error_log(nvJitLinkHandle handle) {
  size_t n = 0;
  if (!handle || detail::nvjitlink_api().nvJitLinkGetErrorLogSize(handle, &n) != NVJITLINK_SUCCESS || n == 0) return "(no log)";
  std::string log(n, '\0');
  if (detail::nvjitlink_api().nvJitLinkGetErrorLog(handle, log.data()) != NVJITLINK_SUCCESS) return "(no log)";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

}  // namespace

std::string cubin_from_ptx(const std::string& ptx, int arch, const std::string& name, double* seconds) {
  KILN_CHECK(arch >= 50 && arch < 1000, "nvJitLink: compute capability ", arch, " for program '", name,
             "' is not one (give e.g. 80 for sm_80)");
  const Clock::time_point start = Clock::now();
  const std::string arch_option = "-arch=" + sm(arch);
  const char* options[] = {arch_option.c_str()};
  JitLink link;
  nvJitLinkResult r = detail::nvjitlink_api().nvJitLinkCreate(&link.handle, 1, options);
  if (r == NVJITLINK_SUCCESS)
    r = detail::nvjitlink_api().nvJitLinkAddData(link.handle, NVJITLINK_INPUT_PTX, ptx.data(), ptx.size(), (name + ".ptx").c_str());
  if (r == NVJITLINK_SUCCESS) r = detail::nvjitlink_api().nvJitLinkComplete(link.handle);
  if (r != NVJITLINK_SUCCESS)
    fail("nvJitLink: program '", name, "' does not compile for ", sm(arch), " (", result_text(r), "):\n",
         error_log(link.handle));
  size_t n = 0;
  std::string cubin;
  r = detail::nvjitlink_api().nvJitLinkGetLinkedCubinSize(link.handle, &n);
  if (r == NVJITLINK_SUCCESS) {
    cubin.resize(n);
    r = detail::nvjitlink_api().nvJitLinkGetLinkedCubin(link.handle, cubin.data());
  }
  if (r != NVJITLINK_SUCCESS) fail("nvJitLink: no cubin for program '", name, "' (", result_text(r), ")");
  if (seconds) *seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return cubin;
}

void llvm_ptx_prewarm(int arch) {
  static std::once_flag once;
  std::call_once(once, [arch] {
    if (!llvm_ptx_supports(std::min(arch, kLlvmNewestArch))) return;
    detail::start_in_background([arch] {
      const PtxOutput ptx = ptx_from_llvm_ir(R"(target triple = "nvptx64-nvidia-cuda"
declare float @__nv_expf(float)
define void @kiln_prewarm(ptr addrspace(1) %p) {
  %x = load float, ptr addrspace(1) %p
  %y = call float @__nv_expf(float %x)
  store float %y, ptr addrspace(1) %p
  ret void
}
!nvvm.annotations = !{!0}
!0 = !{ptr @kiln_prewarm, !"kernel", i32 1}
)", std::min(arch, kLlvmNewestArch), "kiln_prewarm");
      cubin_from_ptx(ptx.ptx, arch, "kiln_prewarm");
    });
  });
}

}  // namespace kiln::cuda
