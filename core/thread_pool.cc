// Kernels run on the OpenMP thread team of libgomp, the runtime oneDNN (Debian's libdnnl) already brings into the
// process. One team for both matters on a small machine: after a oneDNN call its workers keep spinning for a
// while, and a second pool of our own would fight them for the cores. On the shared team the spinning workers
// pick up the next generated kernel within a microsecond instead (see docs/design.md, "One thread team").
#include "core/thread_pool.h"

#include "core/flags.h"
#include "core/log.h"

#include <omp.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

namespace metajit {
namespace {

// Eight, not four: on a shared host another tenant often slows one core for part of a kernel. Split into 16
// chunks instead of 8, the median run of a 0.6 ms softmax on 2 threads took 0.68-0.71 ms instead of 0.76-0.77
// (the best runs were the same); 32 or 64 chunks did no better.
constexpr int64_t kChunksPerThread = 8;

int default_thread_count() {
  std::optional<int64_t> count = flag_integer(Flag::NumberOfThreads);
  if (count && *count > 0) return int(*count);
  return std::max(1u, std::thread::hardware_concurrency());
}

std::atomic<int>& requested_threads() {
  static std::atomic<int> requested{default_thread_count()};
  return requested;
}

// libgomp keeps its worker threads for the life of the process, and a child made by fork() has none of them: a
// parallel region in the child waits for them forever. So once a team may exist, a forked child runs everything
// on its calling thread (the fork handler below), and set_thread_count there warns instead of hanging later.
std::atomic<bool> team_may_exist{false};
std::atomic<bool> forked_after_team{false};

void on_fork_in_child() {
  if (!team_may_exist.load()) return;
  forked_after_team = true;
  requested_threads() = 1;
}

void note_team_may_start() {
  // A plain load first: this runs before every parallel loop and library call.
  if (team_may_exist.load(std::memory_order_relaxed) || team_may_exist.exchange(true)) return;
  static const int registered = pthread_atfork(nullptr, nullptr, on_fork_in_child);
  (void)registered;
}

}  // namespace

int thread_count() { return requested_threads().load(); }

void set_thread_count(int count) {
  if (forked_after_team.load() && count > 1) {
    log_warning("num_threads stays 1 in this process: it was forked after running parallel kernels, and the "
                "OpenMP threads of the parent do not exist in a forked child (the 'spawn' or 'forkserver' start "
                "methods of multiprocessing give workers their own threads)");
    count = 1;
  }
  requested_threads() = std::max(1, count);
  use_thread_count_in_libraries();
}

void use_thread_count_in_libraries() {
  // OpenMP keeps the team size per calling thread; library calls (oneDNN) read it from there.
  if (thread_count() > 1) note_team_may_start();
  if (omp_get_max_threads() != thread_count()) omp_set_num_threads(thread_count());
}

void parallel_for(int64_t total, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  int requested = thread_count();
  // Several chunks per thread, taken on demand, so one thread delayed by another process does not leave the rest
  // idle at the end of a kernel.
  int64_t chunks = std::min<int64_t>(requested == 1 ? 1 : int64_t(requested) * kChunksPerThread,
                                     std::max<int64_t>(1, total / std::max<int64_t>(grain, 1)));
  if (chunks <= 1 || omp_in_parallel()) {  // nested in a kernel's chunk (or a library's loop): run inline
    if (total > 0) body(0, total);
    return;
  }
  // One loop at a time: loops from several Python threads would each bring a team and oversubscribe the cores.
  static std::mutex one_loop_at_a_time;
  std::lock_guard<std::mutex> owner(one_loop_at_a_time);
  std::exception_ptr failure;
  std::mutex failure_mutex;
  int threads = int(std::min<int64_t>(chunks, requested));
  note_team_may_start();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    int64_t begin = total * chunk / chunks, end = total * (chunk + 1) / chunks;
    try {  // an exception must not leave an OpenMP region
      body(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace metajit
