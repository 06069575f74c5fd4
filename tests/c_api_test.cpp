// The C API (gmlake.h): per-device pools, and a defined answer to every bad input: double free, unknown and
// interior pointers, size 0, sizes >= 2^63 (negative from a signed caller), bad device ids, calls after
// gmlake_shutdown and during process exit, bad configuration strings. Each case is one line of docs/errors.md.
//
// gmlake's state is per process: each test starts from gmlake_shutdown() + gmlake_init(). Tests that need a
// process where nothing initialized gmlake yet (GMLAKE_CONF, process exit) run in a child process
// (death-test machinery, "threadsafe" style: the child is a fresh run of this binary).
#include "gmlake/gmlake.h"

#include <gtest/gtest.h>

#include <sys/types.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "gmlake/units.h"

namespace gmlake {
namespace {

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override { start("backend:sim"); }
  void TearDown() override { gmlake_shutdown(); }

  static void start(const char* conf) {
    gmlake_shutdown();
    ASSERT_EQ(gmlake_init(conf), GMLAKE_OK) << gmlake_last_error();
  }
  static gmlake_stats stats(int device) {
    gmlake_stats s{};
    EXPECT_EQ(gmlake_get_stats(device, &s), GMLAKE_OK) << gmlake_last_error();
    return s;
  }
  static void expect_error(int code, const char* words) {
    EXPECT_EQ(gmlake_last_error_code(), code) << gmlake_last_error();
    EXPECT_NE(std::string(gmlake_last_error()).find(words), std::string::npos) << gmlake_last_error();
  }
};

TEST_F(CApiTest, MallocAndFreeWorkOnEveryDeviceWithOnePoolPerDevice) {
  void* a = gmlake_malloc(3 * kMiB, 0, 0);
  ASSERT_NE(a, nullptr) << gmlake_last_error();
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK);
  EXPECT_STREQ(gmlake_last_error(), "");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % kRoundBytes, 0u);
  void* b = gmlake_malloc(kKiB, GMLAKE_MAX_DEVICES - 1, 7);
  ASSERT_NE(b, nullptr) << gmlake_last_error();
  EXPECT_EQ(stats(0).num_allocs, 1u);
  EXPECT_EQ(stats(GMLAKE_MAX_DEVICES - 1).num_allocs, 1u);
  EXPECT_EQ(stats(5).num_allocs, 0u) << "a device never used has no pool and all-zero stats";
  gmlake_free(a, 0, 0, 0);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK);
  gmlake_free(b, 0, GMLAKE_MAX_DEVICES - 1, 7);
  EXPECT_EQ(stats(0).allocated_bytes.current, 0);
  EXPECT_GT(stats(0).reserved_bytes.current, 0);
  EXPECT_EQ(gmlake_empty_cache(0), GMLAKE_OK);
  EXPECT_EQ(stats(0).reserved_bytes.current, 0);
  EXPECT_EQ(gmlake_reset_peak_stats(0), GMLAKE_OK);
  EXPECT_EQ(stats(0).reserved_bytes.peak, 0);
}

TEST_F(CApiTest, TheCapReadsBackAsConfiguredThenAsSetAndIsForgottenByANewSession) {
  auto cap = [](int device) {
    std::uint64_t bytes = 12345;
    EXPECT_EQ(gmlake_get_cap_bytes(device, &bytes), GMLAKE_OK) << gmlake_last_error();
    return bytes;
  };
  EXPECT_EQ(cap(0), 0u) << "no cap configured";
  ASSERT_EQ(gmlake_set_cap_bytes(2, 64 * kMiB), GMLAKE_OK);
  EXPECT_EQ(cap(2), 64 * kMiB) << "set before device 2 has a pool";
  void* p = gmlake_malloc(kMiB, 2, 0);
  ASSERT_NE(p, nullptr) << gmlake_last_error();
  EXPECT_EQ(cap(2), 64 * kMiB) << "the pool made later has it";
  EXPECT_EQ(cap(0), 0u) << "other devices keep theirs";
  ASSERT_EQ(gmlake_set_cap_bytes(2, 0), GMLAKE_OK);
  EXPECT_EQ(cap(2), 0u) << "lifted";
  gmlake_free(p, 0, 2, 0);
  EXPECT_EQ(gmlake_get_cap_bytes(GMLAKE_MAX_DEVICES, nullptr), GMLAKE_ERROR_INVALID_ARGUMENT);
  std::uint64_t bytes = 0;
  EXPECT_EQ(gmlake_get_cap_bytes(-1, &bytes), GMLAKE_ERROR_INVALID_ARGUMENT);
  expect_error(GMLAKE_ERROR_INVALID_ARGUMENT, "invalid device id");
  EXPECT_EQ(gmlake_get_cap_bytes(0, nullptr), GMLAKE_ERROR_INVALID_ARGUMENT);
  expect_error(GMLAKE_ERROR_INVALID_ARGUMENT, "cap_bytes is NULL");
  gmlake_shutdown();
  EXPECT_EQ(gmlake_get_cap_bytes(0, &bytes), GMLAKE_ERROR_SHUT_DOWN);
  start("backend:sim,cap_bytes:32M");
  EXPECT_EQ(cap(2), 32 * kMiB) << "the new session's configured cap, the old set_cap_bytes forgotten";
}

TEST_F(CApiTest, ACapSetAtRunTimeBoundsReservedBytesAppliesToAPoolMadeLaterAndCanBeLifted) {
  // Device 1 has no pool yet: the cap waits for it.
  ASSERT_EQ(gmlake_set_cap_bytes(1, 64 * kMiB), GMLAKE_OK) << gmlake_last_error();
  void* a = gmlake_malloc(40 * kMiB, 1, 0);
  ASSERT_NE(a, nullptr) << gmlake_last_error();
  EXPECT_EQ(gmlake_malloc(40 * kMiB, 1, 0), nullptr) << "80 MiB would pass the 64 MiB cap";
  expect_error(GMLAKE_ERROR_OUT_OF_MEMORY, "cap");
  EXPECT_LE(stats(1).reserved_bytes.peak, static_cast<std::int64_t>(64 * kMiB));
  void* small = gmlake_malloc(8 * kMiB, 1, 0);
  EXPECT_NE(small, nullptr) << "the pool stays usable under its cap: " << gmlake_last_error();
  ASSERT_EQ(gmlake_set_cap_bytes(1, 0), GMLAKE_OK);  // lifted
  void* b = gmlake_malloc(40 * kMiB, 1, 0);
  EXPECT_NE(b, nullptr) << gmlake_last_error();
  for (void* p : {a, small, b}) gmlake_free(p, 0, 1, 0);
  EXPECT_EQ(stats(0).num_allocs, 0u) << "other devices are not touched";
  EXPECT_EQ(gmlake_set_cap_bytes(-1, kMiB), GMLAKE_ERROR_INVALID_ARGUMENT);
  expect_error(GMLAKE_ERROR_INVALID_ARGUMENT, "invalid device id");
  gmlake_shutdown();
  EXPECT_EQ(gmlake_set_cap_bytes(0, kMiB), GMLAKE_ERROR_SHUT_DOWN);
  start("backend:sim");  // a new session forgets the old cap
  void* c = gmlake_malloc(40 * kMiB, 1, 0);
  EXPECT_NE(c, nullptr) << gmlake_last_error();
  gmlake_free(c, 0, 1, 0);
}

TEST_F(CApiTest, BackendTimeCountsTheBackendCallsOfThatDeviceOnly) {
  start("backend:host");
  std::uint64_t calls = 1;
  std::uint64_t time_ns = 1;
  ASSERT_EQ(gmlake_get_backend_time(3, &calls, &time_ns), GMLAKE_OK);
  EXPECT_EQ(calls, 0u) << "no pool yet";
  EXPECT_EQ(time_ns, 0u);
  void* p = gmlake_malloc(5 * kMiB, 0, 0);
  ASSERT_NE(p, nullptr) << gmlake_last_error();
  ASSERT_EQ(gmlake_get_backend_time(0, &calls, &time_ns), GMLAKE_OK);
  EXPECT_GE(calls, 3u) << "at least a reserve, a create, a map";
  EXPECT_GT(time_ns, 0u) << "memfd_create and mmap take time";
  const std::uint64_t before = calls;
  gmlake_free(p, 0, 0, 0);
  ASSERT_EQ(gmlake_get_backend_time(0, &calls, &time_ns), GMLAKE_OK);
  EXPECT_EQ(calls, before) << "a free that keeps its chunks cached calls nothing";
  EXPECT_EQ(gmlake_get_backend_time(0, nullptr, &time_ns), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gmlake_get_backend_time(0, &calls, nullptr), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gmlake_get_backend_time(-1, &calls, &time_ns), GMLAKE_ERROR_INVALID_ARGUMENT);
}

TEST_F(CApiTest, HostBackendBlocksAreWritableMemory) {
  start("backend:host");
  auto* p = static_cast<unsigned char*>(gmlake_malloc(5 * kMiB, 0, 0));
  ASSERT_NE(p, nullptr) << gmlake_last_error();
  std::memset(p, 0x5A, 5 * kMiB);
  EXPECT_EQ(p[5 * kMiB - 1], 0x5A);
  gmlake_free(p, 0, 0, 0);
}

TEST_F(CApiTest, ADoubleFreeIsRejectedAsAnInvalidPointerAndCounted) {
  void* p = gmlake_malloc(kMiB, 0, 0);
  gmlake_free(p, 0, 0, 0);
  gmlake_free(p, 0, 0, 0);
  expect_error(GMLAKE_ERROR_INVALID_POINTER, "not");
  EXPECT_EQ(stats(0).invalid_frees, 1u);
  EXPECT_EQ(stats(0).num_frees, 1u);
  void* q = gmlake_malloc(kMiB, 0, 0);  // the pool still works
  EXPECT_NE(q, nullptr);
  gmlake_free(q, 0, 0, 0);
}

TEST_F(CApiTest, AFreeOfAPointerNeverReturnedIsRejected) {
  int on_stack = 0;
  void* live = gmlake_malloc(kMiB, 0, 0);
  for (void* bogus : {static_cast<void*>(&on_stack), reinterpret_cast<void*>(std::uintptr_t{0x1000}),
                      reinterpret_cast<void*>(UINTPTR_MAX - 511)}) {
    gmlake_free(bogus, 0, 0, 0);
    expect_error(GMLAKE_ERROR_INVALID_POINTER, "not");
  }
  gmlake_free(live, 0, 1, 0);  // another device's pointer
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_ERROR_INVALID_POINTER) << gmlake_last_error();
  EXPECT_EQ(stats(0).invalid_frees, 3u);
  EXPECT_EQ(stats(0).allocated_bytes.current, static_cast<std::int64_t>(kMiB));
  gmlake_free(live, 0, 0, 0);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK);
}

TEST_F(CApiTest, AFreeOfAnInteriorPointerIsRejectedAndTheBlockStaysLive) {
  auto* p = static_cast<char*>(gmlake_malloc(kMiB, 0, 0));
  for (std::uint64_t offset : {std::uint64_t{1}, kRoundBytes, kMiB - 1}) {
    gmlake_free(p + offset, 0, 0, 0);
    expect_error(GMLAKE_ERROR_INVALID_POINTER, "not");
  }
  EXPECT_EQ(stats(0).allocated_bytes.current, static_cast<std::int64_t>(kMiB));
  gmlake_free(p, 0, 0, 0);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK);
}

TEST_F(CApiTest, FreeingNullDoesNothing) {
  gmlake_free(nullptr, 0, 0, 0);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK);
  gmlake_free(nullptr, 0, -3, 0);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK);
}

TEST_F(CApiTest, RecordStreamOnTheHostBackendChecksThePointerAndTheFreeIsImmediate) {
  start("backend:host");
  void* p = gmlake_malloc(kMiB, 0, 1);
  ASSERT_NE(p, nullptr) << gmlake_last_error();
  EXPECT_EQ(gmlake_record_stream(p, 0, 2), GMLAKE_OK) << gmlake_last_error();
  EXPECT_STREQ(gmlake_last_error(), "");
  EXPECT_EQ(gmlake_record_stream(p, 0, 2), GMLAKE_OK) << "twice: the same";
  EXPECT_EQ(gmlake_record_stream(nullptr, 0, 2), GMLAKE_OK);
  gmlake_free(p, 0, 0, 1);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK) << gmlake_last_error();
  const gmlake_stats s = stats(0);
  EXPECT_EQ(s.allocated_bytes.current, 0) << "nothing runs asynchronously on the host: freed at once";
  EXPECT_EQ(s.active_bytes.current, 0);
  EXPECT_EQ(s.num_frees, 1u);
  EXPECT_EQ(s.deferred_frees, 0u);
  EXPECT_EQ(gmlake_malloc(kMiB, 0, 1), p) << "and reused at once";
  gmlake_free(p, 0, 0, 1);
}

TEST_F(CApiTest, RecordStreamOfAnythingButALiveBlockIsAnInvalidPointerAndChangesNothing) {
  start("backend:host");  // distinct addresses across devices (two sim pools may hand out the same ones)
  int on_stack = 0;
  EXPECT_EQ(gmlake_record_stream(&on_stack, 3, 1), GMLAKE_ERROR_INVALID_POINTER);
  expect_error(GMLAKE_ERROR_INVALID_POINTER, "no block was ever allocated on device 3");
  auto* p = static_cast<char*>(gmlake_malloc(kMiB, 0, 0));
  void* freed = gmlake_malloc(kMiB, 0, 0);
  gmlake_free(freed, 0, 0, 0);
  for (void* bad : {static_cast<void*>(&on_stack), static_cast<void*>(p + kRoundBytes), freed}) {
    EXPECT_EQ(gmlake_record_stream(bad, 0, 1), GMLAKE_ERROR_INVALID_POINTER);
    expect_error(GMLAKE_ERROR_INVALID_POINTER, "record_stream");
  }
  void* other = gmlake_malloc(kMiB, 1, 0);
  EXPECT_EQ(gmlake_record_stream(other, 0, 1), GMLAKE_ERROR_INVALID_POINTER) << "another device's block";
  EXPECT_EQ(stats(0).invalid_frees, 0u) << "not a free: not counted";
  EXPECT_EQ(stats(0).allocated_bytes.current, static_cast<std::int64_t>(kMiB));
  gmlake_free(p, 0, 0, 0);
  gmlake_free(other, 0, 1, 0);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK);
}

TEST_F(CApiTest, SizeZeroReturnsNullWithoutAnError) {
  EXPECT_EQ(gmlake_malloc(0, 0, 0), nullptr);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK);
  EXPECT_EQ(stats(0).num_allocs, 0u);
}

TEST_F(CApiTest, ASizeOfTwoToThe63OrANegativeSizeFromASignedCallerIsAnInvalidArgument) {
  const ssize_t negative = -512;
  for (size_t size : {static_cast<size_t>(negative), static_cast<size_t>(-1), size_t{1} << 63}) {
    EXPECT_EQ(gmlake_malloc(size, 0, 0), nullptr);
    expect_error(GMLAKE_ERROR_INVALID_ARGUMENT, "2^63");
  }
  EXPECT_EQ(stats(0).num_ooms, 0u);
}

TEST_F(CApiTest, AHugeSizeBelowTwoToThe63IsOutOfMemory) {
  EXPECT_EQ(gmlake_malloc(size_t{1} << 62, 0, 0), nullptr);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_ERROR_OUT_OF_MEMORY) << gmlake_last_error();
  EXPECT_EQ(stats(0).num_ooms, 1u);
}

TEST_F(CApiTest, ACapIsHonouredAsOutOfMemory) {
  start("backend:sim,cap_bytes:16M");
  void* p = gmlake_malloc(12 * kMiB, 0, 0);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(gmlake_malloc(12 * kMiB, 0, 0), nullptr);
  expect_error(GMLAKE_ERROR_OUT_OF_MEMORY, "cap");
  gmlake_free(p, 0, 0, 0);
}

TEST_F(CApiTest, AnInvalidDeviceIdIsRejectedByEveryCall) {
  void* p = gmlake_malloc(kKiB, 0, 0);
  gmlake_stats s{};
  for (int device : {-1, GMLAKE_MAX_DEVICES, INT_MIN, INT_MAX}) {
    EXPECT_EQ(gmlake_malloc(kKiB, device, 0), nullptr);
    expect_error(GMLAKE_ERROR_INVALID_ARGUMENT, "invalid device id");
    gmlake_free(p, 0, device, 0);
    expect_error(GMLAKE_ERROR_INVALID_ARGUMENT, "invalid device id");
    EXPECT_EQ(gmlake_empty_cache(device), GMLAKE_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(gmlake_get_stats(device, &s), GMLAKE_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(gmlake_reset_peak_stats(device), GMLAKE_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(gmlake_record_stream(p, device, 1), GMLAKE_ERROR_INVALID_ARGUMENT);
    expect_error(GMLAKE_ERROR_INVALID_ARGUMENT, "invalid device id");
  }
  EXPECT_EQ(gmlake_get_stats(0, nullptr), GMLAKE_ERROR_INVALID_ARGUMENT);
  gmlake_free(p, 0, 0, 0);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK);
}

TEST_F(CApiTest, AfterShutdownMallocFailsFreeIsIgnoredAndCountedAndInitStartsAfresh) {
  void* p = gmlake_malloc(kMiB, 0, 0);
  gmlake_shutdown();
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK);
  EXPECT_EQ(gmlake_malloc(kMiB, 0, 0), nullptr);
  expect_error(GMLAKE_ERROR_SHUT_DOWN, "shut down");
  const std::uint64_t ignored = gmlake_ignored_frees();
  gmlake_free(p, 0, 0, 0);
  expect_error(GMLAKE_ERROR_SHUT_DOWN, "shut down");
  EXPECT_EQ(gmlake_ignored_frees(), ignored + 1);
  gmlake_stats s{};
  EXPECT_EQ(gmlake_get_stats(0, &s), GMLAKE_ERROR_SHUT_DOWN);
  EXPECT_EQ(gmlake_empty_cache(0), GMLAKE_ERROR_SHUT_DOWN);
  EXPECT_EQ(gmlake_record_stream(p, 0, 1), GMLAKE_ERROR_SHUT_DOWN);
  gmlake_shutdown();  // again: nothing
  EXPECT_EQ(gmlake_init("backend:sim"), GMLAKE_OK);
  EXPECT_EQ(stats(0).num_allocs, 0u) << "a new session has new pools";
  gmlake_free(p, 0, 0, 0);  // a pointer of the old session is unknown to the new one
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_ERROR_INVALID_POINTER) << gmlake_last_error();
}

TEST_F(CApiTest, InitTwiceFailsAndChangesNothing) {
  void* p = gmlake_malloc(kMiB, 0, 0);
  EXPECT_EQ(gmlake_init("backend:sim"), GMLAKE_ERROR_ALREADY_INITIALIZED);
  gmlake_free(p, 0, 0, 0);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_OK);
}

TEST_F(CApiTest, ABadConfigurationStringFailsNamingTheKeyAndAppliesNothing) {
  gmlake_shutdown();
  const struct {
    const char* conf;
    const char* words;
  } cases[] = {
      {"no_such_key:1", "no_such_key: unknown key"},
      {"backend:sim,cap_bytes:lots", "cap_bytes: bad value"},
      {"cap_bytes:99999999999999999999", "cap_bytes: value '99999999999999999999' overflows"},
      {"cap_bytes:17179869184T", "overflows 64 bits"},
      {"policy:best", "policy: unknown policy"},
      {"backend:gpu", "backend: unknown backend"},
      {"debug:2", "debug: bad value"},
      {"backend:sim,debug:1", "debug: needs backend:host"},
      {"cap_bytes", "expected key:value"},
      {"page_bytes:3M", "page_bytes"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(gmlake_init(c.conf), GMLAKE_ERROR_CONFIG) << c.conf;
    expect_error(GMLAKE_ERROR_CONFIG, c.words);
    EXPECT_EQ(gmlake_malloc(kKiB, 0, 0), nullptr) << "a failed init must not initialize";
    EXPECT_EQ(gmlake_last_error_code(), GMLAKE_ERROR_SHUT_DOWN) << gmlake_last_error();
  }
  EXPECT_EQ(gmlake_init(" backend : sim , cap_bytes : 8M , "), GMLAKE_OK) << gmlake_last_error();
  EXPECT_EQ(gmlake_malloc(16 * kMiB, 0, 0), nullptr) << "the cap of the good string applies";
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_ERROR_OUT_OF_MEMORY);
}

TEST_F(CApiTest, TheLastErrorBelongsToTheThreadThatMadeTheCall) {
  gmlake_free(reinterpret_cast<void*>(std::uintptr_t{0x1000}), 0, 0, 0);
  ASSERT_EQ(gmlake_last_error_code(), GMLAKE_ERROR_INVALID_POINTER);
  int other_code = -1;
  std::thread([&] { other_code = gmlake_last_error_code(); }).join();
  EXPECT_EQ(other_code, GMLAKE_OK);
  EXPECT_EQ(gmlake_last_error_code(), GMLAKE_ERROR_INVALID_POINTER);
}

// --- in a fresh child process

class CApiProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(CApiProcessTest, TheFirstCallConfiguresGmlakeFromGmlakeConf) {
  EXPECT_EXIT(
      {
        setenv("GMLAKE_CONF", "backend:sim,cap_bytes:8M", 1);
        void* p = gmlake_malloc(kMiB, 0, 0);
        const bool capped = gmlake_malloc(16 * kMiB, 0, 0) == nullptr &&
                            gmlake_last_error_code() == GMLAKE_ERROR_OUT_OF_MEMORY;
        const bool again = gmlake_init("backend:sim") == GMLAKE_ERROR_ALREADY_INITIALIZED;
        std::_Exit(p != nullptr && capped && again ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(CApiProcessTest, InitDefaultsAppliesTheDefaultsThenGmlakeConfOnTop) {
  EXPECT_EXIT(
      {
        // The defaults name a cap of 64M; GMLAKE_CONF lowers it to 8M and keeps the defaults' backend.
        setenv("GMLAKE_CONF", "cap_bytes:8M", 1);
        const bool init = gmlake_init_defaults("backend:sim,cap_bytes:64M") == GMLAKE_OK;
        void* p = gmlake_malloc(kMiB, 0, 0);
        const bool capped = gmlake_malloc(16 * kMiB, 0, 0) == nullptr &&
                            gmlake_last_error_code() == GMLAKE_ERROR_OUT_OF_MEMORY;
        gmlake_shutdown();
        unsetenv("GMLAKE_CONF");
        const bool alone = gmlake_init_defaults("backend:sim") == GMLAKE_OK && gmlake_malloc(16 * kMiB, 0, 0) != nullptr;
        std::_Exit(init && p != nullptr && capped && alone ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(CApiProcessTest, ABadGmlakeConfMakesEveryMallocFailWithAConfigError) {
  EXPECT_EXIT(
      {
        setenv("GMLAKE_CONF", "cap_bytes:12Q", 1);
        const bool first = gmlake_malloc(kMiB, 0, 0) == nullptr && gmlake_last_error_code() == GMLAKE_ERROR_CONFIG;
        const bool second = gmlake_malloc(kMiB, 0, 0) == nullptr && gmlake_last_error_code() == GMLAKE_ERROR_CONFIG;
        const bool named = std::strstr(gmlake_last_error(), "cap_bytes") != nullptr;
        const bool fixed = gmlake_init("backend:sim") == GMLAKE_OK && gmlake_malloc(kMiB, 0, 0) != nullptr;
        std::_Exit(first && second && named && fixed ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// What the exit-time calls saw, checked by the last of them.
struct ExitChecks {
  void* block = nullptr;
  bool ok = true;
};
ExitChecks g_exit_checks;

// Runs after main returns, while static objects are being destroyed.
struct FreesAtStaticDestruction {
  ~FreesAtStaticDestruction() {
    gmlake_free(g_exit_checks.block, 0, 0, 0);
    g_exit_checks.ok &= gmlake_last_error_code() == GMLAKE_OK;
    void* p = gmlake_malloc(kMiB, 0, 0);
    g_exit_checks.ok &= p != nullptr;
    gmlake_free(p, 0, 0, 0);
    gmlake_shutdown();
    gmlake_free(p, 0, 0, 0);  // after shutdown: ignored and counted
    g_exit_checks.ok &= gmlake_last_error_code() == GMLAKE_ERROR_SHUT_DOWN && gmlake_ignored_frees() == 1;
    g_exit_checks.ok &= gmlake_malloc(kMiB, 0, 0) == nullptr;
    std::_Exit(g_exit_checks.ok ? 0 : 1);
  }
};

TEST_F(CApiProcessTest, CallsWhileTheProcessExitsBehaveAsAtAnyOtherTime) {
  EXPECT_EXIT(
      {
        // Small arenas: under TSan, mmap has only a few TiB of address space for three 1 TiB arenas.
        gmlake_init("backend:host,arena_virtual_bytes:64G");
        g_exit_checks.block = gmlake_malloc(3 * kMiB, 0, 0);
        static FreesAtStaticDestruction at_exit;  // destroyed by std::exit below
        std::atexit([] {
          void* p = gmlake_malloc(kKiB, 1, 0);  // from an atexit handler
          g_exit_checks.ok &= p != nullptr;
          gmlake_free(p, 0, 1, 0);
        });
        std::exit(7);  // the static destructor ends the process with 0 when every check held
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(CApiProcessTest, DebugModeAbortsWhenFreedMemoryWasWrittenBeforeItIsHandedOutAgain) {
  EXPECT_DEATH(
      {
        gmlake_init("backend:host,debug:1");
        auto* p = static_cast<unsigned char*>(gmlake_malloc(4 * kKiB, 0, 0));
        gmlake_free(p, 0, 0, 0);
        p[100] = 0x42;  // use after free
        void* q = gmlake_malloc(4 * kKiB, 0, 0);
        std::_Exit(q == p ? 0 : 1);
      },
      "written while free");
}

TEST_F(CApiTest, DebugModeHandsOutMemoryFreedCorrectlyWithoutComplaint) {
  start("backend:host,debug:1");
  auto* p = static_cast<unsigned char*>(gmlake_malloc(4 * kKiB, 0, 0));
  std::memset(p, 0x42, 4 * kKiB);
  gmlake_free(p, 0, 0, 0);
  auto* q = static_cast<unsigned char*>(gmlake_malloc(4 * kKiB, 0, 0));
  ASSERT_EQ(q, p) << "the same memory is handed out again";
  EXPECT_EQ(q[0], 0xDB) << "freed memory was poisoned";
  gmlake_free(q, 0, 0, 0);
}

}  // namespace
}  // namespace gmlake
