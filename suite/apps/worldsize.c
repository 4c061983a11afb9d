/* The world-size guard: an LD_PRELOAD shim that notes the world each MPI process joined.
 *
 * It defines MPI_Init and MPI_Init_thread (and Fortran's mpi_init_, mpi_init_thread_, mpi_init_f08_ and
 * mpi_init_thread_f08_), calls the real ones, then asks the same MPI library for the size of MPI_COMM_WORLD, the
 * process's rank in it and MPI_Get_library_version, and writes them as one JSON object to a file of its
 * own in $VNETBENCH_WORLD_DIR. vnetbench reads those files after the job: a program started by a
 * launcher of another MPI runs as N singletons ("rank 0 of 1") and exits 0, which only the ranks can see.
 *
 * Built without MPI headers, so that one build serves every MPI: MPI_COMM_WORLD is Open MPI's
 * &ompi_mpi_comm_world or the MPICH ABI family's integer handle 0x44000000 (MPICH, Intel MPI, MVAPICH,
 * Cray MPICH), told apart by the library's own symbols. Nothing here may disturb the program: every
 * failure to observe is silent, and the real call's result is returned unchanged (only a process whose
 * real MPI_Init cannot be found at all is stopped, saying so: there is nothing to call).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIR_ENV "VNETBENCH_WORLD_DIR"
#define LIBRARY_MAX 8192 /* MPICH's MPI_MAX_LIBRARY_VERSION_STRING, the largest of the MPIs */
#define MPICH_COMM_WORLD 0x44000000
#define MPICH_COMM_NULL 0x04000000
#define MAX_OBJECTS 1024

typedef int (*init_fn)(int *, char ***);
typedef int (*init_thread_fn)(int *, char ***, int, int *);
typedef void (*f_init_fn)(int *);
typedef void (*f_init_thread_fn)(int *, int *, int *);

static int observed;

struct names {
    char *name[MAX_OBJECTS];
    int count;
};

static int collect(struct dl_phdr_info *info, size_t size, void *data) {
    struct names *names = data;
    (void)size;
    if (info->dlpi_name && info->dlpi_name[0] && names->count < MAX_OBJECTS)
        names->name[names->count++] = strdup(info->dlpi_name);
    return 0;
}

/* The definition of ``name`` that is not ours. RTLD_NEXT finds it when the MPI library is in the global
 * scope (a C program linked against it); a library dlopened with RTLD_LOCAL (a Python extension's
 * libmpi) is only found by asking each loaded object in turn. The names are gathered first: dlopen is
 * not called from inside dl_iterate_phdr. */
static void *real(const char *name, void *self) {
    void *found = dlsym(RTLD_NEXT, name);
    if (found && found != self)
        return found;
    found = NULL;
    struct names names = {.count = 0};
    dl_iterate_phdr(collect, &names);
    for (int i = 0; i < names.count; i++) {
        if (!found) {
            void *handle = dlopen(names.name[i], RTLD_LAZY | RTLD_NOLOAD);
            if (handle) {
                void *symbol = dlsym(handle, name);
                if (symbol && symbol != self)
                    found = symbol;
                dlclose(handle);
            }
        }
        free(names.name[i]);
    }
    return found;
}

static void put_json_string(FILE *out, const char *text) {
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(out, "\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f)
            fprintf(out, "\\u%04x", *c);
        else
            fputc(*c, out);
    }
    fputc('"', out);
}

/* ``name`` from ``library`` (the one whose MPI_Init ran), or from whatever defines it when that is not
 * known (a Fortran binding calls a C library among its dependencies). A data object is looked up in the
 * global scope first: a program that uses Open MPI's MPI_COMM_WORLD holds a copy of ompi_mpi_comm_world
 * (a copy relocation), and that copy, not the library's, is the live one. */
static void *lookup(void *library, const char *name, int data) {
    void *found = data ? dlsym(RTLD_DEFAULT, name) : NULL;
    if (!found && library)
        found = dlsym(library, name);
    return found ? found : real(name, NULL);
}

/* Whether MPI_Get_library_version's text names an MPI of the MPICH ABI (MPI_COMM_WORLD is 0x44000000). */
static int mpich_family(const char *version) {
    return strstr(version, "MPICH") || strstr(version, "MVAPICH") || strstr(version, "Intel(R) MPI") ||
           strstr(version, "Intel MPI");
}

/* The world this process joined, from the library that defines ``mpi_function`` (its real MPI_Init),
 * when it is known. */
static void observe(void *mpi_function, const char *how) {
    const char *dir = getenv(DIR_ENV);
    if (observed || !dir || !dir[0])
        return;
    observed = 1;
    Dl_info info;
    void *library = NULL;
    if (mpi_function && dladdr(mpi_function, &info) && info.dli_fname)
        library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    void *initialized_fn = lookup(library, "MPI_Initialized", 0);
    void *size_fn = lookup(library, "MPI_Comm_size", 0);
    void *rank_fn = lookup(library, "MPI_Comm_rank", 0);
    void *parent_fn = lookup(library, "MPI_Comm_get_parent", 0);
    void *version_fn = lookup(library, "MPI_Get_library_version", 0);
    void *ompi_world = lookup(library, "ompi_mpi_comm_world", 1);
    void *ompi_null = lookup(library, "ompi_mpi_comm_null", 1);
    int initialized = 0;
    if (!initialized_fn || ((int (*)(int *))initialized_fn)(&initialized) != 0 || !initialized) {
        if (library)
            dlclose(library);
        return; /* the init failed and returned: nothing to ask */
    }
    int size = -1, rank = -1, spawned = 0, length = 0;
    static char version[LIBRARY_MAX + 1];
    /* the same signature in every ABI: asked first, it says which ABI the handles below must follow */
    if (version_fn && ((int (*)(char *, int *))version_fn)(version, &length) == 0 && length >= 0)
        version[length < LIBRARY_MAX ? length : LIBRARY_MAX] = '\0';
    else
        version[0] = '\0';
    const char *abi = "unknown";
    if (ompi_world) { /* Open MPI: a communicator is a pointer */
        abi = "openmpi";
        if (size_fn)
            ((int (*)(void *, int *))size_fn)(ompi_world, &size);
        if (rank_fn)
            ((int (*)(void *, int *))rank_fn)(ompi_world, &rank);
        void *parent = NULL;
        if (parent_fn && ompi_null && ((int (*)(void **))parent_fn)(&parent) == 0)
            spawned = parent != NULL && parent != ompi_null;
    } else if (mpich_family(version)) { /* the MPICH ABI family: a communicator is an int */
        abi = "mpich";
        if (size_fn)
            ((int (*)(int, int *))size_fn)(MPICH_COMM_WORLD, &size);
        if (rank_fn)
            ((int (*)(int, int *))rank_fn)(MPICH_COMM_WORLD, &rank);
        int parent = MPICH_COMM_NULL;
        if (parent_fn && ((int (*)(int *))parent_fn)(&parent) == 0)
            spawned = parent != MPICH_COMM_NULL;
    } /* else an ABI whose handles are not known here (MPICH's standard ABI, MPItrampoline): a guessed handle
       could abort the program, so the world is left unasked (-1) and the host reads it as not observed */
    if (library)
        dlclose(library);

    char host[256] = "", path[4096], tmp[4200];
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    if (snprintf(path, sizeof path, "%s/%s-%ld.json", dir, host, (long)getpid()) >= (int)sizeof path)
        return;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    FILE *out = fdopen(fd, "w");
    if (!out) {
        close(fd);
        return;
    }
    fprintf(out, "{\"schema\": 1, \"world\": %d, \"rank\": %d, \"spawned\": %s, \"pid\": %ld, \"host\": ", size,
            rank, spawned ? "true" : "false", (long)getpid());
    put_json_string(out, host);
    fprintf(out, ", \"abi\": \"%s\", \"init\": \"%s\", \"library\": ", abi, how);
    put_json_string(out, version);
    fputs("}\n", out);
    if (fclose(out) == 0)
        rename(tmp, path);
    else
        unlink(tmp);
}

int MPI_Init(int *argc, char ***argv) {
    init_fn next = (init_fn)real("MPI_Init", (void *)MPI_Init);
    if (!next) {
        fprintf(stderr, "vnetbench world-size guard: no MPI_Init but its own in this process\n");
        abort();
    }
    int result = next(argc, argv);
    if (result == 0)
        observe((void *)next, "MPI_Init");
    return result;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    init_thread_fn next = (init_thread_fn)real("MPI_Init_thread", (void *)MPI_Init_thread);
    if (!next) {
        fprintf(stderr, "vnetbench world-size guard: no MPI_Init_thread but its own in this process\n");
        abort();
    }
    int result = next(argc, argv, required, provided);
    if (result == 0)
        observe((void *)next, "MPI_Init_thread");
    return result;
}

/* Fortran: mpif.h and `use mpi` (mpi_init_), `use mpi_f08` (mpi_init_f08_, whose ierror is optional: NULL
 * when left out), in the naming of gfortran, ifort/ifx and flang (lower case, one trailing underscore), as
 * Open MPI's and MPICH's Fortran libraries define them. Whether the init succeeded is asked of the library
 * (MPI_Initialized), not read from ierror. The real one may call the C MPI_Init through us: ``observed``
 * keeps that to one file. */
#define FORTRAN_INIT(NAME)                                                                                  \
    void NAME(int *ierr) {                                                                                  \
        f_init_fn next = (f_init_fn)real(#NAME, (void *)NAME);                                              \
        if (!next) {                                                                                        \
            fprintf(stderr, "vnetbench world-size guard: no " #NAME " but its own in this process\n");     \
            abort();                                                                                        \
        }                                                                                                   \
        next(ierr);                                                                                         \
        observe(NULL, #NAME);                                                                               \
    }
#define FORTRAN_INIT_THREAD(NAME)                                                                           \
    void NAME(int *required, int *provided, int *ierr) {                                                    \
        f_init_thread_fn next = (f_init_thread_fn)real(#NAME, (void *)NAME);                                \
        if (!next) {                                                                                        \
            fprintf(stderr, "vnetbench world-size guard: no " #NAME " but its own in this process\n");     \
            abort();                                                                                        \
        }                                                                                                   \
        next(required, provided, ierr);                                                                     \
        observe(NULL, #NAME);                                                                               \
    }

FORTRAN_INIT(mpi_init_)
FORTRAN_INIT_THREAD(mpi_init_thread_)
FORTRAN_INIT(mpi_init_f08_)
FORTRAN_INIT_THREAD(mpi_init_thread_f08_)
