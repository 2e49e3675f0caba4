// Runs the ranks of an in-process group, each on a thread of its own, as sharded decode does on
// one machine.
#pragma once

#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace turbodecode::testing {

// Runs body(r) for r in [0, ranks) on `ranks` threads, waits for all, then rethrows the first
// exception one of them raised (by rank).
inline void run_ranks(int ranks, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace turbodecode::testing
