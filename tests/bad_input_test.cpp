// Bad input on the C++ Allocator API, the same for every policy (docs/errors.md; the C API's are in
// c_api_test.cpp): each has one defined answer, counts what it should, and leaves the allocator as it was.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "gmlake/allocator.h"
#include "gmlake/error.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"
#include "policy_test_support.h"

namespace gmlake {
namespace {

class BadInputTest : public ::testing::TestWithParam<Policy> {
 protected:
  void SetUp() override {
    Config config;
    config.policy = GetParam();
    allocator_ = make_allocator(config, backend_);
    live_ = allocator_->allocate(3 * kMiB, 0);
  }
  void TearDown() override {
    allocator_->deallocate(live_);
    allocator_->check_invariants();
  }
  SimBackend backend_;
  std::unique_ptr<Allocator> allocator_;
  void* live_ = nullptr;
};

std::string policy_name(const ::testing::TestParamInfo<Policy>& info) { return to_string(info.param); }

TEST_P(BadInputTest, SizesOfTwoToThe63AndAboveAreOutOfMemoryAndChangeNoBlock) {
  for (std::uint64_t size : {std::uint64_t{1} << 63, (std::uint64_t{1} << 63) - 1, UINT64_MAX, UINT64_MAX - 511}) {
    const testing::Snapshot before = testing::Snapshot::of(*allocator_);
    try {
      allocator_->allocate(size, 0);
      ADD_FAILURE() << size << ": no error";
    } catch (const OutOfMemoryError& e) {
      EXPECT_EQ(e.requested_bytes(), size);
    }
    EXPECT_EQ(allocator_->stats().num_ooms, before.stats.num_ooms + 1);
    EXPECT_TRUE(testing::same_blocks(before.blocks, allocator_->blocks()));
    EXPECT_EQ(allocator_->stats().allocated_bytes.current, before.stats.allocated_bytes.current);
    allocator_->check_invariants();
  }
}

TEST_P(BadInputTest, SizeZeroIsNullAndFreeingNullIsNothing) {
  const testing::Snapshot before = testing::Snapshot::of(*allocator_);
  EXPECT_EQ(allocator_->allocate(0, 0), nullptr);
  allocator_->deallocate(nullptr);
  testing::expect_unchanged(before, *allocator_);
  EXPECT_EQ(allocator_->stats().invalid_frees, 0u);
}

TEST_P(BadInputTest, DoubleUnknownAndInteriorFreesAreRejectedAndCounted) {
  void* p = allocator_->allocate(kMiB, 0);
  allocator_->deallocate(p);
  testing::expect_invalid_pointer(*allocator_, [&] { allocator_->deallocate(p); });
  testing::expect_invalid_pointer(*allocator_, [&] { allocator_->deallocate(testing::offset(live_, kRoundBytes)); });
  testing::expect_invalid_pointer(*allocator_, [&] { allocator_->deallocate(testing::offset(live_, 1)); });
  int on_stack = 0;
  testing::expect_invalid_pointer(*allocator_, [&] { allocator_->deallocate(&on_stack); });
  EXPECT_EQ(allocator_->stats().invalid_frees, 4u);
}

TEST_P(BadInputTest, DeferredFreesOutOfOrderAreRejected) {
  void* p = allocator_->allocate(kMiB, 0);
  testing::expect_invalid_pointer(*allocator_, [&] { allocator_->end_deferred_free(p); });  // never begun
  allocator_->begin_deferred_free(p);
  testing::expect_invalid_pointer(*allocator_, [&] { allocator_->begin_deferred_free(p); });  // begun twice
  testing::expect_invalid_pointer(*allocator_, [&] { allocator_->deallocate(p); });            // pending
  allocator_->end_deferred_free(p);
  testing::expect_invalid_pointer(*allocator_, [&] { allocator_->end_deferred_free(p); });  // ended twice
  EXPECT_EQ(allocator_->stats().invalid_frees, 4u);
}

TEST_P(BadInputTest, FindBlockFindsOnlyTheStartsOfLiveAndPendingBlocks) {
  void* p = allocator_->allocate(kMiB, 7);
  const auto found = allocator_->find_block(p);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->address, testing::addr(p));
  EXPECT_EQ(found->requested_bytes, kMiB);
  EXPECT_EQ(found->stream, 7u);
  EXPECT_FALSE(found->pending_free);
  allocator_->begin_deferred_free(p);
  EXPECT_TRUE(allocator_->find_block(p)->pending_free);
  allocator_->end_deferred_free(p);
  int on_stack = 0;
  for (const void* other : {p, testing::offset(live_, kRoundBytes), static_cast<void*>(&on_stack),
                            static_cast<void*>(nullptr)}) {
    EXPECT_FALSE(allocator_->find_block(other).has_value());
  }
  EXPECT_EQ(allocator_->stats().invalid_frees, 0u) << "a lookup is not a free";
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, BadInputTest,
                         ::testing::Values(Policy::kGmlake, Policy::kCaching, Policy::kExpandable), policy_name);

}  // namespace
}  // namespace gmlake
