/*
 * mpi_link.c - the link a machine file needs, measured on this machine: the
 * time of MPI_Bcast between the ranks started (2 by bench/cost_cpu.sh) for
 * payloads from 4 bytes to 16 MiB, fitted to t = a + n/B (least squares on
 * the sizes >= 64 KiB for B, the smallest size for a). Prints
 * "latency_us <a> bandwidth_gbs <B>" on rank 0. bench/cost_cpu.sh writes them
 * into the machine file of the CPU comparison (docs/COST.md).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double time_bcast(char *buf, int n, int reps)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps; r++)
        MPI_Bcast(buf, n, MPI_BYTE, r % 2, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    return (MPI_Wtime() - t0) / reps;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int maxn = 16 << 20;
    char *buf = calloc((size_t)maxn, 1);
    if (!buf)
        MPI_Abort(MPI_COMM_WORLD, 1);
    double lat = time_bcast(buf, 4, 2000); /* warm-up, then the figure */
    lat = time_bcast(buf, 4, 2000);
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int k = 0;
    for (int n = 64 << 10; n <= maxn; n *= 2, k++) {
        double t = time_bcast(buf, n, n >= (4 << 20) ? 20 : 100);
        sx += n, sy += t, sxx += (double)n * n, sxy += (double)n * t;
    }
    double slope = (k * sxy - sx * sy) / (k * sxx - sx * sx); /* seconds per byte */
    if (rank == 0)
        printf("latency_us %.3f bandwidth_gbs %.4f\n", lat * 1e6, 1e-9 / slope);
    free(buf);
    MPI_Finalize();
    return 0;
}
