#include "parallel_for.h"

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

#include "turbodecode/tensor.h"

namespace turbodecode::cli {

void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (n <= 0) return;
  const std::int64_t chunks =
      std::clamp<std::int64_t>(n / std::max<std::int64_t>(grain, 1), 1, cpu_threads());
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(chunks));
  const auto run = [&](std::int64_t c) {
    try {
      body(n * c / chunks, n * (c + 1) / chunks);
    } catch (...) {
      errors[static_cast<std::size_t>(c)] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (std::int64_t c = 1; c < chunks; ++c) threads.emplace_back(run, c);
  run(0);
  for (std::thread& thread : threads) thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace turbodecode::cli
