// gmlake's configuration: one table, declared once below, that feeds the Config struct's fields and
// defaults, GMLAKE_CONF parsing, `gmlake conf`, and the report of the configuration in use.
//
// GMLAKE_CONF uses PyTorch's PYTORCH_CUDA_ALLOC_CONF form: "key:value,key:value". Sizes accept a plain
// byte count or a suffix K/M/G/T (powers of 1024, also KiB/MiB/GiB/TiB, case-insensitive): "cap_bytes:24GiB".
// Booleans accept true/false/1/0. An unknown key, a bad value or an overflow throws Error(kConfig) whose
// message names the key; nothing is half-applied.
//
// The config is parsed once and passed down by value; no code reads the environment on the hot path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gmlake/units.h"

namespace gmlake {

// X(type, name, default, unit, description). type is one of: u64 (sizes, counts), bool, Policy, string.
#define GMLAKE_CONFIG_FIELDS(X)                                                                                   \
  X(Policy, policy, Policy::kGmlake, "",                                                                         \
    "allocation policy: gmlake (stitching), caching (PyTorch native), expandable (PyTorch expandable_segments), " \
    "async (PyTorch backend:cudaMallocAsync, CUDA's stream-ordered pool: `gmlake replay --backend cuda` only)")  \
  X(string, backend, "host", "",                                                                                 \
    "where memory comes from (the Pool, the C API): host (memfd + mmap, CPU-readable), sim (accounting only), "  \
    "sim:h100|sim:h200 (VMM calls charged their modelled cost), cuda (the GPU of the pool's device, CUDA VMM "    \
    "API; also sets cross_stream_reuse:false unless the same text sets it). `gmlake replay` takes --backend")     \
  X(bool, debug, false, "",                                                                                      \
    "fill freed memory with 0xDB and check it on reuse (PoisoningAllocator; backend:host only; costs a pass "    \
    "over every block on malloc and free)")                                                                       \
  X(bool, ipc_handles, true, "",                                                                                \
    "chunks exportable to other processes (gmlake_ipc_export, torch.multiprocessing; include/gmlake/ipc.h): on "  \
    "cuda, cuMemCreate with the POSIX file descriptor handle type where the device and driver support it (else " \
    "plain chunks, no error); host chunks are always exportable")                                               \
  X(u64, cap_bytes, 0, "bytes",                                                                                  \
    "memory cap: reserved bytes never exceed it, as PyTorch's per_process_memory_fraction; 0 = no cap")          \
  X(u64, page_bytes, kPageBytes, "bytes",                                                                       \
    "the engine's page: the unit its arenas are cut into and its chunks are made of (a chunk is 1..N pages), a "  \
    "power-of-two multiple of the backend granularity (2 MiB on CUDA: cuMemGetAllocationGranularity); the "       \
    "caching and expandable policies create their backends at it too. Also accepted as chunk_bytes, its older "   \
    "name (giving both with different values is an error)")                                                        \
  X(u64, small_request_max_bytes, 1 * kMiB, "bytes",                                                             \
    "requests up to this size are served from the small pool (PyTorch kSmallSize)")                               \
  X(u64, arena_virtual_bytes, 1 * kTiB, "bytes",                                                                 \
    "gmlake: virtual address space reserved per arena (one arena per pool, and per stream unless "               \
    "cross_stream_reuse); past 16 arenas in use each doubling of their count halves it for new ones, to 1/1024, " \
    "as a process has about 128 TiB in all, the GPU's included (ArenaSet)")                                     \
  X(bool, cross_stream_reuse, true, "",                                                                          \
    "gmlake: free memory of one stream may serve another stream once its free has completed")                    \
  X(u64, fit_candidates, 8, "count",                                                                             \
    "gmlake: free ranges examined, best fit first, for one that is already mapped before stitching")             \
  X(u64, lag_grow_pages, 64, "count",                                                                             \
    "gmlake, asynchronous streams: memory created in a row, in pages (page_bytes), instead of waiting when "   \
    "the oldest idle chunk's stream work is not known finished (the device lags); beyond it the allocator "     \
    "waits. Bounds how much the device's lag can raise the peak (64 x 2 MiB = 128 MiB). Also accepted as "      \
    "lag_grow_chunks, its older name (giving both with different values is an error)")                         \
  X(bool, lag_grow_covered, true, "",                                                                           \
    "gmlake, asynchronous streams: lag growth (lag_grow_pages) also where a mark covers the oldest idle chunk "    \
    "but has not finished, rather than waiting for that mark. Such a wait blocks the host until the device gets " \
    "there: on the H100 fsdp_like_train's waits on covered marks blocked it 160-430 ms a 2.5 s run (run 114, "    \
    "docs/benchmarks.md). false = wait for a covered mark, grow only where none covers (before 2026-11-27)")      \
  X(u64, lag_headroom_permille, 1000000, "permille",                                                                 \
    "gmlake, asynchronous streams: lag growth (lag_grow_pages) only while reserved bytes stay within this many "     \
    "thousandths above the highest allocated bytes (Headroom); past it the allocator waits for the device (or "      \
    "moves in stream order, in_order_moves) as with lag growth spent, so that a GPU-bound job reserves about "       \
    "what `gmlake replay` reserves for its trace, paying the moves and waits lag growth saves: at 20 on an H200 "    \
    "embed_infer_sorted reserved 1.46 GB against 1.70 at 1.005x native's time against 0.972, fsdp_like_train "       \
    "2.5 GB against 12.4 at 1.181x against 0.998 (runs 130-131, docs/benchmarks.md). Lag growth takes only "         \
    "memory the device has free. 1000000 = no bound, the default")                                                   \
  X(bool, arena_handover, true, "",                                                                              \
    "gmlake, asynchronous streams: a stream's first allocation in a pool takes over an empty arena of another "  \
    "stream once no work of that stream can touch it, its chunks mapped where they are, so that a job making its " \
    "side streams anew each step (torch.cuda.Stream() in a loop) finds their layout and moves nothing; false = a " \
    "new arena for every new stream, its chunks moved in one by one (before 2026-11-28)")                        \
  X(u64, handover_quiet_ms, 250, "ms",                                                                           \
    "gmlake, arena_handover: a stream that has allocated nothing for this long may also pass on an arena that "  \
    "still holds blocks of it (the cuBLAS workspace PyTorch keeps for every stream that ran a matmul: such an "   \
    "arena is never empty), those blocks staying where they are, a later free of one waiting for its stream's "   \
    "queued work (cuStreamQuery, else an event); the stream quiet longest goes first, after every empty arena. "  \
    "A serving stream allocates every few ms, a job's runs are seconds apart (multistream_embed_serve: ticks of " \
    "20-40 ms, about 1 s between runs; run 170, docs/benchmarks.md). 0 = only empty arenas pass (before "          \
    "2026-11-29)")                                                                                                \
  X(bool, in_order_moves, false, "",                                                                             \
    "gmlake, asynchronous streams: an idle chunk that its own stream's queued work may still touch moves to "      \
    "back a block of that stream with no wait once lag growth (lag_grow_pages) is spent, its old mapping kept as " \
    "a standby one until that work finishes (stream order, as PyTorch reuses a freed block on its own stream). "  \
    "With lag_grow_pages:0 a one-stream job then reserves on the GPU what `gmlake replay` reserves for its trace " \
    "(no lag growth), at more moves: on the H100 bert-train-eval reserved 3.83 GB against 3.96 at 1.08x native's " \
    "step time against 1.00x (runs 71-72, docs/benchmarks.md); off by default, so the waits stay")               \
  X(u64, max_chunk_bytes, 4 * kMiB, "bytes",                                                                     \
    "gmlake: largest physical chunk, a multiple of page_bytes; a run of unmapped pages gets chunks of its own "  \
    "size up to this and up to the block's share (chunks_per_block); a block above 4096 x this gets chunks of "  \
    "1/4096 of it, so that no block maps more than about 4096 new chunks. Small chunks strand nothing and need no "    \
    "re-cut; with standby mappings a repeating step moves nothing once formed, so the extra calls are paid once "\
    "(docs/benchmarks.md). Larger chunks cost fewer calls per byte (the driver charges per call and per chunk: "  \
    "bench/cuda/vmm_costs_h100.json); page_bytes = one size, page-granular moves")                              \
  X(u64, chunks_per_block, 32, "count",                                                                          \
    "gmlake: a block's unmapped pages get chunks of at most 1/chunks_per_block of the block's size (at least "    \
    "one page): a chunk that a smaller block later covers in part then strands little, and a block of GBs still " \
    "maps in at most about this many calls; 0 = chunks of the run's size (up to max_chunk_bytes)")              \
  X(u64, max_strand_bytes, 16 * kMiB, "bytes",                                                                   \
    "gmlake: most bytes of an idle chunk that a new block may leave uncovered when it lands on part of the "       \
    "chunk (stranded: pinned while the block lives); above it the chunk is re-cut (unmapped and released, the "   \
    "block's pages stitched anew at its own size), a move; 0 = re-cut on any stranded page")                    \
  X(u64, standby_mappings, 4, "count",                                                                          \
    "gmlake: when an idle chunk moves to back another place, its old mapping is kept (a standby mapping: "        \
    "address space, no memory) for up to this many places per chunk, so that a block placed there again takes "  \
    "the chunk back with no driver call while no block uses it elsewhere (the GMLake paper's stitched-block "     \
    "cache): a repeating step stops moving memory once each chunk is mapped where the step uses it; beyond it "  \
    "the oldest is unmapped; 0 = none (every move unmaps). Off while max_idle_mapped_bytes is set")             \
  X(u64, grow_bytes, 2 * kMiB, "bytes",                                                                        \
    "gmlake: a large-pool stitch that ends a block's range and is followed by unmapped pages backs at least "    \
    "this much at once (as PyTorch gives requests under 10 MiB a 20 MiB segment), so the pool grows by few "     \
    "large chunks; page_bytes = back only what the block needs")                                               \
  X(u64, growth_chunk_bytes, 16 * kMiB, "bytes",                                                                \
    "gmlake: while the pool grows (a run's chunk is new memory and nothing idle or free is left to move, or "    \
    "the pool re-forms below the highest allocated bytes it has seen: after empty_cache, a model rebuilt), the " \
    "chunk may cover up to this much of the run, past chunks_per_block and max_chunk_bytes, and at most the "     \
    "larger of reserved bytes and that high / growth_chunk_share: few creates, maps and access grants where "    \
    "the pool grows (a longer batch, a job forming again), and none of these chunks strands more than "          \
    "max_strand_bytes, so none is re-cut "                                                                        \
    "(src/policies/gmlake/chunk_source.h). Whole pages (rounded down); one page = off; off also with "           \
    "max_chunk_bytes = page_bytes (one chunk size), with headroom_permille 0 (memory over calls), under a cap "   \
    "and near the device's end (page-sized chunks)")                                                              \
  X(u64, growth_chunk_share, 768, "count",                                                                      \
    "gmlake: a growth chunk (growth_chunk_bytes) is at most 1/this of the reserved bytes (at least a page), so "  \
    "what a later block strands of it stays a small share of the pool (768 since 2026-11-26: at 448, growth "    \
    "chunks that blocks later covered in part held 1% of t5_train_varlen's peak; docs/benchmarks.md)")          \
  X(u64, waiting_growth_chunk_share, 768, "count",                                                             \
    "gmlake: growth_chunk_share while the device waits for the host: the allocating stream has no queued work "  \
    "(cuStreamQuery, asked only where a growth chunk is made), so every backend call is on the critical path "    \
    "rather than hidden behind queued kernels (../shared/REFERENCE.md); a smaller share makes fewer, larger "     \
    "growth chunks there. 768 (the busy share: no difference) since 2026-11-27: at 32 the large chunks made at "  \
    "each step's start kept bert-train-eval's layout moving at every evaluation on the H100 (A/B 1.068 against "  \
    "1.010, same call; docs/benchmarks.md). Without stream events (host, sim, the replay) assume_device_waits "   \
    "says which share applies")                                                                                 \
  X(bool, assume_device_waits, false, "",                                                                       \
    "gmlake, without stream events (host, sim, the replay): what the growth chunks take the device to do, as no " \
    "stream can be asked: false = busy (growth_chunk_share), true = waiting (waiting_growth_chunk_share). The "   \
    "replay's memory figures are those of the assumption; with stream events (cuda pools) it is not read")      \
  X(bool, memory_first_under_cap, true, "",                                                                    \
    "gmlake: with cap_bytes set, page-sized chunks and no grow-ahead, so nothing is stranded in a partly used "  \
    "chunk and an allocation fails only where the page-granular engine would (docs/benchmarks.md), at many "     \
    "more VMM calls; false: chunks of several sizes until reserved passes 90% of the cap")                      \
  X(u64, headroom_permille, 7, "permille",                                                                      \
    "gmlake: while reserved bytes stay within the peak allocated bytes plus this many thousandths, a new "       \
    "chunk is created rather than an idle page evicted; spends at most that much memory on fewer VMM calls in "   \
    "steady state (a repeating step keeps its pages mapped instead of moving them every step); 0 = evict "       \
    "whenever any page is idle. 7 since 2026-11-26 (9 before): at 9 most training traces sat at utilization "     \
    "0.991, one thousandth above the bar, so any stranding at the peak put a trace under it (docs/benchmarks.md)")\
  X(u64, waiting_headroom_permille, 0, "permille",                                                              \
    "gmlake: headroom_permille while the device waits for the host (the allocating stream has no queued work: "   \
    "waiting_growth_chunk_share): a move would then be on the critical path, so a new chunk is made instead "    \
    "while reserved bytes stay within the highest allocated bytes plus this many thousandths; asked of the "      \
    "stream only where headroom_permille would move memory. Without stream events assume_device_waits decides. "  \
    "At most headroom_permille = off, the default: 50 cut resnet50-infer's VMM time by a third but, were the "    \
    "device always waiting, would reserve more than PyTorch on 5 shipped traces (docs/benchmarks.md)")          \
  X(string, peer_devices, "none", "",                                                                           \
    "gmlake, the lake: devices whose memory the pool may borrow when its own device (or cap_bytes) is full and "  \
    "no idle or free memory is left, tried in order, as device ids separated by ';' (\"1;2\"); none = own device only. "    \
    "Their chunks are given back first (docs/design.md, The lake); caching and expandable ignore it")             \
  X(u64, peer_budget_bytes, 0, "bytes",                                                                          \
    "gmlake, the lake: the most bytes held on peer devices at once, all peers together; 0 = no bound but the "    \
    "peers' own memory")                                                                                         \
  X(string, lake_socket, "none", "",                                                                           \
    "gmlake, the lake between processes: the Unix socket of a lender process (include/gmlake/lake.h), an "       \
    "absolute path or @name (abstract namespace), at most 107 bytes; the pool borrows chunks from it when its "   \
    "own device (or cap_bytes) is full, within peer_budget_bytes, and gives them back when recalled; none = no "  \
    "lender. Not with peer_devices (one source of peer memory per pool); caching and expandable ignore it")      \
  X(u64, lake_answer_timeout_ms, 5000, "ms",                                                                     \
    "gmlake, the lake between processes: how long an allocation waits for the lender's answer to a loan "       \
    "request; past it the request counts as refused (the allocation goes on memory first on the own device), "  \
    "and no new request is sent until the lender has answered it (a late loan goes straight back); 0 = wait "    \
    "as long as the lender lives")                                                                               \
  X(string, lake_allowed_uids, "none", "",                                                                       \
    "gmlake, the lake between processes: uids besides the process's own that may take part, as decimal uids "     \
    "separated by ';' (\"1000;1001\"); a lender serves only borrowers of its own or these uids (others are "       \
    "refused and logged, nothing lent), a borrower trusts only a lender of its own or these uids (SO_PEERCRED, "  \
    "docs/reliability.md); none = the own uid only")                                                            \
  X(u64, move_share_permille, 10, "permille",                                                                   \
    "gmlake: driver time that moving memory (evictions, re-cuts, releases to remake chunks) may take while the "  \
    "device waits for the host (on the critical path), in thousandths of the wall time since the first move, "    \
    "once move_burst_ms is spent; past it the pool grows instead, within move_headroom_permille "                 \
    "(src/policies/gmlake/move_budget.h). A move made while the allocating stream has queued work is hidden "     \
    "behind it: neither charged nor refused (since 2026-11-28: the bound cost embed_infer_sorted 3.6% of its "     \
    "memory for 6% less VMM time; docs/benchmarks.md). Without stream events assume_device_waits says which; "     \
    "`gmlake replay` reads the trace's own times as the wall time. 0 = unbounded")                                \
  X(u64, move_burst_ms, 300, "ms",                                                                              \
    "gmlake: driver time that moves may take at once before move_share_permille has accrued: the moves that "    \
    "form the layout in the first steps, which set the peak for the whole run")                                 \
  X(u64, move_headroom_permille, 50, "permille",                                                                \
    "gmlake: while a move budget refuses, a new chunk is made instead as long as reserved bytes stay within the " \
    "highest allocated bytes plus this many thousandths (and no cap is set, the device has room); past it the "  \
    "move is made anyway: memory first. Bounds what the time bounds may cost in memory")                       \
  X(u64, move_budget_ns_per_op, 0, "ns",                                                                         \
    "gmlake: driver time that moving memory may cost, earned per allocation at a fixed modelled cost per move "   \
    "(src/policies/gmlake/move_budget.h); out of it, the pool grows instead as for move_share_permille; 0 = no "  \
    "per-operation bound (the default: time is bounded by wall time, what users see)")                          \
  X(u64, max_idle_mapped_bytes, 0, "bytes",                                                                      \
    "gmlake: bound on mapped bytes no block uses (the stitched-range cache); beyond it pages are unmapped "      \
    "least-recently-used first; 0 = unbounded")                                                                  \
  X(bool, release_on_oom, true, "",                                                                            \
    "caching, expandable: when memory runs out, release free cached segments and retry once (PyTorch's "          \
    "release_cached_blocks); false for private pools (MemPool, CUDA graph pools), whose free memory a captured " \
    "graph still uses")                                                                                         \
  X(u64, small_segment_bytes, 2 * kMiB, "bytes",                                                                 \
    "caching: segment size of the small pool (PyTorch kSmallBuffer); expandable: small pool page size")          \
  X(u64, large_segment_bytes, 20 * kMiB, "bytes",                                                                \
    "caching: segment size for large requests under large_segment_threshold_bytes (PyTorch kLargeBuffer); "      \
    "expandable: large pool page size")                                                                          \
  X(u64, large_segment_threshold_bytes, 10 * kMiB, "bytes",                                                      \
    "caching: large requests below this get a large_segment_bytes segment (PyTorch kMinLargeAlloc)")             \
  X(u64, large_round_bytes, 2 * kMiB, "bytes",                                                                   \
    "caching: larger requests get a segment of their size rounded up to this (PyTorch kRoundLarge)")             \
  X(u64, expandable_virtual_bytes, 256 * kGiB, "bytes",                                                          \
    "expandable: virtual size of each segment (PyTorch reserves 1.125 x device memory)")

// kAsync: PyTorch's backend:cudaMallocAsync, the device's stream-ordered pool (src/policies/async/); it needs a
// backend with a StreamOrderedPool (cuda) and runs only in `gmlake replay` (a Pool the caller gives a backend).
enum class Policy { kGmlake, kCaching, kExpandable, kAsync };
const char* to_string(Policy p);
// Parses "gmlake" | "caching" | "expandable" | "async" (also "cudaMallocAsync"); throws Error(kConfig) otherwise.
Policy parse_policy(std::string_view text);

struct Config {
  using u64 = std::uint64_t;
  using string = std::string;
#define GMLAKE_CONFIG_DECLARE(type, name, def, unit, desc) type name = def;
  GMLAKE_CONFIG_FIELDS(GMLAKE_CONFIG_DECLARE)
#undef GMLAKE_CONFIG_DECLARE

  // Applies "key:value,key:value" on top of this config (empty text: no change). Throws Error(kConfig)
  // naming the key for an unknown key, a bad value, a value out of range, or a key and its older name
  // (chunk_bytes for page_bytes, lag_grow_chunks for lag_grow_pages) given different values in the same text;
  // then *this is unchanged.
  void apply(std::string_view text);
  // Checks relations between fields (page_bytes a power of two of at least 64 KiB, ...). Throws Error(kConfig).
  void validate() const;
  // "key:value,..." for every field, in table order; parse(to_string()) gives back the same config.
  std::string to_string() const;
};

// The device ids of a peer_devices value: "none" -> {}, "1;2" -> {1, 2}. Throws Error(kConfig) naming
// peer_devices for anything else (not a number, negative, above 1023, listed twice, empty entries).
std::vector<int> parse_peer_devices(std::string_view text);

// The uids of a lake_allowed_uids value: "none" -> {}, "1000;1001" -> {1000, 1001}. Throws Error(kConfig)
// naming lake_allowed_uids for anything else (not a number, above 4294967294, listed twice, empty entries).
std::vector<std::uint32_t> parse_lake_allowed_uids(std::string_view text);

// Checks a lake_socket value: "none", "@name" or an absolute path, 1..107 bytes (sockaddr_un). Throws
// Error(kConfig) naming lake_socket otherwise.
void check_lake_socket(std::string_view text);

// Config{} with `text` applied and validated.
Config parse_config(std::string_view text);

// The GMLAKE_CONF environment variable ("" when unset): the one place it is read (the C API's first call, the
// CLI's replay).
std::string environment_conf();

struct ConfigFieldInfo {
  const char* name;
  const char* type;
  std::string default_value;
  const char* unit;
  const char* description;
};
// One entry per table row, in table order (for --help and docs).
std::vector<ConfigFieldInfo> config_fields();

}  // namespace gmlake
