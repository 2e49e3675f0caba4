#include "common/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace turbodecode {
namespace {

class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs chunk(i) for i in [0, chunks); the calling thread takes part.
  void run(std::int64_t chunks, const std::function<void(std::int64_t)>& chunk) {
    std::lock_guard run_lock(run_mutex_);  // one parallel region at a time
    {
      std::lock_guard lock(mutex_);
      job_ = &chunk;
      job_chunks_ = chunks;
      next_.store(0);
      pending_ = chunks;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    drain();
    std::unique_lock lock(mutex_);
    // Workers that joined this job leave drain() before the job's state is reused.
    done_.wait(lock, [this] { return pending_ == 0 && active_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void drain() {
    for (;;) {
      std::int64_t i = next_.fetch_add(1);
      if (i >= job_chunks_) return;
      try {
        (*job_)(i);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_all();
    }
  }

  void worker_loop() {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && job_ != nullptr); });
        if (stopping_) return;
        seen = generation_;
        ++active_;
      }
      drain();
      std::lock_guard lock(mutex_);
      if (--active_ == 0) done_.notify_all();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(std::int64_t)>* job_ = nullptr;
  std::int64_t job_chunks_ = 0;
  std::atomic<std::int64_t> next_{0};
  std::int64_t pending_ = 0;
  int active_ = 0;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

int configured_threads() {
  if (const char* env = std::getenv("TURBODECODE_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& pool() {
  static ThreadPool instance(configured_threads());
  return instance;
}

}  // namespace

int cpu_threads() { return pool().size(); }

void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t max_chunks = static_cast<std::int64_t>(pool().size()) * 4;
  const std::int64_t chunks = std::clamp<std::int64_t>(n / grain, 1, max_chunks);
  if (chunks == 1) {
    body(0, n);
    return;
  }
  pool().run(chunks, [&](std::int64_t c) {
    const std::int64_t begin = n * c / chunks;
    const std::int64_t end = n * (c + 1) / chunks;
    if (begin < end) body(begin, end);
  });
}

}  // namespace turbodecode
