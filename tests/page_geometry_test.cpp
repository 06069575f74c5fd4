// PageGeometry (src/policies/gmlake/page_geometry.h): the engine's page size and its byte/page conversions.
#include "policies/gmlake/page_geometry.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "gmlake/config.h"
#include "gmlake/units.h"

namespace gmlake::engine {
namespace {

TEST(PageGeometryTest, IsBuiltFromThePageSizeOrItsLog2) {
  constexpr PageGeometry two_mib(2 * kMiB);
  static_assert(two_mib.shift() == 21 && two_mib.bytes() == 2 * kMiB);
  static_assert(PageGeometry::from_shift(21) == two_mib);
  EXPECT_EQ(PageGeometry(64 * kKiB).shift(), 16u);
  EXPECT_EQ(PageGeometry(Config{}.page_bytes), PageGeometry(kPageBytes)) << "the default config's page";
  EXPECT_EQ(PageGeometry(kPageBytes).shift(), kPageShift);
  EXPECT_FALSE(PageGeometry(2 * kMiB) == PageGeometry(4 * kMiB));
}

TEST(PageGeometryTest, ConvertsBetweenPagesAndBytes) {
  const PageGeometry page(2 * kMiB);
  EXPECT_EQ(page.bytes_of(0), 0u);
  EXPECT_EQ(page.bytes_of(3), 6 * kMiB);
  EXPECT_EQ(page.pages_in(6 * kMiB), 3u);
  EXPECT_EQ(page.pages_in(6 * kMiB + 1), 3u) << "rounded down";
  EXPECT_EQ(page.pages_in(2 * kMiB - 1), 0u) << "less than a page is no page";
  EXPECT_EQ(page.pages_in(1 * kTiB), std::uint64_t{1} << 19);
  for (std::uint64_t pages : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4096}, std::uint64_t{1} << 30}) {
    EXPECT_EQ(page.pages_in(page.bytes_of(pages)), pages);
  }
}

TEST(PageGeometryTest, FirstAndLastPageBoundARange) {
  const PageGeometry page(2 * kMiB);
  EXPECT_EQ(page.first_page(0), 0u);
  EXPECT_EQ(page.first_page(2 * kMiB - 1), 0u);
  EXPECT_EQ(page.first_page(2 * kMiB), 1u);
  EXPECT_EQ(page.last_page(0, 1), 0u);
  EXPECT_EQ(page.last_page(0, 2 * kMiB), 0u) << "a range of exactly one page";
  EXPECT_EQ(page.last_page(0, 2 * kMiB + 1), 1u);
  EXPECT_EQ(page.last_page(2 * kMiB - 512, 1024), 1u) << "a small range across a page boundary";
  EXPECT_EQ(page.last_page(4 * kMiB, 512), 2u);
  // A range's pages are last - first + 1, the whole pages it touches.
  EXPECT_EQ(page.last_page(3 * kMiB, 4 * kMiB) - page.first_page(3 * kMiB) + 1, 3u);
}

}  // namespace
}  // namespace gmlake::engine
