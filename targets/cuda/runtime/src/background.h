// A head start on a background thread (NVRTC's start-up while the caller goes on): the threads
// are never detached and are joined at exit, and what they throw is dropped (the real use
// reports the same failure itself). The join runs when this file's static is destroyed, after
// the statics that the work itself constructed later: work that a process may exit in the
// middle of must not depend on them. cuBLASLt's start-up did, and crashed at exit in short
// processes; it now runs on a thread its executable joins (start_gemm, executable.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/config/log.h"

namespace kiln::cuda::detail {

// Work under way on background threads (the head starts below, cuBLASLt's start-up), counted so
// that the exit can wait for it: the toolkit's libraries are loaded when first used, often by
// such a thread, so their statics are constructed after this file's and would be destroyed
// first, under a thread still inside them. toolkit_api.cpp registers wait_for_background_work
// with atexit right after it loads a library, so it runs before that library's destructors
// (atexit handlers run in the reverse order of their registration).
struct BackgroundWork {
  std::mutex mu;
  std::condition_variable idle;
  int running = 0;
};
inline BackgroundWork& background_work() {
  static BackgroundWork& w = *new BackgroundWork;  // never destroyed: the atexit wait reads it
  return w;
}
// Counts one piece of work from before its thread starts to when it ends.
class BackgroundScope {
 public:
  BackgroundScope() {
    std::lock_guard<std::mutex> lock(background_work().mu);
    ++background_work().running;
  }
  BackgroundScope(const BackgroundScope&) = delete;
  ~BackgroundScope() {
    std::lock_guard<std::mutex> lock(background_work().mu);
    if (--background_work().running == 0) background_work().idle.notify_all();
  }
};
inline void wait_for_background_work() {
  std::unique_lock<std::mutex> lock(background_work().mu);
  background_work().idle.wait(lock, [] { return background_work().running == 0; });
}

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
  threads.started.emplace_back([work = std::move(work), counted = std::make_shared<BackgroundScope>()] {
    try {
      work();
    } catch (...) {
    }
  });
}

// A library's problems set up so far (cuDNN's prepared convolutions, cuBLASLt's heuristic
// results), by their key, for every thread. Kept in a never-destroyed static, as the library
// handles they go with.
template <class V>
struct ProblemTable {
  std::mutex mu;
  std::map<std::string, V> by_key;
};

// A library's start-up on a thread of its own: `start` (loading the library, its handle on the
// context), then `set_up` of each problem (its heuristic; one of symbolic sizes fails and is
// left to its first call). What they throw is dropped: the real call reports the same failure
// itself. `library` names it in the cache log, which says how long each part took and whether
// it ran ahead of a plan (CudaRuntime::start_device_setup, with sample problems) or for one
// being loaded; the caller joins the thread (an empty one when there are no problems) before
// its first run.
template <class Problem, class Start, class SetUp>
std::thread start_library(const char* library, bool ahead_of_plan, std::vector<Problem> problems, Start start, SetUp set_up) {
  if (problems.empty()) return {};
  return std::thread([library, ahead_of_plan, problems = std::move(problems), start = std::move(start),
                      set_up = std::move(set_up), counted = std::make_shared<BackgroundScope>()] {
    using Clock = std::chrono::steady_clock;
    auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    const Clock::time_point t0 = Clock::now();
    try {
      start();
    } catch (const std::exception&) {
      return;
    }
    const Clock::time_point t1 = Clock::now();
    for (const Problem& p : problems) {
      try {
        set_up(p);
      } catch (const std::exception&) {
      }
    }
    KILN_LOG(cache, "cuda runtime: ", library, " started ", ahead_of_plan ? "ahead of a plan " : "", "in ", ms(t0, t1), " ms, ",
             problems.size(), ahead_of_plan ? " sample" : "", " problems set up in ", ms(t1, Clock::now()),
             " ms (a background thread)");
  });
}

// Time the libraries spent setting up problems on the calling threads (cuDNN's and cuBLASLt's
// descriptors and heuristics, the first time a problem is met), for the first call's log.
inline std::atomic<int64_t>& library_setup_ns() {
  static std::atomic<int64_t> ns{0};
  return ns;
}
class LibrarySetupClock {
 public:
  LibrarySetupClock() : start_(std::chrono::steady_clock::now()) {}
  LibrarySetupClock(const LibrarySetupClock&) = delete;
  ~LibrarySetupClock() {
    library_setup_ns() += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kiln::cuda::detail
