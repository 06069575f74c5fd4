// IpcImportTable (src/pool/ipc_import_table.h) in one process: what it refuses without an exporter, and that a
// failed open leaves nothing open. Imports across processes: c_api_ipc_test.cpp and ipc_host_test.cpp.
#include "pool/ipc_import_table.h"

#include <gtest/gtest.h>

#include <string>

#include "expect_error.h"

namespace gmlake {
namespace {

TEST(IpcImportTableTest, CloseOnADeviceThatNeverImportedIsAnInvalidPointer) {
  IpcImportTable table(4);
  int x = 0;
  test::expect_error([&] { table.close(3, &x); }, ErrorCode::kInvalidPointer,
                     "gmlake_ipc_close: nothing was ever imported on device 3");
}

TEST(IpcImportTableTest, AHandleThatIsNoneIsRefusedAndLeavesNothingOpen) {
  IpcImportTable table(2);
  const Config config = parse_config("backend:host");
  test::expect_error([&] { table.open(1, config, "not a handle"); }, ErrorCode::kInvalidArgument, "gmlake ipc");
  int x = 0;
  test::expect_error([&] { table.close(1, &x); }, ErrorCode::kInvalidPointer, "");  // the device has a table now
}

TEST(IpcImportTableTest, ABackendThisBuildDoesNotHaveIsRefused) {
  IpcImportTable table(1);
  Config config = parse_config("backend:host");
  config.backend = "nosuch";
  test::expect_error([&] { table.open(0, config, "x"); }, ErrorCode::kInvalidArgument, "unknown backend 'nosuch'");
}

}  // namespace
}  // namespace gmlake
