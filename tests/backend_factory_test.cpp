// make_backend and backend_names: every listed backend can be asked for by name, unknown names and bad device
// suffixes are rejected with the names on offer, and "cuda" (on builds with the CUDA backend) behaves on a
// machine without a GPU driver: a BackendError naming cuInit, never a crash or a load failure.
#include "gmlake/backend_factory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "gmlake/error.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

bool has_cuda() {
  const std::vector<std::string_view> names = backend_names();
  return std::find(names.begin(), names.end(), "cuda") != names.end();
}

// Expects make_backend(name) to throw Error(kInvalidArgument) whose message contains `must_mention`.
void expect_invalid(const std::string& name, const std::string& must_mention) {
  try {
    make_backend(name, kPageBytes);
    ADD_FAILURE() << name << ": no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(must_mention), std::string::npos) << e.what();
  }
}

TEST(BackendFactoryTest, SimAndHostAreListedAndMadeByName) {
  const std::vector<std::string_view> names = backend_names();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0], "sim");
  EXPECT_NE(std::find(names.begin(), names.end(), "host"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "sim:h100"), names.end());
  for (const char* name : {"sim", "host"}) {
    const std::unique_ptr<Backend> backend = make_backend(name, kPageBytes);
    EXPECT_EQ(backend->name(), name);
    EXPECT_EQ(backend->granularity_bytes(), kPageBytes);
  }
}

TEST(BackendFactoryTest, AnUnknownNameIsRejectedWithTheNamesOnOffer) {
  expect_invalid("gpu9", "gpu9");
  expect_invalid("gpu9", "expected sim");
  expect_invalid("", "unknown backend");
  expect_invalid("sim:1", "sim:1");  // only cuda takes a device
}

TEST(BackendFactoryTest, SimBackendsGetTheDevicesThatPeerDevicesNames) {
  EXPECT_EQ(sim_devices_for("none"), 1u);
  EXPECT_EQ(sim_devices_for("1"), 2u);
  EXPECT_EQ(sim_devices_for("3;1"), 4u);
  try {
    sim_devices_for("one");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConfig) << e.what();
  }
  EXPECT_EQ(make_backend("sim", kPageBytes, false, 3)->device_count(), 3u);
  const std::unique_ptr<Backend> modelled = make_backend("sim:h100", kPageBytes, false, 2);
  EXPECT_EQ(modelled->device_count(), 2u);
  EXPECT_EQ(modelled->name(), "sim:h100");
  EXPECT_EQ(make_backend("sim:h100", kPageBytes)->device_count(), 1u);
  EXPECT_EQ(make_backend("host", kPageBytes, false, 3)->device_count(), 1u) << "only sim backends take it";
}

TEST(BackendFactoryTest, TheBaseNameIsWhatComesBeforeTheDeviceSuffix) {
  EXPECT_EQ(backend_base_name("cuda:3"), "cuda");
  EXPECT_EQ(backend_base_name("cuda"), "cuda");
  EXPECT_EQ(backend_base_name("host"), "host");
  EXPECT_EQ(backend_base_name(":1"), "");
}

TEST(BackendFactoryTest, CudaDeviceSuffixesThatAreNotNonNegativeIntegersAreRejected) {
  if (!has_cuda()) GTEST_SKIP() << "this build has no CUDA backend (GMLAKE_WITH_CUDA=OFF)";
  for (const char* name : {"cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda: 1", "cuda:99999999999"}) {
    expect_invalid(name, "non-negative integer");
  }
}

TEST(BackendFactoryTest, CudaWithoutADriverOrDeviceThrowsABackendErrorNamingTheDriverCall) {
  if (!has_cuda()) GTEST_SKIP() << "this build has no CUDA backend (GMLAKE_WITH_CUDA=OFF)";
  try {
    const std::unique_ptr<Backend> backend = make_backend("cuda", kPageBytes);
    GTEST_SKIP() << "a CUDA device is present: the gpu tests (ctest -L gpu) cover the backend here";
  } catch (const BackendError& e) {
    // No driver: "cuInit failed: libcuda.so.1 not found ..."; a driver but no device: cuInit's own error.
    EXPECT_EQ(e.call(), "cuInit") << e.what();
    EXPECT_EQ(e.code(), ErrorCode::kBackend);
    EXPECT_NE(std::string(e.what()).find("cuInit failed: "), std::string::npos) << e.what();
  }
  // A second attempt fails the same way (the failure is remembered, not retried) and still does not crash.
  EXPECT_THROW(make_backend("cuda:1", kPageBytes), BackendError);
}

}  // namespace
}  // namespace gmlake
