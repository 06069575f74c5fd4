// FaultBackend: a Backend that forwards every call to an inner Backend and fails the calls a test chooses,
// so that the allocator's error paths can be driven one by one (the fault-injection sweep in
// tests/fault_sweep_test.cpp, the allocator fuzzer in fuzz/).
//
// A fault is armed for one call kind (create, map, unmap, set_access, reserve, release, address_free): the
// `nth` call of that kind that reaches this backend from now on (1 = the next one), and the `count - 1` calls
// of that kind after it, throw instead of reaching the inner backend. Nothing else is changed: the inner
// backend never sees a failed call, so its tables (live_chunks(), live_mappings(), live_reservations()) show
// exactly what the allocator still holds, and prove at teardown that nothing leaked.
//
// The error thrown is BackendError(call = "fault:<kind>", "injected fault") by default, or OutOfMemoryError
// (as cuMemCreate's CUDA_ERROR_OUT_OF_MEMORY) when the fault says so; any kind may be given either.
//
// Counting follows the base class (backend.h): a call rejected by the contract check never reaches do_* and is
// not counted, here or in the inner backend. calls_seen(kind) counts the calls that reached this wrapper,
// injected_faults() those it failed.
//
// Thread safety: none, like every Backend.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "gmlake/backend.h"

namespace gmlake {

enum class FaultError : std::uint8_t { kBackendError, kOutOfMemory };

struct Fault {
  BackendCall call = BackendCall::kCreate;
  std::uint64_t nth = 1;    // >= 1: the nth call of `call` from the time the fault is armed
  std::uint64_t count = 1;  // >= 1: that many calls in a row fail
  FaultError error = FaultError::kBackendError;
};

class FaultBackend final : public Backend {
 public:
  // `inner` must outlive this backend and must not be used directly while this one is. Same granularity.
  explicit FaultBackend(Backend& inner);

  // "fault(<inner name>)".
  std::string_view name() const override { return name_; }
  bool host_accessible() const override { return inner_.host_accessible(); }
  // IPC and the lake (export_chunk, scrub, import_chunk) are the inner backend's, never failed on purpose (they
  // are no BackendCall kind); an imported chunk is then released, mapped and unmapped through this wrapper like a
  // created one, with the faults armed for those calls.
  bool imports_chunks() const override { return inner_.imports_chunks(); }
  // The inner backend's devices; a create on a peer device is a create (armed faults cover it).
  DeviceId device() const override { return inner_.device(); }
  std::uint32_t device_count() const override { return inner_.device_count(); }

  // Arms `fault` for its call kind, replacing any fault armed for that kind. Throws Error(kInvalidArgument)
  // when nth or count is 0, or the kind is BackendCall::kCount.
  void arm(const Fault& fault);
  // Disarms every fault.
  void disarm_all();

  // Calls of `kind` that reached this backend (past the contract check), failed ones included.
  std::uint64_t calls_seen(BackendCall kind) const { return seen_[index(kind)]; }
  // Calls this backend failed on purpose, over every kind.
  std::uint64_t injected_faults() const { return injected_; }
  Backend& inner() { return inner_; }
  const Backend& inner() const { return inner_; }

 protected:
  std::uintptr_t do_reserve(std::uint64_t size_bytes) override;
  void do_address_free(std::uintptr_t addr, std::uint64_t size_bytes) override;
  ChunkHandle do_create(std::uint64_t size_bytes) override;
  ChunkHandle do_create_on(std::uint64_t size_bytes, DeviceId device) override;
  void do_release(ChunkHandle chunk, std::uint64_t size_bytes) override;
  void do_map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk) override;
  void do_unmap(std::uintptr_t addr, std::uint64_t size_bytes) override;
  void do_set_access(std::uintptr_t addr, std::uint64_t size_bytes) override;
  ExportedChunk do_export_chunk(ChunkHandle chunk) override { return inner_.export_chunk(chunk); }
  void do_scrub(ChunkHandle chunk, std::uint64_t) override { inner_.scrub(chunk); }
  ChunkHandle do_import_chunk(int fd, std::uint64_t fd_offset_bytes, std::uint64_t size_bytes) override {
    return inner_.import_chunk(fd, fd_offset_bytes, size_bytes);
  }

 private:
  struct Armed {
    std::uint64_t first_fail = 0;  // seen_ value of the first failing call; 0 = disarmed
    std::uint64_t last_fail = 0;
    FaultError error = FaultError::kBackendError;
  };
  static std::size_t index(BackendCall kind) { return static_cast<std::size_t>(kind); }
  // Counts a call of `kind` and throws when an armed fault covers it.
  void enter(BackendCall kind, std::uint64_t size_bytes);

  Backend& inner_;
  std::string name_;
  std::array<std::uint64_t, kBackendCallKinds> seen_{};
  std::array<Armed, kBackendCallKinds> armed_{};
  std::uint64_t injected_ = 0;
};

}  // namespace gmlake
