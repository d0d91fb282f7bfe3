// A head start on a background thread (NVRTC's start-up while the caller goes on): the threads
// are never detached and are joined at exit, and what they throw is dropped (the real use
// reports the same failure itself). The join runs when this file's static is destroyed, after
// the statics that the work itself constructed later: work that a process may exit in the
// middle of must not depend on them. cuBLASLt's start-up did, and crashed at exit in short
// processes; it now runs on a thread its executable joins (start_gemm, executable.cpp).
#pragma once

#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace kiln::cuda::detail {

inline void start_in_background(std::function<void()> work) {
  struct Threads {
    std::mutex mu;
    std::vector<std::thread> started;
    ~Threads() {
      for (std::thread& t : started)
        if (t.joinable()) t.join();
    }
  };
  static Threads threads;
  std::lock_guard<std::mutex> lock(threads.mu);
  threads.started.emplace_back([work = std::move(work)] {
    try {
      work();
    } catch (...) {
    }
  });
}

}  // namespace kiln::cuda::detail
