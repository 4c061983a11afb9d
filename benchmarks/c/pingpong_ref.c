/* C reference for kernels/pingpong.py: the same latency and bandwidth loops, in C.
 *
 * Mirrors the Python kernel statement for statement: rank 0 <-> last rank; per message size
 * a Barrier, then `warmup` untimed and `iterations` timed round trips (tag 1) with one
 * MPI_Wtime stamp before each round trip, latency = mean of half the round trips; then
 * bandwidth: `window` persistent sends (tag 2) started together, waited for, and a 4-byte
 * ack back (tag 3), `bw_warmup` untimed windows then `bw_iterations` timed, timed from the
 * sender's clock. Above 8192 bytes the large counts apply (bw_iterations / 5, as the kernel).
 *
 * Usage: mpirun -n 2 pingpong_ref MIN_SIZE MAX_SIZE ITERATIONS WARMUP LARGE_ITERATIONS
 *                                  LARGE_WARMUP WINDOW BW_ITERATIONS
 * Rank 0 prints one JSON object: {"sizes": [{"bytes", "latency_us", "latency_min_us",
 * "latency_p50_us", "bandwidth_mbps", "osu_latency_us"}, ...]}; osu_latency_us is the
 * same round trips timed as one block (no per-iteration stamps), for information only.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "numpy_alloc.h"

#define LARGE 8192

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static long arg(char **argv, int i) { return strtol(argv[i], NULL, 10); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 9 || nranks < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -n 2 %s MIN MAX ITERS WARMUP LARGE_ITERS LARGE_WARMUP WINDOW BW_ITERS\n",
                    argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long min_size = arg(argv, 1), max_size = arg(argv, 2), iterations = arg(argv, 3), warmup = arg(argv, 4);
    long large_iterations = arg(argv, 5), large_warmup = arg(argv, 6), window = arg(argv, 7);
    long bw_iterations = arg(argv, 8);
    int last = nranks - 1, active = rank == 0 || rank == last, peer = rank == 0 ? last : 0;

    /* as np.zeros: calloc (pages are touched first by the loops) with huge pages asked for */
    size_t big = active ? (size_t)max_size * window : 1;
    unsigned char *sendbuf = numpy_alloc(big, 1), *recvbuf = numpy_alloc(big, 1), ack[4] = {0};
    long max_iters = iterations > large_iterations ? iterations : large_iterations;
    double *stamps = malloc((max_iters + 1) * sizeof(double)), *half = malloc(max_iters * sizeof(double));
    MPI_Request *reqs = malloc(window * sizeof(MPI_Request));

    if (rank == 0)
        printf("{\"sizes\": [");
    int first = 1;
    for (long size = min_size; size <= max_size; size *= 2) {
        long iters, warm, bw_iters, bw_warm;
        if (size > LARGE) {
            iters = large_iterations; warm = large_warmup;
            bw_iters = bw_iterations / 5 > 1 ? bw_iterations / 5 : 1;
            bw_warm = large_warmup > 1 ? large_warmup : 1;
        } else {
            iters = iterations; warm = warmup; bw_iters = bw_iterations;
            bw_warm = warmup / 10 > 1 ? warmup / 10 : 1;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (!active)
            continue;

        /* latency: per-iteration stamps, exactly as the kernel */
        if (rank == 0) {
            for (long i = 0; i < warm; i++) {
                MPI_Send(sendbuf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(recvbuf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            for (long i = 0; i < iters; i++) {
                stamps[i] = MPI_Wtime();
                MPI_Send(sendbuf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(recvbuf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            stamps[iters] = MPI_Wtime();
        } else {
            for (long i = 0; i < warm + iters; i++) {
                MPI_Recv(recvbuf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sendbuf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
        }

        /* bandwidth: a window of persistent requests, then an ack */
        for (long w = 0; w < window; w++) {
            if (rank == 0)
                MPI_Send_init(sendbuf + w * size, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[w]);
            else
                MPI_Recv_init(recvbuf + w * size, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[w]);
        }
        double start = 0.0;
        for (long i = 0; i < bw_warm + bw_iters; i++) {
            if (i == bw_warm)
                start = MPI_Wtime();
            MPI_Startall((int)window, reqs);
            MPI_Waitall((int)window, reqs, MPI_STATUSES_IGNORE);
            if (rank == 0)
                MPI_Recv(ack, 4, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else
                MPI_Send(ack, 4, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
        }
        double elapsed = MPI_Wtime() - start;
        for (long w = 0; w < window; w++)
            MPI_Request_free(&reqs[w]);

        /* the same round trips timed as one block, as osu_latency does (information only),
         * after the kernel's own sequence so that it changes nothing the kernel measures */
        double osu = 0.0;
        if (rank == 0) {
            double t0 = MPI_Wtime();
            for (long i = 0; i < iters; i++) {
                MPI_Send(sendbuf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(recvbuf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            osu = (MPI_Wtime() - t0) * 1e6 / iters / 2;
        } else {
            for (long i = 0; i < iters; i++) {
                MPI_Recv(recvbuf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sendbuf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
        }

        if (rank == 0) {
            double sum = 0.0;
            for (long i = 0; i < iters; i++) {
                half[i] = (stamps[i + 1] - stamps[i]) * 1e6 / 2;
                sum += half[i];
            }
            qsort(half, iters, sizeof(double), cmp_double);
            printf("%s{\"bytes\": %ld, \"latency_us\": %.6f, \"latency_min_us\": %.6f, \"latency_p50_us\": %.6f, "
                   "\"bandwidth_mbps\": %.6f, \"osu_latency_us\": %.6f, \"iterations\": %ld, "
                   "\"bw_iterations\": %ld, \"window\": %ld}",
                   first ? "" : ", ", size, sum / iters, half[0], half[(iters - 1) / 2],
                   (double)size * window * bw_iters / elapsed / 1e6, osu, iters, bw_iters, window);
            first = 0;
        }
    }
    if (rank == 0)
        printf("]}\n");
    free(sendbuf); free(recvbuf); free(stamps); free(half); free(reqs);
    MPI_Finalize();
    return 0;
}
