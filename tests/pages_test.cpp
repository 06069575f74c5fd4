// Pages and PageNumber (src/policies/gmlake/pages.h): the engine's page counts and page numbers as types. What
// matters most is what does not compile (the static_asserts): no integer, and no page number for a count, goes
// in or comes out unnamed.
#include "policies/gmlake/pages.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <type_traits>

namespace gmlake::engine {
namespace {

// Zero overhead: one std::uint64_t, copied as one, passed in a register.
static_assert(std::is_trivially_copyable_v<Pages> && std::is_trivially_copyable_v<PageNumber>);
static_assert(sizeof(Pages) == sizeof(std::uint64_t) && sizeof(PageNumber) == sizeof(std::uint64_t));
static_assert(std::is_standard_layout_v<Pages> && std::is_standard_layout_v<PageNumber>);
// No implicit conversion from or to an integer (bytes are integers).
static_assert(!std::is_convertible_v<std::uint64_t, Pages> && !std::is_convertible_v<Pages, std::uint64_t>);
static_assert(!std::is_convertible_v<std::uint64_t, PageNumber> && !std::is_convertible_v<PageNumber, std::uint64_t>);
static_assert(!std::is_convertible_v<int, Pages> && !std::is_convertible_v<int, PageNumber>);
// Nor between the two: a count is not a page number.
static_assert(!std::is_convertible_v<Pages, PageNumber> && !std::is_convertible_v<PageNumber, Pages>);
static_assert(!std::is_constructible_v<Pages, PageNumber> && !std::is_constructible_v<PageNumber, Pages>);
// Made from an integer only by name.
static_assert(std::is_constructible_v<Pages, std::uint64_t> && std::is_constructible_v<PageNumber, std::uint64_t>);
// PageNumber + PageNumber means nothing; PageNumber + Pages is a page number, PageNumber - PageNumber a count.
template <typename A, typename B>
concept Addable = requires(A a, B b) { a + b; };
static_assert(!Addable<PageNumber, PageNumber>);
static_assert(!Addable<Pages, std::uint64_t> && !Addable<PageNumber, std::uint64_t>);
static_assert(std::is_same_v<decltype(PageNumber{} + Pages{}), PageNumber>);
static_assert(std::is_same_v<decltype(PageNumber{} - Pages{}), PageNumber>);
static_assert(std::is_same_v<decltype(PageNumber{} - PageNumber{}), Pages>);
static_assert(std::is_same_v<decltype(Pages{} + Pages{}), Pages>);
// Everything is constexpr.
static_assert(Pages{3} + Pages{4} == Pages{7} && (PageNumber{10} - PageNumber{4}).count() == 6);

TEST(PagesTest, CountsAddSubtractScaleAndCompare) {
  EXPECT_EQ(Pages{}.count(), 0u) << "no pages";
  EXPECT_EQ((Pages{3} + Pages{4}).count(), 7u);
  EXPECT_EQ(Pages{7} - Pages{3}, Pages{4});
  EXPECT_EQ(Pages{3} * 2, Pages{6});
  EXPECT_EQ(Pages{7} / 2, Pages{3}) << "rounded down";
  Pages n{5};
  n += Pages{2};
  EXPECT_EQ(n, Pages{7});
  n -= Pages{3};
  EXPECT_EQ(n, Pages{4});
  EXPECT_EQ(++n, Pages{5});
  EXPECT_LT(Pages{1}, Pages{2});
  EXPECT_GE(Pages{2}, Pages{2});
  EXPECT_NE(Pages{1}, Pages{2});
  EXPECT_EQ(std::min(Pages{4}, Pages{9}), Pages{4});
  EXPECT_EQ(Pages::max().count(), UINT64_MAX);
  EXPECT_GT(Pages::max(), Pages{UINT64_MAX - 1});
}

TEST(PagesTest, PageNumbersMoveByCountsAndTheirDistanceIsACount) {
  EXPECT_EQ(PageNumber{}.value(), 0u) << "the arena's first page";
  EXPECT_EQ(PageNumber{4} + Pages{3}, PageNumber{7});
  EXPECT_EQ(PageNumber{7} - Pages{3}, PageNumber{4});
  EXPECT_EQ(PageNumber{7} - PageNumber{4}, Pages{3});
  // The range [first, last] holds last - first + 1 pages.
  const PageNumber first{4}, last{9};
  EXPECT_EQ(last - first + Pages{1}, Pages{6});
  PageNumber p{4};
  p += Pages{2};
  EXPECT_EQ(p, PageNumber{6});
  EXPECT_EQ(++p, PageNumber{7});
  EXPECT_LT(PageNumber{3}, PageNumber{4});
  EXPECT_EQ(std::max(PageNumber{3}, PageNumber{8}), PageNumber{8});
  EXPECT_EQ(PageNumber::max().value(), UINT64_MAX);
  EXPECT_EQ(PageNumber::max() - Pages{1}, PageNumber{UINT64_MAX - 1});
}

TEST(PagesTest, ArithmeticWrapsAsOnTheIntegerItHolds) {
  // Nothing checks for overflow, as with std::uint64_t before: the engine's ranges keep far from it.
  EXPECT_EQ(Pages{0} - Pages{1}, Pages::max());
  EXPECT_EQ(PageNumber::max() + Pages{1}, PageNumber{0});
}

TEST(PagesTest, PrintsWithItsUnit) {
  std::ostringstream out;
  out << Pages{3} << ", " << PageNumber{7};
  EXPECT_EQ(out.str(), "3 pages, page 7");
}

}  // namespace
}  // namespace gmlake::engine
