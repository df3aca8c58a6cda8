/*
 * empty_mpi.c - the baseline of bench/scale.sh's start-up figure: an MPI
 * program that only starts MPI, reads the world size and stops. A generated
 * program's time to its world-size check, less this, is what tessgen's
 * launcher and class executable add to a process start.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int p = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    MPI_Finalize();
    return p > 0 ? 0 : 1;
}
