// The device pool's geometry (include/gmlake/device/pool_geometry.h), on the CPU: size classes, blocks per slab,
// bitmap words and their valid bits, the state word, and the metadata layout.
#include "gmlake/device/pool_geometry.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>

#include "gmlake/units.h"

namespace gmlake::device {
namespace {

TEST(DevicePoolGeometry, EveryRequestGetsTheSmallestClassThatHoldsIt) {
  EXPECT_EQ(class_of(1), 0u);
  EXPECT_EQ(class_of(16), 0u);
  EXPECT_EQ(class_of(17), 1u);
  EXPECT_EQ(class_of(kMaxClassBytes), kNumClasses - 1);
  EXPECT_EQ(class_of(kMaxClassBytes + 1), kLargeClass);
  for (std::uint64_t size = 1; size <= kMaxClassBytes; size += size / 7 + 1) {
    const unsigned c = class_of(size);
    ASSERT_LT(c, kNumClasses);
    EXPECT_GE(class_bytes(c), size);
    if (c > 0) {
      EXPECT_LT(class_bytes(c - 1), size) << size;  // the smallest one
    }
  }
}

TEST(DevicePoolGeometry, ClassesCutASlabIntoPowerOfTwoBlocksWhoseBitsFitTheBitmap) {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    EXPECT_TRUE(is_pow2(class_bytes(c)));
    EXPECT_EQ(std::uint64_t{blocks_per_slab(c)} * class_bytes(c), kSlabBytes);  // no byte of a slab unused
    EXPECT_LE(bitmap_words(c), kBitmapWords);
    EXPECT_TRUE(is_pow2(bitmap_words(c)));  // take_block wraps with a mask
    std::uint64_t valid = 0;
    for (std::uint32_t w = 0; w < kBitmapWords; ++w) valid += static_cast<std::uint64_t>(std::popcount(valid_bits(c, w)));
    EXPECT_EQ(valid, blocks_per_slab(c)) << c;  // exactly one valid bit per block
  }
  EXPECT_EQ(blocks_per_slab(0), 65536u);
  EXPECT_EQ(valid_bits(kNumClasses - 1, 0), 0xFu);  // 256 KiB: 4 blocks
}

TEST(DevicePoolGeometry, LargeRequestsTakeWholeSlabs) {
  EXPECT_EQ(large_slabs(kMaxClassBytes + 1), 1u);
  EXPECT_EQ(large_slabs(kSlabBytes), 1u);
  EXPECT_EQ(large_slabs(kSlabBytes + 1), 2u);
  EXPECT_EQ(large_slabs(5 * kSlabBytes), 5u);
}

TEST(DevicePoolGeometry, TheStateWordKeepsStateAndCountApart) {
  const std::uint64_t w = make_word(small_state(3), 12345);
  EXPECT_EQ(state_of(w), 4u);
  EXPECT_EQ(count_of(w), 12345u);
  EXPECT_TRUE(is_small_state(state_of(w)));
  EXPECT_FALSE(is_small_state(kStateFree));
  EXPECT_FALSE(is_small_state(kStateLargeHead));
  EXPECT_FALSE(is_small_state(kStateLargeBody));
  EXPECT_TRUE(is_small_state(small_state(kNumClasses - 1)));
  EXPECT_EQ(make_word(kStateFree, 0), 0u);  // zeroed metadata is a pool of free slabs
  // A state change by addition (pool.cuh: add_state) keeps the visitors' count.
  const std::uint64_t body = make_word(kStateLargeBody, 7);
  const std::uint64_t head = body + (std::uint64_t{kStateLargeHead} << 32) - (std::uint64_t{kStateLargeBody} << 32);
  EXPECT_EQ(state_of(head), kStateLargeHead);
  EXPECT_EQ(count_of(head), 7u);
}

TEST(DevicePoolGeometry, TheMetadataLayoutGivesEachSlabItsWordAndAnAlignedBitmap) {
  EXPECT_EQ(kBitmapBytes, 8 * kKiB);
  EXPECT_GE(kWordsOffsetBytes, sizeof(DevicePoolHeader));
  EXPECT_EQ(kWordsOffsetBytes % 256, 0u);
  for (std::uint64_t max_slabs : {1ull, 2ull, 1000ull, 65536ull}) {
    const std::uint64_t bitmaps = bitmaps_offset_bytes(max_slabs);
    EXPECT_GE(bitmaps, kWordsOffsetBytes + max_slabs * 8);  // the words fit before the bitmaps
    EXPECT_EQ(bitmaps % kBitmapBytes, 0u);
    EXPECT_EQ(metadata_bytes(max_slabs, max_slabs) - metadata_bytes(max_slabs, 0), max_slabs * kBitmapBytes);
  }
}

}  // namespace
}  // namespace gmlake::device
