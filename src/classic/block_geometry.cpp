// BlockGeometry: validates a block pool's options once, so the pools' hot paths only do arithmetic.
#include <bit>
#include <limits>
#include <string>

#include "gmlake/error.h"
#include "gmlake/classic/block_pool.h"
#include "gmlake/units.h"

namespace gmlake::classic {
namespace {

[[noreturn]] void invalid(const std::string& why) { throw Error(ErrorCode::kInvalidArgument, "BlockPool: " + why); }

std::uint64_t checked_stride(const BlockPoolOptions& options, std::uint64_t granularity_bytes) {
  if (options.block_bytes == 0) invalid("block_bytes is 0");
  if (!is_pow2(options.alignment_bytes)) {
    invalid("alignment_bytes " + std::to_string(options.alignment_bytes) + " is not a power of two");
  }
  if (options.alignment_bytes > granularity_bytes) {
    invalid("alignment_bytes " + std::to_string(options.alignment_bytes) + " exceeds the backend's granularity " +
            std::to_string(granularity_bytes));
  }
  std::uint64_t stride = 0;
  if (!checked_round_up(options.block_bytes, options.alignment_bytes, &stride)) invalid("block_bytes overflows");
  return stride;
}

std::uint64_t checked_region(const BlockPoolOptions& options, std::uint64_t granularity_bytes, std::uint64_t stride) {
  std::uint64_t region = 0;
  const std::uint64_t wanted = options.region_bytes == 0 ? granularity_bytes : options.region_bytes;
  if (!checked_round_up(wanted, granularity_bytes, &region)) invalid("region_bytes overflows");
  if (region < stride) {
    invalid("a region of " + std::to_string(region) + " bytes holds no block of " + std::to_string(stride) +
            " bytes (raise region_bytes)");
  }
  if (options.max_regions == 0) invalid("max_regions is 0");
  if (region > std::numeric_limits<std::uint64_t>::max() / options.max_regions) {
    invalid("region_bytes x max_regions overflows");
  }
  return region;
}

}  // namespace

BlockGeometry::BlockGeometry(const BlockPoolOptions& options, std::uint64_t granularity_bytes)
    : block_bytes_(options.block_bytes),
      alignment_bytes_(options.alignment_bytes),
      stride_bytes_(checked_stride(options, granularity_bytes)),
      region_bytes_(checked_region(options, granularity_bytes, stride_bytes_)),
      max_regions_(options.max_regions),
      stride_shift_(is_pow2(stride_bytes_) ? std::countr_zero(stride_bytes_) : -1) {
  if (max_blocks() > kMaxBlocks) {
    invalid("the pool could hold " + std::to_string(max_blocks()) + " blocks, more than the limit " +
            std::to_string(kMaxBlocks) + " (lower max_regions or region_bytes)");
  }
}

}  // namespace gmlake::classic
