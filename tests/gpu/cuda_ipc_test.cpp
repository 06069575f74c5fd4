// IPC on the GPU (include/gmlake/ipc.h): a forked child exports a block of its cuda Pool (chunks made with the
// POSIX file descriptor handle type, ipc_handles:1), this process imports it through pidfd_getfd and
// cuMemImportFromShareableHandle and checks the bytes both ways; the import holds the memory after the exporter
// freed it and emptied its cache; a pool made with ipc_handles:0 refuses to export with a clear error.
// The child is a fresh run of this binary (fork, then exec with --gtest_filter=CudaIpcExporter.Run and the
// pipes' descriptors in the environment): CUDA does not survive a fork of a process that initialized it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "cuda_test_support.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "gmlake/ipc.h"
#include "gmlake/pool.h"
#include "gmlake/units.h"
#include "ipc_test_support.h"

namespace gmlake {
namespace {

constexpr std::uint64_t kBytes = 9 * kMiB + 4096;

// The child: a cuda pool, a small block first, the shared block filled with 0x5A; handle sent. Commands:
// "check" answers whether the block holds 0xC3 now; "free" frees it and empties the cache; eof exits.
int cuda_exporter(int to_parent, int from_parent) {
  try {
    if (const std::optional<std::string> why = gpu_test::cuda_unavailable()) throw std::runtime_error(*why);
    cuda::check("cuCtxPushCurrent", cuda::driver().cuCtxPushCurrent(gpu_test::primary_context()));
    Pool pool(parse_config("backend:cuda"));
    void* small = pool.allocate(5000, 0);
    void* block = pool.allocate(kBytes, 0);
    gpu_test::fill_bytes(reinterpret_cast<std::uintptr_t>(block), 0x5A, kBytes);
    gpu_test::synchronize();
    test::send_message(to_parent, ipc_export(pool, block).handle);
    for (;;) {
      const std::string command = test::receive_message(from_parent);
      if (command == "check") {
        const std::vector<std::uint8_t> bytes = gpu_test::read_bytes(reinterpret_cast<std::uintptr_t>(block), kBytes);
        bool all = true;
        for (std::uint8_t b : bytes) all = all && b == 0xC3;
        test::send_message(to_parent, all ? "ok" : "bad");
      } else if (command == "free") {
        pool.deallocate(block);
        pool.empty_cache();
        test::send_message(to_parent, "freed");
      } else {
        pool.deallocate(small);
        return 0;
      }
    }
  } catch (const std::exception& e) {
    test::send_message(to_parent, std::string("error: ") + e.what());
    return 2;
  }
}

// The exporter's process: runs only when started by the test below.
TEST(CudaIpcExporter, Run) {
  const char* up = std::getenv("GMLAKE_IPC_UP");
  const char* down = std::getenv("GMLAKE_IPC_DOWN");
  if (up == nullptr || down == nullptr) GTEST_SKIP() << "the exporter half of CudaIpc (started by it)";
  std::fflush(stdout);
  _exit(cuda_exporter(std::atoi(up), std::atoi(down)));
}

int exec_exporter(int to_parent, int from_parent) {
  setenv("GMLAKE_IPC_UP", std::to_string(to_parent).c_str(), 1);
  setenv("GMLAKE_IPC_DOWN", std::to_string(from_parent).c_str(), 1);
  execl("/proc/self/exe", "gmlake_gpu_tests", "--gtest_filter=CudaIpcExporter.Run", static_cast<char*>(nullptr));
  return 97;
}

class CudaIpc : public gpu_test::CudaTest {};

TEST_F(CudaIpc, AnotherProcessesBlockIsReadAndWrittenAndOutlivesItsFree) {
  test::ForkedChild child(exec_exporter);
  const std::string handle = child.receive();
  ASSERT_EQ(handle.rfind("error: ", 0), std::string::npos) << handle;
  ASSERT_NE(handle, "<eof>");

  CudaBackendOptions options;
  CudaBackend backend(options);
  IpcImports imports(backend);
  void* p = imports.open(handle);
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::vector<std::uint8_t> bytes = gpu_test::read_bytes(addr, kBytes);
  std::uint64_t wrong = 0;
  for (std::uint8_t b : bytes) wrong += b != 0x5A;
  EXPECT_EQ(wrong, 0u) << "the importer sees the exporter's bytes";
  gpu_test::fill_bytes(addr, 0xC3, kBytes);
  gpu_test::synchronize();
  ASSERT_TRUE(child.send("check"));
  EXPECT_EQ(child.receive(), "ok") << "the exporter sees the importer's bytes";

  ASSERT_TRUE(child.send("free"));
  EXPECT_EQ(child.receive(), "freed");
  EXPECT_EQ(child.wait(), 0);
  bytes = gpu_test::read_bytes(addr, kBytes);  // the exporter freed, released and exited: the import holds it
  wrong = 0;
  for (std::uint8_t b : bytes) wrong += b != 0xC3;
  EXPECT_EQ(wrong, 0u);
  imports.close(p);
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TEST_F(CudaIpc, APoolWithoutIpcHandlesRefusesToExport) {
  Pool pool(parse_config("backend:cuda,ipc_handles:0"));
  void* block = pool.allocate(kMiB, 0);
  try {
    ipc_export(pool, block);
    ADD_FAILURE() << "exported a chunk created without the POSIX fd handle type";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("cuMemExportToShareableHandle"), std::string::npos) << e.what();
  }
  pool.deallocate(block);
  void* again = pool.allocate(kMiB, 0);  // the pool is unchanged and usable
  EXPECT_NE(again, nullptr);
  pool.deallocate(again);
}

}  // namespace
}  // namespace gmlake
