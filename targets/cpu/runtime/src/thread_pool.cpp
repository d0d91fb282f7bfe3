// ThreadPool: workers sleep on a condition variable (after a short spin) until the caller
// publishes a job by bumping a generation ticket; everyone, the caller included, claims chunks
// from an atomic counter; the caller waits (spin, then sleep) for the workers it woke to check out.
#include "kiln/cpu/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_CPU_RELAX() _mm_pause()
#else
#define KILN_CPU_RELAX() std::this_thread::yield()
#endif

namespace kiln::cpu {

int hardware_threads() {
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

namespace {
// The pool whose job this thread is running chunks of (worker or participating caller): a
// parallel_for on that pool from here runs inline instead of waiting on itself.
thread_local const void* t_running_pool = nullptr;

// How long to spin before sleeping: long enough to catch back-to-back small kernels without a
// futex round trip, short enough not to steal a shared machine's cores for long.
constexpr std::chrono::microseconds kWorkerSpin{50};
constexpr std::chrono::microseconds kCallerSpin{100};

// Spins (pause instruction) until ready() or the budget is spent; returns ready().
template <class Ready>
bool spin_until(Ready ready, std::chrono::microseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    KILN_CPU_RELAX();
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= deadline) return ready();
  }
}
constexpr uint64_t kSlotBits = 16;
constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;
}  // namespace

struct ThreadPool::Impl {
  int threads = 1;
  std::vector<std::thread> workers;

  std::mutex mutex;  // guards sleeping; pairs with wake / done
  std::condition_variable wake;
  std::condition_variable done;
  bool stop = false;
  // (generation << 16) | free worker slots of that generation's job.
  std::atomic<uint64_t> ticket{0};
  std::atomic<bool> stopping{false};

  // The current job; written by the caller before the ticket is published.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t chunk = 1;
  int64_t chunks = 0;
  std::atomic<int64_t> next_chunk{0};
  std::atomic<int> pending{0};  // slots not yet claimed and finished
  std::mutex error_mutex;
  std::exception_ptr error;

  std::mutex submit;  // one job at a time

  void run_chunks() {
    const void* outer = t_running_pool;
    t_running_pool = this;
    for (;;) {
      int64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) break;
      int64_t begin = c * chunk;
      int64_t end = std::min(n, begin + chunk);
      try {
        (*fn)(begin, end);
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
        }
        next_chunk.store(chunks, std::memory_order_relaxed);  // skip what is left
        break;
      }
    }
    t_running_pool = outer;
  }

  // A worker: wait (spin, then sleep) for a new generation, take one of its free slots if any
  // is left, run chunks, check out.
  void worker_main() {
    uint64_t seen = 0;  // generation last looked at
    for (;;) {
      uint64_t t = 0;
      const bool news = spin_until(
          [&] {
            t = ticket.load(std::memory_order_acquire);
            return (t >> kSlotBits) != seen || stopping.load(std::memory_order_relaxed);
          },
          kWorkerSpin);
      if (!news) {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] {
          t = ticket.load(std::memory_order_acquire);
          return stop || (t >> kSlotBits) != seen;
        });
      }
      if (stopping.load(std::memory_order_relaxed)) return;
      // Claim a slot of the newest generation; generation and free slots share one word, so a
      // slot is never taken twice nor taken in a generation the caller has already closed.
      bool claimed = false;
      while ((t & kSlotMask) != 0) {
        if (ticket.compare_exchange_weak(t, t - 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
          claimed = true;
          break;
        }
      }
      seen = t >> kSlotBits;
      if (!claimed) continue;
      run_chunks();
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex);
        done.notify_one();
      }
    }
  }
};

ThreadPool::ThreadPool(int threads) : impl_(std::make_unique<Impl>()) {
  int n = threads > 0 ? threads : hardware_threads();
  n = std::min<int>(n, static_cast<int>(kSlotMask));
  impl_->threads = n;
  impl_->workers.reserve(n - 1);
  for (int i = 0; i < n - 1; ++i) impl_->workers.emplace_back([this] { impl_->worker_main(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop = true;
    impl_->stopping.store(true);
  }
  impl_->wake.notify_all();
  for (auto& t : impl_->workers) t.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(0);
  return pool;
}

ThreadPool& ThreadPool::of_size(int threads) {
  if (threads <= 0 || threads >= hardware_threads()) return global();
  static std::mutex mu;
  static std::map<int, std::unique_ptr<ThreadPool>>* pools = new std::map<int, std::unique_ptr<ThreadPool>>();
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<ThreadPool>& p = (*pools)[threads];
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return *p;
}

int ThreadPool::size() const { return impl_->threads; }

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  Impl& p = *impl_;
  if (n <= grain || p.threads == 1 || t_running_pool == &p) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> submit(p.submit);
  // About four chunks per thread, none shorter than grain: dynamic claiming evens out the rest.
  const int64_t target_chunks = static_cast<int64_t>(p.threads) * 4;
  p.chunk = std::max(grain, (n + target_chunks - 1) / target_chunks);
  p.chunks = (n + p.chunk - 1) / p.chunk;
  p.n = n;
  p.fn = &fn;
  p.error = nullptr;
  p.next_chunk.store(0, std::memory_order_relaxed);
  const int slots = static_cast<int>(std::min<int64_t>(p.chunks - 1, static_cast<int64_t>(p.workers.size())));
  p.pending.store(slots, std::memory_order_relaxed);
  const uint64_t generation = (p.ticket.load(std::memory_order_relaxed) >> kSlotBits) + 1;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    p.ticket.store((generation << kSlotBits) | static_cast<uint64_t>(slots), std::memory_order_release);
  }
  if (static_cast<size_t>(slots) == p.workers.size()) {
    p.wake.notify_all();
  } else {
    for (int i = 0; i < slots; ++i) p.wake.notify_one();
  }

  p.run_chunks();

  // Every chunk is claimed: close the slots no worker has taken yet, so a worker still waking
  // up is not waited for; then wait for those that did take one.
  uint64_t t = p.ticket.load(std::memory_order_acquire);
  while ((t & kSlotMask) != 0 && !p.ticket.compare_exchange_weak(t, t & ~kSlotMask, std::memory_order_acq_rel,
                                                                 std::memory_order_acquire)) {
  }
  const int unclaimed = static_cast<int>(t & kSlotMask);
  if (unclaimed > 0) p.pending.fetch_sub(unclaimed, std::memory_order_acq_rel);
  auto finished = [&] { return p.pending.load(std::memory_order_acquire) == 0; };
  if (!spin_until(finished, kCallerSpin)) {
    std::unique_lock<std::mutex> lock(p.mutex);
    p.done.wait(lock, finished);
  }
  p.fn = nullptr;
  if (p.error) {
    std::exception_ptr e = p.error;
    p.error = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace kiln::cpu
