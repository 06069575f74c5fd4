// The backend conformance suite (backend_conformance.h) run for the CPU backends, and the base class's own
// behaviour (counting, timing, rollback when the backend throws) checked with a scripted backend.
#include "gmlake/backend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backend_conformance.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

using namespace conformance;  // the suite's names (for INSTANTIATE_TYPED_TEST_SUITE_P) and its helpers

struct SimFactory {
  static constexpr const char* kName = "Sim";
  static std::unique_ptr<Backend> make(std::uint64_t physical_limit_bytes = 0) {
    return std::make_unique<SimBackend>(kGranule, physical_limit_bytes);
  }
  static std::optional<std::string> unavailable() { return std::nullopt; }
};

struct HostFactory {
  static constexpr const char* kName = "Host";
  static std::unique_ptr<Backend> make(std::uint64_t physical_limit_bytes = 0) {
    return std::make_unique<HostBackend>(kGranule, physical_limit_bytes);
  }
  static std::optional<std::string> unavailable() { return std::nullopt; }
};

using CpuFactories = ::testing::Types<SimFactory, HostFactory>;
INSTANTIATE_TYPED_TEST_SUITE_P(Cpu, BackendConformanceTest, CpuFactories, FactoryNames);

TEST(BackendTest, CallNamesAreTheContractsNames) {
  EXPECT_EQ(to_string(BackendCall::kReserve), "reserve");
  EXPECT_EQ(to_string(BackendCall::kAddressFree), "address_free");
  EXPECT_EQ(to_string(BackendCall::kCreate), "create");
  EXPECT_EQ(to_string(BackendCall::kRelease), "release");
  EXPECT_EQ(to_string(BackendCall::kMap), "map");
  EXPECT_EQ(to_string(BackendCall::kUnmap), "unmap");
  EXPECT_EQ(to_string(BackendCall::kSetAccess), "set_access");
}

TEST(BackendTest, AGranularityThatIsNotAPowerOfTwoIsRejected) {
  EXPECT_THROW(SimBackend(0), Error);
  try {
    SimBackend backend(3 * kMiB);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

// A backend that does nothing but what the test scripts: fail the next call, or return a bad address/handle.
class ScriptedBackend final : public Backend {
 public:
  ScriptedBackend() : Backend(kGranule) {}
  std::string_view name() const override { return "scripted"; }
  bool host_accessible() const override { return false; }

  bool fail_next = false;
  std::chrono::nanoseconds delay{0};  // how long each call takes, before it fails or returns
  std::uintptr_t next_addr = kSimBaseAddress;
  std::uint64_t next_handle = 1;

 protected:
  std::uintptr_t do_reserve(std::uint64_t size_bytes) override {
    maybe_fail("reserve");
    const std::uintptr_t addr = next_addr;
    next_addr += size_bytes;
    return addr;
  }
  void do_address_free(std::uintptr_t, std::uint64_t) override { maybe_fail("address_free"); }
  ChunkHandle do_create(std::uint64_t) override {
    maybe_fail("create");
    return ChunkHandle{next_handle++};
  }
  void do_release(ChunkHandle, std::uint64_t) override { maybe_fail("release"); }
  void do_map(std::uintptr_t, std::uint64_t, ChunkHandle) override { maybe_fail("map"); }
  void do_unmap(std::uintptr_t, std::uint64_t) override { maybe_fail("unmap"); }
  void do_set_access(std::uintptr_t, std::uint64_t) override { maybe_fail("set_access"); }

 private:
  void maybe_fail(const char* call) {
    if (delay.count() != 0) std::this_thread::sleep_for(delay);
    if (!fail_next) return;
    fail_next = false;
    throw BackendError(call, "scripted failure");
  }
};

// Runs `call` with the backend scripted to fail; expects BackendError, the call counted, nothing else changed.
void expect_failure_changes_nothing(ScriptedBackend& b, BackendCall kind, const std::function<void()>& call) {
  const Snapshot before(b);
  b.fail_next = true;
  EXPECT_THROW(call(), BackendError) << to_string(kind);
  Snapshot expected = before;
  ++expected.counters.calls[static_cast<std::size_t>(kind)];
  EXPECT_TRUE(Snapshot(b) == expected) << to_string(kind);
}

TEST(BackendTest, ACallTheBackendFailsIsCountedAndLeavesTheTablesUnchanged) {
  ScriptedBackend b;
  expect_failure_changes_nothing(b, BackendCall::kReserve, [&] { b.reserve(2 * kGranule); });
  expect_failure_changes_nothing(b, BackendCall::kCreate, [&] { b.create(kGranule); });
  const std::uintptr_t addr = b.reserve(2 * kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  expect_failure_changes_nothing(b, BackendCall::kMap, [&] { b.map(addr, kGranule, chunk); });
  // The failed map left no trace: the chunk can be released and the range mapped.
  expect_failure_changes_nothing(b, BackendCall::kRelease, [&] { b.release(chunk); });
  b.map(addr, kGranule, chunk);
  expect_failure_changes_nothing(b, BackendCall::kSetAccess, [&] { b.set_access(addr, kGranule); });
  EXPECT_FALSE(b.is_accessible(addr, kGranule));
  b.set_access(addr, kGranule);
  expect_failure_changes_nothing(b, BackendCall::kUnmap, [&] { b.unmap(addr, kGranule); });
  EXPECT_TRUE(b.is_accessible(addr, kGranule));
  b.unmap(addr, kGranule);
  b.release(chunk);
  expect_failure_changes_nothing(b, BackendCall::kAddressFree, [&] { b.address_free(addr, 2 * kGranule); });
  b.address_free(addr, 2 * kGranule);
  EXPECT_EQ(b.live_chunks() + b.live_mappings() + b.live_reservations(), 0u);
}

TEST(BackendTest, ABackendReturningABadAddressOrHandleGetsABackendError) {
  ScriptedBackend b;
  const std::uintptr_t addr = b.reserve(2 * kGranule);
  b.next_addr = addr + kGranule;  // overlaps the live reservation
  EXPECT_THROW(b.reserve(kGranule), BackendError);
  b.next_addr = kSimBaseAddress + 64 * kGranule + kGranule / 2;  // unaligned
  EXPECT_THROW(b.reserve(kGranule), BackendError);
  b.next_addr = 0;
  EXPECT_THROW(b.reserve(kGranule), BackendError);
  EXPECT_EQ(b.live_reservations(), 1u);
  const ChunkHandle chunk = b.create(kGranule);
  b.next_handle = chunk.value;  // a live handle again
  EXPECT_THROW(b.create(kGranule), BackendError);
  b.next_handle = 0;
  EXPECT_THROW(b.create(kGranule), BackendError);
  EXPECT_EQ(b.live_chunks(), 1u);
  EXPECT_EQ(b.live_chunk_bytes(), kGranule);
}

TEST(BackendTest, TimeInsideTheBackendIsAddedUpPerCallKindFailedCallsIncluded) {
  ScriptedBackend b;
  constexpr std::chrono::milliseconds kDelay{2};
  constexpr auto kDelayNs = static_cast<std::uint64_t>(std::chrono::nanoseconds(kDelay).count());
  b.delay = kDelay;
  const std::uintptr_t addr = b.reserve(2 * kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  b.map(addr, kGranule, chunk);
  b.fail_next = true;
  EXPECT_THROW(b.set_access(addr, kGranule), BackendError);
  b.set_access(addr, kGranule);
  const BackendCounters& c = b.counters();
  EXPECT_GE(c.time_ns_of(BackendCall::kReserve), kDelayNs);
  EXPECT_GE(c.time_ns_of(BackendCall::kCreate), kDelayNs);
  EXPECT_GE(c.time_ns_of(BackendCall::kMap), kDelayNs);
  EXPECT_GE(c.time_ns_of(BackendCall::kSetAccess), 2 * kDelayNs);  // the failed call took its time too
  EXPECT_EQ(c.time_ns_of(BackendCall::kUnmap), 0u);                 // never called
  EXPECT_EQ(c.total_time_ns(), c.time_ns_of(BackendCall::kReserve) + c.time_ns_of(BackendCall::kCreate) +
                                   c.time_ns_of(BackendCall::kMap) + c.time_ns_of(BackendCall::kSetAccess));
  b.unmap(addr, kGranule);
  b.release(chunk);
  b.address_free(addr, 2 * kGranule);
}

TEST(BackendTest, ARejectedCallAddsNoTime) {
  ScriptedBackend b;
  b.delay = std::chrono::milliseconds(1);
  const std::uintptr_t addr = b.reserve(kGranule);
  const BackendCounters before = b.counters();
  EXPECT_THROW(b.map(addr, kGranule, ChunkHandle{42}), Error);  // no such chunk
  EXPECT_THROW(b.unmap(addr, kGranule), Error);                 // nothing mapped
  EXPECT_THROW(b.create(kGranule / 2), Error);                  // not a multiple of the granularity
  EXPECT_EQ(b.counters().time_ns, before.time_ns);
  EXPECT_EQ(b.counters().calls, before.calls);
  b.address_free(addr, kGranule);
}

}  // namespace
}  // namespace gmlake
