// torch.cuda.memory._record_memory_history() and _snapshot() with gmlake as PyTorch's allocator.
//
// History. The library records each pool's trace entries itself (gmlake_set_tracing; TracingAllocator: alloc,
// free_requested, free_completed, segment_map / segment_unmap from the backend's maps and unmaps, oom). After
// each gmlake call it makes, the extension drains them (gmlake_drain_trace) into c10 TraceEntry lists, one per
// device, and attaches the Python / C++ stack PyTorch's context recorder gathered for that call to the call's
// own entry (alloc: when >= RecordContext::ALLOC; free_requested: when == ALL). Stacks of live blocks are kept
// (when >= STATE) for the snapshot's blocks. At most alloc_trace_max_entries entries per device, oldest dropped.
//
// Snapshot. Segments come from the library (gmlake_get_segments: caching's segments, expandable's mapped
// range, gmlake's mapped runs of each arena, each with its blocks covering it; private pools' too, with their
// pool id), device traces from the history. Times: microseconds since the Unix epoch, as PyTorch's.
//
// Thread safety: every member may be called from any thread; one mutex guards the entries and the stacks. The
// context recorder (which takes the GIL) is called outside it and outside gmlake's own locks.
// Part of the extension's one translation unit (torch_allocator.cpp includes it).
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "c_api_errors.h"

namespace gmlake_torch {

namespace cda = c10::CachingDeviceAllocator;

class MemoryHistory {
 public:
  static MemoryHistory& instance() {
    static auto* history = new MemoryHistory();  // never destroyed: frees may come at exit
    return *history;
  }

  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // c10's recordHistory. Turning it on asks every device's pools to trace (a pool made later starts traced);
  // off stops them. clear_history drops the entries kept so far.
  void record(bool enabled, cda::CreateContextFn recorder, std::size_t max_entries, cda::RecordContext when,
              bool clear_history, const std::vector<std::string>& skip_actions) {
    {
      std::lock_guard lock(mutex_);
      recorder_.store(enabled ? recorder : nullptr, std::memory_order_relaxed);
      when_.store(enabled ? when : cda::RecordContext::NEVER, std::memory_order_relaxed);
      max_entries_ = max_entries == 0 ? 1 : max_entries;
      skip_.assign(skip_actions.begin(), skip_actions.end());
      if (clear_history) {
        traces_.clear();
        live_contexts_.clear();
      }
    }
    const int devices = static_cast<int>(c10::cuda::device_count());
    for (int d = 0; d < devices && d < GMLAKE_MAX_DEVICES; ++d) {
      check(g_api.gmlake_set_tracing(d, enabled ? kLibraryEntries : 0), "set_tracing");
    }
    enabled_.store(enabled, std::memory_order_relaxed);
  }

  // The stack to attach to an allocation, gathered now (null unless asked for). Call outside any lock.
  std::shared_ptr<c10::GatheredContext> context_for_alloc() const {
    const cda::CreateContextFn recorder = recorder_.load(std::memory_order_relaxed);
    const cda::RecordContext when = when_.load(std::memory_order_relaxed);
    return recorder != nullptr && when >= cda::RecordContext::STATE ? recorder() : nullptr;
  }
  std::shared_ptr<c10::GatheredContext> context_for_free() const {
    const cda::CreateContextFn recorder = recorder_.load(std::memory_order_relaxed);
    const cda::RecordContext when = when_.load(std::memory_order_relaxed);
    return recorder != nullptr && when == cda::RecordContext::ALL ? recorder() : nullptr;
  }

  // After a gmlake call on `device` that allocated (allocated = true) or freed the block at `ptr` (null for
  // calls about no block, as empty_cache): drains the library's entries and keeps them, `context` on the
  // call's own entry.
  void after_call(int device, void* ptr, bool allocated, std::shared_ptr<c10::GatheredContext> context) {
    std::vector<gmlake_trace_event> events(kDrainBatch);
    std::lock_guard lock(mutex_);
    if (ptr != nullptr) {
      if (allocated && context != nullptr) live_contexts_[ptr] = context;
      if (!allocated) live_contexts_.erase(ptr);
    }
    for (;;) {
      std::size_t count = 0;
      if (g_api.gmlake_drain_trace(device, events.data(), events.size(), &count) != GMLAKE_OK) return;
      for (std::size_t i = 0; i < count; ++i) keep(device, events[i], ptr, allocated, context);
      if (count < events.size()) return;
    }
  }

  // The stack recorded when the live block at `ptr` was allocated (null when none was).
  std::shared_ptr<c10::GatheredContext> context_of(std::size_t ptr) {
    std::lock_guard lock(mutex_);
    const auto it = live_contexts_.find(reinterpret_cast<void*>(ptr));
    return it == live_contexts_.end() ? nullptr : it->second;
  }

  // The entries kept, one list per device (0 .. devices - 1).
  std::vector<std::vector<cda::TraceEntry>> traces(int devices) {
    std::lock_guard lock(mutex_);
    std::vector<std::vector<cda::TraceEntry>> out(static_cast<std::size_t>(devices));
    for (auto& [device, entries] : traces_) {
      if (device < devices) out[static_cast<std::size_t>(device)].assign(entries.begin(), entries.end());
    }
    return out;
  }

 private:
  static constexpr std::uint64_t kLibraryEntries = 1 << 16;  // undrained entries the library keeps per pool
  static constexpr std::size_t kDrainBatch = 256;

  static const char* action_name(int action) {
    switch (action) {
      case GMLAKE_TRACE_ALLOC: return "alloc";
      case GMLAKE_TRACE_FREE_REQUESTED: return "free_requested";
      case GMLAKE_TRACE_FREE_COMPLETED: return "free_completed";
      case GMLAKE_TRACE_SEGMENT_ALLOC: return "segment_alloc";
      case GMLAKE_TRACE_SEGMENT_FREE: return "segment_free";
      case GMLAKE_TRACE_SEGMENT_MAP: return "segment_map";
      case GMLAKE_TRACE_SEGMENT_UNMAP: return "segment_unmap";
      default: return "oom";
    }
  }

  static cda::TraceEntry::Action action_of(int action) {
    switch (action) {
      case GMLAKE_TRACE_ALLOC: return cda::TraceEntry::ALLOC;
      case GMLAKE_TRACE_FREE_REQUESTED: return cda::TraceEntry::FREE_REQUESTED;
      case GMLAKE_TRACE_FREE_COMPLETED: return cda::TraceEntry::FREE_COMPLETED;
      case GMLAKE_TRACE_SEGMENT_ALLOC: return cda::TraceEntry::SEGMENT_ALLOC;
      case GMLAKE_TRACE_SEGMENT_FREE: return cda::TraceEntry::SEGMENT_FREE;
      case GMLAKE_TRACE_SEGMENT_MAP: return cda::TraceEntry::SEGMENT_MAP;
      case GMLAKE_TRACE_SEGMENT_UNMAP: return cda::TraceEntry::SEGMENT_UNMAP;
      default: return cda::TraceEntry::OOM;
    }
  }

  // Keeps one drained entry (mutex_ held).
  void keep(int device, const gmlake_trace_event& e, void* ptr, bool allocated,
            const std::shared_ptr<c10::GatheredContext>& context) {
    const char* name = action_name(e.action);
    for (const std::string& skip : skip_) {
      if (skip == name) return;
    }
    std::shared_ptr<c10::GatheredContext> stack;
    const bool own = ptr != nullptr && e.addr == reinterpret_cast<std::uintptr_t>(ptr);
    const bool stacks_in_trace = when_.load(std::memory_order_relaxed) >= cda::RecordContext::ALLOC;
    if (own && allocated && e.action == GMLAKE_TRACE_ALLOC && stacks_in_trace) stack = context;
    if (own && !allocated && e.action == GMLAKE_TRACE_FREE_REQUESTED) stack = context;
    cda::TraceEntry entry(action_of(e.action), static_cast<c10::DeviceIndex>(device), e.addr, e.size_bytes,
                          reinterpret_cast<void*>(e.stream), c10::cuda::MempoolId_t{0, 0}, 0, std::move(stack));
    entry.time_.t_ = static_cast<time_t>(e.time_us);  // PyTorch's snapshot reads time_us from t_
    std::deque<cda::TraceEntry>& entries = traces_[device];
    entries.push_back(std::move(entry));
    while (entries.size() > max_entries_) entries.pop_front();
  }

  std::atomic<bool> enabled_{false};
  std::mutex mutex_;
  std::atomic<cda::CreateContextFn> recorder_{nullptr};  // set while enabled; read outside the mutex
  std::atomic<cda::RecordContext> when_{cda::RecordContext::NEVER};
  std::size_t max_entries_ = 1;
  std::vector<std::string> skip_;
  std::unordered_map<int, std::deque<cda::TraceEntry>> traces_;
  std::unordered_map<void*, std::shared_ptr<c10::GatheredContext>> live_contexts_;
};

// c10's SnapshotInfo of every device's pools now (only pool `pool` when it is not (0, 0)), with the history's
// traces when asked.
inline c10::cuda::CUDACachingAllocator::SnapshotInfo gmlake_snapshot(c10::cuda::MempoolId_t pool,
                                                                     bool include_traces) {
  c10::cuda::CUDACachingAllocator::SnapshotInfo out{};
  const int devices = std::min<int>(static_cast<int>(c10::cuda::device_count()), GMLAKE_MAX_DEVICES);
  MemoryHistory& history = MemoryHistory::instance();
  for (int d = 0; d < devices; ++d) {
    std::vector<gmlake_segment> segments;
    std::vector<gmlake_block> blocks;
    std::size_t n_segments = 0, n_blocks = 0;
    for (;;) {  // the counts may grow between the two calls: ask again until both fit
      check(g_api.gmlake_get_segments(d, segments.data(), segments.size(), &n_segments, blocks.data(), blocks.size(),
                               &n_blocks),
            "get_segments");
      if (n_segments <= segments.size() && n_blocks <= blocks.size()) break;
      segments.resize(n_segments + 8);
      blocks.resize(n_blocks + 64);
    }
    for (std::size_t i = 0; i < n_segments; ++i) {
      const gmlake_segment& s = segments[i];
      const bool wanted = (pool.first == 0 && pool.second == 0) ||
                          (s.pool.first == pool.first && s.pool.second == pool.second);
      if (!wanted) continue;
      cda::SegmentInfo segment;
      segment.device = static_cast<c10::DeviceIndex>(d);
      segment.address = s.address;
      segment.total_size = s.size_bytes;
      segment.stream = reinterpret_cast<void*>(s.stream);
      segment.is_large = s.is_large != 0;
      segment.is_expandable = s.is_expandable != 0;
      segment.owner_private_pool_id = {s.pool.first, s.pool.second};
      for (std::uint64_t b = s.first_block; b < s.first_block + s.num_blocks; ++b) {
        const gmlake_block& block = blocks[b];
        cda::BlockInfo info;
        info.size = block.size_bytes;
        info.requested_size = block.requested_bytes;
        info.allocated = block.state == 0;
        info.active = block.state != 2;
        if (info.active) info.context_when_allocated = history.context_of(block.address);
        if (info.allocated) segment.allocated_size += block.size_bytes;
        if (info.active) {
          segment.active_size += block.size_bytes;
          segment.requested_size += block.requested_bytes;
        }
        segment.blocks.push_back(std::move(info));
      }
      out.segments.push_back(std::move(segment));
    }
  }
  if (include_traces) out.device_traces = history.traces(devices);
  out.config_metadata.expandable_segments = false;
  out.config_metadata.last_allocator_settings = "gmlake";
  out.config_metadata.max_split_size = SIZE_MAX;
  return out;
}

}  // namespace gmlake_torch
