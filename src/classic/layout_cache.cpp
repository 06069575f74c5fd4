// LayoutCache: checks the device list and index, then hands each call to that device's Shard.
#include "gmlake/classic/layout_cache.h"

#include <algorithm>
#include <string>

#include "gmlake/error.h"
#include "layout_cache_shard.h"

namespace gmlake::classic {
namespace {

[[noreturn]] void invalid(const std::string& why) { throw Error(ErrorCode::kInvalidArgument, "LayoutCache: " + why); }

}  // namespace

LayoutCache::LayoutCache(const std::vector<Backend*>& devices, const LayoutCacheOptions& options) {
  if (devices.empty()) invalid("no device");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == nullptr) invalid("device " + std::to_string(i) + " is nullptr");
    if (std::find(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(i), devices[i]) !=
        devices.begin() + static_cast<std::ptrdiff_t>(i)) {
      invalid("device " + std::to_string(i) + " repeats an earlier device's backend");
    }
  }
  shards_.reserve(devices.size());
  for (Backend* device : devices) shards_.push_back(std::make_unique<Shard>(*device, options));
}

LayoutCache::LayoutCache(Backend& device, const LayoutCacheOptions& options)
    : LayoutCache(std::vector<Backend*>{&device}, options) {}

LayoutCache::~LayoutCache() = default;

LayoutCache::Shard& LayoutCache::shard(DeviceIndex device) const {
  if (device >= shards_.size()) {
    invalid("device " + std::to_string(device) + " out of range (" + std::to_string(shards_.size()) + " devices)");
  }
  return *shards_[device];
}

void* LayoutCache::allocate(const Layout& layout, DeviceIndex device) { return shard(device).allocate(layout); }
void LayoutCache::retain(void* ptr, DeviceIndex device) { shard(device).retain(ptr); }
void LayoutCache::release(void* ptr, DeviceIndex device) { shard(device).release(ptr); }
std::uint64_t LayoutCache::use_count(const void* ptr, DeviceIndex device) const { return shard(device).use_count(ptr); }

void LayoutCache::clear() {
  for (const auto& s : shards_) s->clear();
}

const Backend& LayoutCache::backend(DeviceIndex device) const { return shard(device).backend(); }
LayoutCacheStats LayoutCache::stats(DeviceIndex device) const { return shard(device).stats(); }

void LayoutCache::check_invariants() const {
  for (const auto& s : shards_) s->check_invariants();
}

}  // namespace gmlake::classic
