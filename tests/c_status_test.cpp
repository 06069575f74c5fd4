// The C API's error boundary (src/frontends/c_api/c_status.h): every exception becomes a status and this thread's
// message, and every status has its name from the one list in gmlake.h.
#include "frontends/c_api/c_status.h"

#include <gtest/gtest.h>

#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "pool/sessions.h"

namespace gmlake::capi {
namespace {

TEST(CStatusTest, EachExceptionMapsToItsStatusWithItsMessage) {
  struct Case {
    void (*raise)();
    int status;
    const char* words;
  };
  const Case cases[] = {
      {[] { throw ShutDownError("shut"); }, GMLAKE_ERROR_SHUT_DOWN, "shut"},
      {[] { throw AlreadyInitializedError("again"); }, GMLAKE_ERROR_ALREADY_INITIALIZED, "again"},
      {[] { throw Error(ErrorCode::kInvalidPointer, "ptr"); }, GMLAKE_ERROR_INVALID_POINTER, "ptr"},
      {[] { throw OutOfMemoryError(1, 2, 3, 0, "oom"); }, GMLAKE_ERROR_OUT_OF_MEMORY, "oom"},
      {[] { throw BackendError("mmap", "ENOMEM"); }, GMLAKE_ERROR_BACKEND, "mmap failed"},
      {[] { throw Error(ErrorCode::kTrace, "trace"); }, GMLAKE_ERROR_INTERNAL, "trace"},
      {[] { throw std::bad_alloc(); }, GMLAKE_ERROR_OUT_OF_MEMORY, "std::bad_alloc"},
      {[] { throw std::logic_error("logic"); }, GMLAKE_ERROR_INTERNAL, "logic"},
      {[] { throw 42; }, GMLAKE_ERROR_INTERNAL, "unknown exception"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(guarded_status(c.raise), c.status) << c.words;
    EXPECT_EQ(last_error_code(), c.status);
    EXPECT_NE(std::string(last_error_message()).find(c.words), std::string::npos) << last_error_message();
  }
  EXPECT_EQ(guarded_status([] {}), GMLAKE_OK);
  EXPECT_EQ(last_error_code(), GMLAKE_OK) << "a call that succeeds clears the last error";
  EXPECT_STREQ(last_error_message(), "");
}

TEST(CStatusTest, GuardedReturnsTheValueOrTheErrorValue) {
  EXPECT_EQ(guarded(-1, [] { return 5; }), 5);
  EXPECT_EQ(guarded(-1, []() -> int { throw Error(ErrorCode::kConfig, "bad key"); }), -1);
  EXPECT_EQ(last_error_code(), GMLAKE_ERROR_CONFIG);
}

TEST(CStatusTest, LongMessagesAreTruncatedAndTheLastErrorIsPerThread) {
  guarded_status([] { throw std::runtime_error(std::string(2000, 'x')); });
  EXPECT_EQ(std::string(last_error_message()).size(), 511u);
  std::thread([] { EXPECT_EQ(last_error_code(), GMLAKE_OK) << "another thread has its own"; }).join();
  EXPECT_EQ(last_error_code(), GMLAKE_ERROR_INTERNAL);
}

TEST(CStatusTest, EveryStatusHasItsOwnNameAsTheHeaderSpellsIt) {
  std::set<std::string> names;
#define GMLAKE_TEST_STATUS(name, value, meaning)          \
  EXPECT_STREQ(status_name(value), #name);                \
  EXPECT_EQ(static_cast<int>(name), value);               \
  EXPECT_GT(std::string(meaning).size(), 0u);             \
  names.insert(status_name(value));
  GMLAKE_STATUSES(GMLAKE_TEST_STATUS)
#undef GMLAKE_TEST_STATUS
  EXPECT_EQ(names.size(), static_cast<std::size_t>(GMLAKE_ERROR_INTERNAL) + 1) << "0 .. INTERNAL, each once";
  EXPECT_STREQ(status_name(-1), "GMLAKE_UNKNOWN_STATUS");
  EXPECT_STREQ(status_name(GMLAKE_ERROR_INTERNAL + 1), "GMLAKE_UNKNOWN_STATUS");
  EXPECT_EQ(status_of(ErrorCode::kConfig), GMLAKE_ERROR_CONFIG);
}

}  // namespace
}  // namespace gmlake::capi
