#include "kiln/cuda/nvrtc.h"

#include <nvrtc.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <sstream>

#include "kiln/graph/error.h"
#include "toolkit_api.h"
#include "background.h"

namespace kiln::cuda {

namespace {

void check(nvrtcResult r, const char* call, const std::string& name) {
  if (r != NVRTC_SUCCESS) fail("NVRTC: ", call, " failed for program '", name, "': ", detail::nvrtc_api().nvrtcGetErrorString(r));
}

struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p) detail::nvrtc_api().nvrtcDestroyProgram(&p);
  }
};

std::string program_log(nvrtcProgram p, const std::string& name) {
  size_t n = 0;
  check(detail::nvrtc_api().nvrtcGetProgramLogSize(p, &n), "nvrtcGetProgramLogSize", name);
  std::string log(n, '\0');
  if (n > 0) check(detail::nvrtc_api().nvrtcGetProgramLog(p, log.data()), "nvrtcGetProgramLog", name);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

const std::vector<std::string>& env_options() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> o;
    if (const char* e = std::getenv("KILN_NVRTC_OPTIONS")) {
      std::istringstream in(e);
      for (std::string w; in >> w;) o.push_back(w);
    }
    return o;
  }();
  return v;
}

}  // namespace

std::string nvrtc_env_options() {
  std::string all;
  for (const std::string& o : env_options()) all += (all.empty() ? "" : " ") + o;
  return all;
}

std::string numbered_source(const std::string& source) {
  std::istringstream in(source);
  std::ostringstream out;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    char num[16];
    std::snprintf(num, sizeof num, "%5d | ", ++n);
    out << num << line << "\n";
  }
  return out.str();
}

NvrtcOutput nvrtc_compile(const std::string& source, const std::string& name, int arch, bool cubin,
                          const std::vector<std::string>& extra) {
  KILN_CHECK(arch >= 50 && arch < 1000, "NVRTC: compute capability ", arch, " for program '", name,
             "' is not one (give e.g. 80 for sm_80)");
  const auto start = std::chrono::steady_clock::now();
  Program prog;
  check(detail::nvrtc_api().nvrtcCreateProgram(&prog.p, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram",
        name);
  // --no-cache: NVRTC 13 keeps its own cache of images in the driver's compute cache; Kiln's plan
  // cache (sdk/cache) already keeps them, so a second cache would only cost a write per miss and
  // make a compile with Kiln's caches off not cold. -minimal: Kiln's kernels use none of the CUDA
  // runtime's device API that it leaves out, and each program compiles ~5 ms sooner.
  // A cubin for sm_90 is built for sm_90a: it runs on the same devices (compute capability 9.0
  // exactly) and may use Hopper's own instructions (wgmma: the sm_90 flash-attention kernel).
  const std::string target = cubin ? "--gpu-architecture=sm_" + std::to_string(arch) + (arch == 90 ? "a" : "")
                                   : "--gpu-architecture=compute_" + std::to_string(arch);
  std::vector<std::string> opts = {target, "-std=c++17", "-default-device", "--fmad=true", "--no-cache", "-minimal"};
  opts.insert(opts.end(), extra.begin(), extra.end());
  const std::vector<std::string>& from_env = env_options();
  opts.insert(opts.end(), from_env.begin(), from_env.end());
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  const nvrtcResult r = detail::nvrtc_api().nvrtcCompileProgram(prog.p, static_cast<int>(argv.size()), argv.data());
  NvrtcOutput out;
  out.cubin = cubin;
  out.log = program_log(prog.p, name);
  if (r != NVRTC_SUCCESS) {
    std::string all;
    for (const std::string& o : opts) all += " " + o;
    fail("NVRTC: program '", name, "' does not compile for sm_", arch, " (", detail::nvrtc_api().nvrtcGetErrorString(r), ", options", all,
         "):\n", out.log, "\nsource:\n", numbered_source(source));
  }
  size_t n = 0;
  if (cubin) {
    check(detail::nvrtc_api().nvrtcGetCUBINSize(prog.p, &n), "nvrtcGetCUBINSize", name);
    out.image.resize(n);
    check(detail::nvrtc_api().nvrtcGetCUBIN(prog.p, out.image.data()), "nvrtcGetCUBIN", name);
  } else {
    check(detail::nvrtc_api().nvrtcGetPTXSize(prog.p, &n), "nvrtcGetPTXSize", name);
    out.image.resize(n);
    check(detail::nvrtc_api().nvrtcGetPTX(prog.p, out.image.data()), "nvrtcGetPTX", name);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

void nvrtc_prewarm(int arch) {
  static std::once_flag once;
  std::call_once(once, [arch] {
    detail::start_in_background([arch] {
      nvrtc_compile("extern \"C\" __global__ void kiln_prewarm(float* p) { if (p) p[threadIdx.x] = 0.f; }\n",
                    "kiln_prewarm", arch, true);
    });
  });
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(detail::nvrtc_api().nvrtcVersion(&major, &minor), "nvrtcVersion", "-");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<int> nvrtc_supported_archs() {
  int n = 0;
  check(detail::nvrtc_api().nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs", "-");
  std::vector<int> a(static_cast<size_t>(n));
  if (n > 0) check(detail::nvrtc_api().nvrtcGetSupportedArchs(a.data()), "nvrtcGetSupportedArchs", "-");
  return a;
}

}  // namespace kiln::cuda
