/* Reference for `partrain bench collectives`: a plain MPI_Allreduce (float, sum) timed the same
 * way (warm-up, back-to-back iterations, mean over ranks), printing size, time and busbw.
 * Build: mpicc -O2 -o mpi_allreduce mpi_allreduce.c; run: mpirun -n 4 ./mpi_allreduce BYTES */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long bytes = argc > 1 ? atol(argv[1]) : 64L << 20;
  int warmup = argc > 2 ? atoi(argv[2]) : 5;
  int iters = argc > 3 ? atoi(argv[3]) : 20;
  long count = bytes / (long)sizeof(float);
  float* send = malloc((size_t)count * sizeof(float));
  float* recv = malloc((size_t)count * sizeof(float));
  for (long i = 0; i < count; ++i) send[i] = (float)((rank * 7 + i * 3) % 13 - 6);
  for (int i = 0; i < warmup; ++i) {
    MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  double mine = (MPI_Wtime() - start) / iters, total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  long wrong = 0;
  for (long i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < size; ++r) want += (float)((r * 7 + i * 3) % 13 - 6);
    if (recv[i] != want) ++wrong;
  }
  if (rank == 0) {
    double t = total / size;
    double algbw = (double)bytes / t / 1e9;
    printf("mpi_allreduce size=%ld B ranks=%d time=%.2f us algbw=%.3f GB/s busbw=%.3f GB/s "
           "wrong=%ld\n", bytes, size, t * 1e6, algbw, algbw * 2.0 * (size - 1) / size, wrong);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
