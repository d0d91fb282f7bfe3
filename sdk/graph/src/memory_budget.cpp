// The memory budget (memory_budget.h).
#include "kiln/graph/memory_budget.h"

#include <unistd.h>

#include <cstdio>

namespace kiln {

namespace {
// A function-local static: sdk/config sets it during static initialisation.
std::function<int64_t()>& source() {
  static std::function<int64_t()> s;
  return s;
}
}  // namespace

void set_memory_budget_source(std::function<int64_t()> mib) { source() = std::move(mib); }

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  // Unknown (a sandbox without /proc): no bound but the per-tensor one (2^48 bytes).
  if (pages <= 0 || page <= 0) return int64_t{1} << 48;
  return static_cast<int64_t>(pages) * static_cast<int64_t>(page);
}

int64_t memory_budget_bytes() {
  const int64_t mib = source() ? source()() : 0;
  if (mib <= 0) return physical_memory_bytes();
  return mib >= (int64_t{1} << 43) ? INT64_MAX : mib << 20;
}

std::string bytes_str(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 5) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string memory_budget_str() {
  const bool configured = source() && source()() > 0;
  return "the memory budget of " + bytes_str(memory_budget_bytes()) +
         (configured ? " (memory_budget_mb)" : " (the host's physical memory; memory_budget_mb sets another)");
}

}  // namespace kiln
