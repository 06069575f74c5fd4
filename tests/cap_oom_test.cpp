// A request that can never fit under the cap fails with OutOfMemoryError and leaves no
// memory reserved behind (on a shared GPU that would starve the neighbours until empty_cache), for every policy.
#include <gtest/gtest.h>

#include <memory>

#include "gmlake/allocator.h"
#include "gmlake/backend_factory.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

class CapOomTest : public ::testing::TestWithParam<Policy> {};

TEST_P(CapOomTest, ARequestAboveTheCapFailsAndReservesNothing) {
  Config config = parse_config("cap_bytes:256M");
  config.policy = GetParam();
  std::unique_ptr<Backend> backend = make_backend("sim", config.page_bytes);
  std::unique_ptr<Allocator> allocator = make_allocator(config, *backend);
  EXPECT_THROW(allocator->allocate(300 * kMiB, 0), OutOfMemoryError);
  EXPECT_EQ(allocator->stats().reserved_bytes.current, 0) << to_string(GetParam());
  // And the pool still works for what fits.
  void* p = allocator->allocate(100 * kMiB, 0);
  EXPECT_NE(p, nullptr);
  allocator->deallocate(p);
}

INSTANTIATE_TEST_SUITE_P(Policies, CapOomTest, ::testing::Values(Policy::kCaching, Policy::kExpandable, Policy::kGmlake),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace gmlake
