// The memory budget: how many bytes of host memory Kiln may hold for one run. Each host
// allocation of a tensor (TensorData::empty_host), the reference interpreter's values held at
// once (eval::run_graph) and the cpu runtime's buffers for one call (plan::Binder) are checked
// against it before anything is allocated, so that a graph that would need more is a
// kiln::Error naming what would be allocated ("run_graph: node %12 (expand) would allocate
// 4.0 TiB ..."), never an out-of-memory kill or a std::bad_alloc.
// The budget is the config option memory_budget_mb (KILN_MEMORY_BUDGET_MB; sdk/config supplies
// the value), or the host's physical memory when that is 0.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace kiln {

// The budget in bytes, now.
int64_t memory_budget_bytes();
// Where the configured budget comes from, in MiB; a source giving 0 (or none set) means the
// host's physical memory. sdk/config installs config::get("memory_budget_mb").
void set_memory_budget_source(std::function<int64_t()> mib);
int64_t physical_memory_bytes();
// "4.0 TiB", "12.5 MiB", "512 bytes": sizes in messages.
std::string bytes_str(int64_t bytes);
// "the memory budget of 23.4 GiB (memory_budget_mb; 0 = the host's physical memory)": the end of
// every message that refuses an allocation.
std::string memory_budget_str();

}  // namespace kiln
