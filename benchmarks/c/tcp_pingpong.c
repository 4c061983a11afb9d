/* The raw limit of a path between two VMs: a busy-polling TCP ping-pong of SIZE bytes, no MPI.
 *
 * Usage: tcp_pingpong server PORT SIZE ITERATIONS           (in one VM)
 *        tcp_pingpong client ADDRESS PORT SIZE ITERATIONS   (in the other)
 * Both sides poll with recv(MSG_DONTWAIT) instead of sleeping in read(): a wake-up costs a virtualised IPI
 * here (DESIGN.md), which is no part of the switch; between polls they sched_yield(), as MPI's ranks do here
 * (mpi_yield_when_idle), so that a switch that needs a cpu (Open vSwitch's userspace datapath: ovs-vswitchd
 * forwards every packet) is not starved by two pollers on two cores. TCP_NODELAY on both ends. The client prints one JSON
 * object: {"size", "iterations", "one_way_us_p50", "one_way_us_mean", "one_way_us_min", "mbps"} - one way =
 * half a round trip; mbps = SIZE * 2 / round trip (M = 10^6).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void xfer(int fd, char *buf, long size, int sending)
{
    long done = 0;
    while (done < size) {
        long n = sending ? send(fd, buf + done, size - done, MSG_DONTWAIT)
                         : recv(fd, buf + done, size - done, MSG_DONTWAIT);
        if (n > 0)
            done += n;
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            sched_yield();
        else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            perror(sending ? "send" : "recv");
            exit(1);
        }
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int server = argc == 5 && !strcmp(argv[1], "server"), client = argc == 6 && !strcmp(argv[1], "client");
    if (!server && !client) {
        fprintf(stderr, "usage: %s server PORT SIZE ITERATIONS | client ADDRESS PORT SIZE ITERATIONS\n", argv[0]);
        return 2;
    }
    int a = server ? 2 : 3;
    long size = atol(argv[a + 1]), iterations = atol(argv[a + 2]);
    char *buf = calloc(1, size);
    int one = 1, fd;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[a]))};
    if (server) {
        int lfd = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        addr.sin_addr.s_addr = INADDR_ANY;
        if (bind(lfd, (void *)&addr, sizeof addr) || listen(lfd, 1)) {
            perror("bind");
            return 1;
        }
        fd = accept(lfd, NULL, NULL);
    } else {
        inet_pton(AF_INET, argv[2], &addr.sin_addr);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        for (int tries = 0; connect(fd, (void *)&addr, sizeof addr); tries++) {
            if (tries > 200) {
                perror("connect");
                return 1;
            }
            close(fd);
            fd = socket(AF_INET, SOCK_STREAM, 0);
            usleep(50000);
        }
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    long warmup = iterations / 10 + 1;
    double *rt = malloc(sizeof(double) * iterations);
    for (long i = -warmup; i < iterations; i++) {
        double t0 = now();
        if (server) {
            xfer(fd, buf, size, 0);
            xfer(fd, buf, size, 1);
        } else {
            xfer(fd, buf, size, 1);
            xfer(fd, buf, size, 0);
            if (i >= 0)
                rt[i] = now() - t0;
        }
    }
    if (client) {
        double sum = 0;
        for (long i = 0; i < iterations; i++)
            sum += rt[i];
        qsort(rt, iterations, sizeof(double), cmp);
        double p50 = rt[iterations / 2];
        printf("{\"size\": %ld, \"iterations\": %ld, \"one_way_us_p50\": %.3f, \"one_way_us_mean\": %.3f, "
               "\"one_way_us_min\": %.3f, \"mbps\": %.3f}\n", size, iterations, p50 / 2 * 1e6,
               sum / iterations / 2 * 1e6, rt[0] / 2 * 1e6, size * 2 / p50 / 1e6);
    }
    close(fd);
    return 0;
}
