// Allocation traces: the events of PyTorch memory snapshots (torch.cuda.memory._dump_snapshot) and of RMM
// logging_resource_adaptor CSV logs, in one model the replay consumes.
//
// Readers never run code from the file: the pickle reader is a restricted unpickler of the data opcodes only
// (a GLOBAL / REDUCE / BUILD opcode is rejected as "not a snapshot"), and every malformed, truncated or
// unexpected input throws Error(kTrace) with one line naming the file and what is wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gmlake/units.h"

namespace gmlake {

enum class TraceAction : std::uint8_t {
  kAlloc,          // a block of size_bytes (as requested, before rounding) at addr on stream
  kFreeRequested,  // the program freed addr
  kFreeCompleted,  // the allocator returned addr to its pool (after record_stream events completed)
  kSegmentAlloc,   // PyTorch reserved a segment (cudaMalloc) of size_bytes at addr
  kSegmentFree,    // ... released it
  kSegmentMap,     // expandable segments: pages of size_bytes mapped at addr
  kSegmentUnmap,   // ... unmapped
};
const char* to_string(TraceAction a);

struct TraceEvent {
  TraceAction action;
  std::uint64_t addr;
  std::uint64_t size_bytes;
  std::uint64_t stream;
  std::int64_t time_us;
};

// A block already live when recording began: replayed (allocated) before the first event.
struct InitialBlock {
  std::uint64_t addr;
  std::uint64_t size_bytes;
  std::uint64_t stream;
};

struct DeviceTrace {
  int device = 0;
  std::vector<TraceEvent> events;             // in recorded order
  std::vector<InitialBlock> initial_blocks;   // frees with no alloc, and blocks active in `segments` at the end
                                              // that the events never allocated; in address order
  // Bytes PyTorch held in segments when recording began (a snapshot may start mid-run): the `segments`
  // total_size at the end, minus what the segment events added, plus what they released; 0 when that is
  // negative, for RMM logs, and for snapshots without `segments`.
  std::uint64_t initial_reserved_bytes = 0;
};

struct Trace {
  std::string name;                  // file name without directories and extensions ("gpt2_varlen")
  std::vector<DeviceTrace> devices;  // only devices with at least one event or initial block
};

// What a trace reader may spend on one file. The defaults bound the reader's memory by what a snapshot can
// need (docs/reliability.md, "Trace reader budget"); tests lower them to reach the limits cheaply.
inline constexpr std::uint64_t kMaxTraceBytes = 16 * kGiB;  // decompressed
struct TraceReadLimits {
  // Most bytes a file may hold once decompressed (and most a file may hold at all).
  std::uint64_t max_bytes = kMaxTraceBytes;
  // Compressed data may decompress to at most max_ratio bytes per compressed byte once it is past
  // ratio_free_bytes: real snapshots compress 19x (gpt2_varlen) to 27x (resnet50) with xz; gzip cannot pass
  // 1032x, xz a few thousand: beyond 1000x it is a decompression bomb, not a snapshot.
  std::uint64_t max_ratio = 1000;
  std::uint64_t ratio_free_bytes = 64 * kMiB;
  // The pickle reader's own memory (values, containers, memo) per input byte, plus pickle_slack_bytes. Real
  // snapshots need 4 to 6.1 bytes per byte (docs/reliability.md); a pickle of nothing but empty containers
  // would take up to ~80.
  std::uint64_t pickle_bytes_per_input_byte = 12;
  std::uint64_t pickle_slack_bytes = 16 * kMiB;
};

// Reads `path`: a pickle snapshot (raw, .xz or .gz, recognised by magic bytes, not by name) or an RMM CSV log.
// The first bytes (decompressed) are looked at before the rest is read: a file that does not start as a
// snapshot or an RMM log is refused at once. Throws Error(kTrace) when the file is missing, unreadable,
// truncated, corrupt, not a trace, or beyond `limits`.
Trace read_trace(const std::string& path, const TraceReadLimits& limits = {});

// The bytes of `path`, decompressed when they start with the xz or gzip magic (concatenated xz streams and
// gzip members are read as one). Throws Error(kTrace) naming `path` when it cannot be opened or read, when
// the compressed data is truncated or corrupt, and when it holds more than limits.max_bytes (or decompresses
// beyond limits.max_ratio). Never allocates more than limits.max_bytes + 1 bytes for the file's content, also
// for a pipe or a device that never ends (/dev/zero).
std::vector<std::uint8_t> read_decompressed(const std::string& path, const TraceReadLimits& limits = {});

// Parses a PyTorch snapshot pickle (protocol 2-5). Only addresses and sizes must fit 64 bits: any other
// integer (a frame's line number, ...) may be as wide as Python wrote it. Throws Error(kTrace), also when the
// pickle would take more memory than limits allows for its size.
Trace parse_snapshot_pickle(std::span<const std::uint8_t> bytes, std::string name, const TraceReadLimits& limits = {});

// Parses an RMM logging_resource_adaptor CSV (header Thread,Time,Action,Pointer,Size,Stream in any order;
// actions allocate, free, and "allocate failure" which is skipped). A free becomes free_requested then
// free_completed; a free of a pointer the log never allocated becomes an initial block. Time is kept when it
// is a number (taken as microseconds), else 0. All events go to device 0. Sizes must be below 2^63, as in
// snapshots. Throws Error(kTrace) naming the line.
Trace parse_rmm_csv(std::string_view text, std::string name);

// PyTorch's own peak reserved bytes over the trace: initial_reserved_bytes plus the running sum of its segment
// events (segment_alloc/map add size_bytes, segment_free/unmap subtract it, never below 0), at its highest;
// nullopt when the trace has no segment events.
std::optional<std::uint64_t> recorded_peak_reserved_bytes(const DeviceTrace& trace);

}  // namespace gmlake
