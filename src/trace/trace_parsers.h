// What the trace readers share inside the library. The parsers take, besides the trace name, the `source`
// their errors name: read_trace passes the file path, the public parse_* functions the name. The rules on
// initial blocks and reserved bytes that several formats need live once, in trace.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "gmlake/trace.h"

namespace gmlake::trace_detail {

// a + b, or UINT64_MAX when that overflows (sizes from a hostile file must not wrap).
inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// parse_snapshot_pickle, naming `source` in errors. Throws Error(kTrace).
Trace parse_snapshot(std::span<const std::uint8_t> bytes, std::string name, const std::string& source,
                     const TraceReadLimits& limits = {});

// The pickle reader's memory budget for `input_bytes` of pickle under `limits`.
std::uint64_t pickle_budget(std::size_t input_bytes, const TraceReadLimits& limits);

// How many bytes (decompressed) read_input shows to a LooksLike check before it reads the rest.
inline constexpr std::size_t kPeekBytes = 64 * 1024;
// True when `prefix` (the first kPeekBytes of the content, or all of it when `complete`) may begin a trace.
using LooksLike = std::function<bool(std::span<const std::uint8_t> prefix, bool complete)>;

// read_decompressed, and when `looks_like` is given, refusing ("not a PyTorch snapshot or RMM log") content
// whose first bytes it rejects before reading or decompressing the rest.
std::vector<std::uint8_t> read_input(const std::string& path, const TraceReadLimits& limits,
                                     const LooksLike* looks_like);

// parse_rmm_csv, naming `source` in errors. Throws Error(kTrace).
Trace parse_rmm(std::string_view text, std::string name, const std::string& source);

// True when the first line of `text` is an RMM log header (the six columns in any order).
bool starts_with_rmm_header(std::string_view text);

// Adds to `device` an InitialBlock (size and stream of the free) for each address whose first block event
// (alloc, free_requested, free_completed) is a free: a block that was live before recording began. Returns
// every address the block events touch. Does not sort initial_blocks.
std::unordered_set<std::uint64_t> add_blocks_freed_before_alloc(DeviceTrace* device);

// The bytes reserved before `events` began, given those reserved after them: reserved_at_end minus what the
// segment events added plus what they released, or 0 when that is negative (saturating, never wraps).
std::uint64_t reserved_before(std::uint64_t reserved_at_end_bytes, const std::vector<TraceEvent>& events);

}  // namespace gmlake::trace_detail
