/* C reference for kernels/stream.py: McCalpin STREAM's four loops on every rank, in C.
 *
 * Mirrors the Python kernel: three arrays of N doubles per rank, allocated as np.empty does
 * (numpy_alloc.h: malloc, huge pages asked for), left untouched by the allocation and
 * first written by the rank itself (a = 1, b = 2, c = 0, then a = 2a, as stream.c); NTIMES
 * repetitions of copy, scale, add, triad, each op preceded by an MPI_Barrier and timed on
 * its own with CLOCK_MONOTONIC (what Python's perf_counter reads); the first repetition is
 * not counted; best (minimum) time per op; STREAM's byte counts (2, 2, 3, 3 arrays).
 * The loops take restrict pointers: stream.c's arrays are distinct static objects and its
 * compiler knows it, which is what lets gcc turn Copy into a call to libc's memcpy (and drop
 * the overlap checks of the others); without it the reference would time a plain loop that
 * stream.c never runs.
 * Per rank: bytes / own best time. Summed: ranks x bytes / best of the slowest rank's times.
 * The results are checked as STREAM's checkSTREAMresults does.
 *
 * Usage: mpirun -n R stream_ref N NTIMES
 * Rank 0 prints one JSON object: {"array_size", "ntimes", "bandwidth_mbps": {op: summed},
 * "per_rank": [{"rank", "bandwidth_mbps": {op: ...}}, ...], "valid": bool}.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "numpy_alloc.h"

#define SCALAR 3.0
#define EPSILON 1e-13

static const char *OPS[4] = {"copy", "scale", "add", "triad"};
static const double ARRAYS_MOVED[4] = {2, 2, 3, 3};

/* noinline: each loop is compiled once, on its own, like numba's one function per loop */
__attribute__((noinline)) static void copy(double *restrict c, const double *restrict a, long n)
{
    for (long j = 0; j < n; j++)
        c[j] = a[j];
}

__attribute__((noinline)) static void scale(double *restrict b, const double *restrict c, double scalar, long n)
{
    for (long j = 0; j < n; j++)
        b[j] = scalar * c[j];
}

__attribute__((noinline)) static void add(double *restrict c, const double *restrict a, const double *restrict b,
                                           long n)
{
    for (long j = 0; j < n; j++)
        c[j] = a[j] + b[j];
}

__attribute__((noinline)) static void triad(double *restrict a, const double *restrict b, const double *restrict c,
                                             double scalar, long n)
{
    for (long j = 0; j < n; j++)
        a[j] = b[j] + scalar * c[j];
}

__attribute__((noinline)) static void fill(double *x, double value, long n)
{
    for (long j = 0; j < n; j++)
        x[j] = value;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double avg_abs_error(const double *x, double expected, long n)
{
    double total = 0.0;
    for (long j = 0; j < n; j++)
        total += fabs(x[j] - expected);
    return total / n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 3) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -n R %s N NTIMES\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long n = strtol(argv[1], NULL, 10);
    int ntimes = (int)strtol(argv[2], NULL, 10);
    double *a = numpy_alloc(n * sizeof(double), 0), *b = numpy_alloc(n * sizeof(double), 0);
    double *c = numpy_alloc(n * sizeof(double), 0);
    double *times = malloc(4 * ntimes * sizeof(double)), *slowest = malloc(4 * ntimes * sizeof(double));
    if (!a || !b || !c || !times || !slowest)
        MPI_Abort(MPI_COMM_WORLD, 1);
    fill(a, 1.0, n);
    fill(b, 2.0, n);
    fill(c, 0.0, n);
    for (long j = 0; j < n; j++) /* in place, as stream.c does it: not scale(), whose arrays may not overlap */
        a[j] = 2.0 * a[j];

    for (int k = 0; k < ntimes; k++) {
        double start;
        MPI_Barrier(MPI_COMM_WORLD);
        start = now();
        copy(c, a, n);
        times[0 * ntimes + k] = now() - start;
        MPI_Barrier(MPI_COMM_WORLD);
        start = now();
        scale(b, c, SCALAR, n);
        times[1 * ntimes + k] = now() - start;
        MPI_Barrier(MPI_COMM_WORLD);
        start = now();
        add(c, a, b, n);
        times[2 * ntimes + k] = now() - start;
        MPI_Barrier(MPI_COMM_WORLD);
        start = now();
        triad(a, b, c, SCALAR, n);
        times[3 * ntimes + k] = now() - start;
    }
    MPI_Allreduce(times, slowest, 4 * ntimes, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    /* STREAM's replay of the loops in scalars */
    double ea = 2.0, eb = 2.0, ec = 0.0;
    for (int k = 0; k < ntimes; k++) {
        ec = ea;
        eb = SCALAR * ec;
        ec = ea + eb;
        ea = eb + SCALAR * ec;
    }
    int valid = avg_abs_error(a, ea, n) / fabs(ea) <= EPSILON && avg_abs_error(b, eb, n) / fabs(eb) <= EPSILON &&
                avg_abs_error(c, ec, n) / fabs(ec) <= EPSILON;
    int all_valid;
    MPI_Reduce(&valid, &all_valid, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);

    double best[4], best_slowest[4];
    for (int op = 0; op < 4; op++) {
        best[op] = best_slowest[op] = INFINITY;
        for (int k = 1; k < ntimes; k++) {
            best[op] = fmin(best[op], times[op * ntimes + k]);
            best_slowest[op] = fmin(best_slowest[op], slowest[op * ntimes + k]);
        }
    }
    double *all_best = rank == 0 ? malloc(4 * nranks * sizeof(double)) : NULL;
    MPI_Gather(best, 4, MPI_DOUBLE, all_best, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("{\"array_size\": %ld, \"ntimes\": %d, \"valid\": %s, \"bandwidth_mbps\": {", n, ntimes,
               all_valid ? "true" : "false");
        for (int op = 0; op < 4; op++)
            printf("%s\"%s\": %.3f", op ? ", " : "", OPS[op],
                   nranks * ARRAYS_MOVED[op] * 8 * n / best_slowest[op] / 1e6);
        printf("}, \"per_rank\": [");
        for (int r = 0; r < nranks; r++) {
            printf("%s{\"rank\": %d, \"bandwidth_mbps\": {", r ? ", " : "", r);
            for (int op = 0; op < 4; op++)
                printf("%s\"%s\": %.3f", op ? ", " : "", OPS[op], ARRAYS_MOVED[op] * 8 * n / all_best[r * 4 + op] / 1e6);
            printf("}}");
        }
        printf("]}\n");
    }
    free(a); free(b); free(c); free(times); free(slowest); free(all_best);
    MPI_Finalize();
    return 0;
}
