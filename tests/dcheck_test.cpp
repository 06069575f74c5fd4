// GMLAKE_DCHECK (include/gmlake/dcheck.h): on in Debug and sanitizer builds, compiled out elsewhere. Each test
// states what the build it runs in must do.
#include "gmlake/dcheck.h"

#include <gtest/gtest.h>

#include "expect_error.h"

namespace gmlake {
namespace {

TEST(DcheckTest, AHoldingCheckDoesNothing) {
  int evaluated = 0;
  GMLAKE_DCHECK(++evaluated == 1, "holds");
  EXPECT_EQ(evaluated, GMLAKE_DCHECK_IS_ON ? 1 : 0);
}

TEST(DcheckTest, AFailingCheckThrowsItsMessageWhereChecksAreOnAndCostsNothingElsewhere) {
  int evaluated = 0;
  auto failing = [&] { GMLAKE_DCHECK(++evaluated < 0, "the count is negative"); };
  if (GMLAKE_DCHECK_IS_ON) {
    test::expect_broken(failing, "gmlake check failed: the count is negative (++evaluated < 0) at ");
    EXPECT_EQ(evaluated, 1);
  } else {
    failing();
    EXPECT_EQ(evaluated, 0) << "compiled out: the condition is never evaluated";
  }
}

}  // namespace
}  // namespace gmlake
