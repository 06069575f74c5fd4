// The PyTorch extension's table of C entry points (python/gmlake/csrc/c_api_table.h), compiled here without
// PyTorch and resolved against the libgmlake_c.so this build made: every entry of GMLAKE_C_API is found, and the
// functions called through it answer as the library does.
#include "../python/gmlake/csrc/c_api_table.h"

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(ExtensionCApiTableTest, EveryEntryPointResolvesInTheBuiltLibrary) {
  gmlake_torch::CApi api;
  ASSERT_EQ(gmlake_torch::load_api(GMLAKE_C_LIBRARY_PATH, &api), "");
  int entries = 0;
#define GMLAKE_TEST_RESOLVED(name) \
  EXPECT_NE(api.name, nullptr) << #name; \
  ++entries;
  GMLAKE_C_API(GMLAKE_TEST_RESOLVED)
#undef GMLAKE_TEST_RESOLVED
  EXPECT_GT(entries, 30);
  EXPECT_EQ(api.gmlake_max_devices(), GMLAKE_MAX_DEVICES);
  EXPECT_STREQ(api.gmlake_status_name(GMLAKE_ERROR_OUT_OF_MEMORY), "GMLAKE_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(api.gmlake_get_stats(-1, nullptr), GMLAKE_ERROR_INVALID_ARGUMENT);
}

TEST(ExtensionCApiTableTest, ALibraryThatCannotBeLoadedLeavesTheTableUnchanged) {
  gmlake_torch::CApi api;
  const std::string error = gmlake_torch::load_api("/nonexistent/libgmlake_c.so", &api);
  EXPECT_NE(error.find("cannot load /nonexistent/libgmlake_c.so"), std::string::npos) << error;
  EXPECT_EQ(api.gmlake_malloc, nullptr);
}

}  // namespace
