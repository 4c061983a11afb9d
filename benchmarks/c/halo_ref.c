/* C reference for kernels/halo.py (with kernels/_halo_loops.py): the same step, in C.
 *
 * Mirrors the Python kernel: a periodic Cartesian communicator from MPI_Dims_create(R, 3)
 * (reorder off); each rank's block of the global grid split as halo.block() does, padded by
 * the halo width; 26 (or 6) neighbours in halo.directions()' order; one persistent receive
 * (tag = index of the opposite direction) and one persistent send (tag = own index) per
 * neighbour into slices of one receive and one send buffer. Each step, timed with
 * CLOCK_MONOTONIC (perf_counter's clock): compute passes (7-point relaxation, if any);
 * start the receives; pack every message, stamping the face cells as they are packed; start the sends;
 * wait for all; unpack every message into the ghosts and check it (stamp range, sum and
 * position-weighted sum of indices mod 2^64, first and last); every REDUCE_EVERY steps an
 * Allreduce of (energy, 1). Per-step time = the slowest rank's (MPI_MAX over ranks).
 *
 * Usage: mpirun -n R halo_ref NX NY NZ STEPS COMPUTE NEIGHBOURS HALO_WIDTH REDUCE_EVERY
 * Rank 0 prints one JSON object: {"step_s": {"median", "min", "mean", "max"}, "elapsed_s",
 * "valid", "dims", "local_grid", "bytes_per_rank_per_step", "messages_per_rank_per_step"}.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "numpy_alloc.h"

#define MAXDIR 26

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* halo.directions(): faces first, then the rest in (x, y, z) loop order, stably sorted by
 * how many axes they move along (edges, then corners) */
static int directions(int neighbours, int dirs[MAXDIR][3])
{
    static const int faces[6][3] = {{-1, 0, 0}, {1, 0, 0}, {0, -1, 0}, {0, 1, 0}, {0, 0, -1}, {0, 0, 1}};
    int n = 0;
    for (int f = 0; f < 6; f++)
        memcpy(dirs[n++], faces[f], sizeof faces[f]);
    if (neighbours == 6)
        return n;
    for (int moved = 2; moved <= 3; moved++)
        for (int x = -1; x <= 1; x++)
            for (int y = -1; y <= 1; y++)
                for (int z = -1; z <= 1; z++)
                    if (abs(x) + abs(y) + abs(z) == moved) {
                        dirs[n][0] = x; dirs[n][1] = y; dirs[n][2] = z;
                        n++;
                    }
    return n;
}

static void send_region(const int off[3], const long size[3], long h, long r[6])
{
    for (int a = 0; a < 3; a++) {
        long n = size[a];
        r[2 * a] = off[a] < 0 ? h : off[a] == 0 ? h : n;
        r[2 * a + 1] = off[a] < 0 ? 2 * h : off[a] == 0 ? h + n : n + h;
    }
}

static void recv_region(const int off[3], const long size[3], long h, long r[6])
{
    for (int a = 0; a < 3; a++) {
        long n = size[a];
        r[2 * a] = off[a] < 0 ? 0 : off[a] == 0 ? h : h + n;
        r[2 * a + 1] = off[a] < 0 ? h : off[a] == 0 ? h + n : 2 * h + n;
    }
}

static long cells_of(const long r[6]) { return (r[1] - r[0]) * (r[3] - r[2]) * (r[5] - r[4]); }

static long wrap(long v, long n) { return ((v % n) + n) % n; }

/* _halo_loops.compute: a row from old values, then written back; numba compiles it with
 * fastmath {reassoc, contract, arcp, nsz}, the same licence as these flags */
__attribute__((optimize("associative-math", "reciprocal-math", "no-signed-zeros", "no-trapping-math",
                        "fp-contract=fast")))
static double compute(double *f, double *row, long X, long Y, long Z, long h, long passes)
{
    long nx = X - 2 * h, ny = Y - 2 * h, nz = Z - 2 * h;
    double energy = 0.0;
#define F(i, j, k) f[((i) * Y + (j)) * Z + (k)]
    for (long p = 0; p < passes; p++)
        for (long i = h; i < h + nx; i++)
            for (long j = h; j < h + ny; j++) {
                for (long k = h; k < h + nz; k++) {
                    double around = F(i - 1, j, k) + F(i + 1, j, k) + F(i, j - 1, k) + F(i, j + 1, k) +
                                    F(i, j, k - 1) + F(i, j, k + 1);
                    row[k] = 0.5 * F(i, j, k) + around * (1.0 / 12.0);
                }
                for (long k = h; k < h + nz; k++) {
                    F(i, j, k) = row[k];
                    energy += row[k];
                }
            }
    long owned = nx * ny * nz;
    return energy / (owned > 1 ? owned : 1);
}

/* _halo_loops.stamp_pack: the first `stamped` regions (faces) are stamped as they are packed */
static void stamp_pack(double *f, long Y, long Z, double *sendbuf, int stamped, int nmsg, long (*regions)[6],
                       const long *offsets, const long origin[3], const long gdims[3], long h, long base)
{
    long gy = gdims[1], gz = gdims[2];
    for (int m = 0; m < nmsg; m++) {
        long *r = regions[m], pos = offsets[m];
        if (m < stamped) {
            for (long i = r[0]; i < r[1]; i++) {
                long row = (origin[0] + i - h) * gy;
                for (long j = r[2]; j < r[3]; j++) {
                    long line = (row + origin[1] + j - h) * gz + origin[2] - h + base;
                    for (long k = r[4]; k < r[5]; k++) {
                        double value = (double)(line + k);
                        F(i, j, k) = value;
                        sendbuf[pos++] = value;
                    }
                }
            }
        } else {
            for (long i = r[0]; i < r[1]; i++)
                for (long j = r[2]; j < r[3]; j++)
                    for (long k = r[4]; k < r[5]; k++)
                        sendbuf[pos++] = F(i, j, k);
        }
    }
}

/* _halo_loops.unpack_check: index of the first bad message, or -1 */
static int unpack_check(double *f, long Y, long Z, const double *recvbuf, int nmsg, long (*regions)[6],
                        const long *offsets, const int *sources, long step, long nranks, long ncells,
                        const uint64_t *sums, const uint64_t *ordered_sums, const double *firsts,
                        const double *lasts)
{
    int bad = -1;
    double top = (double)ncells;
    for (int m = 0; m < nmsg; m++) {
        long *r = regions[m];
        double base = (double)((step * nranks + sources[m]) * ncells);
        long start = offsets[m], pos = start;
        uint64_t total = 0, ordered = 0;
        int strange = 0;
        for (long i = r[0]; i < r[1]; i++)
            for (long j = r[2]; j < r[3]; j++)
                for (long k = r[4]; k < r[5]; k++) {
                    double value = recvbuf[pos];
                    F(i, j, k) = value;
                    /* clamped to half-way values no whole index has: NaN and out of range fail */
                    double index = value - base;
                    index = index >= 0.0 ? index : -0.5;
                    index = index < top ? index : top + 0.5;
                    int64_t whole = (int64_t)index;
                    strange |= (double)whole != index;
                    total += (uint64_t)whole;
                    ordered += (uint64_t)(pos - start + 1) * (uint64_t)whole;
                    pos++;
                }
        int wrong = strange || total != sums[m] || ordered != ordered_sums[m] || recvbuf[start] - base != firsts[m] ||
                    recvbuf[pos - 1] - base != lasts[m];
        if (wrong && bad < 0)
            bad = m;
    }
    return bad;
}
#undef F

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int nranks, wrank;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    if (argc != 9) {
        if (wrank == 0)
            fprintf(stderr, "usage: mpirun -n R %s NX NY NZ STEPS COMPUTE NEIGHBOURS HALO_WIDTH REDUCE_EVERY\n",
                    argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long gdims[3] = {atol(argv[1]), atol(argv[2]), atol(argv[3])};
    long steps = atol(argv[4]), passes = atol(argv[5]), h = atol(argv[7]), every = atol(argv[8]);
    int neighbours = atoi(argv[6]);

    int dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1}, coords[3];
    MPI_Dims_create(nranks, 3, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
    int rank;
    MPI_Comm_rank(cart, &rank);
    MPI_Cart_coords(cart, rank, 3, coords);
    long origin[3], size[3];
    for (int a = 0; a < 3; a++) {
        long part = gdims[a] / dims[a], extra = gdims[a] % dims[a];
        origin[a] = coords[a] * part + (coords[a] < extra ? coords[a] : extra);
        size[a] = part + (coords[a] < extra);
    }
    long ncells = gdims[0] * gdims[1] * gdims[2];
    long X = size[0] + 2 * h, Y = size[1] + 2 * h, Z = size[2] + 2 * h;
    double *field = numpy_alloc(X * Y * Z * sizeof(double), 1); /* np.zeros */
    double *row = numpy_alloc(Z * sizeof(double), 0);          /* compute's np.empty row */

    int dirs[MAXDIR][3], nmsg = directions(neighbours, dirs), sources[MAXDIR];
    long send_regions[MAXDIR][6], recv_regions[MAXDIR][6], offsets[MAXDIR + 1];
    offsets[0] = 0;
    for (int m = 0; m < nmsg; m++) {
        int c[3];
        for (int a = 0; a < 3; a++)
            c[a] = (int)wrap(coords[a] + dirs[m][a], dims[a]);
        MPI_Cart_rank(cart, c, &sources[m]);
        send_region(dirs[m], size, h, send_regions[m]);
        recv_region(dirs[m], size, h, recv_regions[m]);
        offsets[m + 1] = offsets[m] + cells_of(send_regions[m]);
    }
    long total = offsets[nmsg];
    double *sendbuf = numpy_alloc(total * sizeof(double), 1), *recvbuf = numpy_alloc(total * sizeof(double), 0);
    for (long i = 0; i < total; i++)
        recvbuf[i] = NAN;

    /* what each message must hold, from geometry alone (halo.expected_indices) */
    uint64_t sums[MAXDIR], ordered_sums[MAXDIR];
    double firsts[MAXDIR], lasts[MAXDIR];
    for (int m = 0; m < nmsg; m++) {
        long *r = recv_regions[m], pos = 0, index = 0;
        sums[m] = ordered_sums[m] = 0;
        for (long i = r[0]; i < r[1]; i++)
            for (long j = r[2]; j < r[3]; j++)
                for (long k = r[4]; k < r[5]; k++) {
                    long gx = wrap(origin[0] - h + i, gdims[0]), gy = wrap(origin[1] - h + j, gdims[1]);
                    long gz = wrap(origin[2] - h + k, gdims[2]);
                    index = (gx * gdims[1] + gy) * gdims[2] + gz;
                    if (pos == 0)
                        firsts[m] = (double)index;
                    sums[m] += (uint64_t)index;
                    ordered_sums[m] += (uint64_t)(pos + 1) * (uint64_t)index;
                    pos++;
                }
        lasts[m] = (double)index;
    }

    MPI_Request reqs[2 * MAXDIR]; /* receives first, then sends: as plan.all_requests */
    for (int m = 0; m < nmsg; m++) {
        int back = 0;
        for (int b = 0; b < nmsg; b++)
            if (dirs[b][0] == -dirs[m][0] && dirs[b][1] == -dirs[m][1] && dirs[b][2] == -dirs[m][2])
                back = b;
        MPI_Recv_init(recvbuf + offsets[m], (int)(offsets[m + 1] - offsets[m]), MPI_DOUBLE, sources[m], back, cart,
                      &reqs[m]);
        MPI_Send_init(sendbuf + offsets[m], (int)(offsets[m + 1] - offsets[m]), MPI_DOUBLE, sources[m], m, cart,
                      &reqs[nmsg + m]);
    }

    double *step_s = malloc(steps * sizeof(double)), *slowest = malloc(steps * sizeof(double));
    double partial[2], reduced[2] = {0.0, 0.0}, local_energy = 0.0;
    int bad_message = -1, bad_reductions = 0;
    MPI_Barrier(cart);
    double begin = now();
    for (long step = 0; step < steps; step++) {
        double t0 = now();
        if (passes)
            local_energy = compute(field, row, X, Y, Z, h, passes);
        MPI_Startall(nmsg, reqs);
        stamp_pack(field, Y, Z, sendbuf, 6, nmsg, send_regions, offsets, origin, gdims, h,
                   (step * nranks + rank) * ncells);
        MPI_Startall(nmsg, reqs + nmsg);
        MPI_Waitall(2 * nmsg, reqs, MPI_STATUSES_IGNORE);
        int bad = unpack_check(field, Y, Z, recvbuf, nmsg, recv_regions, offsets, sources, step, nranks, ncells,
                               sums, ordered_sums, firsts, lasts);
        if (bad >= 0 && bad_message < 0)
            bad_message = bad;
        if ((step + 1) % every == 0) {
            partial[0] = local_energy;
            partial[1] = 1.0;
            MPI_Allreduce(partial, reduced, 2, MPI_DOUBLE, MPI_SUM, cart);
            if (reduced[1] != nranks)
                bad_reductions++;
        }
        step_s[step] = now() - t0;
    }
    double elapsed = now() - begin, slowest_elapsed;
    MPI_Allreduce(step_s, slowest, (int)steps, MPI_DOUBLE, MPI_MAX, cart);
    MPI_Allreduce(&elapsed, &slowest_elapsed, 1, MPI_DOUBLE, MPI_MAX, cart);
    int valid = bad_message < 0 && bad_reductions == 0, all_valid;
    MPI_Reduce(&valid, &all_valid, 1, MPI_INT, MPI_LAND, 0, cart);
    if (rank == 0) {
        double sum = 0.0;
        for (long s = 0; s < steps; s++)
            sum += slowest[s];
        qsort(slowest, steps, sizeof(double), cmp_double);
        /* numpy's median: the mean of the two middle values when steps is even */
        double median = steps % 2 ? slowest[steps / 2] : 0.5 * (slowest[steps / 2 - 1] + slowest[steps / 2]);
        printf("{\"step_s\": {\"median\": %.9f, \"min\": %.9f, \"mean\": %.9f, \"max\": %.9f}, "
               "\"elapsed_s\": %.6f, \"valid\": %s, \"dims\": [%d, %d, %d], \"local_grid\": [%ld, %ld, %ld], "
               "\"bytes_per_rank_per_step\": %ld, \"messages_per_rank_per_step\": %d, \"energy\": %.17g}\n",
               median, slowest[0], sum / steps, slowest[steps - 1], slowest_elapsed, all_valid ? "true" : "false",
               dims[0], dims[1], dims[2], size[0], size[1], size[2], total * 8, nmsg, reduced[0]);
    }
    for (int m = 0; m < 2 * nmsg; m++)
        MPI_Request_free(&reqs[m]);
    free(field); free(row); free(sendbuf); free(recvbuf); free(step_s); free(slowest);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return 0;
}
