// The backend interface: physical memory and virtual address space, in the vocabulary of the CUDA virtual
// memory management API, so that each call maps one to one onto a driver call:
//
//   reserve       cuMemAddressReserve   mmap(PROT_NONE)                 (host)
//   address_free  cuMemAddressFree      munmap
//   create        cuMemCreate           a range of a memfd
//   release       cuMemRelease          fallocate(PUNCH_HOLE) of that range
//   map           cuMemMap              mmap(MAP_FIXED | MAP_SHARED) of the memfd range
//   unmap         cuMemUnmap            mmap(PROT_NONE, MAP_FIXED) over it again
//   set_access    cuMemSetAccess        mprotect(PROT_READ | PROT_WRITE)
//
// The contract, written once here and checked once in this base class for every backend (host, sim, cuda,
// wrappers): a violation throws Error(kInvalidArgument) before the backend is called, and nothing changes.
//   - Sizes are non-zero multiples of granularity_bytes(); addresses returned by reserve() are aligned to it.
//   - Every address passed in is a multiple of granularity_bytes(), and no range wraps around the address space.
//   - map(addr, size, chunk): [addr, addr+size) lies inside one live reservation, overlaps no live mapping,
//     and size == the chunk's size (a chunk is always mapped whole). One chunk may be mapped at several
//     addresses at once (aliasing): all of them show the same bytes.
//   - unmap(addr, size): [addr, addr+size) is exactly a union of whole live mappings.
//   - set_access(addr, size): [addr, addr+size) is fully covered by live mappings, and like unmap is exactly a
//     union of whole ones (cuMemSetAccess wants every allocation in the range whole); gives read/write access.
//     A fresh mapping has no access until set_access covers it. One call may cover many adjacent mappings
//     (CUDA charges per chunk, not per call: docs/benchmarks.md, "Reference: CUDA VMM call costs", gives the
//     figures).
//   - release(chunk): the chunk is live and mapped nowhere. address_free(addr, size): exactly one live
//     reservation, with no live mapping inside it.
// A backend whose OS or driver call fails throws BackendError (or OutOfMemoryError when the device or the
// OS has no memory left) and is left as it was before the call: no half-created chunk, no partial mapping.
//
// Thread safety: none. A Backend is used by one pool, which serializes its calls under its own lock.
// Counting: a call rejected by the contract check is not counted (it changed nothing and never reached the
// backend). A call that passed the check is counted once, before the backend runs, whether the backend then
// succeeds or throws: a failed driver call still cost a driver call. So counters()[c] is the number of calls
// of kind c the backend received; one set_access over many mappings counts once.
// Timing: counters().time_ns_of(c) adds up the wall time (steady clock) spent inside the backend's own calls
// of kind c, failed ones included, rejected ones not: the real cost of the driver calls on cuda, small elsewhere.
// A backend whose calls do no real work (sim) is constructed with CallTiming::kUntimed and reports 0: reading
// the clock twice (about 50 ns on a VM) would cost more than its calls and only inflate the allocator's time.
// The live chunks, mappings and reservations are kept in this class, so tests can ask, for any backend,
// whether a byte range is mapped with access (is_accessible) and whether anything leaked (live_chunks() == 0
// after teardown).
// Devices (the lake, docs/design.md): a chunk's memory lives on one device, DeviceId 0 .. device_count() - 1.
// create(size) makes it on device(), the backend's own device, which is also the one set_access gives access
// to; create(size, device) on any device of the backend (cuda: cuMemCreate with that location, mapped and
// accessed from the own device over the peer link). The base class keeps each live chunk's device and the live
// bytes per device. Imported chunks (import_chunk) are another process's memory: they count on no device of this
// backend (chunk_device() is kImportedDevice) but in live_imported_bytes(), and in live_chunk_bytes() (all).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "gmlake/stream_ordered_pool.h"

namespace gmlake {

// An opaque physical-memory handle (CUmemGenericAllocationHandle for cuda). 0 is never a valid handle.
struct ChunkHandle {
  std::uint64_t value = 0;
  friend bool operator==(ChunkHandle a, ChunkHandle b) = default;
};

// A chunk exported for another process (IPC, include/gmlake/ipc.h): a file descriptor of this process that
// stands for the chunk's memory, and where the chunk starts in it (bytes: 0 on cuda, the chunk's offset in the
// backend's memfd on host).
struct ExportedChunk {
  int fd = -1;
  std::uint64_t fd_offset_bytes = 0;
};

// Whether a backend's own calls are timed (BackendCounters::time_ns); see "Timing" above.
// kModelled: not timed either; the backend charges each call a modelled cost instead (sim:h100, sim:h200).
enum class CallTiming : std::uint8_t { kTimed, kUntimed, kModelled };

// A device of a backend: where a chunk's physical memory lives (the CUDA ordinal on cuda; 0 .. devices - 1 on
// sim; 0 on host).
using DeviceId = std::int32_t;
// The device of an imported chunk (import_chunk): memory another process made, on a device this backend does
// not count (the lake's loans live on the lender's device).
inline constexpr DeviceId kImportedDevice = -1;

enum class BackendCall : std::uint8_t { kReserve, kAddressFree, kCreate, kRelease, kMap, kUnmap, kSetAccess, kCount };
inline constexpr std::size_t kBackendCallKinds = static_cast<std::size_t>(BackendCall::kCount);
// "reserve", "address_free", "create", "release", "map", "unmap", "set_access".
std::string_view to_string(BackendCall call);

struct BackendCounters {
  std::array<std::uint64_t, kBackendCallKinds> calls{};    // indexed by BackendCall
  std::array<std::uint64_t, kBackendCallKinds> time_ns{};  // wall time inside those calls, indexed by BackendCall
  std::uint64_t operator[](BackendCall c) const { return calls[static_cast<std::size_t>(c)]; }
  std::uint64_t time_ns_of(BackendCall c) const { return time_ns[static_cast<std::size_t>(c)]; }
  // The wall time inside every backend call, all kinds together.
  std::uint64_t total_time_ns() const;
};

// Told of every map and unmap that succeeded, after the backend's tables changed: for tracing (PyTorch's
// segment_map / segment_unmap trace entries; TracingAllocator). Called on the thread of the call, under the
// pool's lock; must not throw and must not call the backend.
class BackendObserver {
 public:
  virtual ~BackendObserver() = default;
  virtual void on_map(std::uintptr_t addr, std::uint64_t size_bytes) noexcept = 0;
  virtual void on_unmap(std::uintptr_t addr, std::uint64_t size_bytes) noexcept = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // "host", "sim", "cuda", or a wrapper's name.
  virtual std::string_view name() const = 0;
  // The size every chunk and reservation is a multiple of (2 MiB on CUDA devices, kPageBytes by default).
  std::uint64_t granularity_bytes() const { return granularity_bytes_; }
  // True when mapped addresses may be read and written by this process's CPU (host backend).
  virtual bool host_accessible() const = 0;
  // True when import_chunk can take another process's chunks (host, cuda; a wrapper: its inner backend's). The
  // lake's borrower (Config::lake_socket) needs it.
  virtual bool imports_chunks() const { return false; }

  // Reserves `size_bytes` of virtual address space, aligned to granularity_bytes(). Nothing is mapped. Throws
  // OutOfMemoryError when no address space is left for it (host: mmap's ENOMEM; cuda: cuMemAddressReserve's
  // CUDA_ERROR_OUT_OF_MEMORY, about 128 TiB a process), which the gmlake policy answers with smaller arenas.
  std::uintptr_t reserve(std::uint64_t size_bytes);
  void address_free(std::uintptr_t addr, std::uint64_t size_bytes);
  // Creates one chunk of physical memory of `size_bytes` on device(). Throws OutOfMemoryError when none is left.
  ChunkHandle create(std::uint64_t size_bytes);
  // The same on `device`: device() or a peer of it. Throws Error(kInvalidArgument) when `device` is not
  // 0 .. device_count() - 1 or the backend cannot place chunks on it (checked before the backend is called, not
  // counted), OutOfMemoryError when that device has no memory left, BackendError when the driver refuses (cuda:
  // no peer access between the two devices).
  ChunkHandle create(std::uint64_t size_bytes, DeviceId device);
  void release(ChunkHandle chunk);
  void map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk);
  void unmap(std::uintptr_t addr, std::uint64_t size_bytes);
  void set_access(std::uintptr_t addr, std::uint64_t size_bytes);

  // --- IPC (include/gmlake/ipc.h). Neither call is counted in counters() (no BackendCall kind).
  // The file descriptor that stands for live `chunk`, for another process to take with pidfd_getfd: cuda
  // exports it once (cuMemExportToShareableHandle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) and keeps the fd
  // open until the chunk is released; host gives its memfd and the chunk's offset in it. The fd stays owned by
  // the backend. Throws Error(kInvalidArgument) for a chunk that is not live or a backend that cannot export
  // (sim, or a wrapper over it), BackendError when the driver refuses (a chunk created without the POSIX fd
  // handle type).
  ExportedChunk export_chunk(ChunkHandle chunk);
  // Sets every byte of live `chunk` to zero, so that a process it is lent to (the lake, include/gmlake/lake.h)
  // reads none of this process's earlier bytes. host: fallocate(PUNCH_HOLE) of its range in the memfd (the
  // kernel hands zeroed pages at the next touch; no pass over the bytes, and a range the backend created is
  // already a hole: punched at release or new). cuda: the chunk mapped at a scratch range, cuMemsetD8 over it,
  // the context synchronized, unmapped and the range freed (cuMemCreate's memory is not zeroed by the driver
  // within one process: it may hold what this process freed before). Not counted in counters(). Throws
  // Error(kInvalidArgument) for a chunk that is not live, is imported (only its exporter may scrub it) or is
  // mapped (its bytes are in use), or a backend that cannot (sim, or a wrapper over it); BackendError
  // (OutOfMemoryError when the scratch mapping finds no memory) when the driver or the OS refuses: the chunk is
  // then left as it was, live and unmapped, its bytes not known zero.
  void scrub(ChunkHandle chunk);
  // Makes a live chunk of `size_bytes` (a non-zero multiple of granularity_bytes()) from `fd`, a descriptor of
  // another process's exported chunk taken into this one: cuda imports it (cuMemImportFromShareableHandle) and
  // closes fd; host keeps fd, maps [fd_offset_bytes, +size_bytes) of it, and closes it at release. Takes
  // ownership of fd in every case, failures included. The chunk is then used as a created one (map, set_access,
  // unmap, release); its memory is the exporter's (release drops this process's reference only: on cuda the
  // memory lives until every importer and the exporter released it; on host release never punches the
  // exporter's file). The chunk counts on kImportedDevice (live_imported_bytes()), not on device().
  // Throws Error(kInvalidArgument) (bad size, backend that cannot import), BackendError.
  ChunkHandle import_chunk(int fd, std::uint64_t fd_offset_bytes, std::uint64_t size_bytes);

  // The backend's own device: where create(size) places chunks and what set_access grants access to (0 unless
  // the backend says otherwise: cuda's ordinal).
  virtual DeviceId device() const { return 0; }
  // How many devices create(size, device) accepts: ids 0 .. device_count() - 1 (1 unless the backend models or
  // drives several).
  virtual std::uint32_t device_count() const { return 1; }

  // The most chunk bytes live on device() at once (0: no bound but the device's own; the default): create() on
  // device() throws OutOfMemoryError, before the backend is called and not counted, when the chunk would pass it.
  // What `gmlake replay --device-bytes` sets: a device of that size, on every backend.
  void set_device_limit_bytes(std::uint64_t limit_bytes) { device_limit_bytes_ = limit_bytes; }
  std::uint64_t device_limit_bytes() const { return device_limit_bytes_; }
  // Bytes device() can still give to create(): the device's free memory (cuda: cuMemGetInfo; sim: its capacity
  // less its live bytes) bounded by device_limit_bytes(); UINT64_MAX when neither is known (host, an unbounded
  // sim). Not counted; on cuda one driver call (a few microseconds): off the hot path only.
  std::uint64_t device_free_bytes();

  // A new stream-ordered memory pool of device() (stream_ordered_pool.h: cudaMallocAsync's), for one allocator
  // (the `async` policy), which must destroy it before the backend; nullptr when the backend has none (host,
  // sim, the wrappers: the default). cuda: a pool of its own (cuMemPoolCreate) whose max_size_bytes() is
  // device_limit_bytes() as set when the pool is made, rounded down to granularity_bytes() (0: no bound but the
  // device's). Its calls are the driver's, outside this class's contract and counters: they make no chunks,
  // mappings or reservations here. Throws BackendError when the driver refuses the pool (a device without
  // memory pools; a device limit on a driver older than CUDA 12.2, which has no maxSize).
  virtual std::unique_ptr<StreamOrderedPool> make_stream_ordered_pool() { return nullptr; }

  const BackendCounters& counters() const { return counters_; }
  std::uint64_t live_chunks() const { return chunks_.size(); }
  std::uint64_t live_chunk_bytes() const { return live_chunk_bytes_; }
  // Live chunk bytes on `device`, imported chunks not included (0 for a device with none, or no such device).
  std::uint64_t live_chunk_bytes(DeviceId device) const;
  // Live bytes of imported chunks (import_chunk, not yet released): live_chunk_bytes() less every device's.
  std::uint64_t live_imported_bytes() const { return imported_bytes_; }
  // The device of live `chunk` (kImportedDevice for an imported one). Throws Error(kInvalidArgument) for a
  // chunk that is not live.
  DeviceId chunk_device(ChunkHandle chunk) const;
  std::uint64_t live_mappings() const { return mappings_.size(); }
  // The most live mappings there have been at once (on the host backend: VMAs, bounded by vm.max_map_count).
  std::uint64_t peak_mappings() const { return peak_mappings_; }
  std::uint64_t live_reservations() const { return reservations_.size(); }
  // True when every byte of [addr, addr+size_bytes) is mapped and has had set_access since it was mapped.
  // Any addr and size are accepted; false when size_bytes is 0 or the range wraps. O(log n + mappings).
  bool is_accessible(std::uintptr_t addr, std::uint64_t size_bytes) const;
  // The one observer of maps and unmaps (null: none, the default); it must outlive its registration.
  void set_observer(BackendObserver* observer) { observer_ = observer; }
  BackendObserver* observer() const { return observer_; }
  // True when counters().time_ns holds modelled, not measured, time (the allocator's own time excludes it).
  bool time_is_modelled() const { return timing_ == CallTiming::kModelled; }

 protected:
  // Throws Error(kInvalidArgument) unless granularity_bytes is a power of two. `timing`: kUntimed only for
  // backends whose calls cost next to nothing (their time_ns then stays 0).
  explicit Backend(std::uint64_t granularity_bytes, CallTiming timing = CallTiming::kTimed);

  // The backend's own calls. Each is called only with arguments that satisfy the contract above, and must
  // leave nothing behind when it throws.
  virtual std::uintptr_t do_reserve(std::uint64_t size_bytes) = 0;
  virtual void do_address_free(std::uintptr_t addr, std::uint64_t size_bytes) = 0;
  virtual ChunkHandle do_create(std::uint64_t size_bytes) = 0;
  // Creates a chunk on `device` (0 .. device_count() - 1, never device(): that is do_create). By default a
  // backend places chunks on its own device only and throws Error(kInvalidArgument).
  virtual ChunkHandle do_create_on(std::uint64_t size_bytes, DeviceId device);
  virtual void do_release(ChunkHandle chunk, std::uint64_t size_bytes) = 0;
  virtual void do_map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk) = 0;
  virtual void do_unmap(std::uintptr_t addr, std::uint64_t size_bytes) = 0;
  virtual void do_set_access(std::uintptr_t addr, std::uint64_t size_bytes) = 0;
  // device()'s free memory as the driver or model knows it; UINT64_MAX (the default) when unknown.
  virtual std::uint64_t do_device_free_bytes() { return UINT64_MAX; }
  // IPC: by default a backend neither exports nor imports (Error(kInvalidArgument)); do_import_chunk owns fd
  // (closes it when it throws). do_release is called for imported chunks as for created ones.
  virtual ExportedChunk do_export_chunk(ChunkHandle chunk);
  virtual ChunkHandle do_import_chunk(int fd, std::uint64_t fd_offset_bytes, std::uint64_t size_bytes);
  // Zeroes live, own, unmapped `chunk` of `size_bytes` (scrub); by default a backend cannot
  // (Error(kInvalidArgument)).
  virtual void do_scrub(ChunkHandle chunk, std::uint64_t size_bytes);

  // Bytes left below `limit_bytes` with `live_bytes` in use: 0 when at or past it.
  static std::uint64_t bytes_below(std::uint64_t limit_bytes, std::uint64_t live_bytes) {
    return live_bytes >= limit_bytes ? 0 : limit_bytes - live_bytes;
  }
  // Adds `ns` of modelled time to calls of kind `c` (CallTiming::kModelled backends, from their do_* calls).
  void charge(BackendCall c, std::uint64_t ns) { counters_.time_ns[static_cast<std::size_t>(c)] += ns; }
  // Calls f(size_bytes) for each live mapping that starts inside [addr, addr + size_bytes), in address order
  // (from do_unmap and do_set_access, which run before the tables change).
  template <typename F>
  void for_each_mapping_in(std::uintptr_t addr, std::uint64_t size_bytes, F&& f) const {
    for_each_mapping_record_in(addr, size_bytes, [&](const Mapping& m) { f(m.size_bytes); });
  }
  // The same with the device each mapping's memory lives on: f(size_bytes, device) (chunk_device()).
  template <typename F>
  void for_each_mapping_device_in(std::uintptr_t addr, std::uint64_t size_bytes, F&& f) const {
    for_each_mapping_record_in(addr, size_bytes, [&](const Mapping& m) { f(m.size_bytes, chunk_device(m.chunk)); });
  }

 private:
  struct Mapping {
    std::uint64_t size_bytes;
    ChunkHandle chunk;
    bool accessible;
  };
  struct Chunk {
    std::uint64_t size_bytes;
    std::uint32_t mappings;  // live mappings of it
    DeviceId device;         // where its memory lives
  };
  // The range tables need ordered lookups (overlap, runs of adjacent mappings): B-trees, which search and
  // insert in O(log n) with far fewer cache misses and allocations than std::map. Chunks are only looked up
  // by handle: a hash table, O(1).
  using RangeTable = absl::btree_map<std::uintptr_t, std::uint64_t>;  // start -> size
  using MappingTable = absl::btree_map<std::uintptr_t, Mapping>;      // start -> mapping

  void count(BackendCall c) { ++counters_.calls[static_cast<std::size_t>(c)]; }
  // Calls f(mapping) for each live mapping that starts inside [addr, addr + size_bytes), in address order.
  template <typename F>
  void for_each_mapping_record_in(std::uintptr_t addr, std::uint64_t size_bytes, F&& f) const {
    for (auto it = mappings_.lower_bound(addr); it != mappings_.end() && it->first < addr + size_bytes; ++it) {
      f(it->second);
    }
  }
  // The live bytes counter of `device` (a tracked device, or kImportedDevice).
  std::uint64_t& device_bytes(DeviceId device) {
    return device == kImportedDevice ? imported_bytes_ : device_bytes_[static_cast<std::size_t>(device)];
  }
  void track_new_chunk(const char* call, ChunkHandle chunk, std::uint64_t size_bytes, DeviceId device);
  // Runs `call` (a do_* call of kind `c`), adding its wall time to counters_ unless the backend is untimed.
  template <typename Call>
  decltype(auto) timed(BackendCall c, Call&& call);
  void check_size(const char* call, std::uint64_t size_bytes) const;
  // Checks that [addr, addr+size_bytes) is exactly a run of whole live mappings (unmap, set_access); returns the
  // first and the one after the last mapping of the run. Throws Error(kInvalidArgument) naming `call` otherwise.
  std::pair<MappingTable::iterator, MappingTable::iterator> checked_mapping_run(const char* call, std::uintptr_t addr,
                                                                                std::uint64_t size_bytes);
  bool inside_one_reservation(std::uintptr_t addr, std::uint64_t size_bytes) const;

  std::uint64_t granularity_bytes_;
  CallTiming timing_;
  BackendCounters counters_;
  RangeTable reservations_;
  MappingTable mappings_;
  absl::flat_hash_map<std::uint64_t, Chunk> chunks_;  // handle -> chunk
  std::uint64_t live_chunk_bytes_ = 0;
  std::vector<std::uint64_t> device_bytes_;  // live chunk bytes by DeviceId, grown on first use
  std::uint64_t imported_bytes_ = 0;         // live chunk bytes on kImportedDevice
  std::uint64_t peak_mappings_ = 0;
  std::uint64_t device_limit_bytes_ = 0;
  BackendObserver* observer_ = nullptr;
};

}  // namespace gmlake
