// PyTorch memory snapshots (torch.cuda.memory._dump_snapshot) to Trace: the events of `device_traces`, and
// the blocks live before recording began, from frees with no alloc and from the `segments` state at the end.
//
// The snapshot is a dict; only `device_traces` and `segments` are read, and in them only the fields the
// replay needs (frames, compile_context, user_metadata, ... are skipped). Events with actions the replay does
// not model (`snapshot`, `oom`) are skipped. Every element visited is charged to a budget of about twice the
// input size, so a pickle that shares one container many times through the memo cannot make this walk (or
// its output) grow beyond the input.
//
// Only the integers whose exact value the replay needs must fit 64 bits: addresses, sizes, devices (and
// streams, opaque 64-bit handles). Any other field may hold whatever PyTorch wrote: a frame's line number of
// 2^64-1 (seen in a real snapshot) is never looked at, and a time_us beyond 64 bits is taken as the nearest
// 64-bit value.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "gmlake/error.h"
#include "gmlake/trace.h"
#include "pickle_reader.h"
#include "trace_parsers.h"

namespace gmlake {
namespace {

using pickle::Document;
using pickle::Kind;
using pickle::Value;
using trace_detail::saturating_add;

constexpr TraceAction kAllActions[] = {TraceAction::kAlloc,        TraceAction::kFreeRequested,
                                       TraceAction::kFreeCompleted, TraceAction::kSegmentAlloc,
                                       TraceAction::kSegmentFree,  TraceAction::kSegmentMap,
                                       TraceAction::kSegmentUnmap};

// Device indexes above this are not a real machine.
constexpr std::int64_t kMaxDevice = 1 << 16;

// Elements visited beyond twice the input size (room for the fixed lookups of a tiny pickle).
constexpr std::size_t kBudgetSlack = 1024;

std::optional<TraceAction> action_named(std::string_view name) {
  for (TraceAction a : kAllActions) {
    if (name == to_string(a)) return a;
  }
  return std::nullopt;
}

// The fields of one event dict the replay reads; nullptr when absent.
struct EventFields {
  const Value* action = nullptr;
  const Value* addr = nullptr;
  const Value* size = nullptr;
  const Value* stream = nullptr;
  const Value* time_us = nullptr;
};

// What `segments` says about one device when the snapshot was taken.
struct SegmentState {
  std::uint64_t reserved_bytes = 0;         // sum of total_size
  std::vector<InitialBlock> active_blocks;  // active_allocated and active_pending_free blocks
};

class SnapshotReader {
 public:
  SnapshotReader(const Document& doc, std::size_t input_bytes, const std::string& source)
      : doc_(doc), budget_(2 * input_bytes + kBudgetSlack), source_(source) {}

  Trace read(std::string name) {
    const Value& root = doc_.root();
    if (!root.is(Kind::kDict)) {
      fail(std::string("not a PyTorch memory snapshot (top level is a ") + to_string(root.kind) + ", not a dict)");
    }
    const Value* traces = nullptr;
    const Value* segments = nullptr;
    const std::span<const Value> items = dict_items(root);
    for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
      if (!items[i].is(Kind::kString)) continue;
      if (items[i].text() == "device_traces") traces = &items[i + 1];
      if (items[i].text() == "segments") segments = &items[i + 1];
    }
    if (traces == nullptr) fail("not a PyTorch memory snapshot (no device_traces)");
    read_device_traces(*traces);
    if (segments != nullptr && !segments->is(Kind::kNone)) {
      has_segments_ = true;
      read_segments(*segments);
    }
    return finish(std::move(name));
  }

 private:
  // --- errors, with the place being read ---
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::kTrace, "gmlake trace: " + source_ + ": " + what);
  }
  [[noreturn]] void fail_here(const std::string& what) const { fail(place() + ": " + what); }
  // "device_traces[0][12]", "segments[3].blocks[1]".
  std::string place() const {
    std::string p = place_list_;
    if (place_depth_ >= 1) p += "[" + std::to_string(place_index_[0]) + "]";
    if (place_depth_ >= 2) {
      if (place_inner_ != nullptr) p += std::string(".") + place_inner_;
      p += "[" + std::to_string(place_index_[1]) + "]";
    }
    return p;
  }
  void set_place(const char* list, std::size_t depth, std::size_t i = 0, std::size_t j = 0,
                 const char* inner = nullptr) {
    place_list_ = list;
    place_depth_ = depth;
    place_index_[0] = i;
    place_index_[1] = j;
    place_inner_ = inner;
  }

  // --- containers, each visit charged to the budget ---
  void charge(std::size_t n) {
    if (n > budget_) fail("not a PyTorch memory snapshot (containers shared through the pickle memo too often)");
    budget_ -= n;
  }
  std::span<const Value> list_items(const Value& v, const char* what) {
    if (!v.is(Kind::kList)) fail_here(std::string(what) + " is a " + to_string(v.kind) + ", not a list");
    charge(doc_.list(v).size());
    return doc_.list(v);
  }
  std::span<const Value> dict_items(const Value& v, const char* what = "entry") {
    if (!v.is(Kind::kDict)) fail_here(std::string(what) + " is a " + to_string(v.kind) + ", not a dict");
    charge(doc_.dict_items(v).size());
    return doc_.dict_items(v);
  }

  // --- scalar fields ---
  std::uint64_t count(const Value* v, const char* field) const {
    if (v == nullptr) fail_here(std::string("no ") + field);
    if (!v->is(Kind::kInt) || v->integer < 0) {
      fail_here(std::string(field) + " is a " + to_string(v->kind) + ", not a non-negative int");
    }
    if (v->wide) fail_here(std::string(field) + " is 2^63 or more (an address or size fits a signed 64-bit int)");
    return static_cast<std::uint64_t>(v->integer);
  }
  std::uint64_t optional_count(const Value* v, const char* field, std::uint64_t fallback) const {
    return v == nullptr || v->is(Kind::kNone) ? fallback : count(v, field);
  }
  // A stream is an opaque handle (cudaStream_t): any int, kept bit for bit; absent or None is stream 0.
  std::uint64_t stream(const Value* v) const {
    if (v == nullptr || v->is(Kind::kNone)) return 0;
    if (!v->is(Kind::kInt)) fail_here(std::string("stream is a ") + to_string(v->kind) + ", not an int");
    if (v->wide) fail_here("stream does not fit 64 bits (a stream is a 64-bit handle)");
    return static_cast<std::uint64_t>(v->integer);
  }
  std::int64_t time_us(const Value* v) const {
    if (v == nullptr || v->is(Kind::kNone)) return 0;
    if (v->is(Kind::kInt)) return v->integer;
    if (v->is(Kind::kFloat) && std::isfinite(v->number) && std::fabs(v->number) < 9.2e18) {
      return static_cast<std::int64_t>(v->number);
    }
    fail_here(std::string("time_us is a ") + to_string(v->kind) + ", not an int");
  }
  std::string_view text(const Value* v, const char* field) const {
    if (v == nullptr) fail_here(std::string("no ") + field);
    if (!v->is(Kind::kString)) fail_here(std::string(field) + " is a " + to_string(v->kind) + ", not a str");
    return v->text();
  }

  // --- device_traces ---
  void read_device_traces(const Value& v) {
    set_place("device_traces", 0);
    const std::span<const Value> lists = list_items(v, "device_traces");
    for (std::size_t d = 0; d < lists.size(); ++d) {
      set_place("device_traces", 1, d);
      const std::span<const Value> events = list_items(lists[d], "the device's event list");
      if (events.empty()) continue;
      if (static_cast<std::int64_t>(d) > kMaxDevice) fail_here("device index out of range");
      DeviceTrace& device = device_at(static_cast<int>(d));
      device.events.reserve(events.size());
      for (std::size_t i = 0; i < events.size(); ++i) {
        set_place("device_traces", 2, d, i);
        read_event(events[i], &device.events);
      }
    }
  }

  void read_event(const Value& v, std::vector<TraceEvent>* out) {
    const EventFields f = event_fields(dict_items(v, "event"));
    const std::optional<TraceAction> action = action_named(text(f.action, "action"));
    if (!action) return;  // snapshot, oom, ...: not allocator state changes
    out->push_back(TraceEvent{*action, count(f.addr, "addr"), count(f.size, "size"), stream(f.stream),
                              time_us(f.time_us)});
  }

  static EventFields event_fields(std::span<const Value> items) {
    EventFields f;
    for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
      if (!items[i].is(Kind::kString)) continue;
      const std::string_view key = items[i].text();
      const Value* value = &items[i + 1];
      if (key == "action") f.action = value;
      else if (key == "addr") f.addr = value;
      else if (key == "size") f.size = value;
      else if (key == "stream") f.stream = value;
      else if (key == "time_us") f.time_us = value;
    }
    return f;
  }

  // --- segments ---
  void read_segments(const Value& v) {
    set_place("segments", 0);
    const std::span<const Value> segments = list_items(v, "segments");
    for (std::size_t s = 0; s < segments.size(); ++s) {
      set_place("segments", 1, s);
      read_segment(segments[s], s);
    }
  }

  void read_segment(const Value& v, std::size_t s) {
    const Value* device = nullptr;
    const Value* address = nullptr;
    const Value* total_size = nullptr;
    const Value* stream_value = nullptr;
    const Value* blocks = nullptr;
    const std::span<const Value> items = dict_items(v, "segment");
    for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
      if (!items[i].is(Kind::kString)) continue;
      const std::string_view key = items[i].text();
      if (key == "device") device = &items[i + 1];
      else if (key == "address") address = &items[i + 1];
      else if (key == "total_size") total_size = &items[i + 1];
      else if (key == "stream") stream_value = &items[i + 1];
      else if (key == "blocks") blocks = &items[i + 1];
    }
    const std::uint64_t d = optional_count(device, "device", 0);
    if (d > static_cast<std::uint64_t>(kMaxDevice)) fail_here("device index out of range");
    SegmentState& state = segments_[static_cast<int>(d)];
    state.reserved_bytes = saturating_add(state.reserved_bytes, count(total_size, "total_size"));
    if (blocks == nullptr || blocks->is(Kind::kNone)) return;
    const std::span<const Value> list = list_items(*blocks, "blocks");
    std::uint64_t next_address = count(address, "address");
    const std::uint64_t segment_stream = stream(stream_value);
    for (std::size_t b = 0; b < list.size(); ++b) {
      set_place("segments", 2, s, b, "blocks");
      read_block(list[b], segment_stream, &next_address, &state);
    }
  }

  // One block of a segment. Blocks lie in address order from the segment's start; old snapshots without a
  // block `address` get it from the sizes before it.
  void read_block(const Value& v, std::uint64_t segment_stream, std::uint64_t* next_address, SegmentState* state) {
    const Value* address = nullptr;
    const Value* size = nullptr;
    const Value* requested = nullptr;
    const Value* block_state = nullptr;
    const std::span<const Value> items = dict_items(v, "block");
    for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
      if (!items[i].is(Kind::kString)) continue;
      const std::string_view key = items[i].text();
      if (key == "address") address = &items[i + 1];
      else if (key == "size") size = &items[i + 1];
      else if (key == "requested_size") requested = &items[i + 1];
      else if (key == "state") block_state = &items[i + 1];
    }
    const std::uint64_t addr = optional_count(address, "address", *next_address);
    const std::uint64_t size_bytes = count(size, "size");
    *next_address = saturating_add(addr, size_bytes);
    const std::string_view s = text(block_state, "state");
    if (s != "active_allocated" && s != "active_pending_free") return;
    state->active_blocks.push_back(InitialBlock{addr, optional_count(requested, "requested_size", size_bytes),
                                                segment_stream});
  }

  // --- assembly ---
  DeviceTrace& device_at(int d) {
    DeviceTrace& device = devices_[d];
    device.device = d;
    return device;
  }

  Trace finish(std::string name) {
    for (const auto& [d, state] : segments_) device_at(d);
    Trace trace;
    trace.name = std::move(name);
    for (auto& [d, device] : devices_) {
      const auto it = segments_.find(d);
      add_initial_state(it == segments_.end() ? nullptr : &it->second, &device);
      if (device.events.empty() && device.initial_blocks.empty()) continue;
      trace.devices.push_back(std::move(device));
    }
    return trace;
  }

  // Initial blocks from frees with no alloc, then from active blocks the events never touch; reserved
  // bytes at the start from those at the end (only known when the snapshot has `segments`).
  void add_initial_state(const SegmentState* state, DeviceTrace* device) const {
    std::unordered_set<std::uint64_t> touched = trace_detail::add_blocks_freed_before_alloc(device);
    if (has_segments_ || state != nullptr) {
      device->initial_reserved_bytes =
          trace_detail::reserved_before(state == nullptr ? 0 : state->reserved_bytes, device->events);
    }
    if (state != nullptr) {
      for (const InitialBlock& block : state->active_blocks) {
        if (touched.insert(block.addr).second) device->initial_blocks.push_back(block);
      }
    }
    std::sort(device->initial_blocks.begin(), device->initial_blocks.end(),
              [](const InitialBlock& a, const InitialBlock& b) { return a.addr < b.addr; });
  }

  const Document& doc_;
  std::size_t budget_;
  const std::string& source_;
  std::map<int, DeviceTrace> devices_;
  std::map<int, SegmentState> segments_;
  bool has_segments_ = false;
  const char* place_list_ = "";
  std::size_t place_depth_ = 0;
  std::size_t place_index_[2] = {0, 0};
  const char* place_inner_ = nullptr;
};

}  // namespace

namespace trace_detail {

std::uint64_t pickle_budget(std::size_t input_bytes, const TraceReadLimits& limits) {
  const std::uint64_t per_byte = limits.pickle_bytes_per_input_byte;
  const std::uint64_t scaled = per_byte != 0 && input_bytes > UINT64_MAX / per_byte ? UINT64_MAX : input_bytes * per_byte;
  return saturating_add(scaled, limits.pickle_slack_bytes);
}

Trace parse_snapshot(std::span<const std::uint8_t> bytes, std::string name, const std::string& source,
                     const TraceReadLimits& limits) {
  const Document doc = pickle::parse_pickle(bytes, source, pickle_budget(bytes.size(), limits));
  return SnapshotReader(doc, bytes.size(), source).read(std::move(name));
}

}  // namespace trace_detail

Trace parse_snapshot_pickle(std::span<const std::uint8_t> bytes, std::string name, const TraceReadLimits& limits) {
  const std::string source = name;
  return trace_detail::parse_snapshot(bytes, std::move(name), source, limits);
}

}  // namespace gmlake
