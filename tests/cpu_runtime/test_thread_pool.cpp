#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kiln/cpu/thread_pool.h"

using kiln::cpu::ThreadPool;

namespace {

// Sums i over [0, n) through the pool and checks each index was visited exactly once.
void check_covers(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
  std::atomic<int64_t> sum{0};
  std::atomic<bool> bad_range{false};  // Boost.Test assertions are not thread-safe: check after
  pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    if (!(0 <= begin && begin < end && end <= n)) {
      bad_range = true;
      return;
    }
    int64_t local = 0;
    for (int64_t i = begin; i < end; ++i) {
      local += i;
      visits[i].fetch_add(1, std::memory_order_relaxed);
    }
    sum += local;
  });
  BOOST_TEST(!bad_range.load());
  BOOST_TEST(sum.load() == n * (n - 1) / 2, "n=" << n << " grain=" << grain);
  int64_t not_once = 0;
  for (int64_t i = 0; i < n; ++i) not_once += visits[i].load() != 1;
  BOOST_TEST(not_once == 0, "n=" << n << ": " << not_once << " indices not visited exactly once");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(thread_pool)

BOOST_AUTO_TEST_CASE(sums_are_correct) {
  ThreadPool& pool = ThreadPool::global();
  BOOST_TEST(pool.size() == kiln::cpu::hardware_threads());
  const int64_t grain = 1000;
  for (int64_t n : {int64_t{0}, int64_t{1}, grain - 1, grain, grain + 1, int64_t{1000000}})
    check_covers(pool, n, grain);
  check_covers(pool, 1000, 1);
  check_covers(pool, 7, 0);  // grain below 1 counts as 1
}

BOOST_AUTO_TEST_CASE(pools_of_other_sizes) {
  ThreadPool one(1);
  BOOST_TEST(one.size() == 1);
  check_covers(one, 100000, 10);
  ThreadPool eight(8);  // more threads than this machine may have: still correct
  BOOST_TEST(eight.size() == 8);
  for (int rep = 0; rep < 50; ++rep) check_covers(eight, 10000 + rep, 7);
}

BOOST_AUTO_TEST_CASE(process_pools_by_size) {
  // cpu.threads picks one of these: 0 (and every hardware thread) is the global pool.
  BOOST_TEST(&ThreadPool::of_size(0) == &ThreadPool::global());
  BOOST_TEST(&ThreadPool::of_size(kiln::cpu::hardware_threads()) == &ThreadPool::global());
  if (kiln::cpu::hardware_threads() > 1) {
    ThreadPool& one = ThreadPool::of_size(1);
    BOOST_TEST(one.size() == 1);
    BOOST_TEST(&ThreadPool::of_size(1) == &one);  // made once, kept
    check_covers(one, 100000, 10);
  }
}

BOOST_AUTO_TEST_CASE(small_ranges_run_inline) {
  ThreadPool pool(4);
  std::thread::id where;
  pool.parallel_for(10, 10, [&](int64_t, int64_t) { where = std::this_thread::get_id(); });
  BOOST_TEST((where == std::this_thread::get_id()));
}

BOOST_AUTO_TEST_CASE(exceptions_propagate) {
  ThreadPool pool(4);
  for (int rep = 0; rep < 20; ++rep) {
    std::atomic<int64_t> done{0};
    BOOST_CHECK_THROW(pool.parallel_for(1000000, 1000,
                                        [&](int64_t begin, int64_t end) {
                                          if (begin <= 500000 && 500000 < end)
                                            throw std::runtime_error("chunk failed");
                                          done += end - begin;
                                        }),
                      std::runtime_error);
    BOOST_TEST(done.load() < 1000000);
  }
  check_covers(pool, 100000, 100);  // still usable afterwards
}

BOOST_AUTO_TEST_CASE(nested_parallel_for_runs_inline) {
  ThreadPool& pool = ThreadPool::global();
  std::atomic<int64_t> sum{0};
  pool.parallel_for(64, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      pool.parallel_for(1000, 10, [&](int64_t b, int64_t e) {
        int64_t local = 0;
        for (int64_t j = b; j < e; ++j) local += j;
        sum += local;
      });
    }
  });
  BOOST_TEST(sum.load() == 64 * (1000 * 999 / 2));
}

BOOST_AUTO_TEST_CASE(calls_from_several_threads) {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep) {
        std::atomic<int64_t> sum{0};
        pool.parallel_for(5000, 16, [&](int64_t b, int64_t e) {
          int64_t local = 0;
          for (int64_t i = b; i < e; ++i) local += i;
          sum += local;
        });
        if (sum.load() != 5000 * 4999 / 2) ++failures;
      }
    });
  }
  for (auto& c : callers) c.join();
  BOOST_TEST(failures.load() == 0);
}

BOOST_AUTO_TEST_CASE(empty_parallel_for_overhead) {
  ThreadPool& pool = ThreadPool::global();
  const int calls = 1000;
  std::atomic<int64_t> chunks{0};
  auto empty = [&](int64_t, int64_t) { chunks.fetch_add(1, std::memory_order_relaxed); };
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) pool.parallel_for(1 << 16, 1, empty);  // split across every thread
  const auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) pool.parallel_for(16, 16, empty);  // inline
  const auto t2 = std::chrono::steady_clock::now();
  const double split_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
  const double inline_us = std::chrono::duration<double, std::micro>(t2 - t1).count() / calls;
  BOOST_TEST_MESSAGE("empty parallel_for over " << pool.size() << " threads: " << split_us
                                                << " us per call (split), " << inline_us
                                                << " us per call (n <= grain, inline)");
  BOOST_TEST(chunks.load() >= 2 * calls);
  // After an idle spell the workers are asleep: the call pays for waking them.
  double idle_total = 0;
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const auto a = std::chrono::steady_clock::now();
    pool.parallel_for(1 << 16, 1, empty);
    idle_total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
  }
  BOOST_TEST_MESSAGE("empty parallel_for after 2 ms idle: " << idle_total / 50 << " us per call");
}

BOOST_AUTO_TEST_SUITE_END()
