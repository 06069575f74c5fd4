// IPC on the host backend (include/gmlake/ipc.h), two real processes: a forked child exports a block of its Pool,
// this process imports it through pidfd_getfd and reads the child's bytes; what it writes the child reads back.
// Then every failure: the exporter exited, a descriptor no longer open, another backend's handle, a corrupt
// handle, a double close, a pointer that is no block: each is a clear error, and leaves no descriptor, mapping,
// reservation or chunk behind; the importer works afterwards.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "expect_error.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/ipc.h"
#include "gmlake/pool.h"
#include "gmlake/units.h"
#include "ipc_test_support.h"

namespace gmlake {
namespace {

using test::ForkedChild;
using test::receive_message;
using test::send_message;

constexpr std::uint64_t kBlockBytes = 5 * kMiB + 300;  // several 2 MiB chunks, not a multiple of them

std::uint8_t pattern(std::uint64_t i, std::uint8_t seed) { return static_cast<std::uint8_t>(i * 7 + seed); }

void fill(void* p, std::uint64_t n, std::uint8_t seed) {
  auto* bytes = static_cast<std::uint8_t*>(p);
  for (std::uint64_t i = 0; i < n; ++i) bytes[i] = pattern(i, seed);
}

// The first index whose byte differs from the pattern, n when none does.
std::uint64_t first_mismatch(const void* p, std::uint64_t n, std::uint8_t seed) {
  const auto* bytes = static_cast<const std::uint8_t*>(p);
  for (std::uint64_t i = 0; i < n; ++i) {
    if (bytes[i] != pattern(i, seed)) return i;
  }
  return n;
}

// The child: a host pool, a small block first (so the shared one starts inside a chunk), the shared block filled
// with seed 1, its handle sent; then it waits for "check" (reads seed 2, answers "ok" or "bad"), "free" (frees
// the block and empties the cache) or the pipe's end, and exits 0.
int exporter(int to_parent, int from_parent) {
  Pool pool(parse_config("backend:host"));
  void* small = pool.allocate(3000, 0);
  void* block = pool.allocate(kBlockBytes, 0);
  fill(block, kBlockBytes, 1);
  const IpcExport exported = ipc_export(pool, block);
  if (exported.offset_bytes != 0) return 3;
  send_message(to_parent, exported.handle);
  for (;;) {
    const std::string command = receive_message(from_parent);
    if (command == "check") {
      send_message(to_parent, first_mismatch(block, kBlockBytes, 2) == kBlockBytes ? "ok" : "bad");
    } else if (command == "free") {
      pool.deallocate(block);
      pool.empty_cache();
      send_message(to_parent, "freed");
    } else {
      pool.deallocate(small);
      return 0;
    }
  }
}

class IpcHostTest : public ::testing::Test {
 protected:
  HostBackend backend_;
  IpcImports imports_{backend_};

  void expect_nothing_left() {
    EXPECT_EQ(imports_.open_count(), 0u);
    EXPECT_EQ(backend_.live_chunks(), 0u);
    EXPECT_EQ(backend_.live_mappings(), 0u);
    EXPECT_EQ(backend_.live_reservations(), 0u);
  }
};

TEST_F(IpcHostTest, TheImporterReadsTheExportersBytesAndTheExporterReadsTheImporters) {
  ForkedChild child(exporter);
  const std::string handle = child.receive();
  ASSERT_NE(handle, "<eof>") << "the exporter died";
  void* p = imports_.open(handle);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(first_mismatch(p, kBlockBytes, 1), kBlockBytes) << "the importer sees the exporter's bytes";
  fill(p, kBlockBytes, 2);
  ASSERT_TRUE(child.send("check"));
  EXPECT_EQ(child.receive(), "ok") << "the exporter sees the importer's bytes";

  void* again = imports_.open(handle);  // a second import maps anew: same memory, another address
  EXPECT_NE(again, p);
  EXPECT_EQ(first_mismatch(again, kBlockBytes, 2), kBlockBytes);
  EXPECT_EQ(imports_.open_count(), 2u);
  imports_.close(again);
  imports_.close(p);
  EXPECT_EQ(child.wait(), 0);
  expect_nothing_left();
}

TEST_F(IpcHostTest, AHandleOfAnExitedProcessIsRefused) {
  std::string handle;
  {
    ForkedChild child(exporter);
    handle = child.receive();
    ASSERT_EQ(child.wait(), 0);
  }
  test::expect_error([&] { imports_.open(handle); }, ErrorCode::kInvalidArgument, "has exited");
  expect_nothing_left();
}

TEST_F(IpcHostTest, FailedImportsLeaveNothingAndTheImporterStaysUsable) {
  ForkedChild child(exporter);
  const std::string handle = child.receive();
  IpcHandle fields = decode_ipc_handle(handle);

  IpcHandle closed_fd = fields;
  closed_fd.chunks.back().fd = 1000;  // never opened by the child
  test::expect_error([&] { imports_.open(encode_ipc_handle(closed_fd)); }, ErrorCode::kInvalidArgument,
                     "is not open");
  expect_nothing_left();

  IpcHandle other_backend = fields;
  other_backend.backend = "cuda";
  test::expect_error([&] { imports_.open(encode_ipc_handle(other_backend)); }, ErrorCode::kInvalidArgument,
                     "cuda backend's memory");
  std::string corrupt = handle;
  corrupt[corrupt.size() / 2] ^= 1;
  test::expect_error([&] { imports_.open(corrupt); }, ErrorCode::kInvalidArgument, "corrupt handle");
  IpcHandle odd_chunk = fields;
  odd_chunk.chunks[0].size_bytes = 4096;  // not a multiple of this backend's 2 MiB granularity
  odd_chunk.block_offset_bytes = 0;
  odd_chunk.block_size_bytes = 4096;
  test::expect_error([&] { imports_.open(encode_ipc_handle(odd_chunk)); }, ErrorCode::kInvalidArgument,
                     "granularity");
  expect_nothing_left();

  void* p = imports_.open(handle);  // the importer still works
  EXPECT_EQ(first_mismatch(p, kBlockBytes, 1), kBlockBytes);
  imports_.close(p);
  test::expect_error([&] { imports_.close(p); }, ErrorCode::kInvalidPointer, "not an open import");
  int local = 0;
  test::expect_error([&] { imports_.close(&local); }, ErrorCode::kInvalidPointer, "not an open import");
  EXPECT_EQ(child.wait(), 0);
  expect_nothing_left();
}

TEST(IpcExport, InteriorPointersGiveTheirOffsetAndWhatIsNoLiveBlockIsRefused) {
  Pool pool(parse_config("backend:host"));
  auto* block = static_cast<char*>(pool.allocate(kBlockBytes, 0));
  const IpcExport interior = ipc_export(pool, block + 1000);
  EXPECT_EQ(interior.offset_bytes, 1000u);
  EXPECT_EQ(decode_ipc_handle(interior.handle).block_size_bytes, round_up(kBlockBytes, kRoundBytes));
  int local = 0;
  test::expect_error([&] { ipc_export(pool, &local); }, ErrorCode::kInvalidPointer, "no live allocated block");
  pool.deallocate(block);
  test::expect_error([&] { ipc_export(pool, block); }, ErrorCode::kInvalidPointer, "no live allocated block");

  Pool sim(parse_config("backend:sim"));
  void* simulated = sim.allocate(kMiB, 0);
  test::expect_error([&] { ipc_export(sim, simulated); }, ErrorCode::kInvalidArgument, "cannot export");
  sim.deallocate(simulated);
  pool.check_invariants();
}

TEST(IpcExport, EveryPolicysBlocksCanBeImportedInTheSameProcess) {
  for (const char* policy : {"gmlake", "caching", "expandable"}) {
    SCOPED_TRACE(policy);
    Pool pool(parse_config(std::string("backend:host,policy:") + policy));
    void* first = pool.allocate(700 * kKiB, 0);
    void* block = pool.allocate(kBlockBytes, 0);
    fill(block, kBlockBytes, 5);
    HostBackend backend;
    IpcImports imports(backend);
    void* alias = imports.open(ipc_export(pool, block).handle);
    EXPECT_EQ(first_mismatch(alias, kBlockBytes, 5), kBlockBytes);
    fill(alias, kBlockBytes, 6);
    EXPECT_EQ(first_mismatch(block, kBlockBytes, 6), kBlockBytes);
    imports.close(alias);
    pool.deallocate(block);
    pool.deallocate(first);
    pool.check_invariants();
  }
}

}  // namespace
}  // namespace gmlake
