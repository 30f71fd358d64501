/* memkernels.c: C reference of torque-async's memory and STREAM kernels.
 *
 * Same semantics as workers/memory.py and workers/stream_kernels.py: every buffer holds n chunks of
 * `size` bytes (the working set), transfer k works on chunk k mod n, load/store touch one
 * 64-bit word per `stride` bytes, and the rate printed is transfer bytes (size per transfer)
 * in MiB/s over one timer around the loop of n x iterations transfers.  Buffers are anonymous
 * mmaps advised MADV_HUGEPAGE and touched (pattern-filled) before the timer starts, as the
 * Python tests do.  After timing the data is checked, so no store can be optimised away.
 *
 *   gcc -O3 -march=native -o memkernels memkernels.c
 *   ./memkernels KERNEL N SIZE ITERATIONS [STRIDE]
 *   KERNEL: bcopy bzero load store ls Scopy Sscale Sadd Striad, or STREAMtriad: STREAM's own
 *   Triad loop over the whole arrays, one pass a transfer (the same bytes in all)
 * Prints one line: "<MiB/s> <kernel> n=<n> size=<size> iterations=<i> check=ok".
 *
 * Built with -shared -fPIC it also offers memkernels_run(), which times the same loop on
 * buffers the caller made (tools/bench_memory.py --same-process).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef uint64_t u64u __attribute__((aligned(1), may_alias));   /* a word at any offset */

#define PAT1 0x5555555555555555ULL
#define KEY 0xDECAFBAD00000000ULL
#define SCALAR 3.0

static size_t n, size, stride;
static unsigned char *buf0, *buf1;           /* memory kernels: buffer, (bcopy) destination */
static double *a, *b, *c;                    /* STREAM arrays */
static size_t m;                             /* doubles per STREAM chunk */
static uint64_t acc;                         /* load accumulator, printed so loads stay */
static const uint64_t value = ~PAT1;         /* what store writes: the complement of pattern 1 */

static void *alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(2); }
    madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

static void fill(unsigned char *p, size_t bytes, uint64_t pattern)
{
    uint64_t *w = (uint64_t *)p;
    for (size_t i = 0; i < bytes / 8; i++) w[i] = pattern;
    w[0] = KEY;
}

static uint64_t load_chunk(const unsigned char *p)
{
    uint64_t s = 0;
    for (size_t off = 0; off + 8 <= size; off += stride) s += *(const u64u *)(p + off);
    return s;
}

static void store_chunk(unsigned char *p)
{
    for (size_t off = 0; off + 8 <= size; off += stride) *(u64u *)(p + off) = value;
}

static void k_bcopy(size_t j) { memmove(buf1 + j * size, buf0 + j * size, size); }
static void k_bzero(size_t j) { memset(buf0 + j * size, 0, size); }
static void k_load(size_t j) { acc += load_chunk(buf0 + j * size); }
static void k_store(size_t j) { store_chunk(buf0 + j * size); }
static void k_ls(size_t j) { acc += load_chunk(buf0 + j * size); store_chunk(buf0 + j * size); }

static void k_scopy(size_t j)
{
    double *restrict cc = c + j * m; const double *restrict aa = a + j * m;
    for (size_t i = 0; i < m; i++) cc[i] = aa[i];
}
static void k_sscale(size_t j)
{
    double *restrict bb = b + j * m; const double *restrict cc = c + j * m;
    for (size_t i = 0; i < m; i++) bb[i] = SCALAR * cc[i];
}
static void k_sadd(size_t j)
{
    double *restrict cc = c + j * m; const double *restrict aa = a + j * m, *restrict bb = b + j * m;
    for (size_t i = 0; i < m; i++) cc[i] = aa[i] + bb[i];
}
static void k_striad(size_t j)
{
    double *restrict aa = a + j * m; const double *restrict bb = b + j * m, *restrict cc = c + j * m;
    for (size_t i = 0; i < m; i++) aa[i] = bb[i] + SCALAR * cc[i];
}

/* STREAM's own Triad: one pass over the whole arrays is one transfer (j is not used). */
static void k_stream_triad(size_t j)
{
    (void)j;
    double *restrict aa = a; const double *restrict bb = b, *restrict cc = c;
    for (size_t i = 0; i < n * m; i++) aa[i] = bb[i] + SCALAR * cc[i];
}

static const struct kernel {
    const char *name;
    void (*run)(size_t j);
    int stream;
} kernels[] = {
    {"bcopy", k_bcopy, 0}, {"bzero", k_bzero, 0}, {"load", k_load, 0}, {"store", k_store, 0},
    {"ls", k_ls, 0}, {"Scopy", k_scopy, 1}, {"Sscale", k_sscale, 1}, {"Sadd", k_sadd, 1},
    {"Striad", k_striad, 1}, {"STREAMtriad", k_stream_triad, 2},
};

static const struct kernel *find(const char *name)
{
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++)
        if (!strcmp(name, kernels[i].name)) return &kernels[i];
    return NULL;
}

static double run(const struct kernel *k, size_t transfers)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t x = 0; x < transfers; x++) k->run(x % n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
}

/* Seconds for `transfers` transfers of kernel `name` on the caller's buffers: x (src / buf /
 * a), y (bcopy's dst / b), z (c); -1 for an unknown kernel.  Buffers hold n x size bytes. */
double memkernels_run(const char *name, size_t n_, size_t size_, size_t stride_,
                      void *x, void *y, void *z, size_t transfers)
{
    const struct kernel *k = find(name);
    if (!k) return -1;
    n = n_; size = size_; stride = stride_;
    m = size / 8;
    buf0 = x; buf1 = y;
    a = x; b = y; c = z;
    return run(k, transfers);
}

static int check_array(const char *name, const double *x, size_t touched, double out, double in)
{
    for (size_t i = 0; i < n * m; i++) {
        double e = i < touched ? out : in;
        if (x[i] != e) { fprintf(stderr, "%s[%zu] = %g, expected %g\n", name, i, x[i], e); return 0; }
    }
    return 1;
}

static int check(const struct kernel *k, size_t transfers)
{
    size_t t = transfers < n ? transfers : n;       /* chunks touched */
    const char *name = k->name;
    if (k->stream) {
        size_t tt = t * m;
        double ea = 1.0, eb = 2.0, ec = 0.5;
        if (!strcmp(name, "Scopy")) return check_array("c", c, tt, 1.0, ec) && check_array("a", a, 0, 0, ea);
        if (!strcmp(name, "Sscale")) return check_array("b", b, tt, SCALAR * ec, eb);
        if (!strcmp(name, "Sadd")) return check_array("c", c, tt, ea + eb, ec);
        if (k->stream == 2) tt = n * m;
        return check_array("a", a, tt, eb + SCALAR * ec, ea);
    }
    for (size_t j = 0; j < t; j++) {
        unsigned char *p = buf0 + j * size;
        if (!strcmp(name, "bcopy") && memcmp(buf1 + j * size, p, size)) return 0;
        if (!strcmp(name, "bzero")) for (size_t i = 0; i < size; i++) if (p[i]) return 0;
        if (!strcmp(name, "store") || !strcmp(name, "ls"))
            for (size_t off = 0; off + 8 <= size; off += stride) if (*(u64u *)(p + off) != value) return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s KERNEL N SIZE ITERATIONS [STRIDE]\n", argv[0]);
        return 2;
    }
    const struct kernel *k = find(argv[1]);
    if (!k) { fprintf(stderr, "unknown kernel %s\n", argv[1]); return 2; }
    n = strtoull(argv[2], NULL, 0);
    size = strtoull(argv[3], NULL, 0);
    size_t iterations = strtoull(argv[4], NULL, 0);
    stride = argc > 5 ? strtoull(argv[5], NULL, 0) : 64;
    if (!n || size < 8 || !stride) { fprintf(stderr, "bad n, size or stride\n"); return 2; }

    if (k->stream) {
        size -= size % 8;
        m = size / 8;
        a = alloc(n * size); b = alloc(n * size); c = alloc(n * size);
        for (size_t i = 0; i < n * m; i++) { a[i] = 1.0; b[i] = 2.0; c[i] = 0.5; }
    } else {
        buf0 = alloc(n * size);
        fill(buf0, n * size, PAT1);
        if (k->run == k_bcopy) { buf1 = alloc(n * size); fill(buf1, n * size, ~PAT1); }
    }

    size_t transfers = k->stream == 2 ? iterations : n * iterations;   /* whole arrays: a pass */
    double seconds = run(k, transfers);
    double mibs = (double)n * iterations * size / 1048576.0 / seconds;
    int ok = check(k, transfers);
    printf("%.1f %s n=%zu size=%zu iterations=%zu acc=%llx check=%s\n", mibs, k->name, n, size,
           iterations, (unsigned long long)acc, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
