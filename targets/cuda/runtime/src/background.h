// A head start on a background thread (NVRTC's and cuBLASLt's start-up while the caller goes on):
// the threads are joined at exit, before those libraries' own statics go, never detached, and
// what they throw is dropped (the real use reports the same failure itself).
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
