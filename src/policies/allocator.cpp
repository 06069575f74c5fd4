// make_allocator: the one place that knows every policy.
#include "gmlake/allocator.h"

#include <string>

#include "./gmlake/stitching_allocator.h"  // ./: this folder's gmlake/, not include/gmlake/
#include "gmlake/error.h"
#include "async/async_allocator.h"
#include "caching/caching_allocator.h"
#include "expandable/expandable_allocator.h"

namespace gmlake {

std::unique_ptr<Allocator> make_allocator(const Config& config, Backend& backend, StreamEvents* events,
                                          Clock* clock, ChunkProvider* lake) {
  // Each allocator's constructor validates the config (once): not here as well.
  if (events != nullptr && config.policy != Policy::kGmlake) {
    throw Error(ErrorCode::kConfig, std::string("gmlake config: policy: ") + to_string(config.policy) +
                                        " does not support asynchronous streams yet; use gmlake");
  }
  switch (config.policy) {
    case Policy::kGmlake: return std::make_unique<engine::StitchingAllocator>(config, backend, events, clock, lake);
    case Policy::kCaching: return std::make_unique<CachingAllocator>(config, backend);
    case Policy::kExpandable: return std::make_unique<ExpandableAllocator>(config, backend);
    case Policy::kAsync: return std::make_unique<AsyncAllocator>(config, backend);
  }
  throw Error(ErrorCode::kConfig, "gmlake config: policy: unknown policy");
}

}  // namespace gmlake
