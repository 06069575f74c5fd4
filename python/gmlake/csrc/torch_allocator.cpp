// gmlake as PyTorch's c10 CUDA allocator: a small extension compiled against the installed torch (by
// torch.utils.cpp_extension, see gmlake/_extension.py), so that no PyTorch rebuild is needed.
//
// What it adds over the plain CUDAPluggableAllocator (ctypes) path:
//   - Tensor.record_stream reaches gmlake (gmlake_record_stream): memory used by a second stream is reused only
//     after that stream's work up to the free has finished (PyTorch's own record_stream contract);
//   - torch.cuda.memory_stats() / memory_reserved() / max_memory_allocated() ... report gmlake's pool;
//   - out of memory raises torch.OutOfMemoryError (PyTorch 2.11's pluggable path makes a tensor without memory);
//   - the pluggable layer's per-allocation std::function calls, mutex and hash map are skipped: a block's
//     DataPtr frees itself straight into the C API (gmlake keeps the block's size and stream itself);
//   - PyTorch's own caching allocator stays reachable: while route_to_native(true) is set (gmlake.torch.native()),
//     allocations come from it instead. Each block goes back to the allocator that made it (its DataPtr's
//     deleter says which), so the switch may flip at any time. It serves code paths gmlake does not handle yet,
//     and step-by-step A/B timing of both allocators in one process (bench/torch/train.py --alloc ab).
//
// It subclasses torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator so that every virtual function of
// c10's CUDAAllocator this file does not override keeps the plug-in's behaviour in whatever PyTorch 2.x it is
// compiled against. The C API (include/gmlake/gmlake.h) is found in the libgmlake_c.so the Python package loaded
// already (dlopen of the same path gives the same instance), so both front ends share one set of pools.
//
// Thread safety: every entry point may be called from any thread; gmlake's C API serializes per device. The
// raw_alloc table (pointers of raw_alloc, whose raw_delete carries no device) has its own mutex.
#include <dlfcn.h>

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include <utility>

#include "c_api_errors.h"
#include "gmlake/gmlake.h"
#include "memory_history.h"
#include "private_pools.h"

namespace gmlake_torch {
namespace {

namespace cca = c10::cuda::CUDACachingAllocator;
using PluggableBase = torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator;

constexpr std::size_t kAll = 0;  // c10's StatType::AGGREGATE: the index of a stat's all-pools figure

// PyTorch's own caching allocator, as c10 held it before install(); allocations go to it while g_route_native.
cca::CUDAAllocator* g_native = nullptr;
std::atomic<bool> g_route_native{false};
std::atomic<bool> g_native_used{false};  // set once anything was routed: only then do frees and caches look there

// One deleter per device, since a DataPtr's deleter receives only its context (the block's address).
// With the memory history on, the call's entries are drained and its stack attached (memory_history.h).
template <int kDevice>
void free_on_device(void* ptr) {
  MemoryHistory& history = MemoryHistory::instance();
  if (!history.enabled()) {
    g_api.gmlake_free(ptr, 0, kDevice, 0);
  } else {
    std::shared_ptr<c10::GatheredContext> context;
    try {
      context = history.context_for_free();
    } catch (...) {  // a deleter must not throw: the free goes on without a stack
    }
    g_api.gmlake_free(ptr, 0, kDevice, 0);
    try {
      history.after_call(kDevice, ptr, /*allocated=*/false, std::move(context));
    } catch (...) {
    }
  }
  if (g_api.gmlake_last_error_code() != GMLAKE_OK) {  // a deleter must not throw: report and go on
    std::fprintf(stderr, "gmlake: freeing a tensor's block failed: %s\n", g_api.gmlake_last_error());
  }
}

template <std::size_t... kDevices>
constexpr std::array<c10::DeleterFnPtr, sizeof...(kDevices)> make_deleters(std::index_sequence<kDevices...>) {
  return {&free_on_device<static_cast<int>(kDevices)>...};
}
constexpr auto kDeleters = make_deleters(std::make_index_sequence<GMLAKE_MAX_DEVICES>{});

// The deleter of `device`'s blocks.
c10::DeleterFnPtr deleter_of(int device) {
  TORCH_CHECK(device >= 0 && device < GMLAKE_MAX_DEVICES, "gmlake: device ", device, " is beyond the ",
              GMLAKE_MAX_DEVICES, " devices gmlake serves");
  return kDeleters[static_cast<std::size_t>(device)];
}

bool is_ours(c10::DeleterFnPtr deleter) {
  for (c10::DeleterFnPtr d : kDeleters) {
    if (d == deleter) return true;
  }
  return false;
}

c10::DeviceIndex current_device() {
  c10::DeviceIndex device = 0;
  C10_CUDA_CHECK(c10::cuda::GetDevice(&device));
  return device;
}

std::uint64_t stream_id(cudaStream_t stream) { return reinterpret_cast<std::uintptr_t>(stream); }

// A block from the device's main pool, or from the private pool an active beginAllocateToPool routes this stream
// to (private_pools.h); with the memory history on, the call's entries are kept with its stack.
void* allocate_raw(std::size_t size_bytes, c10::DeviceIndex device, cudaStream_t stream) {
  TORCH_CHECK(device >= 0 && device < GMLAKE_MAX_DEVICES, "gmlake: device ", static_cast<int>(device),
              " is beyond the ", GMLAKE_MAX_DEVICES, " devices gmlake serves");
  if (size_bytes == 0) return nullptr;
  MemoryHistory& history = MemoryHistory::instance();
  const bool traced = history.enabled();
  auto context = traced ? history.context_for_alloc() : nullptr;
  void* ptr = nullptr;
  if (const std::optional<MempoolId> pool = PrivatePools::instance().route(device, stream)) {
    try {
      ptr = PrivatePools::instance().allocate(size_bytes, device, stream, *pool);
    } catch (...) {
      if (traced) history.after_call(device, nullptr, true, nullptr);  // the oom entry
      throw;
    }
  } else {
    ptr = g_api.gmlake_malloc(size_bytes, device, stream_id(stream));
    if (ptr == nullptr && g_api.gmlake_last_error_code() == GMLAKE_ERROR_OUT_OF_MEMORY) {
      const std::string main_error = g_api.gmlake_last_error();  // what the user sees if no MemPool can help either
      ptr = PrivatePools::instance().allocate_on_oom(size_bytes, device, stream);
      if (ptr == nullptr) {
        if (traced) history.after_call(device, nullptr, /*allocated=*/true, nullptr);  // the oom entry
        TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory (gmlake, malloc): ", main_error);
      }
    }
  }
  if (traced) history.after_call(device, ptr, /*allocated=*/true, std::move(context));
  if (ptr == nullptr) raise_last_error("malloc");
  return ptr;
}

using DeviceStats = decltype(std::declval<PluggableBase&>().getDeviceStats(0));

// The DeviceStats member of a gauge's PyTorch key (the stat table's torch_key, include/gmlake/stat_fields.h);
// a gauge without a key ("") is not PyTorch's. A key this function does not know is a table entry the extension
// cannot report: an error, so that a new key cannot be dropped silently.
void set_torch_gauge(DeviceStats& out, std::string_view key, const gmlake_gauge& g) {
  if (key.empty()) return;
  auto set = [&](auto& stat) {
    stat[kAll].current = g.current;
    stat[kAll].peak = g.peak;
  };
  if (key == "allocated_bytes.all") return set(out.allocated_bytes);
  if (key == "reserved_bytes.all") return set(out.reserved_bytes);
  if (key == "active_bytes.all") return set(out.active_bytes);
  if (key == "requested_bytes.all") return set(out.requested_bytes);
  if (key == "inactive_split_bytes.all") return set(out.inactive_split_bytes);
  TORCH_CHECK(false, "gmlake: the stat table names a PyTorch gauge key the extension does not know: ", key);
}

// The same for a counter's key.
void set_torch_counter(DeviceStats& out, std::string_view key, std::int64_t value) {
  if (key.empty()) return;
  if (key == "num_alloc_retries") out.num_alloc_retries = value;
  else if (key == "num_ooms") out.num_ooms = value;
  else if (key == "allocation.all.allocated") out.allocation[kAll].allocated = value;
  else if (key == "allocation.all.freed") out.allocation[kAll].freed = value;
  else if (key == "num_device_alloc") out.num_device_alloc = value;
  else if (key == "num_device_free") out.num_device_free = value;
  else TORCH_CHECK(false, "gmlake: the stat table names a PyTorch counter key the extension does not know: ", key);
}

class GmlakeAllocator final : public PluggableBase {
 public:
  // The base class's functions (used only by the virtual functions not overridden here) call the C API too.
  GmlakeAllocator()
      : PluggableBase(
            [](std::size_t size, int device, cudaStream_t stream) {
              return g_api.gmlake_malloc(size, device, stream_id(stream));
            },
            [](void* ptr, std::size_t size, int device, cudaStream_t stream) {
              g_api.gmlake_free(ptr, size, device, stream_id(stream));
            }) {
    for (auto& f : fractions_) f.store(1.0);
  }

  // PyTorch calls this once, when CUDA starts; the native allocator is readied too (it holds no memory yet).
  void init(int device_count) override {
    PluggableBase::init(device_count);
    if (g_native != nullptr) g_native->init(device_count);
  }

  c10::DataPtr allocate(std::size_t size_bytes) override {
    if (g_route_native.load(std::memory_order_relaxed)) return g_native->allocate(size_bytes);
    const c10::DeviceIndex device = current_device();
    void* ptr = allocate_raw(size_bytes, device, c10::cuda::getCurrentCUDAStream(device).stream());
    return {ptr, ptr, kDeleters[static_cast<std::size_t>(device)], c10::Device(c10::DeviceType::CUDA, device)};
  }

  // The deleter of the current device's blocks, as allocate() gives them: PyTorch compares a storage's deleter
  // with it (CUDA graph trees' _free_And_Remove_DeleterFn, _has_Standard_Deleter; Allocator::raw_deallocate
  // frees raw_allocate's blocks with it).
  c10::DeleterFnPtr raw_deleter() const override { return deleter_of(current_device()); }

  void* raw_alloc(std::size_t size_bytes) override {
    if (g_route_native.load(std::memory_order_relaxed)) return remember(g_native->raw_alloc(size_bytes), kNative);
    const c10::DeviceIndex device = current_device();
    return raw_alloc_on(size_bytes, device, c10::cuda::getCurrentCUDAStream(device).stream());
  }

  void* raw_alloc_with_stream(std::size_t size_bytes, cudaStream_t stream) override {
    if (g_route_native.load(std::memory_order_relaxed)) {
      return remember(g_native->raw_alloc_with_stream(size_bytes, stream), kNative);
    }
    return raw_alloc_on(size_bytes, current_device(), stream);
  }

  void raw_delete(void* ptr) override { raw_delete_any(ptr); }

  void recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream stream) override {
    if (ptr.get() == nullptr) return;
    if (!is_ours(ptr.get_deleter())) {  // the native allocator's block, or no allocator's (ignored, as PyTorch does)
      if (g_native_used.load()) g_native->recordStream(ptr, stream);
      return;
    }
    check(g_api.gmlake_record_stream(ptr.get_context(), ptr.device().index(), stream_id(stream.stream())),
          "record_stream");
  }

  void emptyCache(c10::cuda::MempoolId_t mempool_id) override {
    if (g_native_used.load()) g_native->emptyCache(mempool_id);
    MemoryHistory& history = MemoryHistory::instance();
    if (mempool_id.first != 0 || mempool_id.second != 0) {  // one private pool (a MemPool's empty_cache)
      const c10::DeviceIndex device = current_device();
      PrivatePools::instance().empty_cache(device, mempool_id);
      if (history.enabled()) history.after_call(device, nullptr, false, nullptr);
      return;
    }
    const int devices = static_cast<int>(c10::cuda::device_count());
    for (int d = 0; d < devices && d < GMLAKE_MAX_DEVICES; ++d) {
      check(g_api.gmlake_empty_cache(d), "empty_cache");
      if (history.enabled()) history.after_call(d, nullptr, false, nullptr);
    }
  }

  // torch.cuda.set_per_process_memory_fraction: gmlake's cap on the device's main pool (gmlake_set_cap_bytes),
  // fraction x the device's total memory, as PyTorch bounds its reserved bytes; 1 lifts the cap (the device holds
  // no more anyway), 0 allows nothing. Under a cap gmlake puts memory first (docs/design.md).
  void setMemoryFraction(double fraction, c10::DeviceIndex device) override {
    TORCH_CHECK_VALUE(fraction >= 0 && fraction <= 1, "invalid fraction: ", fraction, ", please set within [0, 1]");
    TORCH_CHECK_VALUE(device >= 0 && device < GMLAKE_MAX_DEVICES, "gmlake: invalid device ", static_cast<int>(device));
    std::size_t free_bytes = 0, total_bytes = 0;
    {
      c10::cuda::CUDAGuard guard(device);
      C10_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    }
    const std::uint64_t cap_bytes =
        fraction >= 1.0 ? 0 : std::max<std::uint64_t>(1, static_cast<std::uint64_t>(fraction * static_cast<double>(total_bytes)));
    check(g_api.gmlake_set_cap_bytes(device, cap_bytes), "set_cap_bytes");
    if (g_native_used.load()) g_native->setMemoryFraction(fraction, device);
    fractions_[device].store(fraction);
  }

  double getMemoryFraction(c10::DeviceIndex device) override {
    TORCH_CHECK_VALUE(device >= 0 && device < GMLAKE_MAX_DEVICES, "gmlake: invalid device ", static_cast<int>(device));
    return fractions_[device].load();
  }

  // --- Memory history and snapshots (memory_history.h): torch.cuda.memory._record_memory_history(),
  // _snapshot(), _dump_snapshot(), and what memory_viz reads.
  void recordHistory(bool enabled, cca::CreateContextFn context_recorder, std::size_t alloc_trace_max_entries,
                     cca::RecordContext when, bool clear_history,
                     const std::vector<std::string>& skip_actions) override {
    MemoryHistory::instance().record(enabled, context_recorder, alloc_trace_max_entries, when, clear_history,
                                     skip_actions);
  }

  bool isHistoryEnabled() override { return MemoryHistory::instance().enabled(); }

  cca::SnapshotInfo snapshot(c10::cuda::MempoolId_t mempool_id, bool include_traces) override {
    return gmlake_snapshot(mempool_id, include_traces);
  }

  // --- Private pools (private_pools.h): torch.cuda.MemPool, torch.cuda.graph and CUDA graph trees.
  void createOrIncrefPool(c10::DeviceIndex device, c10::cuda::MempoolId_t mempool_id,
                          std::shared_ptr<cca::CUDAAllocator> allocator) override {
    TORCH_CHECK(allocator == nullptr || allocator.get() == this,
                "gmlake: a MemPool with an allocator of its own is not served by gmlake (create it without one)");
    PrivatePools::instance().create_or_incref(device, mempool_id);
  }

  // MemPool(use_on_oom=True): when the device's main pool runs out, the allocation is served by that MemPool as a
  // last resort (private_pools.h); False (what MemPool's destructor sets) stops it.
  void setUseOnOOM(c10::DeviceIndex device, c10::cuda::MempoolId_t mempool_id, bool use_on_oom) override {
    PrivatePools::instance().set_use_on_oom(device, mempool_id, use_on_oom);
  }

  void beginAllocateToPool(c10::DeviceIndex device, c10::cuda::MempoolId_t mempool_id,
                           std::function<bool(cudaStream_t)> filter) override {
    PrivatePools::instance().begin_allocate_to(device, mempool_id, std::move(filter));
  }

  void endAllocateToPool(c10::DeviceIndex device, c10::cuda::MempoolId_t mempool_id) override {
    PrivatePools::instance().end_allocate_to(device, mempool_id);
  }

  void releasePool(c10::DeviceIndex device, c10::cuda::MempoolId_t mempool_id) override {
    PrivatePools::instance().release(device, mempool_id);
  }

  int getPoolUseCount(c10::DeviceIndex device, c10::cuda::MempoolId_t mempool_id) override {
    return PrivatePools::instance().use_count(device, mempool_id);
  }

  bool checkPoolLiveAllocations(c10::DeviceIndex device, c10::cuda::MempoolId_t mempool_id,
                                const std::unordered_set<void*>& expected_live_allocations) override {
    return PrivatePools::instance().live_allocations_are(device, mempool_id, expected_live_allocations);
  }

  // The pool's allocated blocks now: what cudagraph trees keep at the end of each recording.
  std::shared_ptr<cca::AllocatorState> getCheckpointState(c10::DeviceIndex device,
                                                          c10::cuda::MempoolId_t id) override {
    auto state = std::make_shared<GmlakePoolState>();
    state->device = device;
    state->pool = id;
    state->blocks = PrivatePools::instance().allocated_blocks(device, id);
    return state;
  }

  // CUDA graph trees, before recording a graph after replaying others (PyTorch's semantics): every block allocated
  // in the pool now is freed (ptrs_freed) and every block allocated at the checkpoint is made again at its address
  // (dataptrs_allocd, with this allocator's deleter; PyTorch gives each to the storage that still lives, releases
  // the others' and raw_deletes those whose tensors died). A pointer may be in both lists.
  cca::CheckpointDelta setCheckpointPoolState(c10::DeviceIndex device,
                                              std::shared_ptr<cca::AllocatorState> pps) override {
    const auto* state = dynamic_cast<const GmlakePoolState*>(pps.get());
    TORCH_CHECK(state != nullptr, "gmlake: setCheckpointPoolState of a state gmlake's getCheckpointState did not make");
    TORCH_CHECK(state->device == device, "gmlake: setCheckpointPoolState on device ", static_cast<int>(device),
                " of a checkpoint taken on device ", static_cast<int>(state->device));
    cca::CheckpointDelta delta;
    for (const gmlake_block& b : PrivatePools::instance().restore(device, state->pool, state->blocks)) {
      delta.ptrs_freed.push_back(reinterpret_cast<void*>(b.address));
    }
    for (const gmlake_block& b : state->blocks) {
      void* ptr = reinterpret_cast<void*>(b.address);
      delta.dataptrs_allocd.emplace_back(ptr, ptr, deleter_of(device), c10::Device(c10::DeviceType::CUDA, device));
    }
    MemoryHistory& history = MemoryHistory::instance();
    if (history.enabled()) {  // drains the restore's entries; the stacks of the blocks not made again go
      history.after_call(device, nullptr, false, nullptr);
      std::unordered_set<void*> remade;
      for (const c10::DataPtr& p : delta.dataptrs_allocd) remade.insert(p.get());
      for (void* ptr : delta.ptrs_freed) {
        if (remade.count(ptr) == 0) history.after_call(device, ptr, false, nullptr);
      }
    }
    return delta;
  }

  // The largest block an allocation could have now, as PyTorch's own allocator answers it: a zero guess becomes the
  // device's free memory (cudaMemGetInfo), then raised to the bytes the pool holds unused (reserved - allocated:
  // gmlake stitches any of its idle or free pages into one range, where PyTorch's largest cached block stands).
  // cuDNN keeps only the convolution plans whose workspace fits this (ATen's Conv_v8.cpp get_available_workspace,
  // Conv_v7.cpp getMaxWorkspaceSize): 0 here would leave it the plans that need no workspace.
  void cacheInfo(c10::DeviceIndex device, std::size_t* largest_block) override {
    if (*largest_block == 0) {
      c10::cuda::CUDAGuard guard(device);
      std::size_t free_bytes = 0, total_bytes = 0;
      if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
        *largest_block = free_bytes;
      } else {
        (void)cudaGetLastError();  // an unknown answer stays 0, as before: cuDNN then takes no-workspace plans
      }
    }
    gmlake_stats s{};
    if (g_api.gmlake_get_stats(device, &s) == GMLAKE_OK && s.reserved_bytes.current > s.allocated_bytes.current) {
      *largest_block = std::max(*largest_block,
                                static_cast<std::size_t>(s.reserved_bytes.current - s.allocated_bytes.current));
    }
  }

  // torch.cuda.memory_stats(): each statistic of the stat table (include/gmlake/stat_fields.h) that has a PyTorch
  // key, under that key; gmlake.torch.memory_stats() reports the same keys from the same table.
  decltype(std::declval<PluggableBase&>().getDeviceStats(0)) getDeviceStats(c10::DeviceIndex device) override {
    gmlake_stats s{};
    check(g_api.gmlake_get_stats(device, &s), "get_stats");
    decltype(std::declval<PluggableBase&>().getDeviceStats(0)) out{};
#define GMLAKE_TORCH_GAUGE(name, torch_key) set_torch_gauge(out, torch_key, s.name);
#define GMLAKE_TORCH_COUNTER(name, torch_key) set_torch_counter(out, torch_key, static_cast<std::int64_t>(s.name));
    GMLAKE_GAUGE_FIELDS(GMLAKE_TORCH_GAUGE)
    GMLAKE_COUNTER_FIELDS(GMLAKE_TORCH_COUNTER)
#undef GMLAKE_TORCH_GAUGE
#undef GMLAKE_TORCH_COUNTER
    // PyTorch's count of allocations not freed; gmlake.torch.memory_stats() reports it the same way.
    out.allocation[kAll].current = out.allocation[kAll].allocated - out.allocation[kAll].freed;
    return out;
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    if (g_native_used.load()) g_native->resetPeakStats(device);
    check(g_api.gmlake_reset_peak_stats(device), "reset_peak_stats");
  }

  void resetAccumulatedStats(c10::DeviceIndex /*device*/) override {}  // gmlake's counters are monotonic

  std::string name() override { return "gmlake"; }

  // --- IPC: torch.multiprocessing's storage._share_cuda_ / _new_shared_cuda (gmlake_ipc_export / _import /
  // _close; include/gmlake/ipc.h). PyTorch calls both with the storage's device current. The receiving process
  // must run gmlake too; a handle of PyTorch's own allocator (a sender without gmlake) goes to it.
  decltype(std::declval<PluggableBase&>().shareIpcHandle(nullptr)) shareIpcHandle(void* ptr) override {
    const c10::DeviceIndex device = current_device();
    std::size_t handle_bytes = 0, offset_bytes = 0;
    const int status = g_api.gmlake_ipc_export(ptr, device, nullptr, &handle_bytes, &offset_bytes);
    if (status == GMLAKE_ERROR_INVALID_POINTER && g_native_used.load()) return g_native->shareIpcHandle(ptr);
    check(status, "ipc_export");
    std::string handle(handle_bytes, '\0');
    check(g_api.gmlake_ipc_export(ptr, device, handle.data(), &handle_bytes, &offset_bytes), "ipc_export");
    handle.resize(handle_bytes);
    decltype(std::declval<PluggableBase&>().shareIpcHandle(nullptr)) out{};
    out.offset = static_cast<std::ptrdiff_t>(offset_bytes);
    out.handle = std::move(handle);
    return out;
  }

  std::shared_ptr<void> getIpcDevPtr(std::string handle) override {
    if (handle.rfind("GMLKIPC1", 0) != 0) return g_native->getIpcDevPtr(std::move(handle));  // PyTorch's own
    const int device = current_device();
    void* ptr = nullptr;
    check(g_api.gmlake_ipc_import(handle.data(), handle.size(), device, &ptr), "ipc_import");
    return std::shared_ptr<void>(ptr, [device](void* p) {
      if (g_api.gmlake_ipc_close(p, device) != GMLAKE_OK) {  // a deleter must not throw: report and go on
        std::fprintf(stderr, "gmlake: closing an imported block failed: %s\n", g_api.gmlake_last_error());
      }
    });
  }

 private:
  static constexpr int kNative = -1;  // the raw_alloc table's device for a block of PyTorch's own allocator
  std::array<std::atomic<double>, GMLAKE_MAX_DEVICES> fractions_;  // setMemoryFraction's, 1.0 until set

  void* raw_alloc_on(std::size_t size_bytes, c10::DeviceIndex device, cudaStream_t stream) {
    return remember(allocate_raw(size_bytes, device, stream), device);
  }

  static void* remember(void* ptr, int device) {
    if (ptr != nullptr) {
      std::lock_guard lock(raw_mutex());
      raw_devices()[ptr] = device;
    }
    return ptr;
  }

  // raw_delete receives no device: raw_alloc remembers it (raw_alloc serves workspaces: rare, not per tensor).
  // A pointer raw_alloc did not return is a block allocate() made on the current device: CUDA graph trees free
  // the blocks of a restored checkpoint whose tensors died this way (and _free_And_Remove_DeleterFn's).
  static void raw_delete_any(void* ptr) {
    if (ptr == nullptr) return;
    std::optional<int> device;
    {
      std::lock_guard lock(raw_mutex());
      auto it = raw_devices().find(ptr);
      if (it != raw_devices().end()) {
        device = it->second;
        raw_devices().erase(it);
      }
    }
    if (device == kNative) {
      g_native->raw_delete(ptr);
      return;
    }
    deleter_of(device ? *device : current_device())(ptr);
  }

  static std::mutex& raw_mutex() {
    static std::mutex m;
    return m;
  }
  static std::unordered_map<void*, int>& raw_devices() {
    static auto* table = new std::unordered_map<void*, int>();  // never destroyed: frees may come at exit
    return *table;
  }
};

std::shared_ptr<GmlakeAllocator> g_allocator;

// Makes gmlake PyTorch's CUDA allocator. Raises RuntimeError when PyTorch's allocator is initialized already.
void install(const std::string& library_path) {
  if (g_allocator) return;
  const std::string error = load_api(library_path, &g_api);
  TORCH_CHECK(error.empty(), error);
  g_native = cca::get();  // PyTorch's own caching allocator (nothing has been allocated through it yet)
  auto allocator = std::make_shared<GmlakeAllocator>();
  torch::cuda::CUDAPluggableAllocator::changeCurrentAllocator(allocator);
  g_allocator = std::move(allocator);
}

bool installed() { return g_allocator != nullptr && cca::get() == g_allocator.get(); }

// Sends later allocations to PyTorch's own caching allocator (true) or to gmlake (false); returns the previous
// setting. Process-wide, not per thread: autograd runs backward on its own threads.
bool route_to_native(bool on) {
  TORCH_CHECK(installed(), "gmlake: route_to_native needs gmlake installed as PyTorch's allocator");
  if (on) g_native_used.store(true);
  return g_route_native.exchange(on);
}

// The native allocator's figures for one device (zeros while nothing was routed to it).
pybind11::dict native_memory_stats(int device) {
  pybind11::dict out;
  std::int64_t reserved = 0, reserved_peak = 0, allocated = 0, allocated_peak = 0;
  if (g_native_used.load()) {
    const auto s = g_native->getDeviceStats(static_cast<c10::DeviceIndex>(device));
    reserved = s.reserved_bytes[kAll].current;
    reserved_peak = s.reserved_bytes[kAll].peak;
    allocated = s.allocated_bytes[kAll].current;
    allocated_peak = s.allocated_bytes[kAll].peak;
  }
  out["reserved_bytes.all.current"] = reserved;
  out["reserved_bytes.all.peak"] = reserved_peak;
  out["allocated_bytes.all.current"] = allocated;
  out["allocated_bytes.all.peak"] = allocated_peak;
  return out;
}

}  // namespace
}  // namespace gmlake_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "gmlake as PyTorch's c10 CUDA allocator";
  m.def("install", &gmlake_torch::install, "Makes gmlake PyTorch's CUDA allocator (path of libgmlake_c.so)");
  m.def("installed", &gmlake_torch::installed, "True when gmlake is PyTorch's current CUDA allocator");
  m.def("route_to_native", &gmlake_torch::route_to_native,
        "Sends later allocations to PyTorch's own caching allocator (True) or gmlake (False); returns the old value");
  m.def("native_memory_stats", &gmlake_torch::native_memory_stats,
        "reserved/allocated bytes (current, peak) of PyTorch's own allocator for one device");
}
