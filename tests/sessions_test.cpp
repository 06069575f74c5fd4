// Sessions (src/pool/sessions.h): the states, what start refuses, and that end runs its teardown only once per
// ready session.
#include "pool/sessions.h"

#include <gtest/gtest.h>

#include "expect_error.h"
#include "gmlake/backend_factory.h"

namespace gmlake {
namespace {

TEST(SessionsTest, StartPublishesTheParsedConfigAndEndShutsItDown) {
  Sessions sessions;
  EXPECT_EQ(sessions.state(), SessionState::kUninitialized);
  EXPECT_EQ(sessions.current(), nullptr);
  sessions.start("backend:sim,cap_bytes:4M");
  EXPECT_EQ(sessions.state(), SessionState::kReady);
  ASSERT_NE(sessions.current(), nullptr);
  EXPECT_EQ(sessions.current()->config.backend, "sim");
  EXPECT_EQ(sessions.current()->config.cap_bytes, 4u << 20);
  int teardowns = 0;
  sessions.end([&] { ++teardowns; });
  EXPECT_EQ(sessions.state(), SessionState::kShutDown);
  sessions.end([&] { ++teardowns; });
  EXPECT_EQ(teardowns, 1) << "a second end finds no ready session";
}

TEST(SessionsTest, ASecondStartWhileReadyIsRefusedAndAStartAfterEndBeginsAfresh) {
  Sessions sessions;
  sessions.start("backend:host");
  EXPECT_THROW(sessions.start("backend:sim"), AlreadyInitializedError);
  EXPECT_EQ(sessions.current()->config.backend, "host") << "the refused start changed nothing";
  sessions.end([] {});
  sessions.start("backend:sim");
  EXPECT_EQ(sessions.state(), SessionState::kReady);
  EXPECT_EQ(sessions.current()->config.backend, "sim");
}

TEST(SessionsTest, ABadConfigStartsNothing) {
  Sessions sessions;
  test::expect_error([&] { sessions.start("nosuch_key:1"); }, ErrorCode::kConfig, "nosuch_key");
  test::expect_error([&] { sessions.start("backend:nosuch"); }, ErrorCode::kConfig, "this build's");
  EXPECT_EQ(sessions.state(), SessionState::kUninitialized);
}

TEST(SessionsTest, StartFromEnvironmentStartsOnlyWhenNothingEverStarted) {
  Sessions started;
  started.start("backend:sim");
  started.end([] {});
  started.start_from_environment();
  EXPECT_EQ(started.state(), SessionState::kShutDown) << "after an end, only start begins afresh";
}

TEST(ParseSessionConfigTest, AcceptsEveryBackendOfThisBuildWithADeviceSuffix) {
  for (std::string_view name : backend_names()) {
    EXPECT_EQ(parse_session_config("backend:" + std::string(name)).backend, name);
  }
  test::expect_error([] { parse_session_config("backend:tpu"); }, ErrorCode::kConfig, "unknown backend 'tpu'");
}

}  // namespace
}  // namespace gmlake
