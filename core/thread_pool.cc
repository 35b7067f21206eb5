// A fixed set of workers sleeping on a condition variable; one parallel_for at a time owns them (others wait),
// which keeps the design simple and matches the executor, which launches one kernel at a time.
#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace metajit {
namespace {

thread_local bool inside_parallel_region = false;
constexpr int64_t kChunksPerThread = 4;

int default_thread_count() {
  if (const char* value = std::getenv("METAJIT_NUM_THREADS")) {
    int count = std::atoi(value);
    if (count > 0) return count;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

class ThreadPool {
 public:
  static ThreadPool& instance() {
    static ThreadPool* pool = new ThreadPool();  // leaked: workers must outlive static destructors
    return *pool;
  }

  int requested = default_thread_count();

  void run(int64_t total, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
    // Several chunks per thread, taken on demand, so one thread delayed by another process does not leave the
    // rest idle at the end of a kernel.
    int64_t chunks = std::min<int64_t>(requested == 1 ? 1 : int64_t(requested) * kChunksPerThread,
                                       std::max<int64_t>(1, total / std::max<int64_t>(grain, 1)));
    if (chunks <= 1 || inside_parallel_region) {
      if (total > 0) body(0, total);
      return;
    }
    std::lock_guard<std::mutex> owner(run_mutex_);
    ensure_workers(int(std::min<int64_t>(chunks, requested)) - 1);
    std::exception_ptr failure;
    std::mutex failure_mutex;
    auto run_chunk = [&](int64_t chunk) {
      int64_t begin = total * chunk / chunks, end = total * (chunk + 1) / chunks;
      try {
        inside_parallel_region = true;
        body(begin, end);
        inside_parallel_region = false;
      } catch (...) {
        inside_parallel_region = false;
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    };
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = run_chunk;
      next_chunk_ = 1;
      chunk_count_ = chunks;
      remaining_ = chunks - 1;
      ++generation_;
    }
    wake_.notify_all();
    run_chunk(0);
    // The caller also steals chunks so progress never depends on workers waking up promptly.
    for (;;) {
      int64_t chunk;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (next_chunk_ >= chunk_count_) break;
        chunk = next_chunk_++;
      }
      run_chunk(chunk);
      finish_one();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return remaining_ == 0; });
    task_ = nullptr;
    lock.unlock();
    if (failure) std::rethrow_exception(failure);
  }

 private:
  void finish_one() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--remaining_ == 0) done_.notify_all();
  }

  void ensure_workers(int count) {
    while (int(workers_.size()) < count) workers_.emplace_back([this] { worker_loop(); });
  }

  void worker_loop() {
    uint64_t seen_generation = 0;
    for (;;) {
      int64_t chunk;
      std::function<void(int64_t)> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen_generation && next_chunk_ < chunk_count_; });
        chunk = next_chunk_++;
        task = task_;
        if (next_chunk_ >= chunk_count_) seen_generation = generation_;
      }
      task(chunk);
      finish_one();
    }
  }

  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::function<void(int64_t)> task_;
  int64_t next_chunk_ = 0, chunk_count_ = 0, remaining_ = 0;
  uint64_t generation_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace

int thread_count() { return ThreadPool::instance().requested; }

void set_thread_count(int count) { ThreadPool::instance().requested = std::max(1, count); }

void parallel_for(int64_t total, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  ThreadPool::instance().run(total, grain, body);
}

}  // namespace metajit
