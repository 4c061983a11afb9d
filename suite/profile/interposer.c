/* The MPI profiler: an LD_PRELOAD interposer through the standard profiling interface (PMPI).
 *
 * Each wrapper MPI_X times the real PMPI_X (CLOCK_MONOTONIC) and notes, in fixed tables allocated at MPI_Init:
 * per call type the calls, bytes and seconds; per peer (a WORLD rank) the messages and bytes sent and received
 * by size (log2 buckets); per collective and communicator size the calls, bytes and seconds; the time between
 * calls (computation). With VNETBENCH_PROFILE_TRACE_BYTES set, every call is also an event in a per-rank buffer
 * (mapped once, capped: events past the cap are counted as dropped and the trace is marked truncated). At
 * MPI_Finalize each rank writes rank-N.json (the summary) and, when tracing, rank-N.trace into
 * $VNETBENCH_PROFILE_DIR; vnetbench reads them after the job (suite/profile/collect.py, trace.py).
 *
 * Built without MPI headers, so that one build serves every MPI and no second libmpi is ever linked into a
 * process (the venv's Open MPI 5 and Debian's Open MPI 4 share the soname libmpi.so.40). On x86-64 a handle is
 * passed in a 64-bit register or an 8-byte stack slot whether the MPI's handle is a pointer (Open MPI) or an
 * int (the MPICH ABI family), so the wrappers pass handles through as uintptr_t; what the profiler asks itself
 * (a datatype's size, a communicator's members, a received count) uses each ABI family's constants and status
 * layout, chosen at MPI_Init from the library's own symbols (see abi_detect). The real functions are the
 * PMPI_ names: found with dlsym(RTLD_NEXT), or by asking each loaded object (mpi4py loads libmpi RTLD_LOCAL).
 * Calling PMPI_ (not the next MPI_) also keeps other preloaded shims (the world-size guard, which must come
 * first in LD_PRELOAD) out of the chain below us.
 *
 * Nothing here may disturb the program: every failure to observe is silent, and the real call's result is
 * returned unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef uintptr_t H; /* any MPI handle */

#define DIR_ENV "VNETBENCH_PROFILE_DIR"
#define TRACE_ENV "VNETBENCH_PROFILE_TRACE_BYTES"
#define BUCKETS 40   /* log2 size buckets (see bucket) */
#define MAX_PEERS 4096
#define REQ_SLOTS 65536 /* open addressing, a power of two */
#define COMM_SLOTS 64
#define MAX_STATUS 32 /* bytes: Open MPI's status is 24, MPICH's 20 */
#define MAX_MEMBERS 4096

/* ---- the calls ---------------------------------------------------------------------------------------- */
#define CALLS(X)                                                                                                \
    X(Send) X(Recv) X(Isend) X(Irecv) X(Ssend) X(Issend) X(Rsend) X(Bsend) X(Sendrecv) X(Sendrecv_replace)        \
    X(Probe) X(Iprobe) X(Mprobe) X(Mrecv) X(Send_init) X(Recv_init) X(Start) X(Startall) X(Request_free)         \
    X(Wait) X(Waitall) X(Waitany) X(Waitsome) X(Test) X(Testall) X(Testany) X(Testsome)                          \
    X(Barrier) X(Bcast) X(Reduce) X(Allreduce) X(Allgather) X(Allgatherv) X(Gather) X(Gatherv) X(Scatter)        \
    X(Scatterv) X(Alltoall) X(Alltoallv) X(Reduce_scatter) X(Reduce_scatter_block) X(Scan) X(Exscan)             \
    X(Comm_dup) X(Comm_split) X(Comm_create) X(Cart_create) X(Comm_free) X(Init) X(Init_thread) X(Finalize)
#define ENUM(name) C_##name,
enum { CALLS(ENUM) NCALLS };
#define NAME(name) "MPI_" #name,
static const char *call_name[NCALLS] = {CALLS(NAME)};
#define FIRST_COLLECTIVE C_Barrier
#define LAST_COLLECTIVE C_Exscan

/* ---- the real functions --------------------------------------------------------------------------------- */
typedef int (*fn)();
#define PTR(name) static fn p_##name;
CALLS(PTR)
static fn p_Type_size, p_Comm_size, p_Comm_rank, p_Comm_group, p_Group_translate_ranks, p_Group_free,
    p_Get_count, p_Get_library_version, p_Comm_test_inter;

#define MAX_OBJECTS 1024
struct names {
    char *name[MAX_OBJECTS];
    int count;
};

static int collect_names(struct dl_phdr_info *info, size_t size, void *data) {
    struct names *names = data;
    (void)size;
    if (info->dlpi_name && info->dlpi_name[0] && names->count < MAX_OBJECTS)
        names->name[names->count++] = strdup(info->dlpi_name);
    return 0;
}

/* ``name`` (a PMPI_ function, which no interposer defines) from the global scope, or from whichever loaded
 * object defines it (a libmpi dlopened RTLD_LOCAL). */
static void *real(const char *name) {
    void *found = dlsym(RTLD_NEXT, name);
    if (found)
        return found;
    struct names names = {.count = 0};
    dl_iterate_phdr(collect_names, &names);
    for (int i = 0; i < names.count; i++) {
        if (!found) {
            void *handle = dlopen(names.name[i], RTLD_LAZY | RTLD_NOLOAD);
            if (handle) {
                found = dlsym(handle, name);
                dlclose(handle);
            }
        }
        free(names.name[i]);
    }
    return found;
}

/* The real function, looked up on first use (a call before MPI_Init, e.g. from a library's constructor). */
static fn resolve_(fn *slot, const char *name) {
    *slot = (fn)real(name);
    return *slot;
}
#define NEXT(name) (p_##name ? p_##name : resolve_(&p_##name, "PMPI_" #name))

/* ---- the ABI ---------------------------------------------------------------------------------------------- */
enum { ABI_UNKNOWN, ABI_OPENMPI, ABI_MPICH };
static int abi;
static H comm_world, byte_type, request_null;
static int any_source, proc_null, status_size, source_offset, tag_offset, request_size;
static void *status_ignore, *in_place;
static const char *abi_name = "unknown";

static void *data_symbol(void *library, const char *name) {
    /* a program linked against Open MPI may hold a copy of the object (a copy relocation): that copy is live */
    void *found = dlsym(RTLD_DEFAULT, name);
    if (!found && library)
        found = dlsym(library, name);
    return found ? found : real(name);
}

static char library_version[512];
static void *mpi_library; /* the library whose PMPI_Init ran, kept open: its twins are looked up there */

static void abi_detect(void) {
    Dl_info info;
    void *library = NULL;
    if (p_Init_thread && dladdr((void *)p_Init_thread, &info) && info.dli_fname)
        library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    else if (p_Init && dladdr((void *)p_Init, &info) && info.dli_fname)
        library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    static char version[8192 + 1];
    int length = 0;
    p_Get_library_version = (fn)real("PMPI_Get_library_version");
    if (p_Get_library_version && p_Get_library_version(version, &length) == 0 && length >= 0)
        version[length < 8192 ? length : 8192] = '\0';
    else
        version[0] = '\0';
    snprintf(library_version, sizeof library_version, "%s", version);
    for (char *c = library_version; *c; c++)
        if (*c == '\n' || *c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
            *c = ' ';
    void *world = data_symbol(library, "ompi_mpi_comm_world");
    if (world) {
        abi = ABI_OPENMPI;
        abi_name = "openmpi";
        comm_world = (H)world;
        byte_type = (H)data_symbol(library, "ompi_mpi_byte");
        request_null = (H)data_symbol(library, "ompi_request_null");
        any_source = -1, proc_null = -2;
        status_size = 24, source_offset = 0, tag_offset = 4, request_size = 8;
        status_ignore = (void *)0, in_place = (void *)1;
        if (!byte_type || !request_null)
            abi = ABI_UNKNOWN;
    } else if (strstr(version, "MPICH") || strstr(version, "MVAPICH") || strstr(version, "Intel")) {
        abi = ABI_MPICH;
        abi_name = "mpich";
        comm_world = 0x44000000, byte_type = 0x4c00010d, request_null = 0x2c000000;
        any_source = -2, proc_null = -1;
        status_size = 20, source_offset = 8, tag_offset = 12, request_size = 4;
        status_ignore = (void *)1, in_place = (void *)-1;
    }
    mpi_library = library;
}

/* a handle as the ABI defines it: an MPICH handle is an int (the upper half of its register is undefined) */
static inline H handle(H value) { return abi == ABI_MPICH ? (H)(uint32_t)value : value; }
static inline H request_at(const void *array, int i) {
    return request_size == 4 ? (H)((const uint32_t *)array)[i] : ((const H *)array)[i];
}
static inline int status_source(const void *status) { return *(const int *)((const char *)status + source_offset); }
static inline int status_tag(const void *status) { return *(const int *)((const char *)status + tag_offset); }

/* ---- state ---------------------------------------------------------------------------------------------- */
struct stat_ {
    uint64_t calls, bytes;
    double seconds;
};
struct bucketed {
    uint64_t messages[BUCKETS], bytes[BUCKETS];
};
struct comm_entry {
    H comm;
    int size, trace_id;
    int *world; /* NULL: the world itself */
};
struct request {
    H handle;
    int64_t id, nbytes;
    int peer, tag;
    char kind, persistent, active; /* kind 's' or 'r' */
};

static int active, world_rank = -1, world_size = -1, tracing, unsupported;
static double t_init, t_last, t_final, compute_s, mpi_s;
static struct stat_ calls[NCALLS];
struct sized {
    int size;
    struct stat_ s;
};
static struct sized collectives[NCALLS][16]; /* by communicator size (the 16th: every other size) */
static struct bucketed *sent, *received;     /* [world_size] */
static struct comm_entry comms[COMM_SLOTS];
static struct request requests[REQ_SLOTS];
static int64_t next_request;
static uint64_t lost_requests;
static volatile int lock;
static __thread int depth;
static int provided_level = -1;

static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static inline void acquire(void) {
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
        ;
}
static inline void release(void) { __atomic_store_n(&lock, 0, __ATOMIC_RELEASE); }
/* a size's bucket: b holds the sizes in (2^(b-1), 2^b] (0: sizes 0 and 1), so that 64 B and 1 KiB close buckets */
static inline int bucket(int64_t n) {
    int b = n <= 1 ? 0 : 64 - __builtin_clzll((uint64_t)(n - 1));
    return b < BUCKETS ? b : BUCKETS - 1;
}

static int64_t type_bytes(int64_t count, H type) {
    int size = 0;
    if (count <= 0 || NEXT(Type_size)((void *)type, &size) != 0)
        return 0;
    return count * size;
}

/* ---- communicators: their members as world ranks ------------------------------------------------------------ */
static int next_comm_trace_id;

static struct comm_entry *comm_of(H comm) {
    comm = handle(comm);
    unsigned slot = (unsigned)((comm >> 4) ^ (comm >> 12)) % COMM_SLOTS;
    struct comm_entry *e = &comms[slot];
    if (e->comm == comm && e->size > 0)
        return e;
    free(e->world);
    memset(e, 0, sizeof *e);
    e->trace_id = -1;
    int size = 0, inter = 0;
    if (NEXT(Comm_size)((void *)comm, &size) != 0 || size <= 0)
        return NULL;
    if (NEXT(Comm_test_inter) && p_Comm_test_inter((void *)comm, &inter) == 0 && inter)
        return NULL; /* an intercommunicator's ranks name the remote group: not followed */
    e->comm = comm, e->size = size;
    if (comm == comm_world)
        return e;
    H group = 0, world_group = 0;
    int *ranks = malloc(sizeof(int) * size * 2);
    if (!ranks)
        return e;
    for (int i = 0; i < size; i++)
        ranks[i] = i;
    if (NEXT(Comm_group)((void *)comm, &group) == 0 && p_Comm_group((void *)comm_world, &world_group) == 0 &&
        NEXT(Group_translate_ranks)((void *)group, size, ranks, (void *)world_group, ranks + size) == 0) {
        e->world = ranks;
        memmove(ranks, ranks + size, sizeof(int) * size);
    } else {
        free(ranks);
    }
    if (NEXT(Group_free)) {
        if (group)
            p_Group_free(&group);
        if (world_group)
            p_Group_free(&world_group);
    }
    return e;
}

static inline int world_of(H comm, int rank) {
    if (rank < 0)
        return rank == any_source ? -1 : -2; /* -2: MPI_PROC_NULL */
    if (handle(comm) == comm_world)
        return rank;
    struct comm_entry *e = comm_of(comm);
    if (!e || rank >= e->size)
        return -3;
    return e->world ? e->world[rank] : rank;
}
static inline int is_null_peer(int rank) { return rank == proc_null; }

/* ---- the trace ------------------------------------------------------------------------------------------ */
struct event {
    uint16_t call, items;
    int32_t comm;
    double t0, t1;
    int64_t nbytes;
    int32_t root, pad;
};
struct item {
    int8_t kind, pad[3]; /* 0 send, 1 recv, 2 complete */
    int32_t peer;
    int64_t nbytes;
    int32_t tag, pad2;
    int64_t req;
};
static char *trace_buf;
static size_t trace_cap, trace_used;
static uint64_t trace_events, trace_dropped;
static struct event *open_event;
static char *comm_table; /* the traced communicators' members: [n, ranks...] */
static size_t comm_table_used, comm_table_cap;

static void event_begin(int call, double t0, double t1, int64_t nbytes, int comm, int root) {
    open_event = NULL;
    if (!tracing)
        return;
    if (trace_used + sizeof(struct event) > trace_cap) {
        trace_dropped++;
        return;
    }
    struct event *e = (struct event *)(trace_buf + trace_used);
    e->call = call, e->items = 0, e->comm = comm, e->t0 = t0 - t_init, e->t1 = t1 - t_init, e->nbytes = nbytes;
    e->root = root, e->pad = 0;
    trace_used += sizeof *e;
    trace_events++;
    open_event = e;
}

static void event_item(int kind, int peer, int64_t nbytes, int tag, int64_t req) {
    if (!open_event)
        return;
    if (trace_used + sizeof(struct item) > trace_cap || open_event->items == UINT16_MAX) {
        trace_dropped++;
        return;
    }
    struct item *i = (struct item *)(trace_buf + trace_used);
    memset(i, 0, sizeof *i);
    i->kind = kind, i->peer = peer, i->nbytes = nbytes, i->tag = tag, i->req = req;
    trace_used += sizeof *i;
    open_event->items++;
}

static int comm_trace_id(struct comm_entry *e) {
    if (!tracing || !e)
        return -1;
    if (e->trace_id >= 0)
        return e->trace_id;
    size_t need = sizeof(int32_t) * (1 + e->size);
    if (comm_table_used + need > comm_table_cap) {
        size_t cap = comm_table_cap ? comm_table_cap * 2 : 4096;
        while (cap < comm_table_used + need)
            cap *= 2;
        char *grown = realloc(comm_table, cap);
        if (!grown)
            return -1;
        comm_table = grown, comm_table_cap = cap;
    }
    int32_t *out = (int32_t *)(comm_table + comm_table_used);
    out[0] = e->size;
    for (int i = 0; i < e->size; i++)
        out[1 + i] = e->world ? e->world[i] : i;
    comm_table_used += need;
    return e->trace_id = next_comm_trace_id++;
}

/* ---- accounting ---------------------------------------------------------------------------------------- */
#define BEGIN(call)                                                                                             \
    int observe_ = active && depth == 0;                                                                        \
    double t0_ = 0;                                                                                             \
    depth++;                                                                                                    \
    if (observe_)                                                                                               \
        t0_ = now();
#define MIDDLE()                                                                                                \
    depth--;                                                                                                    \
    double t1_ = observe_ ? now() : 0;                                                                          \
    if (observe_)                                                                                               \
        acquire();
#define END() \
    if (observe_) \
        release();

static inline void account(int call, double t0, double t1, int64_t nbytes) {
    calls[call].calls++;
    calls[call].bytes += nbytes;
    calls[call].seconds += t1 - t0;
    if (t0 > t_last)
        compute_s += t0 - t_last;
    mpi_s += t1 - t0;
    t_last = t1;
}

static inline void count_peer(struct bucketed *table, int peer, int64_t nbytes) {
    if (peer < 0 || peer >= world_size || !table)
        return;
    int b = bucket(nbytes);
    table[peer].messages[b]++;
    table[peer].bytes[b] += nbytes;
}

/* received bytes and source from a status */
static int64_t status_bytes(const void *status) {
    int count = 0;
    if (NEXT(Get_count)((void *)status, (void *)byte_type, &count) != 0 || count < 0)
        return 0;
    return count;
}

/* ---- requests ------------------------------------------------------------------------------------------ */
static inline unsigned req_slot(H h) { return (unsigned)((h >> 3) * 2654435761u) & (REQ_SLOTS - 1); }

static struct request *req_find(H h) {
    h = handle(h);
    if (h == request_null)
        return NULL;
    for (unsigned i = req_slot(h), n = 0; n < REQ_SLOTS; i = (i + 1) & (REQ_SLOTS - 1), n++) {
        if (requests[i].handle == h)
            return &requests[i];
        if (requests[i].handle == 0)
            return NULL;
    }
    return NULL;
}

static void req_remove(struct request *r) {
    /* backward-shift deletion keeps the probe chains whole */
    unsigned i = (unsigned)(r - requests);
    for (unsigned j = (i + 1) & (REQ_SLOTS - 1);; j = (j + 1) & (REQ_SLOTS - 1)) {
        if (requests[j].handle == 0)
            break;
        unsigned home = req_slot(requests[j].handle);
        if (((j - home) & (REQ_SLOTS - 1)) >= ((j - i) & (REQ_SLOTS - 1))) {
            requests[i] = requests[j];
            i = j;
        }
    }
    memset(&requests[i], 0, sizeof requests[i]);
}

static struct request *req_add(H h, char kind, int peer, int64_t nbytes, int tag, int persistent) {
    h = handle(h);
    if (h == request_null || h == 0)
        return NULL;
    struct request *r = req_find(h);
    if (!r) {
        for (unsigned i = req_slot(h), n = 0; n < REQ_SLOTS; i = (i + 1) & (REQ_SLOTS - 1), n++)
            if (requests[i].handle == 0) {
                r = &requests[i];
                break;
            }
    }
    if (!r) {
        lost_requests++;
        return NULL;
    }
    r->handle = h, r->kind = kind, r->peer = peer, r->nbytes = nbytes, r->tag = tag;
    r->persistent = persistent, r->active = !persistent, r->id = persistent ? -1 : next_request++;
    return r;
}

/* a request completed: its receive's bytes and source counted, its completion traced */
static int64_t req_complete(H h, const void *status) {
    struct request *r = req_find(h);
    if (!r || !r->active)
        return 0;
    int64_t got = 0;
    int peer = -1;
    if (r->kind == 'r') {
        got = status ? status_bytes(status) : r->nbytes;
        int source = status ? status_source(status) : -1;
        peer = source >= 0 ? source : r->peer;
        count_peer(received, peer, got);
    }
    event_item(2, peer, got, r->kind == 'r' && status ? status_tag(status) : r->tag, r->id);
    if (r->persistent)
        r->active = 0;
    else
        req_remove(r);
    return got;
}

/* ---- scratch for Wait and Test of arrays (grown, never shrunk: no allocation per call once it fits) ---- */
static __thread H *scratch_req;
static __thread char *scratch_status;
static __thread int scratch_n;

static int scratch(int n) {
    if (n <= scratch_n)
        return 1;
    H *r = realloc(scratch_req, sizeof(H) * n);
    if (r)
        scratch_req = r;
    char *s = realloc(scratch_status, (size_t)MAX_STATUS * n);
    if (s)
        scratch_status = s;
    if (!r || !s)
        return 0;
    scratch_n = n;
    return 1;
}

/* ---- writing the files at MPI_Finalize ------------------------------------------------------------------ */
static double per_call_cost(void) {
    /* what a wrapper adds to a call: two clock reads, the lock and the bookkeeping, measured here */
    struct stat_ saved = calls[C_Finalize];
    double saved_compute = compute_s, saved_mpi = mpi_s, saved_last = t_last;
    int n = 2000;
    double begin = now();
    for (int i = 0; i < n; i++) {
        double a = now();
        double b = now();
        acquire();
        account(C_Finalize, a, b, 8);
        count_peer(sent, world_rank, 8);
        release();
    }
    double cost = (now() - begin) / n;
    calls[C_Finalize] = saved;
    compute_s = saved_compute, mpi_s = saved_mpi, t_last = saved_last;
    if (sent && world_rank >= 0) {
        sent[world_rank].messages[bucket(8)] -= n;
        sent[world_rank].bytes[bucket(8)] -= 8ull * n;
    }
    return cost;
}

static void write_peers(FILE *out, const char *key, struct bucketed *table) {
    fprintf(out, ", \"%s\": {", key);
    int first = 1;
    for (int p = 0; table && p < world_size; p++) {
        int any = 0;
        for (int b = 0; b < BUCKETS; b++)
            any |= table[p].messages[b] != 0;
        if (!any)
            continue;
        fprintf(out, "%s\"%d\": [", first ? "" : ", ", p);
        first = 0;
        int firstb = 1;
        for (int b = 0; b < BUCKETS; b++)
            if (table[p].messages[b]) {
                fprintf(out, "%s[%d, %llu, %llu]", firstb ? "" : ", ", b, (unsigned long long)table[p].messages[b],
                        (unsigned long long)table[p].bytes[b]);
                firstb = 0;
            }
        fputc(']', out);
    }
    fputc('}', out);
}

static void put32(FILE *out, uint32_t v) { fwrite(&v, 4, 1, out); }
static void put64(FILE *out, uint64_t v) { fwrite(&v, 8, 1, out); }

static void write_trace(const char *dir) {
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/rank-%d.trace", dir, world_rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "wb");
    if (!out)
        return;
    fwrite("VNBTRC01", 8, 1, out);
    put32(out, 1); /* version */
    put32(out, (uint32_t)world_rank);
    put32(out, (uint32_t)world_size);
    put32(out, trace_dropped ? 1 : 0); /* flags: truncated */
    put64(out, trace_events);
    put64(out, trace_dropped);
    double elapsed = t_final - t_init;
    fwrite(&elapsed, 8, 1, out);
    put32(out, NCALLS);
    for (int i = 0; i < NCALLS; i++) {
        uint8_t len = (uint8_t)strlen(call_name[i]);
        fwrite(&len, 1, 1, out);
        fwrite(call_name[i], len, 1, out);
    }
    put32(out, (uint32_t)next_comm_trace_id);
    put64(out, comm_table_used);
    if (comm_table_used)
        fwrite(comm_table, comm_table_used, 1, out);
    put64(out, trace_used);
    if (trace_used)
        fwrite(trace_buf, trace_used, 1, out);
    fwrite("VNBTRCND", 8, 1, out);
    if (fclose(out) == 0)
        rename(tmp, path);
    else
        unlink(tmp);
}

static void write_files(void) {
    const char *dir = getenv(DIR_ENV);
    if (!dir || !dir[0])
        return;
    double cost = per_call_cost();
    uint64_t total = 0;
    for (int i = 0; i < NCALLS; i++)
        total += calls[i].calls;
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/rank-%d.json", dir, world_rank < 0 ? (int)getpid() : world_rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out)
        return;
    fprintf(out, "{\"schema\": 1, \"rank\": %d, \"size\": %d, \"pid\": %ld, \"abi\": \"%s\", \"library\": \"%s\", "
                 "\"thread_level\": %d, \"elapsed_s\": %.9f, \"mpi_s\": %.9f, \"compute_s\": %.9f, "
                 "\"per_call_cost_s\": %.3e, \"wrapped_calls\": %llu, \"lost_requests\": %llu",
            world_rank, world_size, (long)getpid(), abi_name, library_version, provided_level, t_final - t_init,
            mpi_s, compute_s, cost, (unsigned long long)total, (unsigned long long)lost_requests);
    if (unsupported)
        fprintf(out, ", \"unsupported\": \"the MPI library's ABI is not one the profiler knows\"");
    fputs(", \"calls\": {", out);
    int first = 1;
    for (int i = 0; i < NCALLS; i++)
        if (calls[i].calls) {
            fprintf(out, "%s\"%s\": [%llu, %llu, %.9f]", first ? "" : ", ", call_name[i],
                    (unsigned long long)calls[i].calls, (unsigned long long)calls[i].bytes, calls[i].seconds);
            first = 0;
        }
    fputs("}, \"collectives\": {", out);
    first = 1;
    for (int i = FIRST_COLLECTIVE; i <= LAST_COLLECTIVE; i++)
        for (int s = 0; s < 16; s++)
            if (collectives[i][s].s.calls) {
                fprintf(out, "%s\"%s/%d\": [%llu, %llu, %.9f]", first ? "" : ", ", call_name[i],
                        collectives[i][s].size, (unsigned long long)collectives[i][s].s.calls,
                        (unsigned long long)collectives[i][s].s.bytes, collectives[i][s].s.seconds);
                first = 0;
            }
    fputc('}', out);
    write_peers(out, "sent", sent);
    write_peers(out, "received", received);
    if (tracing)
        fprintf(out, ", \"trace\": {\"events\": %llu, \"dropped\": %llu, \"bytes\": %llu, \"cap\": %llu}",
                (unsigned long long)trace_events, (unsigned long long)trace_dropped,
                (unsigned long long)trace_used, (unsigned long long)trace_cap);
    fputs("}\n", out);
    if (fclose(out) == 0)
        rename(tmp, path);
    else
        unlink(tmp);
    if (tracing)
        write_trace(dir);
}

static void resolve_twins(void);

/* ---- init and finalize ---------------------------------------------------------------------------------- */
static void resolve_all(void) {
#define RESOLVE(name) NEXT(name);
    CALLS(RESOLVE)
    NEXT(Type_size), NEXT(Comm_size), NEXT(Comm_rank), NEXT(Comm_group), NEXT(Group_translate_ranks);
    NEXT(Group_free), NEXT(Get_count), NEXT(Comm_test_inter);
}

static void started(int result, double t0, int call) {
    if (result != 0 || active || !getenv(DIR_ENV))
        return;
    resolve_all();
    abi_detect();
    resolve_twins();
    if (abi == ABI_UNKNOWN) {
        unsupported = 1;
        world_rank = (int)getpid() * -1;
        return;
    }
    p_Comm_rank((void *)comm_world, &world_rank);
    p_Comm_size((void *)comm_world, &world_size);
    if (world_size > 0 && world_size <= MAX_PEERS) {
        sent = calloc(world_size, sizeof *sent);
        received = calloc(world_size, sizeof *received);
    }
    const char *cap = getenv(TRACE_ENV);
    if (cap && atoll(cap) > 0) {
        trace_cap = (size_t)atoll(cap);
        trace_buf = mmap(NULL, trace_cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        tracing = trace_buf != MAP_FAILED;
        if (!tracing)
            trace_buf = NULL, trace_cap = 0;
    }
    t_init = t_last = now();
    calls[call].calls = 1;
    calls[call].seconds = t_init - t0;
    active = 1;
}

int MPI_Init(int *argc, char ***argv) {
    double t0 = now();
    int result = NEXT(Init)(argc, argv);
    started(result, t0, C_Init);
    return result;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    double t0 = now();
    int result = NEXT(Init_thread)(argc, argv, required, provided);
    if (result == 0 && provided)
        provided_level = *provided;
    started(result, t0, C_Init_thread);
    return result;
}

int MPI_Finalize(void) {
    if (active || unsupported) {
        t_final = now();
        if (active) {
            acquire();
            account(C_Finalize, t_final, t_final, 0);
            active = 0;
            release();
        }
        write_files();
    }
    return NEXT(Finalize)();
}

/* ---- point to point ---------------------------------------------------------------------------------------- */
/* Each call with a count has an MPI-4 large-count twin, MPI_X_c (MPI_Count counts, MPI_Aint displacements),
 * which mpi4py calls wherever the library defines it (a weak reference: MPICH 4 does, Open MPI 4 does not).
 * Both are wrapped and counted as MPI_X. Defining MPI_X_c here makes it defined for every library, so the twin
 * of a library without PMPI_X_c narrows its counts and calls PMPI_X (MPI_ERR_COUNT when one does not fit). */
#define ERR_COUNT 2 /* MPI_ERR_COUNT in Open MPI and in the MPICH ABI */
#define C_TWINS(X)                                                                                              \
    X(Send) X(Recv) X(Isend) X(Irecv) X(Ssend) X(Issend) X(Rsend) X(Bsend) X(Sendrecv) X(Sendrecv_replace)        \
    X(Mrecv) X(Send_init) X(Recv_init) X(Bcast) X(Reduce) X(Allreduce) X(Allgather) X(Allgatherv) X(Gather)      \
    X(Gatherv) X(Scatter) X(Scatterv) X(Alltoall) X(Alltoallv) X(Reduce_scatter) X(Reduce_scatter_block) X(Scan) \
    X(Exscan)
#define PTR_C(name) static fn p_##name##_c;
C_TWINS(PTR_C)
static int twins_resolved;
/* at MPI_Init, in the library itself: asking every loaded object for each of the 28 (a Python process with numpy
 * has a hundred), as a library without them makes ``real`` do, took milliseconds - inside a kernel's timed loop,
 * had it waited for the first call */
static void resolve_twins(void) {
#define RESOLVE_C(name)                                                                                         \
    p_##name##_c = (fn)(mpi_library ? dlsym(mpi_library, "PMPI_" #name "_c") : real("PMPI_" #name "_c"));
    C_TWINS(RESOLVE_C)
    twins_resolved = 1;
}
#define FITS(n) ((int64_t)(n) >= -2147483647 - 1 && (int64_t)(n) <= 2147483647)
/* the real call: the int one, or the large-count twin (or its narrowed fallback) */
#define CALL_INT(NAME, ARGS, NARROW, OK) NEXT(NAME) ARGS
#define CALL_C(NAME, ARGS, NARROW, OK)                                                                          \
    ((twins_resolved || (resolve_twins(), 1)) && p_##NAME##_c ? p_##NAME##_c ARGS                               \
                                                               : (OK) ? NEXT(NAME) NARROW : ERR_COUNT)

/* counts and displacements narrowed for a twin's fallback (thread-local, grown, never shrunk) */
static __thread int *narrowed[4];
static __thread int narrowed_n[4];
static const int *narrow(const void *values, int n, int slot, int *ok) {
    const int64_t *v = values;
    if (!v || n <= 0)
        return NULL;
    if (n > narrowed_n[slot]) {
        int *grown = realloc(narrowed[slot], sizeof(int) * n);
        if (!grown) {
            *ok = 0;
            return NULL;
        }
        narrowed[slot] = grown, narrowed_n[slot] = n;
    }
    for (int i = 0; i < n; i++) {
        if (!FITS(v[i]))
            *ok = 0;
        narrowed[slot][i] = (int)v[i];
    }
    return narrowed[slot];
}

#define SEND_LIKE(NAME, SUF, CT, CALL)                                                                          \
    int MPI_##NAME##SUF(const void *buf, CT count, H type, int dest, int tag, H comm) {                         \
        BEGIN(C_##NAME)                                                                                         \
        int result = CALL(NAME, (buf, count, type, dest, tag, comm), (buf, (int)count, type, dest, tag, comm),  \
                          FITS(count));                                                                         \
        MIDDLE()                                                                                                \
        if (observe_) {                                                                                         \
            int64_t nbytes = is_null_peer(dest) ? 0 : type_bytes(count, type);                                  \
            int peer = world_of(comm, dest);                                                                    \
            account(C_##NAME, t0_, t1_, nbytes);                                                                \
            count_peer(sent, peer, nbytes);                                                                     \
            event_begin(C_##NAME, t0_, t1_, 0, -1, -1);                                                         \
            if (peer >= 0)                                                                                      \
                event_item(0, peer, nbytes, tag, -1);                                                           \
        }                                                                                                       \
        END()                                                                                                   \
        return result;                                                                                          \
    }
#define BOTH(MACRO, NAME) MACRO(NAME, , int, CALL_INT) MACRO(NAME, _c, int64_t, CALL_C)
BOTH(SEND_LIKE, Send)
BOTH(SEND_LIKE, Ssend)
BOTH(SEND_LIKE, Rsend)
BOTH(SEND_LIKE, Bsend)

#define ISEND_LIKE(NAME, SUF, CT, CALL)                                                                         \
    int MPI_##NAME##SUF(const void *buf, CT count, H type, int dest, int tag, H comm, void *request) {          \
        BEGIN(C_##NAME)                                                                                         \
        int result = CALL(NAME, (buf, count, type, dest, tag, comm, request),                                   \
                          (buf, (int)count, type, dest, tag, comm, request), FITS(count));                      \
        MIDDLE()                                                                                                \
        if (observe_) {                                                                                         \
            int64_t nbytes = is_null_peer(dest) ? 0 : type_bytes(count, type);                                  \
            int peer = world_of(comm, dest);                                                                    \
            account(C_##NAME, t0_, t1_, nbytes);                                                                \
            count_peer(sent, peer, nbytes);                                                                     \
            struct request *r = result == 0 && request ? req_add(request_at(request, 0), 's', peer, nbytes, tag, 0) \
                                                       : NULL;                                                  \
            event_begin(C_##NAME, t0_, t1_, 0, -1, -1);                                                         \
            if (peer >= 0)                                                                                      \
                event_item(0, peer, nbytes, tag, r ? r->id : -1);                                               \
        }                                                                                                       \
        END()                                                                                                   \
        return result;                                                                                          \
    }
BOTH(ISEND_LIKE, Isend)
BOTH(ISEND_LIKE, Issend)

#define IRECV(NAME, SUF, CT, CALL)                                                                              \
    int MPI_##NAME##SUF(void *buf, CT count, H type, int source, int tag, H comm, void *request) {              \
        BEGIN(C_##NAME)                                                                                         \
        int result = CALL(NAME, (buf, count, type, source, tag, comm, request),                                 \
                          (buf, (int)count, type, source, tag, comm, request), FITS(count));                    \
        MIDDLE()                                                                                                \
        if (observe_) {                                                                                         \
            int peer = world_of(comm, source);                                                                  \
            int64_t nbytes = is_null_peer(source) ? 0 : type_bytes(count, type);                                \
            account(C_##NAME, t0_, t1_, 0);                                                                     \
            struct request *r = NULL;                                                                           \
            if (result == 0 && request && peer != -2)                                                           \
                r = req_add(request_at(request, 0), 'r', peer, nbytes, tag, 0);                                 \
            event_begin(C_##NAME, t0_, t1_, 0, -1, -1);                                                         \
            if (peer != -2)                                                                                     \
                event_item(1, peer, nbytes, tag, r ? r->id : -1);                                               \
        }                                                                                                       \
        END()                                                                                                   \
        return result;                                                                                          \
    }
BOTH(IRECV, Irecv)

static __thread char own_status[MAX_STATUS];

#define RECV(NAME, SUF, CT, CALL)                                                                               \
    int MPI_##NAME##SUF(void *buf, CT count, H type, int source, int tag, H comm, void *status) {               \
        BEGIN(C_##NAME)                                                                                         \
        void *st = observe_ && status == status_ignore ? own_status : status;                                   \
        int result = CALL(NAME, (buf, count, type, source, tag, comm, st),                                      \
                          (buf, (int)count, type, source, tag, comm, st), FITS(count));                         \
        MIDDLE()                                                                                                \
        if (observe_) {                                                                                         \
            int64_t got = 0;                                                                                    \
            int peer = -2;                                                                                      \
            if (result == 0 && !is_null_peer(source)) {                                                         \
                got = status_bytes(st);                                                                         \
                peer = world_of(comm, status_source(st));                                                       \
            }                                                                                                   \
            account(C_##NAME, t0_, t1_, got);                                                                   \
            count_peer(received, peer, got);                                                                    \
            event_begin(C_##NAME, t0_, t1_, 0, -1, -1);                                                         \
            if (peer >= 0)                                                                                      \
                event_item(1, peer, got, status_tag(st), -1);                                                   \
        }                                                                                                       \
        END()                                                                                                   \
        return result;                                                                                          \
    }
BOTH(RECV, Recv)

#define MRECV(NAME, SUF, CT, CALL)                                                                              \
    int MPI_##NAME##SUF(void *buf, CT count, H type, void *message, void *status) {                             \
        BEGIN(C_##NAME)                                                                                         \
        void *st = observe_ && status == status_ignore ? own_status : status;                                   \
        int result = CALL(NAME, (buf, count, type, message, st), (buf, (int)count, type, message, st),          \
                          FITS(count));                                                                         \
        MIDDLE()                                                                                                \
        if (observe_) {                                                                                         \
            int64_t got = 0;                                                                                    \
            int peer = -2;                                                                                      \
            if (result == 0 && status_source(st) >= 0) {                                                        \
                got = status_bytes(st);                                                                         \
                /* the message's communicator is not known here: a world rank on MPI_COMM_WORLD and its         \
                   duplicates (mpi4py's pickled receives) */                                                    \
                peer = status_source(st);                                                                       \
            }                                                                                                   \
            account(C_##NAME, t0_, t1_, got);                                                                   \
            count_peer(received, peer, got);                                                                    \
            event_begin(C_##NAME, t0_, t1_, 0, -1, -1);                                                         \
            if (peer >= 0)                                                                                      \
                event_item(1, peer, got, status_tag(st), -1);                                                   \
        }                                                                                                       \
        END()                                                                                                   \
        return result;                                                                                          \
    }
BOTH(MRECV, Mrecv)

#define SENDRECV(NAME, SUF, CT, CALL)                                                                           \
    int MPI_##NAME##SUF(const void *sbuf, CT scount, H stype, int dest, int stag, void *rbuf, CT rcount,        \
                        H rtype, int source, int rtag, H comm, void *status) {                                  \
        BEGIN(C_##NAME)                                                                                         \
        void *st = observe_ && status == status_ignore ? own_status : status;                                   \
        int result = CALL(NAME, (sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, st), \
                          (sbuf, (int)scount, stype, dest, stag, rbuf, (int)rcount, rtype, source, rtag, comm,  \
                           st),                                                                                 \
                          FITS(scount) && FITS(rcount));                                                        \
        MIDDLE()                                                                                                \
        if (observe_)                                                                                           \
            exchanged(C_##NAME, t0_, t1_, result, comm, dest, stag, type_bytes(scount, stype), source, st);     \
        END()                                                                                                   \
        return result;                                                                                          \
    }
#define SENDRECV_REPLACE(NAME, SUF, CT, CALL)                                                                   \
    int MPI_##NAME##SUF(void *buf, CT count, H type, int dest, int stag, int source, int rtag, H comm,          \
                        void *status) {                                                                         \
        BEGIN(C_##NAME)                                                                                         \
        void *st = observe_ && status == status_ignore ? own_status : status;                                   \
        int result = CALL(NAME, (buf, count, type, dest, stag, source, rtag, comm, st),                         \
                          (buf, (int)count, type, dest, stag, source, rtag, comm, st), FITS(count));            \
        MIDDLE()                                                                                                \
        if (observe_)                                                                                           \
            exchanged(C_##NAME, t0_, t1_, result, comm, dest, stag, type_bytes(count, type), source, st);       \
        END()                                                                                                   \
        return result;                                                                                          \
    }

static void exchanged(int call, double t0, double t1, int result, H comm, int dest, int stag, int64_t out,
                      int source, void *st) {
    int64_t got = 0;
    if (is_null_peer(dest))
        out = 0;
    int to = world_of(comm, dest), from = -2;
    if (result == 0 && !is_null_peer(source)) {
        got = status_bytes(st);
        from = world_of(comm, status_source(st));
    }
    account(call, t0, t1, out + got);
    count_peer(sent, to, out);
    count_peer(received, from, got);
    event_begin(call, t0, t1, 0, -1, -1);
    if (to >= 0)
        event_item(0, to, out, stag, -1);
    if (from >= 0)
        event_item(1, from, got, status_tag(st), -1);
}
BOTH(SENDRECV, Sendrecv)
BOTH(SENDRECV_REPLACE, Sendrecv_replace)


/* calls and time only */
#define PLAIN(NAME, PARAMS, ARGS)                                                                               \
    int MPI_##NAME PARAMS {                                                                                     \
        BEGIN(C_##NAME)                                                                                         \
        int result = NEXT(NAME) ARGS;                                                                           \
        MIDDLE()                                                                                                \
        if (observe_) {                                                                                         \
            account(C_##NAME, t0_, t1_, 0);                                                                     \
            event_begin(C_##NAME, t0_, t1_, 0, -1, -1);                                                         \
        }                                                                                                       \
        END()                                                                                                   \
        return result;                                                                                          \
    }
PLAIN(Probe, (int source, int tag, H comm, void *status), (source, tag, comm, status))
PLAIN(Iprobe, (int source, int tag, H comm, int *flag, void *status), (source, tag, comm, flag, status))
PLAIN(Mprobe, (int source, int tag, H comm, void *message, void *status), (source, tag, comm, message, status))
PLAIN(Comm_dup, (H comm, void *out), (comm, out))
PLAIN(Comm_split, (H comm, int color, int key, void *out), (comm, color, key, out))
PLAIN(Comm_create, (H comm, H group, void *out), (comm, group, out))
PLAIN(Cart_create, (H comm, int n, const int *dims, const int *periods, int reorder, void *out),
      (comm, n, dims, periods, reorder, out))

int MPI_Comm_free(void *comm) {
    BEGIN(C_Comm_free)
    if (observe_ && comm) {
        H h = handle(request_size == 4 ? (H) * (uint32_t *)comm : *(H *)comm);
        acquire();
        for (int i = 0; i < COMM_SLOTS; i++)
            if (comms[i].comm == h) {
                free(comms[i].world);
                memset(&comms[i], 0, sizeof comms[i]);
            }
        release();
    }
    int result = NEXT(Comm_free)(comm);
    MIDDLE()
    if (observe_) {
        account(C_Comm_free, t0_, t1_, 0);
        event_begin(C_Comm_free, t0_, t1_, 0, -1, -1);
    }
    END()
    return result;
}

/* persistent requests: a message per Start, not per init */
#define INIT_LIKE(NAME, SUF, CT, CALL, KIND)                                                                    \
    int MPI_##NAME##SUF(const void *buf, CT count, H type, int peer_rank, int tag, H comm, void *request) {     \
        BEGIN(C_##NAME)                                                                                         \
        int result = CALL(NAME, (buf, count, type, peer_rank, tag, comm, request),                              \
                          (buf, (int)count, type, peer_rank, tag, comm, request), FITS(count));                 \
        MIDDLE()                                                                                                \
        if (observe_) {                                                                                         \
            account(C_##NAME, t0_, t1_, 0);                                                                     \
            if (result == 0 && request && !is_null_peer(peer_rank))                                             \
                req_add(request_at(request, 0), KIND, world_of(comm, peer_rank), type_bytes(count, type), tag, 1); \
            event_begin(C_##NAME, t0_, t1_, 0, -1, -1);                                                         \
        }                                                                                                       \
        END()                                                                                                   \
        return result;                                                                                          \
    }
INIT_LIKE(Send_init, , int, CALL_INT, 's')
INIT_LIKE(Send_init, _c, int64_t, CALL_C, 's')
INIT_LIKE(Recv_init, , int, CALL_INT, 'r')
INIT_LIKE(Recv_init, _c, int64_t, CALL_C, 'r')


static int64_t started_request(H h) {
    struct request *r = req_find(h);
    if (!r || !r->persistent)
        return 0;
    r->active = 1;
    r->id = next_request++;
    if (r->kind == 's') {
        count_peer(sent, r->peer, r->nbytes);
        if (r->peer >= 0)
            event_item(0, r->peer, r->nbytes, r->tag, r->id);
        return r->nbytes;
    }
    event_item(1, r->peer, r->nbytes, r->tag, r->id);
    return 0;
}

int MPI_Start(void *request) {
    BEGIN(C_Start)
    H h = request ? request_at(request, 0) : 0;
    int result = NEXT(Start)(request);
    MIDDLE()
    if (observe_) {
        event_begin(C_Start, t0_, t1_, 0, -1, -1);
        int64_t nbytes = result == 0 ? started_request(h) : 0;
        account(C_Start, t0_, t1_, nbytes);
    }
    END()
    return result;
}

int MPI_Startall(int count, void *requests_) {
    BEGIN(C_Startall)
    int result = NEXT(Startall)(count, requests_);
    MIDDLE()
    if (observe_) {
        event_begin(C_Startall, t0_, t1_, 0, -1, -1);
        int64_t nbytes = 0;
        for (int i = 0; result == 0 && i < count; i++)
            nbytes += started_request(request_at(requests_, i));
        account(C_Startall, t0_, t1_, nbytes);
    }
    END()
    return result;
}

int MPI_Request_free(void *request) {
    BEGIN(C_Request_free)
    H h = request ? request_at(request, 0) : 0;
    int result = NEXT(Request_free)(request);
    MIDDLE()
    if (observe_) {
        struct request *r = req_find(h);
        if (r && result == 0)
            req_remove(r);
        account(C_Request_free, t0_, t1_, 0);
        event_begin(C_Request_free, t0_, t1_, 0, -1, -1);
    }
    END()
    return result;
}

/* ---- completion ------------------------------------------------------------------------------------------ */
int MPI_Wait(void *request, void *status) {
    BEGIN(C_Wait)
    H h = request ? request_at(request, 0) : 0;
    void *st = observe_ && status == status_ignore ? own_status : status;
    int result = NEXT(Wait)(request, st);
    MIDDLE()
    if (observe_) {
        event_begin(C_Wait, t0_, t1_, 0, -1, -1);
        int64_t got = result == 0 ? req_complete(h, st) : 0;
        account(C_Wait, t0_, t1_, got);
    }
    END()
    return result;
}

int MPI_Test(void *request, int *flag, void *status) {
    BEGIN(C_Test)
    H h = request ? request_at(request, 0) : 0;
    void *st = observe_ && status == status_ignore ? own_status : status;
    int result = NEXT(Test)(request, flag, st);
    MIDDLE()
    if (observe_) {
        event_begin(C_Test, t0_, t1_, 0, -1, -1);
        int64_t got = result == 0 && flag && *flag ? req_complete(h, st) : 0;
        account(C_Test, t0_, t1_, got);
    }
    END()
    return result;
}

/* the array's handles before the call (completion sets them to MPI_REQUEST_NULL), and statuses to read */
#define ARRAY_BEGIN(CALL, count, reqs, statuses)                                                               \
    BEGIN(CALL)                                                                                                 \
    int kept_ = observe_ && count > 0 && reqs && scratch(count);                                                \
    void *st_ = statuses;                                                                                       \
    if (kept_) {                                                                                                \
        for (int i = 0; i < count; i++)                                                                         \
            scratch_req[i] = request_at(reqs, i);                                                               \
        if (statuses == status_ignore)                                                                          \
            st_ = scratch_status;                                                                               \
    }

int MPI_Waitall(int count, void *reqs, void *statuses) {
    ARRAY_BEGIN(C_Waitall, count, reqs, statuses)
    int result = NEXT(Waitall)(count, reqs, st_);
    MIDDLE()
    if (observe_) {
        event_begin(C_Waitall, t0_, t1_, 0, -1, -1);
        int64_t got = 0;
        for (int i = 0; kept_ && result == 0 && i < count; i++)
            got += req_complete(scratch_req[i], (char *)st_ + (size_t)i * status_size);
        account(C_Waitall, t0_, t1_, got);
    }
    END()
    return result;
}

int MPI_Testall(int count, void *reqs, int *flag, void *statuses) {
    ARRAY_BEGIN(C_Testall, count, reqs, statuses)
    int result = NEXT(Testall)(count, reqs, flag, st_);
    MIDDLE()
    if (observe_) {
        event_begin(C_Testall, t0_, t1_, 0, -1, -1);
        int64_t got = 0;
        for (int i = 0; kept_ && result == 0 && flag && *flag && i < count; i++)
            got += req_complete(scratch_req[i], (char *)st_ + (size_t)i * status_size);
        account(C_Testall, t0_, t1_, got);
    }
    END()
    return result;
}

#define ANY_LIKE(NAME, PARAMS, ARGS, DONE)                                                                      \
    int MPI_##NAME PARAMS {                                                                                     \
        BEGIN(C_##NAME)                                                                                         \
        int kept_ = observe_ && count > 0 && reqs && scratch(count);                                            \
        for (int i = 0; kept_ && i < count; i++)                                                                \
            scratch_req[i] = request_at(reqs, i);                                                               \
        void *st = observe_ && status == status_ignore ? own_status : status;                                   \
        int result = NEXT(NAME) ARGS;                                                                           \
        MIDDLE()                                                                                                \
        if (observe_) {                                                                                         \
            event_begin(C_##NAME, t0_, t1_, 0, -1, -1);                                                         \
            int64_t got = 0;                                                                                    \
            if (kept_ && result == 0 && (DONE) && index && *index >= 0 && *index < count)                       \
                got = req_complete(scratch_req[*index], st);                                                    \
            account(C_##NAME, t0_, t1_, got);                                                                   \
        }                                                                                                       \
        END()                                                                                                   \
        return result;                                                                                          \
    }
ANY_LIKE(Waitany, (int count, void *reqs, int *index, void *status), (count, reqs, index, st), 1)
ANY_LIKE(Testany, (int count, void *reqs, int *index, int *flag, void *status), (count, reqs, index, flag, st),
         flag && *flag)

#define SOME_LIKE(NAME)                                                                                         \
    int MPI_##NAME(int count, void *reqs, int *outcount, int *indices, void *statuses) {                       \
        ARRAY_BEGIN(C_##NAME, count, reqs, statuses)                                                            \
        int result = NEXT(NAME)(count, reqs, outcount, indices, st_);                                           \
        MIDDLE()                                                                                                \
        if (observe_) {                                                                                         \
            event_begin(C_##NAME, t0_, t1_, 0, -1, -1);                                                         \
            int64_t got = 0;                                                                                    \
            for (int i = 0; kept_ && result == 0 && outcount && indices && i < *outcount; i++)                  \
                if (indices[i] >= 0 && indices[i] < count)                                                      \
                    got += req_complete(scratch_req[indices[i]], (char *)st_ + (size_t)i * status_size);       \
            account(C_##NAME, t0_, t1_, got);                                                                   \
        }                                                                                                       \
        END()                                                                                                   \
        return result;                                                                                          \
    }
SOME_LIKE(Waitsome)
SOME_LIKE(Testsome)

/* ---- collectives ------------------------------------------------------------------------------------------ */
static void collective(int call, double t0, double t1, H comm, int64_t nbytes, int root) {
    struct comm_entry *e = comm_of(comm);
    int size = e ? e->size : 0;
    account(call, t0, t1, nbytes);
    int b = 0;
    while (b < 15 && collectives[call][b].size != size && collectives[call][b].s.calls)
        b++;
    if (b == 15 && collectives[call][b].size != size)
        size = -1; /* more sizes than slots: the rest together */
    collectives[call][b].size = size;
    collectives[call][b].s.calls++;
    collectives[call][b].s.bytes += nbytes;
    collectives[call][b].s.seconds += t1 - t0;
    int world_root = root >= 0 && e ? (e->world ? (root < e->size ? e->world[root] : -1) : root) : -1;
    event_begin(call, t0, t1, nbytes, comm_trace_id(e), world_root);
}

static int my_rank(H comm) {
    int rank = 0;
    NEXT(Comm_rank)((void *)comm, &rank);
    return rank;
}
#define SIZE_OF(comm) (comm_of(comm) ? comm_of(comm)->size : 0)

/* the sum of ``n`` counts, ints or (``wide``) MPI_Counts, in bytes of ``type`` */
static int64_t sum_counts(const void *counts, int wide, int n, H type) {
    int64_t total = 0;
    for (int i = 0; counts && i < n; i++)
        total += wide ? ((const int64_t *)counts)[i] : ((const int *)counts)[i];
    return type_bytes(total, type);
}
static int64_t count_at(const void *counts, int wide, int i) {
    return !counts ? 0 : wide ? ((const int64_t *)counts)[i] : ((const int *)counts)[i];
}

/* the collective ``NAME`` with its parameters, its real call's arguments (and their narrowed fallback, and
 * whether that fits), the data its arguments give on this rank (BYTES; WIDE: the counts are MPI_Counts) and its
 * root */
#define COLLECTIVE(NAME, SUF, PARAMS, ARGS, NARROW, OK, BYTES, ROOT, CALL, WIDE)                                \
    int MPI_##NAME##SUF PARAMS {                                                                                \
        BEGIN(C_##NAME)                                                                                         \
        int result = CALL(NAME, ARGS, NARROW, OK);                                                              \
        MIDDLE()                                                                                                \
        if (observe_) {                                                                                         \
            const int wide = WIDE;                                                                              \
            (void)wide;                                                                                         \
            collective(C_##NAME, t0_, t1_, comm, (BYTES), (ROOT));                                              \
        }                                                                                                       \
        END()                                                                                                   \
        return result;                                                                                          \
    }

COLLECTIVE(Barrier, , (H comm), (comm), (comm), 1, 0, -1, CALL_INT, 0)

#define BCAST(SUF, CT, CALL, WIDE)                                                                              \
    COLLECTIVE(Bcast, SUF, (void *buf, CT count, H type, int root, H comm), (buf, count, type, root, comm),     \
               (buf, (int)count, type, root, comm), FITS(count), type_bytes(count, type), root, CALL, WIDE)
BCAST(, int, CALL_INT, 0)
BCAST(_c, int64_t, CALL_C, 1)

#define REDUCE(SUF, CT, CALL, WIDE)                                                                             \
    COLLECTIVE(Reduce, SUF, (const void *s, void *r, CT count, H type, H op, int root, H comm),                 \
               (s, r, count, type, op, root, comm), (s, r, (int)count, type, op, root, comm), FITS(count),      \
               type_bytes(count, type), root, CALL, WIDE)
REDUCE(, int, CALL_INT, 0)
REDUCE(_c, int64_t, CALL_C, 1)

#define ALLREDUCE_LIKE(NAME, SUF, CT, CALL, WIDE)                                                               \
    COLLECTIVE(NAME, SUF, (const void *s, void *r, CT count, H type, H op, H comm), (s, r, count, type, op, comm), \
               (s, r, (int)count, type, op, comm), FITS(count), type_bytes(count, type), -1, CALL, WIDE)
#define BOTH_COLL(MACRO, NAME) MACRO(NAME, , int, CALL_INT, 0) MACRO(NAME, _c, int64_t, CALL_C, 1)
BOTH_COLL(ALLREDUCE_LIKE, Allreduce)
BOTH_COLL(ALLREDUCE_LIKE, Scan)
BOTH_COLL(ALLREDUCE_LIKE, Exscan)

#define ALLGATHER_LIKE(NAME, SUF, CT, CALL, WIDE, BYTES)                                                        \
    COLLECTIVE(NAME, SUF, (const void *s, CT sc, H st, void *r, CT rc, H rt, H comm),                           \
               (s, sc, st, r, rc, rt, comm), (s, (int)sc, st, r, (int)rc, rt, comm), FITS(sc) && FITS(rc),      \
               BYTES, -1, CALL, WIDE)
#define BLOCK (s == in_place ? type_bytes(rc, rt) : type_bytes(sc, st))
ALLGATHER_LIKE(Allgather, , int, CALL_INT, 0, BLOCK)
ALLGATHER_LIKE(Allgather, _c, int64_t, CALL_C, 1, BLOCK)
ALLGATHER_LIKE(Alltoall, , int, CALL_INT, 0, BLOCK * SIZE_OF(comm))
ALLGATHER_LIKE(Alltoall, _c, int64_t, CALL_C, 1, BLOCK * SIZE_OF(comm))

#define GATHER_LIKE(NAME, SUF, CT, CALL, WIDE, BYTES)                                                           \
    COLLECTIVE(NAME, SUF, (const void *s, CT sc, H st, void *r, CT rc, H rt, int root, H comm),                 \
               (s, sc, st, r, rc, rt, root, comm), (s, (int)sc, st, r, (int)rc, rt, root, comm),                \
               FITS(sc) && FITS(rc), BYTES, root, CALL, WIDE)
GATHER_LIKE(Gather, , int, CALL_INT, 0, BLOCK)
GATHER_LIKE(Gather, _c, int64_t, CALL_C, 1, BLOCK)
#define SCATTER_BLOCK (r == in_place ? type_bytes(sc, st) : type_bytes(rc, rt))
GATHER_LIKE(Scatter, , int, CALL_INT, 0, SCATTER_BLOCK)
GATHER_LIKE(Scatter, _c, int64_t, CALL_C, 1, SCATTER_BLOCK)

/* the v-collectives: the fallback of a twin narrows its count and displacement arrays (``ok_`` says whether
 * they fit) */
#define NARROW_OK int ok_ = 1
#define ALLGATHERV(SUF, CT, DT, CALL, WIDE)                                                                     \
    int MPI_Allgatherv##SUF(const void *s, CT sc, H st, void *r, const CT *rc, const DT *d, H rt, H comm) {     \
        BEGIN(C_Allgatherv)                                                                                     \
        int result;                                                                                             \
        if (WIDE && !((twins_resolved || (resolve_twins(), 1)) && p_Allgatherv_c)) {                            \
            int n = SIZE_OF(comm), ok = FITS(sc);                                                               \
            const int *rc_ = narrow(rc, n, 0, &ok), *d_ = narrow(d, n, 1, &ok);                                 \
            result = ok ? NEXT(Allgatherv)(s, (int)sc, st, r, rc_, d_, rt, comm) : ERR_COUNT;                   \
        } else                                                                                                  \
            result = WIDE ? p_Allgatherv_c(s, sc, st, r, rc, d, rt, comm)                                       \
                          : NEXT(Allgatherv)(s, sc, st, r, rc, d, rt, comm);                                    \
        MIDDLE()                                                                                                \
        if (observe_)                                                                                           \
            collective(C_Allgatherv, t0_, t1_, comm,                                                            \
                       s == in_place ? type_bytes(count_at(rc, WIDE, my_rank(comm)), rt) : type_bytes(sc, st), -1); \
        END()                                                                                                   \
        return result;                                                                                          \
    }
ALLGATHERV(, int, int, CALL_INT, 0)
ALLGATHERV(_c, int64_t, int64_t, CALL_C, 1)

#define GATHERV(SUF, CT, DT, WIDE)                                                                              \
    int MPI_Gatherv##SUF(const void *s, CT sc, H st, void *r, const CT *rc, const DT *d, H rt, int root,        \
                         H comm) {                                                                              \
        BEGIN(C_Gatherv)                                                                                        \
        int result;                                                                                             \
        if (WIDE && !((twins_resolved || (resolve_twins(), 1)) && p_Gatherv_c)) {                               \
            int n = SIZE_OF(comm), ok = FITS(sc);                                                               \
            const int *rc_ = narrow(rc, n, 0, &ok), *d_ = narrow(d, n, 1, &ok);                                 \
            result = ok ? NEXT(Gatherv)(s, (int)sc, st, r, rc_, d_, rt, root, comm) : ERR_COUNT;                \
        } else                                                                                                  \
            result = WIDE ? p_Gatherv_c(s, sc, st, r, rc, d, rt, root, comm)                                    \
                          : NEXT(Gatherv)(s, sc, st, r, rc, d, rt, root, comm);                                 \
        MIDDLE()                                                                                                \
        if (observe_)                                                                                           \
            collective(C_Gatherv, t0_, t1_, comm,                                                               \
                       s == in_place ? type_bytes(count_at(rc, WIDE, my_rank(comm)), rt) : type_bytes(sc, st),  \
                       root);                                                                                   \
        END()                                                                                                   \
        return result;                                                                                          \
    }
GATHERV(, int, int, 0)
GATHERV(_c, int64_t, int64_t, 1)

#define SCATTERV(SUF, CT, DT, WIDE)                                                                             \
    int MPI_Scatterv##SUF(const void *s, const CT *sc, const DT *d, H st, void *r, CT rc, H rt, int root,       \
                          H comm) {                                                                             \
        BEGIN(C_Scatterv)                                                                                       \
        int result;                                                                                             \
        if (WIDE && !((twins_resolved || (resolve_twins(), 1)) && p_Scatterv_c)) {                              \
            int n = SIZE_OF(comm), ok = FITS(rc);                                                               \
            const int *sc_ = narrow(sc, n, 0, &ok), *d_ = narrow(d, n, 1, &ok);                                 \
            result = ok ? NEXT(Scatterv)(s, sc_, d_, st, r, (int)rc, rt, root, comm) : ERR_COUNT;               \
        } else                                                                                                  \
            result = WIDE ? p_Scatterv_c(s, sc, d, st, r, rc, rt, root, comm)                                   \
                          : NEXT(Scatterv)(s, sc, d, st, r, rc, rt, root, comm);                                \
        MIDDLE()                                                                                                \
        if (observe_)                                                                                           \
            collective(C_Scatterv, t0_, t1_, comm,                                                              \
                       r == in_place ? type_bytes(count_at(sc, WIDE, my_rank(comm)), st) : type_bytes(rc, rt),  \
                       root);                                                                                   \
        END()                                                                                                   \
        return result;                                                                                          \
    }
SCATTERV(, int, int, 0)
SCATTERV(_c, int64_t, int64_t, 1)

#define ALLTOALLV(SUF, CT, DT, WIDE)                                                                            \
    int MPI_Alltoallv##SUF(const void *s, const CT *sc, const DT *sd, H st, void *r, const CT *rc,              \
                           const DT *rd, H rt, H comm) {                                                        \
        BEGIN(C_Alltoallv)                                                                                      \
        int result;                                                                                             \
        if (WIDE && !((twins_resolved || (resolve_twins(), 1)) && p_Alltoallv_c)) {                             \
            int n = SIZE_OF(comm), ok = 1;                                                                      \
            const int *sc_ = narrow(sc, n, 0, &ok), *sd_ = narrow(sd, n, 1, &ok);                               \
            const int *rc_ = narrow(rc, n, 2, &ok), *rd_ = narrow(rd, n, 3, &ok);                               \
            result = ok ? NEXT(Alltoallv)(s, sc_, sd_, st, r, rc_, rd_, rt, comm) : ERR_COUNT;                  \
        } else                                                                                                  \
            result = WIDE ? p_Alltoallv_c(s, sc, sd, st, r, rc, rd, rt, comm)                                   \
                          : NEXT(Alltoallv)(s, sc, sd, st, r, rc, rd, rt, comm);                                \
        MIDDLE()                                                                                                \
        if (observe_)                                                                                           \
            collective(C_Alltoallv, t0_, t1_, comm,                                                             \
                       s == in_place ? sum_counts(rc, WIDE, SIZE_OF(comm), rt)                                  \
                                     : sum_counts(sc, WIDE, SIZE_OF(comm), st), -1);                            \
        END()                                                                                                   \
        return result;                                                                                          \
    }
ALLTOALLV(, int, int, 0)
ALLTOALLV(_c, int64_t, int64_t, 1)

#define REDUCE_SCATTER(SUF, CT, WIDE)                                                                           \
    int MPI_Reduce_scatter##SUF(const void *s, void *r, const CT *rc, H type, H op, H comm) {                   \
        BEGIN(C_Reduce_scatter)                                                                                 \
        int result;                                                                                             \
        if (WIDE && !((twins_resolved || (resolve_twins(), 1)) && p_Reduce_scatter_c)) {                        \
            int ok = 1;                                                                                         \
            const int *rc_ = narrow(rc, SIZE_OF(comm), 0, &ok);                                                 \
            result = ok ? NEXT(Reduce_scatter)(s, r, rc_, type, op, comm) : ERR_COUNT;                          \
        } else                                                                                                  \
            result = WIDE ? p_Reduce_scatter_c(s, r, rc, type, op, comm)                                        \
                          : NEXT(Reduce_scatter)(s, r, rc, type, op, comm);                                     \
        MIDDLE()                                                                                                \
        if (observe_)                                                                                           \
            collective(C_Reduce_scatter, t0_, t1_, comm, sum_counts(rc, WIDE, SIZE_OF(comm), type), -1);        \
        END()                                                                                                   \
        return result;                                                                                          \
    }
REDUCE_SCATTER(, int, 0)
REDUCE_SCATTER(_c, int64_t, 1)

#define REDUCE_SCATTER_BLOCK(SUF, CT, CALL, WIDE)                                                               \
    COLLECTIVE(Reduce_scatter_block, SUF, (const void *s, void *r, CT rc, H type, H op, H comm),                \
               (s, r, rc, type, op, comm), (s, r, (int)rc, type, op, comm), FITS(rc),                           \
               type_bytes(rc, type) * SIZE_OF(comm), -1, CALL, WIDE)
REDUCE_SCATTER_BLOCK(, int, CALL_INT, 0)
REDUCE_SCATTER_BLOCK(_c, int64_t, CALL_C, 1)
