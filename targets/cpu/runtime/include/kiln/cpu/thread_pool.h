// kiln::cpu::ThreadPool: runs fn(begin, end) over [0, n) in chunks on a fixed set of worker
// threads (size() - 1 workers plus the calling thread). Chunks are at least `grain` long and
// are claimed from an atomic counter, so uneven chunks balance themselves. n <= grain, a pool of
// one thread, or a call made from inside a parallel_for of this pool (nesting) runs inline on
// the caller. The first exception thrown by fn stops the remaining chunks and is rethrown to the
// caller. Calls from several outside threads at once are served one after another.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace kiln::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads = 0);  // 0: every hardware thread this process may use
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool (all hardware threads), created on first use.
  static ThreadPool& global();
  // A process-wide pool of `threads` threads (config cpu.threads), created on first use and
  // kept: global() for 0 or for at least every hardware thread.
  static ThreadPool& of_size(int threads);

  int size() const;  // threads that run chunks, the caller included
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Hardware threads this process may run on (its CPU affinity mask; at least 1).
int hardware_threads();

}  // namespace kiln::cpu
