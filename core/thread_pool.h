// Parallel loops for kernels. Kernels receive a [begin, end) slice of their outermost work range, so generated
// code needs no OpenMP and the runtime alone decides the thread count (METAJIT_NUM_THREADS).
#pragma once
#include <cstdint>
#include <functional>

namespace metajit {

int thread_count();
void set_thread_count(int count);  // takes effect on the next parallel_for and library call

// Makes library calls made from this thread (oneDNN) use thread_count() threads too; call before one.
void use_thread_count_in_libraries();

// Splits [0, total) into at most thread_count() contiguous chunks of at least `grain` items and runs `body` on
// them, the calling thread included. Returns when all chunks are done; rethrows the first exception.
// Nested calls (from inside a body) run serially on the calling thread.
void parallel_for(int64_t total, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& body);

}  // namespace metajit
