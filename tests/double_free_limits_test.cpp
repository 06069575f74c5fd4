// What double-free detection covers (docs/errors.md). A second free of an address is
// rejected while no block lives there; once the address was handed out again, the second free is the new
// block's free and cannot be told from it: it frees the new block. This test pins both halves, so that the
// documentation cannot drift from the behaviour.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "gmlake/allocator.h"
#include "gmlake/backend_factory.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

class DoubleFreeLimitsTest : public ::testing::TestWithParam<Policy> {};

TEST_P(DoubleFreeLimitsTest, DetectedUntilTheAddressIsHandedOutAgainThenItFreesTheNewBlock) {
  Config config;
  config.policy = GetParam();
  std::unique_ptr<Backend> backend = make_backend("sim", config.page_bytes);
  std::unique_ptr<Allocator> allocator = make_allocator(config, *backend);
  void* a = allocator->allocate(1 * kMiB, 0);
  allocator->deallocate(a);
  EXPECT_THROW(allocator->deallocate(a), Error);  // detected: no block lives at `a`
  EXPECT_EQ(allocator->stats().invalid_frees, 1u);
  // Blocks of the same size until one lands at `a`: every policy hands a freed range out again, at the latest
  // once the other free space is taken.
  std::vector<void*> others;
  void* b = allocator->allocate(1 * kMiB, 0);
  while (b != a && others.size() < 64) {
    others.push_back(b);
    b = allocator->allocate(1 * kMiB, 0);
  }
  ASSERT_EQ(b, a) << "no block of 65 landed at the freed address";
  allocator->deallocate(a);  // the stale pointer's second free: indistinguishable, it frees b
  EXPECT_EQ(allocator->stats().allocated_bytes.current, static_cast<std::int64_t>(others.size() * kMiB));
  EXPECT_EQ(allocator->stats().invalid_frees, 1u);
  EXPECT_THROW(allocator->deallocate(b), Error);  // b's owner now gets the error
  EXPECT_EQ(allocator->stats().invalid_frees, 2u);
  for (void* p : others) allocator->deallocate(p);
}

INSTANTIATE_TEST_SUITE_P(Policies, DoubleFreeLimitsTest,
                         ::testing::Values(Policy::kCaching, Policy::kExpandable, Policy::kGmlake),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace gmlake
