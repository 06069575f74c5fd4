// The Backend base class: checks the contract written in backend.h, counts calls, and keeps the tables of live
// reservations, mappings and chunks. Every public call runs in three steps:
//   1. check the contract against the tables (throw Error(kInvalidArgument), nothing counted or changed);
//   2. count the call, then call the backend's do_* (which may throw, leaving the backend as it was), timing it;
//   3. update the tables, either with non-throwing operations after the backend call or with insertions
//      made before it and rolled back when it throws.
// Range lookups are B-tree searches, O(log n) plus O(k) for the k mappings a range covers; chunk lookups are
// hash lookups, O(1). These checks run on every call, so they must cost little next to the sim backend's
// calls, which do nothing.
#include "gmlake/backend.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <iterator>
#include <optional>
#include <string>
#include <utility>

#include "gmlake/error.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

[[noreturn]] void invalid(const char* call, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, std::string("Backend::") + call + ": " + why);
}

std::string hex(std::uintptr_t addr) { return fmt::format("{:#x}", addr); }

std::string range_text(std::uintptr_t addr, std::uint64_t size_bytes) {
  return fmt::format("[{:#x}, +{} bytes)", addr, size_bytes);
}

// Runs `undo` while an exception is in flight, swallowing whatever it throws: the first error is the one
// the caller must see.
template <typename Undo>
void undo_quietly(Undo&& undo) noexcept {
  try {
    undo();
  } catch (...) {
  }
}

// Throws unless `addr` is aligned to `granularity_bytes` and [addr, addr+size_bytes) does not wrap.
void check_placement(const char* call, std::uintptr_t addr, std::uint64_t size_bytes, std::uint64_t granularity_bytes) {
  if (addr % granularity_bytes != 0) {
    invalid(call, "address " + hex(addr) + " is not aligned to the granularity " + std::to_string(granularity_bytes));
  }
  if (addr + size_bytes < addr) invalid(call, range_text(addr, size_bytes) + " wraps around the address space");
}

// The two range tables (reservations_, mappings_) map a range's start to a value whose size `size_of` reads;
// their ranges never overlap. These helpers work on either.

// True when some range of `table` overlaps [addr, addr+size_bytes). O(log n).
template <typename Table, typename SizeOf>
bool overlaps_any(const Table& table, std::uintptr_t addr, std::uint64_t size_bytes, SizeOf size_of) {
  const auto next = table.lower_bound(addr);
  if (next != table.end() && next->first - addr < size_bytes) return true;
  if (next == table.begin()) return false;
  const auto prev = std::prev(next);
  return addr - prev->first < size_of(prev->second);
}

// When [addr, addr+size_bytes) is exactly a run of adjacent ranges of `table`, the first of them and the
// iterator past the last one; otherwise nullopt. O(log n + k) for a run of k.
template <typename Table, typename SizeOf>
std::optional<std::pair<typename Table::iterator, typename Table::iterator>> whole_run(
    Table& table, std::uintptr_t addr, std::uint64_t size_bytes, SizeOf size_of) {
  const std::uintptr_t end = addr + size_bytes;
  const auto first = table.find(addr);
  auto it = first;
  while (it != table.end()) {
    const std::uintptr_t range_end = it->first + size_of(it->second);
    if (range_end == end) return std::pair{first, std::next(it)};
    if (range_end > end) break;
    const auto next = std::next(it);
    if (next == table.end() || next->first != range_end) break;
    it = next;
  }
  return std::nullopt;
}

// Runs `call` and adds the wall time it took to `total_ns`, also when it throws.
template <typename Call>
decltype(auto) stopwatch_call(std::uint64_t& total_ns, Call&& call) {
  struct Stopwatch {
    std::uint64_t& total_ns;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Stopwatch() {
      const auto elapsed = std::chrono::steady_clock::now() - start;
      total_ns += static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
    }
  } stopwatch{total_ns};
  return call();
}

const auto kReservationBytes = [](std::uint64_t size_bytes) { return size_bytes; };
const auto kMappingBytes = [](const auto& mapping) { return mapping.size_bytes; };

}  // namespace

std::uint64_t BackendCounters::total_time_ns() const {
  std::uint64_t total_ns = 0;
  for (std::uint64_t ns : time_ns) total_ns += ns;
  return total_ns;
}

std::string_view to_string(BackendCall call) {
  switch (call) {
    case BackendCall::kReserve: return "reserve";
    case BackendCall::kAddressFree: return "address_free";
    case BackendCall::kCreate: return "create";
    case BackendCall::kRelease: return "release";
    case BackendCall::kMap: return "map";
    case BackendCall::kUnmap: return "unmap";
    case BackendCall::kSetAccess: return "set_access";
    case BackendCall::kCount: break;
  }
  return "unknown";
}

template <typename Call>
decltype(auto) Backend::timed(BackendCall c, Call&& call) {
  if (timing_ != CallTiming::kTimed) return call();
  return stopwatch_call(counters_.time_ns[static_cast<std::size_t>(c)], std::forward<Call>(call));
}

Backend::Backend(std::uint64_t granularity_bytes, CallTiming timing)
    : granularity_bytes_(granularity_bytes), timing_(timing) {
  if (!is_pow2(granularity_bytes)) {
    invalid("Backend", "granularity_bytes " + std::to_string(granularity_bytes) + " is not a power of two");
  }
}

void Backend::check_size(const char* call, std::uint64_t size_bytes) const {
  if (size_bytes == 0) invalid(call, "size_bytes is 0");
  if (size_bytes % granularity_bytes_ != 0) {
    invalid(call, "size_bytes " + std::to_string(size_bytes) + " is not a multiple of the granularity " +
                      std::to_string(granularity_bytes_));
  }
}

bool Backend::inside_one_reservation(std::uintptr_t addr, std::uint64_t size_bytes) const {
  auto it = reservations_.upper_bound(addr);
  if (it == reservations_.begin()) return false;
  --it;
  return addr - it->first <= it->second && size_bytes <= it->second - (addr - it->first);
}

std::uintptr_t Backend::reserve(std::uint64_t size_bytes) {
  check_size("reserve", size_bytes);
  count(BackendCall::kReserve);
  const std::uintptr_t addr =
      timed(BackendCall::kReserve, [&] { return do_reserve(size_bytes); });
  // A bad address is a bug in the backend; it is not freed, since the range may belong to a live reservation.
  if (addr == 0 || addr % granularity_bytes_ != 0 || addr + size_bytes < addr ||
      overlaps_any(reservations_, addr, size_bytes, kReservationBytes)) {
    throw BackendError("reserve",
                       std::string(name()) + " backend returned the bad range " + range_text(addr, size_bytes));
  }
  try {
    reservations_.emplace(addr, size_bytes);
  } catch (...) {
    undo_quietly([&] { do_address_free(addr, size_bytes); });
    throw;
  }
  return addr;
}

void Backend::address_free(std::uintptr_t addr, std::uint64_t size_bytes) {
  check_size("address_free", size_bytes);
  check_placement("address_free", addr, size_bytes, granularity_bytes_);
  const auto it = reservations_.find(addr);
  if (it == reservations_.end() || it->second != size_bytes) {
    invalid("address_free", range_text(addr, size_bytes) + " is not a live reservation");
  }
  if (overlaps_any(mappings_, addr, size_bytes, kMappingBytes)) {
    invalid("address_free", range_text(addr, size_bytes) + " still has live mappings inside");
  }
  count(BackendCall::kAddressFree);
  timed(BackendCall::kAddressFree, [&] { do_address_free(addr, size_bytes); });
  reservations_.erase(it);
}

ChunkHandle Backend::create(std::uint64_t size_bytes) { return create(size_bytes, device()); }

ChunkHandle Backend::create(std::uint64_t size_bytes, DeviceId device) {
  check_size("create", size_bytes);
  if (device < 0 || static_cast<std::uint64_t>(device) >= device_count()) {
    invalid("create", "device " + std::to_string(device) + " is not a device of the " + std::string(name()) +
                          " backend (0 .. " + std::to_string(device_count() - 1) + ")");
  }
  const bool own = device == this->device();
  if (own && device_limit_bytes_ != 0 && live_chunk_bytes(device) + size_bytes > device_limit_bytes_) {
    throw OutOfMemoryError(size_bytes, live_chunk_bytes(device), 0, device_limit_bytes_,
                           "the " + std::string(name()) +
                               " backend's device limit (device_limit_bytes) would be passed");
  }
  count(BackendCall::kCreate);
  const ChunkHandle chunk = timed(BackendCall::kCreate, [&] {
    return own ? do_create(size_bytes) : do_create_on(size_bytes, device);
  });
  track_new_chunk("create", chunk, size_bytes, device);
  return chunk;
}

std::uint64_t Backend::device_free_bytes() {
  std::uint64_t free_bytes = do_device_free_bytes();
  if (device_limit_bytes_ != 0) {
    free_bytes = std::min(free_bytes, bytes_below(device_limit_bytes_, live_chunk_bytes(device())));
  }
  return free_bytes;
}

ChunkHandle Backend::do_create_on(std::uint64_t, DeviceId device) {
  invalid("create", "the " + std::string(name()) + " backend cannot place chunks on device " + std::to_string(device));
}

std::uint64_t Backend::live_chunk_bytes(DeviceId device) const {
  if (device < 0 || static_cast<std::size_t>(device) >= device_bytes_.size()) return 0;
  return device_bytes_[static_cast<std::size_t>(device)];
}

DeviceId Backend::chunk_device(ChunkHandle chunk) const {
  const auto it = chunks_.find(chunk.value);
  if (it == chunks_.end()) invalid("chunk_device", "chunk " + std::to_string(chunk.value) + " is not live");
  return it->second.device;
}

// Records a chunk the backend just made (create, import_chunk). A bad handle is a bug in the backend; it is not
// released, since it may name a live chunk. When the table cannot take it (bad_alloc) the chunk is released.
void Backend::track_new_chunk(const char* call, ChunkHandle chunk, std::uint64_t size_bytes, DeviceId device) {
  auto bad_handle = [&] {
    return BackendError(call, std::string(name()) + " backend returned handle " + std::to_string(chunk.value) +
                                  ", which is 0 or already live");
  };
  if (chunk.value == 0) throw bad_handle();
  bool inserted = false;
  try {
    if (device >= 0 && static_cast<std::size_t>(device) >= device_bytes_.size()) {
      device_bytes_.resize(static_cast<std::size_t>(device) + 1);
    }
    inserted = chunks_.try_emplace(chunk.value, Chunk{size_bytes, 0, device}).second;
  } catch (...) {
    undo_quietly([&] { do_release(chunk, size_bytes); });
    throw;
  }
  if (!inserted) throw bad_handle();  // the live chunk's entry is left as it was
  live_chunk_bytes_ += size_bytes;
  device_bytes(device) += size_bytes;
}

void Backend::release(ChunkHandle chunk) {
  const auto it = chunks_.find(chunk.value);
  if (it == chunks_.end()) invalid("release", "chunk " + std::to_string(chunk.value) + " is not live");
  if (it->second.mappings != 0) {
    invalid("release", "chunk " + std::to_string(chunk.value) + " is still mapped at " +
                           std::to_string(it->second.mappings) + " address(es)");
  }
  const std::uint64_t size_bytes = it->second.size_bytes;
  count(BackendCall::kRelease);
  timed(BackendCall::kRelease, [&] { do_release(chunk, size_bytes); });
  live_chunk_bytes_ -= size_bytes;
  device_bytes(it->second.device) -= size_bytes;
  chunks_.erase(it);
}

void Backend::map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk) {
  check_size("map", size_bytes);
  check_placement("map", addr, size_bytes, granularity_bytes_);
  if (!inside_one_reservation(addr, size_bytes)) {
    invalid("map", range_text(addr, size_bytes) + " is not inside one live reservation");
  }
  if (overlaps_any(mappings_, addr, size_bytes, kMappingBytes)) {
    invalid("map", range_text(addr, size_bytes) + " overlaps a live mapping");
  }
  const auto chunk_it = chunks_.find(chunk.value);
  if (chunk_it == chunks_.end()) invalid("map", "chunk " + std::to_string(chunk.value) + " is not live");
  if (chunk_it->second.size_bytes != size_bytes) {
    invalid("map", "size_bytes " + std::to_string(size_bytes) + " differs from the size of chunk " +
                       std::to_string(chunk.value) + ", " + std::to_string(chunk_it->second.size_bytes) +
                       " bytes (a chunk is mapped whole)");
  }
  count(BackendCall::kMap);
  // Insert first (bad_alloc leaves nothing behind), roll back if the backend throws. The chunk's entry is
  // only counted up, which cannot throw, so chunk_it stays valid: nothing is inserted into chunks_ here.
  const auto mapping = mappings_.emplace(addr, Mapping{size_bytes, chunk, false}).first;
  try {
    timed(BackendCall::kMap, [&] { do_map(addr, size_bytes, chunk); });
  } catch (...) {
    mappings_.erase(mapping);
    throw;
  }
  ++chunk_it->second.mappings;
  if (mappings_.size() > peak_mappings_) peak_mappings_ = mappings_.size();
  if (observer_ != nullptr) observer_->on_map(addr, size_bytes);
}

std::pair<Backend::MappingTable::iterator, Backend::MappingTable::iterator> Backend::checked_mapping_run(
    const char* call, std::uintptr_t addr, std::uint64_t size_bytes) {
  check_size(call, size_bytes);
  check_placement(call, addr, size_bytes, granularity_bytes_);
  const auto run = whole_run(mappings_, addr, size_bytes, kMappingBytes);
  if (!run) invalid(call, range_text(addr, size_bytes) + " is not exactly a run of whole live mappings");
  return *run;
}

void Backend::unmap(std::uintptr_t addr, std::uint64_t size_bytes) {
  const auto [first, last] = checked_mapping_run("unmap", addr, size_bytes);
  count(BackendCall::kUnmap);
  timed(BackendCall::kUnmap, [&] { do_unmap(addr, size_bytes); });
  for (auto it = first; it != last; ++it) --chunks_.find(it->second.chunk.value)->second.mappings;
  mappings_.erase(first, last);
  if (observer_ != nullptr) observer_->on_unmap(addr, size_bytes);
}

void Backend::set_access(std::uintptr_t addr, std::uint64_t size_bytes) {
  const auto [first, last] = checked_mapping_run("set_access", addr, size_bytes);
  count(BackendCall::kSetAccess);
  timed(BackendCall::kSetAccess, [&] { do_set_access(addr, size_bytes); });
  for (auto it = first; it != last; ++it) it->second.accessible = true;
}

bool Backend::is_accessible(std::uintptr_t addr, std::uint64_t size_bytes) const {
  if (size_bytes == 0 || addr + size_bytes < addr) return false;
  const std::uintptr_t end = addr + size_bytes;
  auto it = mappings_.upper_bound(addr);
  if (it == mappings_.begin()) return false;
  --it;
  std::uintptr_t covered = it->first;  // every byte of [addr, covered) is accessible
  while (it != mappings_.end() && it->first == covered && it->second.accessible) {
    covered = it->first + it->second.size_bytes;
    if (covered >= end) return true;
    ++it;
  }
  return false;
}

// --- IPC

ExportedChunk Backend::export_chunk(ChunkHandle chunk) {
  if (!chunks_.contains(chunk.value)) invalid("export_chunk", "chunk " + std::to_string(chunk.value) + " is not live");
  return do_export_chunk(chunk);
}

void Backend::scrub(ChunkHandle chunk) {
  const auto it = chunks_.find(chunk.value);
  if (it == chunks_.end()) invalid("scrub", "chunk " + std::to_string(chunk.value) + " is not live");
  if (it->second.device == kImportedDevice) {
    invalid("scrub", "chunk " + std::to_string(chunk.value) + " was imported: only its exporter scrubs it");
  }
  if (it->second.mappings != 0) {
    invalid("scrub", "chunk " + std::to_string(chunk.value) + " is mapped: its bytes are in use");
  }
  do_scrub(chunk, it->second.size_bytes);
}

ChunkHandle Backend::import_chunk(int fd, std::uint64_t fd_offset_bytes, std::uint64_t size_bytes) {
  try {
    check_size("import_chunk", size_bytes);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    throw;
  }
  const ChunkHandle chunk = do_import_chunk(fd, fd_offset_bytes, size_bytes);  // owns fd from here on
  track_new_chunk("import_chunk", chunk, size_bytes, kImportedDevice);
  return chunk;
}

ExportedChunk Backend::do_export_chunk(ChunkHandle) {
  invalid("export_chunk", "the " + std::string(name()) + " backend cannot export chunks to other processes");
}

void Backend::do_scrub(ChunkHandle, std::uint64_t) {
  invalid("scrub", "the " + std::string(name()) + " backend cannot scrub chunks (it cannot lend them either)");
}

ChunkHandle Backend::do_import_chunk(int fd, std::uint64_t, std::uint64_t) {
  if (fd >= 0) ::close(fd);
  invalid("import_chunk", "the " + std::string(name()) + " backend cannot import chunks from other processes");
}

}  // namespace gmlake
