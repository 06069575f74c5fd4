/* gmlake's C API: one memory pool per device, created on first use, behind plain C functions, so that any
 * language, and PyTorch's CUDAPluggableAllocator (void* malloc(ssize_t size, int device, cudaStream_t stream),
 * void free(void* ptr, ssize_t size, int device, cudaStream_t stream)), can use gmlake through a thin shim.
 *
 * Pools. Device ids are 0 .. GMLAKE_MAX_DEVICES - 1. Each device has its own pool: one allocator (the policy
 * the configuration names) over its own backend, created by the first call that needs it. A pointer belongs
 * to the device it was allocated on and must be freed there.
 *
 * Configuration. One string in PYTORCH_CUDA_ALLOC_CONF form, "key:value,key:value", parsed once: by
 * gmlake_init, or, when the first call comes before any gmlake_init, from the GMLAKE_CONF environment
 * variable. Keys: every key of `gmlake conf` (include/gmlake/config.h: policy, cap_bytes, ...), and two of
 * this API's own:
 *   backend:host|sim|cuda   host (default): real memory (memfd + mmap) the CPU can read and write;
 *                      sim: accounting only, its addresses must never be dereferenced;
 *                      cuda (builds with the CUDA backend): device memory of GPU `device` through the CUDA
 *                      VMM API, safe for asynchronous streams (CUDA events: see stream_events.h); each stream
 *                      keeps its own arenas (cross_stream_reuse defaults to false, and true is refused).
 *                      The reference policies (policy:caching, policy:expandable) also run on cuda, for
 *                      comparison: gmlake_empty_cache synchronizes the device before they release memory, but
 *                      their out-of-memory retry (which releases cached segments) does not wait for queued
 *                      work yet: use them on cuda with a cap only after torch.cuda.synchronize().
 *   debug:0|1          1: freed memory is filled with 0xDB and checked on reuse (host backend only; costs a
 *                      pass over every block on malloc and on free). A block handed out whose bytes are not
 *                      all 0 or 0xDB was written after a free: the process prints what it found and aborts.
 * An unknown key, a bad value or a value that overflows 64 bits fails with GMLAKE_ERROR_CONFIG, naming the
 * key, and nothing is applied.
 *
 * Sizes are bytes. Blocks are at least 512 B-aligned and at least the size asked.
 *
 * Errors. No function throws or aborts on bad input (except the debug check above). Every function except
 * gmlake_last_error and gmlake_last_error_code first clears this thread's last error, then, on failure, sets
 * it: gmlake_last_error_code() gives the gmlake_status, gmlake_last_error() a one-line message. Functions that
 * return an int return that status.
 *
 * Thread safety. Every function may be called from any thread at any time, concurrently: calls on one device
 * are serialized by that pool's lock (one lock per device, as PyTorch's allocator), calls on different
 * devices do not wait for each other. A pointer may be freed on another thread than the one that allocated it.
 *
 * Lifetime. gmlake_shutdown() gives every pool's memory back (blocks still live included). After it,
 * gmlake_malloc fails with GMLAKE_ERROR_SHUT_DOWN and gmlake_free ignores its pointer (counted by
 * gmlake_ignored_frees), until a gmlake_init starts afresh. gmlake's state is never destroyed at process exit,
 * so calls made while the process exits (from atexit handlers, static destructors, other threads) behave as
 * at any other time.
 */
#ifndef GMLAKE_GMLAKE_H_
#define GMLAKE_GMLAKE_H_

#include <stddef.h>
#include <stdint.h>

#include "gmlake/stat_fields.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device ids accepted: 0 .. GMLAKE_MAX_DEVICES - 1 (gmlake_max_devices() gives it to bindings). */
#define GMLAKE_MAX_DEVICES 64

/* The statuses every function reports, declared once: X(name, value, meaning). gmlake_status_name(value) gives
 * the name; the bindings (python/gmlake) map statuses to their errors through it. */
#define GMLAKE_STATUSES(X)                                                                                        \
  X(GMLAKE_OK, 0, "success")                                                                                      \
  X(GMLAKE_ERROR_OUT_OF_MEMORY, 1, "no memory within the cap or on the device (or on the host)")                  \
  X(GMLAKE_ERROR_INVALID_POINTER, 2, "free or record_stream of a pointer not a live block of that device")        \
  X(GMLAKE_ERROR_INVALID_ARGUMENT, 3, "a size >= 2^63, a device id out of range, a null output pointer")          \
  X(GMLAKE_ERROR_CONFIG, 4, "unknown configuration key, bad value, overflow")                                     \
  X(GMLAKE_ERROR_BACKEND, 5, "the OS or driver call behind the pool failed")                                      \
  X(GMLAKE_ERROR_SHUT_DOWN, 6, "called after gmlake_shutdown()")                                                  \
  X(GMLAKE_ERROR_ALREADY_INITIALIZED, 7, "gmlake_init when gmlake is initialized already")                        \
  X(GMLAKE_ERROR_INTERNAL, 8, "anything else (a bug: please report it with the message)")

typedef enum gmlake_status {
#define GMLAKE_STATUS_ENUMERATOR(name, value, meaning) name = value,
  GMLAKE_STATUSES(GMLAKE_STATUS_ENUMERATOR)
#undef GMLAKE_STATUS_ENUMERATOR
} gmlake_status;

typedef struct gmlake_gauge {
  int64_t current;
  int64_t peak;
} gmlake_gauge;

/* A pool's statistics, with PyTorch's names and meanings: one field per entry of the tables of
 * include/gmlake/stat_fields.h, in their order (gauges first), which documents them. */
typedef struct gmlake_stats {
#define GMLAKE_STATS_C_GAUGE(name, torch_key) gmlake_gauge name;
#define GMLAKE_STATS_C_COUNTER(name, torch_key) uint64_t name;
  GMLAKE_GAUGE_FIELDS(GMLAKE_STATS_C_GAUGE)
  GMLAKE_COUNTER_FIELDS(GMLAKE_STATS_C_COUNTER)
#undef GMLAKE_STATS_C_GAUGE
#undef GMLAKE_STATS_C_COUNTER
} gmlake_stats;

/* Sets the configuration (format above). conf NULL: the GMLAKE_CONF environment variable (unset or empty: the
 * defaults). Creates no pool yet. Returns GMLAKE_OK; GMLAKE_ERROR_CONFIG (nothing applied);
 * GMLAKE_ERROR_ALREADY_INITIALIZED when gmlake is initialized (by gmlake_init or by a first call) and not shut
 * down since. After gmlake_shutdown() it starts afresh, with new empty pools. */
int gmlake_init(const char* conf);

/* As gmlake_init(NULL), with `defaults` (same format; NULL or "" for none) applied first: a key GMLAKE_CONF also
 * sets takes GMLAKE_CONF's value. For front ends that need a default of their own (the PyTorch plug-in's
 * backend:cuda) without reading the environment themselves: GMLAKE_CONF is read in one place, the library. */
int gmlake_init_defaults(const char* defaults);

/* A block of at least size_bytes on `device`, used first by `stream` (an opaque id: a cudaStream_t's value;
 * 0 is the default stream). Frees waiting for recorded streams (gmlake_record_stream) whose work has finished
 * complete first; when the pool is out of memory while some still wait, it waits for them and tries once more.
 * Returns NULL on failure, with the last error: GMLAKE_ERROR_INVALID_ARGUMENT
 * (size_bytes >= 2^63, which is also a negative size from a signed caller, or a bad device id),
 * GMLAKE_ERROR_OUT_OF_MEMORY, GMLAKE_ERROR_BACKEND, GMLAKE_ERROR_CONFIG (the first call, configured from a bad
 * GMLAKE_CONF), GMLAKE_ERROR_SHUT_DOWN. size_bytes 0 returns NULL with GMLAKE_OK: not an error. */
void* gmlake_malloc(size_t size_bytes, int device, uint64_t stream);

/* Frees a block that gmlake_malloc returned on `device`. size_bytes and `stream` are accepted for PyTorch's
 * CUDAPluggableAllocator signature (void free(void*, ssize_t, int, cudaStream_t)) and not used: a block is freed
 * in the order of the stream it was allocated on. NULL: nothing happens. Failures
 * (the last error; the pool is unchanged): GMLAKE_ERROR_INVALID_POINTER for a pointer that is not the start of
 * a live block of that device (freed already, never returned, an interior pointer, another device's; detected
 * in every build, and counted in invalid_frees; but a pointer freed already whose address a later gmlake_malloc
 * handed out again is that new block's start: freeing it again frees the new block, docs/errors.md),
 * GMLAKE_ERROR_INVALID_ARGUMENT for a bad device id,
 * GMLAKE_ERROR_SHUT_DOWN after gmlake_shutdown() (the pointer is ignored and counted), and GMLAKE_ERROR_BACKEND
 * when recording an event on a recorded stream failed (the block stays allocated; it may be freed again).
 * A block with streams recorded by gmlake_record_stream is freed at once but its memory is reused only once
 * the work queued on those streams up to this call has finished (counted in deferred_frees). */
void gmlake_free(void* ptr, size_t size_bytes, int device, uint64_t stream);

/* Tensor.record_stream: the block gmlake_malloc returned at `ptr` on `device` is also used by `stream`, so that
 * when it is freed its memory is not reused, by any stream, until the work queued on `stream` up to the free
 * has finished (PyTorch's CUDACachingAllocator does the same, with one event per stream at the free). The
 * block's own stream, or a stream recorded already, adds nothing. On backends that run nothing asynchronously
 * (host, sim) it only checks `ptr`. NULL: nothing, GMLAKE_OK. Returns GMLAKE_OK;
 * GMLAKE_ERROR_INVALID_POINTER when `ptr` is not the start of a live block of that device (freed already,
 * never returned, an interior pointer, another device's; nothing changes, nothing counted);
 * GMLAKE_ERROR_INVALID_ARGUMENT (bad device id); GMLAKE_ERROR_SHUT_DOWN. No backend call is made here: the
 * events are recorded by gmlake_free, which reports their failure (GMLAKE_ERROR_BACKEND). */
int gmlake_record_stream(void* ptr, int device, uint64_t stream);

/* Gives the device's free cached memory back to the backend (torch.cuda.empty_cache), after waiting for the
 * frees that wait for recorded streams. Returns GMLAKE_OK,
 * GMLAKE_ERROR_INVALID_ARGUMENT (bad device id), GMLAKE_ERROR_BACKEND (what could be released was; the rest
 * is retried by the next call), GMLAKE_ERROR_SHUT_DOWN. A device with no pool yet: GMLAKE_OK. */
int gmlake_empty_cache(int device);

/* Copies the device's statistics into *out (all zero for a device with no pool yet). Returns GMLAKE_OK,
 * GMLAKE_ERROR_INVALID_ARGUMENT (bad device id or out NULL), GMLAKE_ERROR_SHUT_DOWN. */
int gmlake_get_stats(int device, gmlake_stats* out);

/* Sets every gauge's peak to its current value (torch.cuda.reset_peak_memory_stats). Same returns as
 * gmlake_empty_cache. */
int gmlake_reset_peak_stats(int device);

/* Sets the device's memory cap (cap_bytes, include/gmlake/config.h) at run time, as
 * torch.cuda.set_per_process_memory_fraction does for PyTorch's allocator: from the next allocation on, the
 * device's main pool never holds more than cap_bytes reserved (0: no cap, the configuration's cap_bytes
 * notwithstanding). Memory already reserved above a lower cap stays until freed and emptied (gmlake_empty_cache);
 * allocations that would take reserved bytes past it fail with GMLAKE_ERROR_OUT_OF_MEMORY, and under any cap
 * the gmlake policy puts memory first (memory_first_under_cap). A device with no pool yet keeps the cap for its
 * pool, made later; the cap lasts until changed or gmlake_shutdown. Private pools (gmlake_pool_*) are not
 * capped. Thread-safe. Returns GMLAKE_OK, GMLAKE_ERROR_INVALID_ARGUMENT (bad device id), GMLAKE_ERROR_SHUT_DOWN. */
int gmlake_set_cap_bytes(int device, uint64_t cap_bytes);

/* Sets *cap_bytes to the device's memory cap in bytes, 0 for none (as torch.cuda.get_per_process_memory_fraction
 * reads PyTorch's): what gmlake_set_cap_bytes last set, else the configuration's cap_bytes, which the device's
 * main pool has or will be made with. Starts gmlake from GMLAKE_CONF first if no gmlake_init came before, as
 * gmlake_malloc does. Returns GMLAKE_OK; GMLAKE_ERROR_INVALID_ARGUMENT (bad device id, NULL cap_bytes);
 * GMLAKE_ERROR_CONFIG (GMLAKE_CONF is bad); GMLAKE_ERROR_SHUT_DOWN. */
int gmlake_get_cap_bytes(int device, uint64_t* cap_bytes);

/* Gives every pool's memory back to its backend, blocks still live included (their pointers become invalid),
 * and refuses later calls until gmlake_init. Calls running concurrently on other threads finish first. Calling
 * it again, or before any initialization, does nothing. Never fails. */
void gmlake_shutdown(void);

/* The device's backend calls (cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, ... on cuda) since its pool
 * was created: *calls their number, *time_ns the wall time spent inside them (steady clock), failed calls
 * included. Both 0 for a device with no pool yet. For measuring what the VMM costs a job (the allocator's own
 * bookkeeping is not included). Returns GMLAKE_OK, GMLAKE_ERROR_INVALID_ARGUMENT (bad device id or a NULL
 * output), GMLAKE_ERROR_SHUT_DOWN. */
int gmlake_get_backend_time(int device, uint64_t* calls, uint64_t* time_ns);

/* Frees gmlake_free ignored because gmlake was shut down, over the life of the process. */
uint64_t gmlake_ignored_frees(void);

/* --- Memory history and segments (what torch.cuda.memory._record_memory_history() and _snapshot() show). */

/* One trace entry, as PyTorch's (include/gmlake/snapshot_writer.h): action is one of GMLAKE_TRACE_*; addr is the
 * block's or the mapped range's address (0 for oom); size_bytes the size asked (blocks) or mapped; stream the
 * block's (0 for segment entries); time_us microseconds since the Unix epoch. */
enum {
  GMLAKE_TRACE_ALLOC = 0,
  GMLAKE_TRACE_FREE_REQUESTED = 1,
  GMLAKE_TRACE_FREE_COMPLETED = 2,
  GMLAKE_TRACE_SEGMENT_ALLOC = 3,
  GMLAKE_TRACE_SEGMENT_FREE = 4,
  GMLAKE_TRACE_SEGMENT_MAP = 5,
  GMLAKE_TRACE_SEGMENT_UNMAP = 6,
  GMLAKE_TRACE_OOM = 7
};
typedef struct gmlake_trace_event {
  int32_t action;
  uint64_t addr;
  uint64_t size_bytes;
  uint64_t stream;
  int64_t time_us;
} gmlake_trace_event;

/* max_events >= 1: the device's pools record their trace entries from now on (at most max_events not yet
 * drained per pool; older ones are dropped first); 0: stops recording (entries not drained stay). Applies to
 * the pools the device has and to those made later; makes none. Returns GMLAKE_OK,
 * GMLAKE_ERROR_INVALID_ARGUMENT (bad device), GMLAKE_ERROR_CONFIG (a bad GMLAKE_CONF on the first call),
 * GMLAKE_ERROR_SHUT_DOWN. */
int gmlake_set_tracing(int device, uint64_t max_events);

/* Moves up to `capacity` of the oldest entries recorded since the last drain into out[0 .. *count); the rest
 * stay. A device with no pool: *count = 0. Returns GMLAKE_OK, GMLAKE_ERROR_INVALID_ARGUMENT (bad device, out
 * NULL with capacity > 0, count NULL), GMLAKE_ERROR_SHUT_DOWN. */
int gmlake_drain_trace(int device, gmlake_trace_event* out, size_t capacity, size_t* count);

/* A pool of a device: (0, 0) its main pool; any other value a private pool (PyTorch's MempoolId_t). */
typedef struct gmlake_pool_id {
  uint64_t first;
  uint64_t second;
} gmlake_pool_id;

/* A segment (a contiguous mapped range: caching's cudaMalloc-like segments, expandable's mapped range, gmlake's
 * mapped runs of an arena, stitched from chunks) and its blocks blocks[first_block .. first_block + num_blocks),
 * in address order, covering it exactly. state: 0 active_allocated, 1 active_pending_free, 2 inactive. */
typedef struct gmlake_segment {
  uint64_t address;
  uint64_t size_bytes;
  uint64_t stream;
  int32_t is_large;
  int32_t is_expandable;
  uint64_t first_block;
  uint64_t num_blocks;
  uint64_t num_chunks; /* physical chunks behind it (more than one: stitched) */
  gmlake_pool_id pool; /* the pool it belongs to */
} gmlake_segment;
typedef struct gmlake_block {
  uint64_t address;
  uint64_t size_bytes;
  uint64_t requested_bytes;
  int32_t state;
} gmlake_block;

/* The device's segments and their blocks now. Sets *segment_count and *block_count to the numbers there are;
 * writes them only when both fit (segment_capacity, block_capacity), else writes nothing: call again with
 * larger arrays. O(blocks). Returns GMLAKE_OK, GMLAKE_ERROR_INVALID_ARGUMENT (bad device, a NULL count, a NULL
 * array with a capacity > 0), GMLAKE_ERROR_SHUT_DOWN. */
int gmlake_get_segments(int device, gmlake_segment* segments, size_t segment_capacity, size_t* segment_count,
                        gmlake_block* blocks, size_t block_capacity, size_t* block_count);

/* --- Private pools (PyTorch's torch.cuda.MemPool and CUDA graph pools: beginAllocateToPool, releasePool).
 * A private pool is a pool of its own on the device, made by gmlake_pool_create and alive while its use count is
 * above 0 or it still holds blocks. It runs the `caching` policy (blocks never move and its segments stay mapped
 * while it lives, as a captured CUDA graph needs: gmlake's stitching would move pages), keeps its cached memory
 * when memory runs out and uses no CUDA events (record_stream on its blocks only checks the pointer). Its blocks
 * are freed with gmlake_free like any other (the device finds the pool that holds them); gmlake_get_stats,
 * gmlake_get_segments, tracing and gmlake_empty_cache cover every pool of the device (empty_cache skips the
 * private pools still in use). The cap (cap_bytes) applies to each pool separately. */

/* Makes the private pool `pool_id` (not (0, 0)) on `device` with use count 1, or adds 1 to its use count.
 * Returns GMLAKE_OK, GMLAKE_ERROR_INVALID_ARGUMENT (bad device, pool id (0, 0)), GMLAKE_ERROR_CONFIG (backend
 * sim, whose pools would hand out the same addresses; or the pool could not be made), GMLAKE_ERROR_BACKEND,
 * GMLAKE_ERROR_SHUT_DOWN. */
int gmlake_pool_create(int device, gmlake_pool_id pool_id);
/* Subtracts 1 from the use count; at 0 the pool goes as soon as it holds no block (its memory back to the
 * backend). GMLAKE_ERROR_INVALID_ARGUMENT for an unknown pool or a use count already 0. */
int gmlake_pool_release(int device, gmlake_pool_id pool_id);
/* *count = the pool's use count (0 for a pool that does not exist). */
int gmlake_pool_use_count(int device, gmlake_pool_id pool_id, int64_t* count);
/* gmlake_malloc from the private pool `pool_id`, which must exist (GMLAKE_ERROR_INVALID_ARGUMENT otherwise). */
void* gmlake_pool_malloc(size_t size_bytes, int device, uint64_t stream, gmlake_pool_id pool_id);
/* Gives the private pool's free cached memory back (torch.cuda.empty_cache on a MemPool); a pool that does not
 * exist (any more) has nothing cached: GMLAKE_OK. */
int gmlake_pool_empty_cache(int device, gmlake_pool_id pool_id);
/* The live and pending blocks of a pool ((0, 0): the main pool), in address order: *count is their number;
 * they are written only when *count <= capacity. state: 0 allocated, 1 pending free. */
int gmlake_pool_blocks(int device, gmlake_pool_id pool_id, gmlake_block* blocks, size_t capacity, size_t* count);
/* Restores the private pool `pool_id` to a checkpoint (PyTorch's setCheckpointPoolState: CUDA graph trees
 * recording a graph after replaying others): frees every live block of the pool, then allocates each of
 * blocks[0 .. count) again at its address: exactly [address, address + size_bytes), requested_bytes counted as
 * asked, on its segment's stream. blocks: what gmlake_pool_blocks returned when the checkpoint was taken (state 0),
 * in any order; count 0 frees every block. The blocks freed are those gmlake_pool_blocks lists just before the
 * call (unless another thread changes the pool in between); each block made must be freed with gmlake_free as
 * any other. Memory is neither written nor mapped: a block freed and made again keeps its bytes. Traced as the
 * frees and allocations it is. All or nothing: checked before anything changes. Returns GMLAKE_OK;
 * GMLAKE_ERROR_INVALID_ARGUMENT, the pool unchanged: bad device, pool id (0, 0) or a pool that does not exist (any
 * more), blocks NULL with count > 0, a block whose state is not 0, whose size_bytes is not a positive multiple of
 * 512, whose requested_bytes is 0 or above size_bytes, that lies outside every segment of the pool (its segment
 * was released: gmlake_pool_empty_cache since the checkpoint) or overlaps another, and a pool made with debug:1;
 * GMLAKE_ERROR_SHUT_DOWN. O((live + count) log(live + count) + the pool's blocks). */
int gmlake_pool_restore(int device, gmlake_pool_id pool_id, const gmlake_block* blocks, size_t count);

/* The names of gmlake_stats' fields, in its order, each with its kind: "allocated_bytes:gauge,...,num_ooms:counter,..."
 * (the tables of include/gmlake/stat_fields.h; gmlake_stat_table gives the same with their PyTorch keys), so that
 * bindings lay the struct out from the library itself. Static storage, never NULL; never fails. */
const char* gmlake_stat_names(void);

/* The stat table (include/gmlake/stat_fields.h), one statistic a line, in gmlake_stats' order:
 * "name<TAB>kind<TAB>torch_key\n", kind "gauge" or "counter", torch_key the key torch.cuda.memory_stats() gives it
 * under the PyTorch extension (a gauge's: the prefix of ".current" and ".peak"; empty when PyTorch has none).
 * Static storage, never NULL; never fails. */
const char* gmlake_stat_table(void);

/* The configuration table (include/gmlake/config.h; what `gmlake conf` prints): one key a line,
 * "name<TAB>type<TAB>default<TAB>unit<TAB>description\n", in table order. Static storage, never NULL. */
const char* gmlake_config_table(void);

/* The device limit, GMLAKE_MAX_DEVICES, for bindings that cannot read this header. Never fails. */
int gmlake_max_devices(void);

/* The name of a gmlake_status, as spelled in this header ("GMLAKE_ERROR_OUT_OF_MEMORY"), or
 * "GMLAKE_UNKNOWN_STATUS" for a value that is none. Static storage, never NULL; never fails. */
const char* gmlake_status_name(int status);

/* This header's functions (the GMLAKE_C_API list below), one a line, in the list's order:
 * "name<TAB>return_type<TAB>parameter_type,parameter_type,...\n" (no parameters: an empty field). Types are spelled
 * by what a binding needs to pass them: void (returns nothing), int32, uint64, int64, string (a const char*: a C
 * string, or bytes with a length beside them), pointer (any other pointer) and gmlake_pool_id (the struct, by
 * value). python/gmlake/_library.py sets its ctypes signatures from it. Static storage, never NULL; never fails. */
const char* gmlake_c_api_table(void);

/* The gmlake_status of this thread's last call (GMLAKE_OK when it succeeded). */
int gmlake_last_error_code(void);

/* A one-line message describing this thread's last call's failure, "" when it succeeded. The pointer is valid
 * on this thread until its next gmlake call. */
const char* gmlake_last_error(void);

/* --- IPC: sharing a block with another process (torch.multiprocessing does it through the PyTorch extension).
 * Protocol, lifetime and failures: include/gmlake/ipc.h. Both processes run gmlake with the same backend and
 * page_bytes; the importer takes the exporter's file descriptors with pidfd_getfd(2) (Linux >= 5.6, ptrace
 * access to the exporter: same user, kernel.yama.ptrace_scope 0 or CAP_SYS_PTRACE). On cuda the chunks must be
 * exportable (ipc_handles:1, the default, on a device with POSIX file descriptor handles).
 * Thread safety: as every function here (exports under the device's lock; imports under a lock of their own). */

/* Describes the live block of `device` that contains `ptr` (its start or any byte of it) as a handle of
 * *handle_bytes bytes (binary: no terminating zero) another process can open with gmlake_ipc_import; sets
 * *offset_bytes to ptr's offset from the block's start. handle_out NULL: only sets *handle_bytes (the size
 * needed) and *offset_bytes. Otherwise *handle_bytes is the buffer's capacity on entry and the handle's size on
 * return; a buffer too small fails with GMLAKE_ERROR_INVALID_ARGUMENT, *handle_bytes set to the size needed.
 * The handle stays valid while the block lives and the exporting process runs. O(n) in the pool's blocks.
 * Returns GMLAKE_OK; GMLAKE_ERROR_INVALID_POINTER (ptr in no live allocated block of that device);
 * GMLAKE_ERROR_INVALID_ARGUMENT (bad device, NULL handle_bytes or offset_bytes, small buffer, a backend that
 * cannot export: sim); GMLAKE_ERROR_BACKEND (cuMemExportToShareableHandle failed: chunks not exportable);
 * GMLAKE_ERROR_SHUT_DOWN. Nothing changes in the pool. */
int gmlake_ipc_export(void* ptr, int device, char* handle_out, size_t* handle_bytes, size_t* offset_bytes);

/* Maps the block another process exported (handle, handle_bytes: what gmlake_ipc_export wrote) into this
 * process on `device` and sets *ptr_out to its start (the exporter's block start: add the exporter's
 * offset_bytes for its pointer). Each call maps anew. The mapping is not part of the pool (not in its stats) and
 * stays until gmlake_ipc_close, gmlake_shutdown included; on cuda it holds the memory even after the exporter
 * frees it. Returns GMLAKE_OK; GMLAKE_ERROR_INVALID_ARGUMENT (not a gmlake handle, corrupt, another backend's,
 * its exporter exited, its block freed since, NULL arguments, bad device); GMLAKE_ERROR_BACKEND (pidfd_getfd
 * refused: no ptrace access; kernel without pidfd; a driver call failed); GMLAKE_ERROR_OUT_OF_MEMORY (no
 * address space); GMLAKE_ERROR_CONFIG; GMLAKE_ERROR_SHUT_DOWN. On failure *ptr_out is NULL and nothing stays
 * mapped or open. */
int gmlake_ipc_import(const char* handle, size_t handle_bytes, int device, void** ptr_out);

/* Unmaps what gmlake_ipc_import returned on `device`. Returns GMLAKE_OK; GMLAKE_ERROR_INVALID_POINTER for
 * anything else (closed already, an interior pointer, a gmlake_malloc block), changing nothing;
 * GMLAKE_ERROR_INVALID_ARGUMENT (bad device); GMLAKE_ERROR_BACKEND (the unmap failed: still open). Works after
 * gmlake_shutdown. */
int gmlake_ipc_close(void* ptr, int device);

/* Every function of this header, declared once as a list: X(name) for each, in the order of the declarations
 * above. Made from it: gmlake_c_api_table (whose signatures the library derives from the declarations), the ctypes
 * binding (python/gmlake/_library.py) and the PyTorch extension's table of entry points
 * (python/gmlake/csrc/c_api_table.h). A new function is declared above and listed here. */
#define GMLAKE_C_API(X)        \
  X(gmlake_init)               \
  X(gmlake_init_defaults)      \
  X(gmlake_malloc)             \
  X(gmlake_free)               \
  X(gmlake_record_stream)      \
  X(gmlake_empty_cache)        \
  X(gmlake_get_stats)          \
  X(gmlake_reset_peak_stats)   \
  X(gmlake_set_cap_bytes)      \
  X(gmlake_get_cap_bytes)      \
  X(gmlake_shutdown)           \
  X(gmlake_get_backend_time)   \
  X(gmlake_ignored_frees)      \
  X(gmlake_set_tracing)        \
  X(gmlake_drain_trace)        \
  X(gmlake_get_segments)       \
  X(gmlake_pool_create)        \
  X(gmlake_pool_release)       \
  X(gmlake_pool_use_count)     \
  X(gmlake_pool_malloc)        \
  X(gmlake_pool_empty_cache)   \
  X(gmlake_pool_blocks)        \
  X(gmlake_pool_restore)       \
  X(gmlake_stat_names)         \
  X(gmlake_stat_table)         \
  X(gmlake_config_table)       \
  X(gmlake_max_devices)        \
  X(gmlake_status_name)        \
  X(gmlake_c_api_table)        \
  X(gmlake_last_error_code)    \
  X(gmlake_last_error)         \
  X(gmlake_ipc_export)         \
  X(gmlake_ipc_import)         \
  X(gmlake_ipc_close)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GMLAKE_GMLAKE_H_ */
