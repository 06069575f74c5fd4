// FaultBackend: forwards to its inner backend, fails exactly the calls armed, with the error asked for, and
// leaves the inner backend untouched by a failed call.
#include "backends/fault/fault_backend.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

TEST(FaultBackendTest, ForwardsEveryCallToTheInnerBackendWhenNothingIsArmed) {
  SimBackend sim;
  FaultBackend fault(sim);
  EXPECT_EQ(fault.name(), "fault(sim)");
  EXPECT_EQ(fault.granularity_bytes(), sim.granularity_bytes());
  EXPECT_EQ(fault.host_accessible(), sim.host_accessible());
  const std::uintptr_t addr = fault.reserve(4 * kPageBytes);
  const ChunkHandle chunk = fault.create(kPageBytes);
  fault.map(addr, kPageBytes, chunk);
  fault.set_access(addr, kPageBytes);
  EXPECT_TRUE(sim.is_accessible(addr, kPageBytes));
  EXPECT_EQ(sim.live_chunks(), 1u);
  EXPECT_EQ(sim.live_mappings(), 1u);
  fault.unmap(addr, kPageBytes);
  fault.release(chunk);
  fault.address_free(addr, 4 * kPageBytes);
  EXPECT_EQ(sim.live_chunks() + sim.live_mappings() + sim.live_reservations(), 0u);
  for (std::size_t k = 0; k < kBackendCallKinds; ++k) {
    const auto kind = static_cast<BackendCall>(k);
    EXPECT_EQ(fault.calls_seen(kind), 1u) << to_string(kind);
    EXPECT_EQ(sim.counters()[kind], 1u) << to_string(kind);
  }
  EXPECT_EQ(fault.injected_faults(), 0u);
}

TEST(FaultBackendTest, FailsExactlyTheNthCallOfTheArmedKindAndNoOther) {
  SimBackend sim;
  FaultBackend fault(sim);
  fault.arm({BackendCall::kCreate, 3, 1, FaultError::kBackendError});
  const ChunkHandle a = fault.create(kPageBytes);
  const ChunkHandle b = fault.create(kPageBytes);
  try {
    fault.create(kPageBytes);
    ADD_FAILURE() << "the third create did not fail";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.call(), "fault:create");
    EXPECT_EQ(e.code(), ErrorCode::kBackend);
  }
  EXPECT_EQ(sim.live_chunks(), 2u) << "the failed call reached the inner backend";
  EXPECT_EQ(sim.counters()[BackendCall::kCreate], 2u);
  EXPECT_EQ(fault.calls_seen(BackendCall::kCreate), 3u);
  const ChunkHandle c = fault.create(kPageBytes);  // the fourth works again
  EXPECT_EQ(fault.injected_faults(), 1u);
  for (ChunkHandle h : {a, b, c}) fault.release(h);
  EXPECT_EQ(sim.live_chunks(), 0u);
}

TEST(FaultBackendTest, CountsFromTheMomentItIsArmedAndFailsCountCallsInARow) {
  SimBackend sim;
  FaultBackend fault(sim);
  const std::uintptr_t addr = fault.reserve(8 * kPageBytes);
  const ChunkHandle chunk = fault.create(kPageBytes);
  fault.map(addr, kPageBytes, chunk);  // map call 1, before arming
  fault.arm({BackendCall::kMap, 1, 2, FaultError::kBackendError});
  EXPECT_THROW(fault.map(addr + kPageBytes, kPageBytes, chunk), BackendError);
  EXPECT_THROW(fault.map(addr + 2 * kPageBytes, kPageBytes, chunk), BackendError);
  fault.map(addr + 3 * kPageBytes, kPageBytes, chunk);
  EXPECT_EQ(sim.live_mappings(), 2u);
  EXPECT_EQ(fault.live_mappings(), 2u);
  EXPECT_EQ(fault.injected_faults(), 2u);
}

TEST(FaultBackendTest, AnOutOfMemoryFaultThrowsOutOfMemoryError) {
  SimBackend sim;
  FaultBackend fault(sim);
  fault.arm({BackendCall::kCreate, 1, 1, FaultError::kOutOfMemory});
  try {
    fault.create(kPageBytes);
    ADD_FAILURE() << "no error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), kPageBytes);
    EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sim.live_chunks(), 0u);
}

TEST(FaultBackendTest, ACallRejectedByTheContractNeverCountsTowardsAFault) {
  SimBackend sim;
  FaultBackend fault(sim);
  fault.arm({BackendCall::kCreate, 1, 1, FaultError::kBackendError});
  try {
    fault.create(kPageBytes + 1);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  }
  EXPECT_EQ(fault.calls_seen(BackendCall::kCreate), 0u);
  EXPECT_THROW(fault.create(kPageBytes), BackendError);  // the armed fault is still ahead
}

TEST(FaultBackendTest, ArmingTwiceReplacesTheFaultAndDisarmingStopsIt) {
  SimBackend sim;
  FaultBackend fault(sim);
  const std::uintptr_t addr = fault.reserve(kPageBytes);
  fault.arm({BackendCall::kReserve, 1, 1, FaultError::kBackendError});
  fault.arm({BackendCall::kReserve, 2, 1, FaultError::kBackendError});
  const std::uintptr_t second = fault.reserve(kPageBytes);  // the first fault was replaced
  fault.disarm_all();
  const std::uintptr_t third = fault.reserve(kPageBytes);
  EXPECT_EQ(fault.injected_faults(), 0u);
  for (std::uintptr_t a : {addr, second, third}) fault.address_free(a, kPageBytes);
  EXPECT_EQ(sim.live_reservations(), 0u);
}

TEST(FaultBackendTest, ABadFaultIsRejected) {
  SimBackend sim;
  FaultBackend fault(sim);
  EXPECT_THROW(fault.arm({BackendCall::kCreate, 0, 1, FaultError::kBackendError}), Error);
  EXPECT_THROW(fault.arm({BackendCall::kCreate, 1, 0, FaultError::kBackendError}), Error);
  EXPECT_THROW(fault.arm({BackendCall::kCount, 1, 1, FaultError::kBackendError}), Error);
  EXPECT_NO_THROW(fault.create(kPageBytes));
}

// What the lake needs of a wrapper (the allocator fuzzer runs the lake over FaultBackend(HostBackend)): export,
// scrub and import go to the inner backend, never failed on purpose; an imported chunk is then mapped and released
// through the wrapper like a created one, armed faults included.
TEST(FaultBackendTest, ExportScrubAndImportAreTheInnerBackendsAndAnImportTakesTheArmedFaultsAfterwards) {
  SimBackend sim;
  EXPECT_FALSE(FaultBackend(sim).imports_chunks());
  HostBackend lender_host(kPageBytes);
  HostBackend borrower_host(kPageBytes);
  FaultBackend lender(lender_host);
  FaultBackend borrower(borrower_host);
  EXPECT_TRUE(borrower.imports_chunks());
  const ChunkHandle chunk = lender.create(kPageBytes);
  lender.scrub(chunk);
  const ExportedChunk exported = lender.export_chunk(chunk);
  const ChunkHandle imported = borrower.import_chunk(::dup(exported.fd), exported.fd_offset_bytes, kPageBytes);
  EXPECT_EQ(borrower.live_imported_bytes(), kPageBytes);
  EXPECT_EQ(borrower_host.live_imported_bytes(), kPageBytes);
  const std::uintptr_t here = borrower.reserve(kPageBytes);
  borrower.map(here, kPageBytes, imported);
  borrower.set_access(here, kPageBytes);
  std::memset(reinterpret_cast<void*>(here), 0x5A, kPageBytes);
  const std::uintptr_t there = lender.reserve(kPageBytes);
  lender.map(there, kPageBytes, chunk);
  lender.set_access(there, kPageBytes);
  EXPECT_EQ(reinterpret_cast<const unsigned char*>(there)[kPageBytes - 1], 0x5A) << "one chunk, seen from both";
  lender.unmap(there, kPageBytes);
  lender.address_free(there, kPageBytes);
  borrower.unmap(here, kPageBytes);
  borrower.address_free(here, kPageBytes);
  borrower.arm({BackendCall::kRelease, 1, 1, FaultError::kBackendError});
  EXPECT_THROW(borrower.release(imported), BackendError);
  EXPECT_EQ(borrower_host.live_chunks(), 1u) << "a release that failed leaves the import";
  borrower.release(imported);
  lender.release(chunk);
  EXPECT_EQ(lender_host.live_chunks() + borrower_host.live_chunks(), 0u);
}

}  // namespace
}  // namespace gmlake
