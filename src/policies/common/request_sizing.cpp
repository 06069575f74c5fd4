#include "request_sizing.h"

#include "gmlake/units.h"

namespace gmlake::policy {

std::optional<std::uint64_t> round_request_bytes(std::uint64_t size_bytes) {
  std::uint64_t rounded = 0;
  if (!checked_round_up(size_bytes < kRoundBytes ? kRoundBytes : size_bytes, kRoundBytes, &rounded)) {
    return std::nullopt;
  }
  return rounded;
}

PoolKind pool_for(const Config& config, std::uint64_t rounded_bytes) {
  return rounded_bytes <= config.small_request_max_bytes ? PoolKind::kSmall : PoolKind::kLarge;
}

std::optional<std::uint64_t> caching_segment_bytes(const Config& config, std::uint64_t rounded_bytes) {
  if (pool_for(config, rounded_bytes) == PoolKind::kSmall) return config.small_segment_bytes;
  if (rounded_bytes < config.large_segment_threshold_bytes) return config.large_segment_bytes;
  std::uint64_t segment_bytes = 0;
  if (!checked_round_up(rounded_bytes, config.large_round_bytes, &segment_bytes)) return std::nullopt;
  return segment_bytes;
}

bool caching_should_split(const Config& config, PoolKind pool, std::uint64_t block_bytes,
                          std::uint64_t rounded_bytes) {
  const std::uint64_t remaining_bytes = block_bytes - rounded_bytes;
  if (pool == PoolKind::kSmall) return remaining_bytes >= kRoundBytes;
  return remaining_bytes > config.small_request_max_bytes;
}

bool expandable_should_split(std::uint64_t block_bytes, std::uint64_t rounded_bytes) {
  return block_bytes - rounded_bytes >= kRoundBytes;
}

}  // namespace gmlake::policy
