/* The raw-MPI side of bench/distributed_benchmark.py: MPI_Allreduce (sum, float32) on the same message sizes, timed
   the same way (median of repeats after warm-up, each timing between barriers), in place and from one buffer into
   another (Open MPI's shared-memory path differs a lot between the two). Prints one line per size:
   "<bytes> <in-place seconds> <out-of-place seconds>". Built with mpicc by the benchmark; not part of the library. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int i = 1; i < argc; ++i) {
    long bytes = atol(argv[i]);
    long count = bytes / 4;
    int repeats = bytes >= (64L << 20) ? 5 : bytes >= (1L << 20) ? 10 : 50;
    float* data = malloc((size_t)bytes);
    float* result = malloc((size_t)bytes);
    for (long j = 0; j < count; ++j) data[j] = 1.0f;
    double medians[2];
    for (int form = 0; form < 2; ++form) {
      double times[64];
      for (int r = -2; r < repeats; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        if (form == 0)
          MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else
          MPI_Allreduce(data, result, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double seconds = MPI_Wtime() - start;
        if (r >= 0) times[r] = seconds;
      }
      qsort(times, (size_t)repeats, sizeof(double), compare);
      medians[form] = times[repeats / 2];
    }
    if (rank == 0) printf("%ld %.9f %.9f\n", bytes, medians[0], medians[1]);
    free(data);
    free(result);
  }
  MPI_Finalize();
  return 0;
}
