// Process replay: plans written as text to $KILN_REPLAY_DIR (replay.h).
#include "kiln/plan/replay.h"

#include <errno.h>  // program_invocation_short_name (glibc, _GNU_SOURCE)

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

namespace kiln::plan {

namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string program_name() {
#if defined(__GLIBC__)
  return ::program_invocation_short_name ? ::program_invocation_short_name : "kiln";
#else
  return "kiln";
#endif
}

}  // namespace

std::string replay_text(const KernelPlan& p) {
  std::ostringstream os;
  os << p.str() << "arch " << p.arch << "\n";
  for (const PlanKernel& k : p.kernels) {
    os << "kernel " << k.name << ": launch block " << k.launch.block << " items " << k.launch.items_per_block
       << " max_blocks " << k.launch.max_blocks << " shared " << k.launch.shared_bytes << " grid_stride "
       << k.launch.grid_stride << "; language '" << k.language << "'; variants:";
    for (const std::string& v : k.variants) os << " " << v;
    if (k.gemm) {
      const PlanGemm& g = *k.gemm;
      os << "\n  gemm b" << g.a << " x b" << g.b << " -> b" << g.c << " " << dtype_name(g.dtype) << " m " << g.m.str()
         << " n " << g.n.str() << " k " << g.k.str() << " batch " << shape_str(g.batch) << " a_batch_strides "
         << shape_str(g.a_batch_strides) << " b_batch_strides " << shape_str(g.b_batch_strides) << " offsets "
         << g.a_offset.str() << " " << g.b_offset.str() << " a strides " << g.a_row_stride.str() << " "
         << g.a_col_stride.str() << " b strides " << g.b_row_stride.str() << " " << g.b_col_stride.str()
         << " epilogue '" << g.epilogue << "' bias b" << g.bias << " alpha " << g.alpha << " tile " << g.tile[0] << "x" << g.tile[1];
    }
    if (k.kind == "reference") os << "\n  attrs hash " << k.attrs.hash();
    os << "\n";
  }
  os << "prelude:\n" << p.prelude << "\n";
  for (const PlanKernel& k : p.kernels)
    if (!k.source.empty()) os << "source of " << k.name << ":\n" << k.source << "\n";
  return os.str();
}

static const char* replay_dir() {
  static const char* dir = std::getenv("KILN_REPLAY_DIR");
  return dir && *dir ? dir : nullptr;
}

bool replay_enabled() { return replay_dir() != nullptr; }

void record_for_replay(const KernelPlan& p, std::string_view input) {
  const char* dir = replay_dir();
  if (!dir) return;
  static std::mutex mu;
  static std::map<std::string, int> seen;
  try {
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(input)));
    std::string stem = program_name() + "-" + p.target + "-" + hash;
    int n;
    {
      std::lock_guard lock(mu);
      n = seen[stem]++;
    }
    const std::string path = std::string(dir) + "/" + stem + "-" + std::to_string(n) + ".txt";
    const std::string text = replay_text(p);
    if (FILE* f = std::fopen(path.c_str(), "wb")) {
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
    }
  } catch (...) {
    // Replay is a debugging aid: it never changes what the caller sees.
  }
}

}  // namespace kiln::plan
