// An LD_PRELOAD diagnostic for the host side of a PyTorch process: counts glibc's malloc-family calls and frees,
// and for every request of 128 KiB or more (glibc's initial mmap threshold) which shared object asked for it.
// Used to find why one allocator's process gives freed host tensors back to the kernel and faults them in again
// (docs/benchmarks.md, twentieth session): a large request from another library between a tensor's free and
// the next tensor's allocation changes what glibc trims and reuses.
//
//   gcc -O2 -shared -fPIC -o malloc_count.so bench/torch/malloc_count.c -ldl
//   LD_PRELOAD=$PWD/malloc_count.so python3 ...   (workload_ab.py's heap_state() reads it when it is loaded)
//
// malloc_count_snapshot(long out[MALLOC_COUNT_FIELDS]) copies the counters (the order of the enum below) for a
// caller to difference. kLargeMmapped and kLargeMmappedBytes count the requests of 128 KiB up to 32 MiB that glibc
// served with a mapping of their own (the IS_MMAPPED bit of the chunk's size word): which of these go to mmap and
// which to the heap is what glibc's dynamic mmap threshold decides, and a mapped one is unmapped at its free, so
// its pages fault in again at the next such request. malloc_count_by_object(char* buf, size_t n) writes "object
// requests bytes" lines, the large requests by the shared object of the caller's return address. Both
// thread-safe. At exit, with MALLOC_COUNT_REPORT set, the totals and that table go to stderr. The requests go on
// to glibc's own __libc_malloc family (glibc 2.36 exports them), so glibc's behaviour is unchanged apart from the
// time counted here.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void* __libc_malloc(size_t);
extern void __libc_free(void*);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);

enum { kCalls, kFrees, kLargeCalls, kLargeBytes, kHugeCalls, kHugeBytes, kLargeMmapped, kLargeMmappedBytes,
       MALLOC_COUNT_FIELDS };
enum { kLargeBytesMin = 128 << 10, kHugeBytesMin = 32 << 20, kObjects = 32 };

static atomic_long counters[MALLOC_COUNT_FIELDS];
static struct {
  const char* name;  // dli_fname: lives as long as the object stays loaded
  long requests, bytes;
} objects[kObjects];
static atomic_flag objects_lock = ATOMIC_FLAG_INIT;

static void count(size_t n, void* caller) {
  atomic_fetch_add(&counters[kCalls], 1);
  if (n < kLargeBytesMin) return;
  atomic_fetch_add(&counters[kLargeCalls], 1);
  atomic_fetch_add(&counters[kLargeBytes], (long)n);
  if (n >= kHugeBytesMin) {
    atomic_fetch_add(&counters[kHugeCalls], 1);
    atomic_fetch_add(&counters[kHugeBytes], (long)n);
  }
  Dl_info info;
  const char* name = dladdr(caller, &info) && info.dli_fname ? info.dli_fname : "?";
  while (atomic_flag_test_and_set(&objects_lock)) {
  }
  for (int i = 0; i < kObjects; ++i) {  // the last row, once reached, sums every object without a row of its own
    if (objects[i].name == NULL || strcmp(objects[i].name, name) == 0 || i == kObjects - 1) {
      if (objects[i].name == NULL) objects[i].name = i == kObjects - 1 ? "(other objects)" : name;
      objects[i].requests += 1;
      objects[i].bytes += (long)n;
      break;
    }
  }
  atomic_flag_clear(&objects_lock);
}

// A large request below kHugeBytesMin that glibc served with its own mapping: glibc's chunk header, the size word
// just before the pointer, has bit 1 (IS_MMAPPED) set (glibc malloc/malloc.c; memalign's result is a chunk too).
static void* mapped(void* p, size_t n) {
  if (p != NULL && n >= kLargeBytesMin && n < kHugeBytesMin && (((const size_t*)p)[-1] & 2) != 0) {
    atomic_fetch_add(&counters[kLargeMmapped], 1);
    atomic_fetch_add(&counters[kLargeMmappedBytes], (long)n);
  }
  return p;
}

void* malloc(size_t n) {
  count(n, __builtin_return_address(0));
  return mapped(__libc_malloc(n), n);
}
void free(void* p) {
  if (p != NULL) atomic_fetch_add(&counters[kFrees], 1);
  __libc_free(p);
}
void* calloc(size_t count_, size_t size) {
  count(count_ * size, __builtin_return_address(0));
  return mapped(__libc_calloc(count_, size), count_ * size);
}
void* realloc(void* p, size_t n) {
  count(n, __builtin_return_address(0));
  return mapped(__libc_realloc(p, n), n);
}
void* memalign(size_t alignment, size_t n) {
  count(n, __builtin_return_address(0));
  return mapped(__libc_memalign(alignment, n), n);
}
void* aligned_alloc(size_t alignment, size_t n) {
  count(n, __builtin_return_address(0));
  return mapped(__libc_memalign(alignment, n), n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
  count(n, __builtin_return_address(0));
  *out = mapped(__libc_memalign(alignment, n), n);
  return *out != NULL || n == 0 ? 0 : 12;  // ENOMEM
}

void malloc_count_snapshot(long out[MALLOC_COUNT_FIELDS]) {
  for (int i = 0; i < MALLOC_COUNT_FIELDS; ++i) out[i] = atomic_load(&counters[i]);
}

size_t malloc_count_by_object(char* buf, size_t n) {
  size_t used = 0;
  if (n > 0) buf[0] = '\0';
  while (atomic_flag_test_and_set(&objects_lock)) {
  }
  for (int i = 0; i < kObjects && objects[i].name != NULL && used < n; ++i) {
    const int w = snprintf(buf + used, n - used, "%s %ld %ld\n", objects[i].name, objects[i].requests,
                           objects[i].bytes);
    if (w < 0) break;
    used += (size_t)w;
  }
  atomic_flag_clear(&objects_lock);
  return used < n ? used : n;
}

__attribute__((destructor)) static void report(void) {
  if (getenv("MALLOC_COUNT_REPORT") == NULL) return;
  long c[MALLOC_COUNT_FIELDS];
  malloc_count_snapshot(c);
  fprintf(stderr,
          "malloc_count: %ld calls, %ld frees, %ld of 128 KiB or more (%ld bytes), %ld of 32 MiB or more, %ld of "
          "128 KiB-32 MiB mapped by glibc (%ld bytes)\n",
          c[kCalls], c[kFrees], c[kLargeCalls], c[kLargeBytes], c[kHugeCalls], c[kLargeMmapped],
          c[kLargeMmappedBytes]);
  char buf[8192];
  malloc_count_by_object(buf, sizeof buf);
  fputs(buf, stderr);
}
