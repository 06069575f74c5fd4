// make_allocator: the one place that knows every policy.
#include "gmlake/allocator.h"

#include "engine/stitching_allocator.h"
#include "gmlake/error.h"
#include "policy/caching_allocator.h"
#include "policy/expandable_allocator.h"

namespace gmlake {

std::unique_ptr<Allocator> make_allocator(const Config& config, Backend& backend) {
  config.validate();
  switch (config.policy) {
    case Policy::kGmlake: return std::make_unique<engine::StitchingAllocator>(config, backend);
    case Policy::kCaching: return std::make_unique<CachingAllocator>(config, backend);
    case Policy::kExpandable: return std::make_unique<ExpandableAllocator>(config, backend);
  }
  throw Error(ErrorCode::kConfig, "gmlake config: policy: unknown policy");
}

}  // namespace gmlake
