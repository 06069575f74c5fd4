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
  EXPECT_EQ(page.bytes_of(Pages{0}), 0u);
  EXPECT_EQ(page.bytes_of(Pages{3}), 6 * kMiB);
  EXPECT_EQ(page.pages_in(6 * kMiB), Pages{3});
  EXPECT_EQ(page.pages_in(6 * kMiB + 1), Pages{3}) << "rounded down";
  EXPECT_EQ(page.pages_in(2 * kMiB - 1), Pages{0}) << "less than a page is no page";
  EXPECT_EQ(page.pages_in(1 * kTiB), Pages{std::uint64_t{1} << 19});
  for (const Pages pages : {Pages{0}, Pages{1}, Pages{4096}, Pages{std::uint64_t{1} << 30}}) {
    EXPECT_EQ(page.pages_in(page.bytes_of(pages)), pages);
  }
}

TEST(PageGeometryTest, FirstAndLastPageBoundARange) {
  const PageGeometry page(2 * kMiB);
  EXPECT_EQ(page.first_page(0), PageNumber{0});
  EXPECT_EQ(page.first_page(2 * kMiB - 1), PageNumber{0});
  EXPECT_EQ(page.first_page(2 * kMiB), PageNumber{1});
  EXPECT_EQ(page.last_page(0, 1), PageNumber{0});
  EXPECT_EQ(page.last_page(0, 2 * kMiB), PageNumber{0}) << "a range of exactly one page";
  EXPECT_EQ(page.last_page(0, 2 * kMiB + 1), PageNumber{1});
  EXPECT_EQ(page.last_page(2 * kMiB - 512, 1024), PageNumber{1}) << "a small range across a page boundary";
  EXPECT_EQ(page.last_page(4 * kMiB, 512), PageNumber{2});
  // A range's pages are last - first + 1, the whole pages it touches.
  EXPECT_EQ(page.last_page(3 * kMiB, 4 * kMiB) - page.first_page(3 * kMiB) + Pages{1}, Pages{3});
}

TEST(PageGeometryTest, APageNumbersOffsetIsItsFirstByte) {
  const PageGeometry page(2 * kMiB);
  EXPECT_EQ(page.offset_of(PageNumber{0}), 0u);
  EXPECT_EQ(page.offset_of(PageNumber{3}), 6 * kMiB);
  for (const std::uint64_t offset : {std::uint64_t{0}, 2 * kMiB, 6 * kMiB, 1 * kTiB}) {
    EXPECT_EQ(page.offset_of(page.first_page(offset)), offset) << "a page's first byte is in it";
  }
  EXPECT_EQ(page.offset_of(page.first_page(6 * kMiB + 512)), 6 * kMiB) << "rounded down to its page";
}

}  // namespace
}  // namespace gmlake::engine
