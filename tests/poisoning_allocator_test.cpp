// PoisoningAllocator: freed memory is filled with 0xDB, and a block handed out that holds any other non-zero
// byte is reported with its offset and value (a write after free). On the host backend, for every policy.
#include "adaptors/poisoning_allocator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

std::vector<PoisonViolation> g_violations;
void record(const PoisonViolation& v) { g_violations.push_back(v); }

class PoisoningAllocatorTest : public ::testing::TestWithParam<Policy> {
 protected:
  void SetUp() override {
    g_violations.clear();
    Config config;
    config.policy = GetParam();
    allocator_ = std::make_unique<PoisoningAllocator>(make_allocator(config, backend_), record);
  }
  HostBackend backend_;
  std::unique_ptr<Allocator> allocator_;
};

std::string policy_name(const ::testing::TestParamInfo<Policy>& info) { return to_string(info.param); }

TEST_P(PoisoningAllocatorTest, FreedMemoryIsPoisonedAndHandedOutAgainWithoutComplaint) {
  auto* p = static_cast<unsigned char*>(allocator_->allocate(8 * kKiB, 0));
  std::memset(p, 0x11, 8 * kKiB);
  allocator_->deallocate(p);
  EXPECT_EQ(p[0], kPoisonByte);
  EXPECT_EQ(p[8 * kKiB - 1], kPoisonByte);
  auto* q = static_cast<unsigned char*>(allocator_->allocate(8 * kKiB, 0));
  EXPECT_EQ(q, p);
  EXPECT_TRUE(g_violations.empty());
  allocator_->deallocate(q);
  allocator_->check_invariants();
}

TEST_P(PoisoningAllocatorTest, AWriteAfterFreeIsReportedWhenTheMemoryIsHandedOutAgain) {
  auto* p = static_cast<unsigned char*>(allocator_->allocate(8 * kKiB, 0));
  allocator_->deallocate(p);
  p[1234] = 0x42;
  void* q = allocator_->allocate(8 * kKiB, 0);
  ASSERT_EQ(q, p);
  ASSERT_EQ(g_violations.size(), 1u);
  EXPECT_EQ(g_violations[0].block, reinterpret_cast<std::uintptr_t>(q));
  EXPECT_EQ(g_violations[0].offset_bytes, 1234u);
  EXPECT_EQ(g_violations[0].value, 0x42);
  allocator_->deallocate(q);
}

TEST_P(PoisoningAllocatorTest, ADeferredFreeIsPoisonedOnlyWhenItCompletes) {
  auto* p = static_cast<unsigned char*>(allocator_->allocate(kKiB, 0));
  p[0] = 0x11;
  allocator_->begin_deferred_free(p);
  EXPECT_EQ(p[0], 0x11) << "the stream may still be using the memory";
  allocator_->end_deferred_free(p);
  EXPECT_EQ(p[0], kPoisonByte);
}

TEST_P(PoisoningAllocatorTest, ABadFreeTouchesNoMemoryAndIsRejected) {
  auto* p = static_cast<unsigned char*>(allocator_->allocate(kKiB, 0));
  p[kRoundBytes] = 0x11;
  EXPECT_THROW(allocator_->deallocate(p + kRoundBytes), Error);
  EXPECT_EQ(p[kRoundBytes], 0x11);
  allocator_->deallocate(p);
  EXPECT_THROW(allocator_->deallocate(p), Error);
  EXPECT_EQ(allocator_->stats().invalid_frees, 2u);
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, PoisoningAllocatorTest,
                         ::testing::Values(Policy::kGmlake, Policy::kCaching, Policy::kExpandable), policy_name);

TEST(PoisoningAllocatorConfigTest, MemoryTheCpuCannotTouchIsRejected) {
  SimBackend sim;
  try {
    PoisoningAllocator a(make_allocator(Config{}, sim));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConfig);
  }
}

}  // namespace
}  // namespace gmlake
