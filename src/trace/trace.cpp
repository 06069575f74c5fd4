// The trace model's shared rules (action names, initial blocks, reserved bytes) and read_trace, which finds
// the format of a file from its bytes.
#include "gmlake/trace.h"

#include <algorithm>
#include <string>

#include "gmlake/error.h"
#include "trace_parsers.h"

namespace gmlake {
namespace {

using trace_detail::saturating_add;

// The first byte of every pickle of protocol 2 or later (the PROTO opcode).
constexpr std::uint8_t kPickleProto = 0x80;

// Suffixes stripped from a file name to name its trace, in any order, repeatedly.
constexpr std::string_view kTraceSuffixes[] = {".xz", ".gz", ".pickle", ".pkl", ".snapshot", ".csv"};

bool is_block_event(TraceAction a) {
  return a == TraceAction::kAlloc || a == TraceAction::kFreeRequested || a == TraceAction::kFreeCompleted;
}

std::uint64_t floored_sub(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

// "traces/gpt2_varlen.snapshot.pickle.xz" -> "gpt2_varlen".
std::string trace_name(std::string_view path) {
  const std::size_t slash = path.find_last_of('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (std::string_view suffix : kTraceSuffixes) {
      if (name.size() > suffix.size() && name.ends_with(suffix)) {
        name.remove_suffix(suffix.size());
        stripped = true;
      }
    }
  }
  return std::string(name);
}

}  // namespace

const char* to_string(TraceAction a) {
  switch (a) {
    case TraceAction::kAlloc: return "alloc";
    case TraceAction::kFreeRequested: return "free_requested";
    case TraceAction::kFreeCompleted: return "free_completed";
    case TraceAction::kSegmentAlloc: return "segment_alloc";
    case TraceAction::kSegmentFree: return "segment_free";
    case TraceAction::kSegmentMap: return "segment_map";
    case TraceAction::kSegmentUnmap: return "segment_unmap";
  }
  return "unknown";
}

namespace trace_detail {

std::unordered_set<std::uint64_t> add_blocks_freed_before_alloc(DeviceTrace* device) {
  std::unordered_set<std::uint64_t> touched;
  for (const TraceEvent& e : device->events) {
    if (!is_block_event(e.action)) continue;
    const bool first = touched.insert(e.addr).second;
    if (first && e.action != TraceAction::kAlloc) {
      device->initial_blocks.push_back(InitialBlock{e.addr, e.size_bytes, e.stream});
    }
  }
  return touched;
}

std::uint64_t reserved_before(std::uint64_t reserved_at_end_bytes, const std::vector<TraceEvent>& events) {
  std::uint64_t added = 0;
  std::uint64_t released = 0;
  for (const TraceEvent& e : events) {
    if (e.action == TraceAction::kSegmentAlloc || e.action == TraceAction::kSegmentMap) {
      added = saturating_add(added, e.size_bytes);
    } else if (e.action == TraceAction::kSegmentFree || e.action == TraceAction::kSegmentUnmap) {
      released = saturating_add(released, e.size_bytes);
    }
  }
  return floored_sub(saturating_add(reserved_at_end_bytes, released), added);
}

}  // namespace trace_detail

Trace read_trace(const std::string& path, const TraceReadLimits& limits) {
  // A pickle starts with PROTO; an RMM log with its header line, which must be within the first bytes.
  const trace_detail::LooksLike looks_like = [](std::span<const std::uint8_t> prefix, bool complete) {
    if (!prefix.empty() && prefix.front() == kPickleProto) return true;
    const std::string_view text(reinterpret_cast<const char*>(prefix.data()), prefix.size());
    return (complete || text.find('\n') != std::string_view::npos) && trace_detail::starts_with_rmm_header(text);
  };
  const std::vector<std::uint8_t> bytes = trace_detail::read_input(path, limits, &looks_like);
  if (!bytes.empty() && bytes.front() == kPickleProto) {
    return trace_detail::parse_snapshot(bytes, trace_name(path), path, limits);
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (trace_detail::starts_with_rmm_header(text)) return trace_detail::parse_rmm(text, trace_name(path), path);
  throw Error(ErrorCode::kTrace, "gmlake trace: " + path + ": not a PyTorch snapshot or RMM log");
}

std::optional<std::uint64_t> recorded_peak_reserved_bytes(const DeviceTrace& trace) {
  bool any = false;
  std::uint64_t reserved = trace.initial_reserved_bytes;
  std::uint64_t peak = reserved;
  for (const TraceEvent& e : trace.events) {
    switch (e.action) {
      case TraceAction::kSegmentAlloc:
      case TraceAction::kSegmentMap: reserved = saturating_add(reserved, e.size_bytes); break;
      case TraceAction::kSegmentFree:
      case TraceAction::kSegmentUnmap: reserved = floored_sub(reserved, e.size_bytes); break;
      default: continue;
    }
    any = true;
    peak = std::max(peak, reserved);
  }
  if (!any) return std::nullopt;
  return peak;
}

}  // namespace gmlake
