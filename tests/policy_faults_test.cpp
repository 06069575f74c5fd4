// Every policy under backend failures, one failing call at a time (fault_backend.h): the failing call surfaces
// as OutOfMemoryError or BackendError, the allocator stays consistent (check_invariants) and usable, and
// nothing leaks. The regression tests for the failures the fault sweep (fault_sweep_test.cpp) found are here.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gmlake/allocator.h"
#include "gmlake/error.h"
#include "backends/fault/fault_backend.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

class PolicyFaultsTest : public ::testing::TestWithParam<Policy> {
 protected:
  void SetUp() override { make(""); }
  void TearDown() override {
    allocator_.reset();
    EXPECT_EQ(sim_.live_chunks(), 0u) << "chunks leaked";
    EXPECT_EQ(sim_.live_mappings(), 0u) << "mappings leaked";
    EXPECT_EQ(sim_.live_reservations(), 0u) << "reservations leaked";
  }

  // A fresh allocator over a fresh FaultBackend (nothing armed) over the same sim backend.
  void make(const std::string& conf) {
    allocator_.reset();
    fault_ = std::make_unique<FaultBackend>(sim_);
    Config config = parse_config(conf);
    config.policy = GetParam();
    allocator_ = make_allocator(config, *fault_);
  }

  // Blocks of several sizes and pools, so that every policy holds several chunks or segments.
  std::vector<void*> allocate_some() {
    std::vector<void*> out;
    for (std::uint64_t size : {kKiB, 700 * kKiB, 3 * kMiB, 12 * kMiB, 30 * kMiB, 5 * kMiB}) {
      out.push_back(allocator_->allocate(size, 0));
    }
    return out;
  }
  void free_all(std::vector<void*>& blocks) {
    for (void* p : blocks) allocator_->deallocate(p);
    blocks.clear();
  }
  std::int64_t reserved() const { return allocator_->stats().reserved_bytes.current; }
  // The allocator still works: a block can be had, written nowhere (sim), and freed.
  void expect_usable() {
    void* p = allocator_->allocate(4 * kMiB, 0);
    EXPECT_NE(p, nullptr);
    allocator_->deallocate(p);
    allocator_->check_invariants();
  }

  SimBackend sim_;
  std::unique_ptr<FaultBackend> fault_;
  std::unique_ptr<Allocator> allocator_;
};

std::string policy_name(const ::testing::TestParamInfo<Policy>& info) { return to_string(info.param); }

TEST_P(PolicyFaultsTest, AnAllocationWhoseBackendCallFailsThrowsBackendErrorAndChangesNoBlock) {
  for (BackendCall kind : {BackendCall::kReserve, BackendCall::kCreate, BackendCall::kMap, BackendCall::kSetAccess}) {
    SCOPED_TRACE(std::string(to_string(kind)));
    make("");
    fault_->arm({kind, 1, 1, FaultError::kBackendError});
    EXPECT_THROW(allocator_->allocate(40 * kMiB, 0), BackendError);
    EXPECT_EQ(fault_->injected_faults(), 1u);
    fault_->disarm_all();
    allocator_->check_invariants();
    EXPECT_TRUE(allocator_->blocks().empty());
    EXPECT_EQ(allocator_->stats().num_allocs, 0u);
    EXPECT_EQ(static_cast<std::uint64_t>(reserved()), sim_.live_chunk_bytes());
    expect_usable();
  }
}

TEST_P(PolicyFaultsTest, EveryOutOfMemoryAnAllocationThrowsIsCountedInNumOoms) {
  for (BackendCall kind : {BackendCall::kReserve, BackendCall::kCreate, BackendCall::kMap, BackendCall::kSetAccess}) {
    SCOPED_TRACE(std::string(to_string(kind)));
    make("");
    fault_->arm({kind, 1, 16, FaultError::kOutOfMemory});  // the policy's own retries fail too (a new arena: 11)
    EXPECT_THROW(allocator_->allocate(40 * kMiB, 0), OutOfMemoryError);
    fault_->disarm_all();
    EXPECT_EQ(allocator_->stats().num_ooms, 1u);
    allocator_->check_invariants();
    expect_usable();
  }
}

TEST_P(PolicyFaultsTest, AFailedUnmapInEmptyCacheChangesNothingAndTheNextEmptyCacheReleasesEverything) {
  std::vector<void*> blocks = allocate_some();
  free_all(blocks);
  const std::int64_t before = reserved();
  ASSERT_GT(before, 0);
  fault_->arm({BackendCall::kUnmap, 1, 1, FaultError::kBackendError});
  EXPECT_THROW(allocator_->empty_cache(), BackendError);
  allocator_->check_invariants();
  EXPECT_EQ(static_cast<std::uint64_t>(reserved()), sim_.live_chunk_bytes());
  allocator_->empty_cache();
  allocator_->check_invariants();
  EXPECT_EQ(reserved(), 0);
  EXPECT_EQ(sim_.live_chunks(), 0u);
  expect_usable();
}

TEST_P(PolicyFaultsTest, AFailedReleaseInEmptyCacheKeepsTheChunkReservedUntilTheNextEmptyCache) {
  std::vector<void*> blocks = allocate_some();
  free_all(blocks);
  fault_->arm({BackendCall::kRelease, 2, 1, FaultError::kBackendError});
  EXPECT_THROW(allocator_->empty_cache(), BackendError);
  allocator_->check_invariants();
  EXPECT_GT(reserved(), 0) << "the chunk that failed to release is still held";
  EXPECT_EQ(static_cast<std::uint64_t>(reserved()), sim_.live_chunk_bytes());
  expect_usable();
  allocator_->empty_cache();
  allocator_->check_invariants();
  EXPECT_EQ(reserved(), 0);
  EXPECT_EQ(sim_.live_chunks(), 0u);
}

TEST_P(PolicyFaultsTest, AFailedAddressFreeInEmptyCacheIsRetriedByTheNextOne) {
  std::vector<void*> blocks = allocate_some();
  free_all(blocks);
  fault_->arm({BackendCall::kAddressFree, 1, 1, FaultError::kBackendError});
  const std::uint64_t reservations_before = sim_.live_reservations();
  try {
    allocator_->empty_cache();
  } catch (const BackendError&) {
    EXPECT_EQ(fault_->injected_faults(), 1u);
  }
  allocator_->check_invariants();
  EXPECT_EQ(reserved(), 0);
  allocator_->empty_cache();
  EXPECT_LE(sim_.live_reservations(), reservations_before);
  if (GetParam() == Policy::kCaching) {
    EXPECT_EQ(sim_.live_reservations(), 0u) << "caching keeps no empty segment";
  }
  expect_usable();
}

TEST_P(PolicyFaultsTest, ABackendCallFailingOnceDuringTeardownIsRetriedAndNothingLeaks) {
  for (BackendCall kind : {BackendCall::kUnmap, BackendCall::kRelease, BackendCall::kAddressFree}) {
    SCOPED_TRACE(std::string(to_string(kind)));
    make("");
    std::vector<void*> blocks = allocate_some();
    allocator_->deallocate(blocks[1]);
    fault_->arm({kind, 1, 1, FaultError::kBackendError});
    allocator_.reset();  // live blocks included
    EXPECT_EQ(fault_->injected_faults(), 1u);
    EXPECT_EQ(sim_.live_chunks() + sim_.live_mappings() + sim_.live_reservations(), 0u);
  }
}

TEST_P(PolicyFaultsTest, AnUnmapFailingWhileAnAllocationPastTheCapIsUndoneLeavesAConsistentAllocator) {
  // Found by fuzz/allocator_fuzzer: gmlake maps a block's pages one by one and meets the cap half way; undoing
  // them, an unmap fails: the page must still end up an ordinary (accessible) idle page.
  std::vector<void*> blocks = allocate_some();
  allocator_->set_cap_bytes(static_cast<std::uint64_t>(reserved()) + 2 * kPageBytes);
  fault_->arm({BackendCall::kUnmap, 1, 1, FaultError::kBackendError});
  EXPECT_THROW(allocator_->allocate(64 * kMiB, 0), OutOfMemoryError);
  fault_->disarm_all();
  allocator_->check_invariants();
  EXPECT_EQ(static_cast<std::uint64_t>(reserved()), sim_.live_chunk_bytes());
  allocator_->set_cap_bytes(0);
  void* p = allocator_->allocate(64 * kMiB, 0);  // over the page the failed unmap left mapped
  allocator_->check_invariants();
  allocator_->deallocate(p);
  free_all(blocks);
  expect_usable();
}

TEST_P(PolicyFaultsTest, AFreeNeverFailsBecauseOfTheBackend) {
  // gmlake with a bound on idle mapped memory unmaps on free; a failed unmap must not fail the free.
  for (FaultError error : {FaultError::kBackendError, FaultError::kOutOfMemory}) {
    make("max_idle_mapped_bytes:2M");
    std::vector<void*> blocks = allocate_some();
    allocator_->begin_deferred_free(blocks[0]);
    fault_->arm({BackendCall::kUnmap, 1, 1000, error});
    EXPECT_NO_THROW(allocator_->end_deferred_free(blocks[0]));
    for (std::size_t i = 1; i < blocks.size(); ++i) EXPECT_NO_THROW(allocator_->deallocate(blocks[i]));
    fault_->disarm_all();
    allocator_->check_invariants();
    EXPECT_EQ(allocator_->stats().allocated_bytes.current, 0);
    EXPECT_EQ(allocator_->stats().num_frees, blocks.size());
    expect_usable();
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, PolicyFaultsTest,
                         ::testing::Values(Policy::kGmlake, Policy::kCaching, Policy::kExpandable), policy_name);

}  // namespace
}  // namespace gmlake
