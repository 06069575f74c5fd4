// expect_error: asserts that `f` throws gmlake::Error with `code` and a message containing `must_contain`.
// expect_broken: asserts that `f` throws std::logic_error (an invariant check or a GMLAKE_DCHECK that failed)
// with a message containing `must_contain`.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

#include "gmlake/error.h"

namespace gmlake::test {

inline void expect_error(const std::function<void()>& f, ErrorCode code, const std::string& must_contain) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << must_contain << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(must_contain), std::string::npos) << e.what();
  }
}

inline void expect_broken(const std::function<void()>& f, const std::string& must_contain) {
  try {
    f();
    ADD_FAILURE() << "no check failed; expected one containing '" << must_contain << "'";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find(must_contain), std::string::npos) << e.what();
  }
}

}  // namespace gmlake::test
