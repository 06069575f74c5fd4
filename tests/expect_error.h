// expect_error: asserts that `f` throws gmlake::Error with `code` and a message containing `must_contain`.
#pragma once

#include <gtest/gtest.h>

#include <functional>
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

}  // namespace gmlake::test
