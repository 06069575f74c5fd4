// The C API's IPC (gmlake_ipc_export / gmlake_ipc_import / gmlake_ipc_close) on the host backend, two processes:
// a forked child exports a gmlake_malloc block, this process imports it and checks the bytes both ways; a small
// buffer, a corrupt handle, a double close and a pointer that is no import each get their status and message.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmlake/gmlake.h"
#include "gmlake/units.h"
#include "ipc_test_support.h"

namespace gmlake {
namespace {

constexpr std::size_t kBytes = 3 * kMiB + 100;

int c_exporter(int to_parent, int from_parent) {
  gmlake_shutdown();
  if (gmlake_init("backend:host") != GMLAKE_OK) return 2;
  auto* block = static_cast<unsigned char*>(gmlake_malloc(kBytes, 0, 0));
  if (block == nullptr) return 3;
  for (std::size_t i = 0; i < kBytes; ++i) block[i] = static_cast<unsigned char>(i % 251);
  std::size_t handle_bytes = 0, offset_bytes = 1;
  if (gmlake_ipc_export(block + 10, 0, nullptr, &handle_bytes, &offset_bytes) != GMLAKE_OK) return 4;
  if (offset_bytes != 10) return 5;
  std::vector<char> handle(handle_bytes);
  std::size_t small = handle_bytes - 1;
  if (gmlake_ipc_export(block, 0, handle.data(), &small, &offset_bytes) != GMLAKE_ERROR_INVALID_ARGUMENT) return 6;
  if (small != handle_bytes) return 7;
  if (gmlake_ipc_export(block, 0, handle.data(), &handle_bytes, &offset_bytes) != GMLAKE_OK) return 8;
  test::send_message(to_parent, std::string(handle.data(), handle_bytes));
  test::receive_message(from_parent);  // the parent wrote
  for (std::size_t i = 0; i < kBytes; ++i) {
    if (block[i] != static_cast<unsigned char>(255 - i % 251)) return 9;
  }
  gmlake_free(block, 0, 0, 0);
  gmlake_shutdown();
  return 0;
}

TEST(CApiIpc, AForkedExportersBlockIsReadAndWrittenThroughItsHandle) {
  gmlake_shutdown();
  ASSERT_EQ(gmlake_init("backend:host"), GMLAKE_OK) << gmlake_last_error();
  test::ForkedChild child(c_exporter);
  const std::string handle = child.receive();
  ASSERT_NE(handle, "<eof>") << "the exporter failed early";

  void* ptr = nullptr;
  ASSERT_EQ(gmlake_ipc_import(handle.data(), handle.size(), 0, &ptr), GMLAKE_OK) << gmlake_last_error();
  auto* bytes = static_cast<unsigned char*>(ptr);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < kBytes; ++i) mismatches += bytes[i] != static_cast<unsigned char>(i % 251);
  EXPECT_EQ(mismatches, 0u);
  for (std::size_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<unsigned char>(255 - i % 251);
  ASSERT_TRUE(child.send("written"));
  EXPECT_EQ(child.wait(), 0) << "the exporter found other bytes (or failed: see its exit code)";

  gmlake_stats stats{};
  ASSERT_EQ(gmlake_get_stats(0, &stats), GMLAKE_OK);
  EXPECT_EQ(stats.allocated_bytes.current, 0) << "an import is not the pool's memory";

  std::string corrupt = handle;
  corrupt[20] ^= 1;
  void* bad = &mismatches;
  EXPECT_EQ(gmlake_ipc_import(corrupt.data(), corrupt.size(), 0, &bad), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gmlake_last_error()).find("corrupt handle"), std::string::npos) << gmlake_last_error();
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(gmlake_ipc_import(handle.data(), handle.size(), 0, nullptr), GMLAKE_ERROR_INVALID_ARGUMENT);

  EXPECT_EQ(gmlake_ipc_close(ptr, 0), GMLAKE_OK) << gmlake_last_error();
  EXPECT_EQ(gmlake_ipc_close(ptr, 0), GMLAKE_ERROR_INVALID_POINTER);
  EXPECT_NE(std::string(gmlake_last_error()).find("not an open import"), std::string::npos) << gmlake_last_error();
  EXPECT_EQ(gmlake_ipc_close(ptr, -1), GMLAKE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gmlake_ipc_import(handle.data(), handle.size(), 0, &ptr), GMLAKE_ERROR_INVALID_ARGUMENT)
      << "the exporter has exited";
  EXPECT_NE(std::string(gmlake_last_error()).find("has exited"), std::string::npos) << gmlake_last_error();

  void* block = gmlake_malloc(kMiB, 0, 0);
  std::size_t handle_bytes = 0, offset_bytes = 0;
  EXPECT_EQ(gmlake_ipc_export(static_cast<char*>(block) + kMiB + 4096, 0, nullptr, &handle_bytes, &offset_bytes),
            GMLAKE_ERROR_INVALID_POINTER);
  EXPECT_EQ(gmlake_ipc_export(block, 0, nullptr, nullptr, &offset_bytes), GMLAKE_ERROR_INVALID_ARGUMENT);
  gmlake_free(block, 0, 0, 0);
  gmlake_shutdown();
}

}  // namespace
}  // namespace gmlake
