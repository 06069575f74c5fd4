// What the CUDA backend promises beyond the conformance suite: real device memory with the VMM semantics
// (aliasing, stitching separate chunks into one range, data living in the chunk across remaps), its
// construction checks, real driver failures mapped to gmlake errors with the backend still usable afterwards,
// context handling, exportable chunks, and a destructor that gives everything back.
#include "backends/cuda/cuda_backend.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "gmlake/backend_factory.h"
#include "gmlake/error.h"
#include "gmlake/units.h"
#include "gpu/cuda_test_support.h"

namespace gmlake {
namespace {

using gpu_test::copy_from_device;
using gpu_test::copy_to_device;
using gpu_test::fill_bytes;
using gpu_test::fill_words;
using gpu_test::read_bytes;
using gpu_test::synchronize;

constexpr std::uint64_t kGranule = kPageBytes;

class CudaBackendTest : public gpu_test::CudaTest {};

// The 32-bit words of [addr, addr + size_bytes) on the device.
std::vector<std::uint32_t> read_words(std::uintptr_t addr, std::uint64_t size_bytes) {
  std::vector<std::uint32_t> words(size_bytes / sizeof(std::uint32_t));
  copy_from_device(words.data(), addr, size_bytes);
  return words;
}

// True when every word of `words` equals `value`.
bool all_equal(const std::vector<std::uint32_t>& words, std::uint32_t value) {
  for (std::uint32_t w : words) {
    if (w != value) return false;
  }
  return true;
}

TEST_F(CudaBackendTest, IsNamedCudaIsNotHostAccessibleAndIsMadeByName) {
  const CudaBackend backend;
  EXPECT_EQ(backend.name(), "cuda");
  EXPECT_FALSE(backend.host_accessible());
  EXPECT_EQ(backend.device(), 0);
  EXPECT_EQ(backend.granularity_bytes(), kPageBytes);
  EXPECT_EQ(kPageBytes % backend.device_granularity_bytes(), 0u);
  for (const char* name : {"cuda", "cuda:0"}) {
    const std::unique_ptr<Backend> made = make_backend(name, kPageBytes);
    EXPECT_EQ(made->name(), "cuda");
  }
}

TEST_F(CudaBackendTest, AGranularityThatIsNotAPowerOfTwoMultipleOfTheDeviceGranularityIsRejected) {
  const std::uint64_t granularity_bytes = CudaBackend().device_granularity_bytes();
  CudaBackendOptions options;
  options.granularity_bytes = 3 * granularity_bytes;  // a multiple, not a power of two
  EXPECT_THROW(CudaBackend{options}, Error);
  if (granularity_bytes > 1) {
    options.granularity_bytes = granularity_bytes / 2;  // a power of two, not a multiple
    try {
      CudaBackend backend(options);
      ADD_FAILURE() << "no error for granularity_bytes " << options.granularity_bytes;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("granularity"), std::string::npos) << e.what();
    }
  }
  options.granularity_bytes = 2 * granularity_bytes;  // a larger granularity is fine
  EXPECT_EQ(CudaBackend(options).granularity_bytes(), 2 * granularity_bytes);
}

TEST_F(CudaBackendTest, ADeviceThatDoesNotExistIsABackendErrorNamingCuDeviceGet) {
  for (int device : {9999, -1}) {
    CudaBackendOptions options;
    options.device = device;
    try {
      CudaBackend backend(options);
      ADD_FAILURE() << "no error for device " << device;
    } catch (const BackendError& e) {
      EXPECT_EQ(e.call(), "cuDeviceGet") << e.what();
      EXPECT_NE(std::string(e.what()).find("CUDA_ERROR_"), std::string::npos) << e.what();
    }
  }
}

TEST_F(CudaBackendTest, OneChunkMappedAtTwoRangesShowsTheSameBytesThroughBoth) {
  CudaBackend b;
  const std::uintptr_t base = b.reserve(4 * kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  const std::uintptr_t first = base, second = base + 2 * kGranule;
  b.map(first, kGranule, chunk);
  b.map(second, kGranule, chunk);
  b.set_access(first, kGranule);
  b.set_access(second, kGranule);

  constexpr std::uint64_t kPatternOffset = 1000;
  std::vector<std::uint8_t> pattern(4 * kKiB);
  std::iota(pattern.begin(), pattern.end(), std::uint8_t{7});
  fill_bytes(first, 0x5a, kGranule);
  copy_to_device(first + kPatternOffset, pattern.data(), pattern.size());
  synchronize();
  const std::vector<std::uint8_t> seen = read_bytes(second, kGranule);
  EXPECT_EQ(seen.front(), 0x5a);
  EXPECT_EQ(seen.back(), 0x5a);
  EXPECT_TRUE(std::equal(pattern.begin(), pattern.end(), seen.begin() + kPatternOffset));
  EXPECT_EQ(seen[kPatternOffset + pattern.size()], 0x5a);

  fill_words(second + kGranule / 2, 0xdeadbeef, 16);  // and back the other way
  synchronize();
  EXPECT_TRUE(all_equal(read_words(first + kGranule / 2, 16 * sizeof(std::uint32_t)), 0xdeadbeef));

  b.unmap(first, kGranule);  // the data lives in the chunk: a third mapping sees it too
  const std::uintptr_t third = base + kGranule;
  b.map(third, kGranule, chunk);
  b.set_access(third, kGranule);
  EXPECT_EQ(read_bytes(third, kGranule), read_bytes(second, kGranule));
  b.unmap(second, kGranule);
  b.unmap(third, kGranule);
  b.release(chunk);
  b.address_free(base, 4 * kGranule);
}

TEST_F(CudaBackendTest, SeparateChunksStitchedIntoOneRangeReadBackInAnyOrder) {
  constexpr std::uint64_t kChunks = 8;
  CudaBackend b;
  const std::uintptr_t written = b.reserve(kChunks * kGranule);
  const std::uintptr_t reread = b.reserve(kChunks * kGranule);
  std::vector<ChunkHandle> chunks;
  for (std::uint64_t i = 0; i < kChunks; ++i) chunks.push_back(b.create(kGranule));
  // Written through one range with the chunks in reverse order, one set_access over all of them...
  for (std::uint64_t i = 0; i < kChunks; ++i) b.map(written + i * kGranule, kGranule, chunks[kChunks - 1 - i]);
  b.set_access(written, kChunks * kGranule);
  for (std::uint64_t i = 0; i < kChunks; ++i) {
    fill_words(written + i * kGranule, 0x1000 + static_cast<std::uint32_t>(kChunks - 1 - i), kGranule / 4);
  }
  synchronize();
  EXPECT_TRUE(all_equal(read_words(written, kGranule), 0x1000 + kChunks - 1));
  // ...and read back through another range with the chunks in a third order (odd ones first).
  std::vector<std::uint64_t> order;
  for (std::uint64_t i = 1; i < kChunks; i += 2) order.push_back(i);
  for (std::uint64_t i = 0; i < kChunks; i += 2) order.push_back(i);
  for (std::uint64_t i = 0; i < kChunks; ++i) b.map(reread + i * kGranule, kGranule, chunks[order[i]]);
  b.set_access(reread, kChunks * kGranule);
  const std::vector<std::uint32_t> words = read_words(reread, kChunks * kGranule);
  for (std::uint64_t i = 0; i < kChunks; ++i) {
    const std::vector<std::uint32_t> piece(words.begin() + static_cast<std::ptrdiff_t>(i * kGranule / 4),
                                           words.begin() + static_cast<std::ptrdiff_t>((i + 1) * kGranule / 4));
    EXPECT_TRUE(all_equal(piece, 0x1000 + static_cast<std::uint32_t>(order[i]))) << "chunk " << order[i];
  }
  b.unmap(written, kChunks * kGranule);  // one call over many mappings
  b.unmap(reread, kChunks * kGranule);
  for (ChunkHandle c : chunks) b.release(c);
  b.address_free(written, kChunks * kGranule);
  b.address_free(reread, kChunks * kGranule);
}

TEST_F(CudaBackendTest, CallsWorkFromAThreadWithNoCurrentContextAndLeaveItWithNone) {
  CudaBackend b;
  bool none_before = false, none_after = false;
  std::vector<std::uint32_t> words;
  std::thread worker([&] {
    const cuda::DriverApi& api = cuda::driver();
    CUcontext current = nullptr;
    api.cuCtxGetCurrent(&current);
    none_before = current == nullptr;
    const std::uintptr_t addr = b.reserve(kGranule);
    const ChunkHandle chunk = b.create(kGranule);
    b.map(addr, kGranule, chunk);
    b.set_access(addr, kGranule);
    api.cuCtxGetCurrent(&current);
    none_after = current == nullptr;
    b.unmap(addr, kGranule);
    b.release(chunk);
    b.address_free(addr, kGranule);
  });
  worker.join();
  EXPECT_TRUE(none_before);
  EXPECT_TRUE(none_after);
  EXPECT_EQ(b.live_chunks() + b.live_mappings() + b.live_reservations(), 0u);
}

TEST_F(CudaBackendTest, ACreateLargerThanTheDeviceIsOutOfMemoryAndTheBackendStillWorks) {
  CudaBackend b;
  const std::uint64_t too_big = round_up(gpu_test::device_memory().total_bytes, kGranule) + kGranule;
  try {
    b.create(too_big);
    ADD_FAILURE() << "cuMemCreate of " << too_big << " bytes succeeded";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), too_big);
    EXPECT_EQ(e.reserved_bytes(), 0u);
    EXPECT_NE(std::string(e.what()).find("cuMemCreate"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.live_chunks(), 0u);
  EXPECT_EQ(b.counters()[BackendCall::kCreate], 1u);
  const std::uintptr_t addr = b.reserve(kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  b.map(addr, kGranule, chunk);
  b.set_access(addr, kGranule);
  fill_words(addr, 0x600dcafe, kGranule / 4);
  synchronize();
  EXPECT_TRUE(all_equal(read_words(addr, kGranule), 0x600dcafe));
  b.unmap(addr, kGranule);
  b.release(chunk);
  b.address_free(addr, kGranule);
}

// A process has about 128 TiB of address space, the GPU's included (bench/cuda/va_limit_h200.json): a reservation
// past it is an out-of-memory (the gmlake policy then makes smaller arenas: ArenaSet), and the backend still works.
TEST_F(CudaBackendTest, AReservationPastTheAddressSpaceIsOutOfMemoryAndTheBackendStillWorks) {
  CudaBackend b;
  const std::uint64_t too_big = std::uint64_t{256} << 40;  // 256 TiB
  try {
    b.reserve(too_big);
    ADD_FAILURE() << "cuMemAddressReserve of 256 TiB succeeded";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), too_big);
    EXPECT_NE(std::string(e.what()).find("no virtual address space left"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.live_reservations(), 0u);
  const std::uintptr_t addr = b.reserve(kGranule);
  b.address_free(addr, kGranule);
}

TEST_F(CudaBackendTest, ExportableChunksExportAsFileDescriptorsAndOthersDoNot) {
  CudaBackendOptions options;
  options.exportable = true;
  CudaBackend exportable(options);
  EXPECT_TRUE(exportable.exportable());
  const ChunkHandle chunk = exportable.create(kGranule);
  int fd = -1;
  const cuda::DriverApi& api = cuda::driver();
  EXPECT_EQ(api.cuMemExportToShareableHandle(&fd, chunk.value, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_SUCCESS);
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
  exportable.release(chunk);

  CudaBackend plain;
  const ChunkHandle other = plain.create(kGranule);
  int other_fd = -1;
  EXPECT_NE(api.cuMemExportToShareableHandle(&other_fd, other.value, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_SUCCESS);
  if (other_fd >= 0) close(other_fd);
  plain.release(other);
}

TEST_F(CudaBackendTest, TheDestructorGivesBackEverythingStillLive) {
  constexpr std::uint64_t kHeldBytes = kGiB;
  constexpr std::uint64_t kSlackBytes = 64 * kMiB;  // what the driver may keep or others may take meanwhile
  std::uint64_t free_while_held = 0;
  {
    CudaBackend b;
    const std::uintptr_t addr = b.reserve(2 * kHeldBytes);
    const ChunkHandle chunk = b.create(kHeldBytes);
    b.map(addr, kHeldBytes, chunk);
    b.map(addr + kHeldBytes, kHeldBytes, chunk);
    b.set_access(addr, 2 * kHeldBytes);
    fill_bytes(addr, 1, kHeldBytes);
    synchronize();
    free_while_held = gpu_test::device_memory().free_bytes;
  }  // mapped twice, accessible, never unmapped, released or freed by the test
  EXPECT_GE(gpu_test::device_memory().free_bytes + kSlackBytes, free_while_held + kHeldBytes);
}

// Backend::scrub (issue 25: what the lake does to every chunk before it lends it): the bytes are zero after it,
// a mapped chunk is refused, and its cost is printed ("[scrub] ..."; docs/reliability.md has the figures).
TEST_F(CudaBackendTest, ScrubZeroesAChunkAndPrintsItsCost) {
  CudaBackend backend(CudaBackendOptions{});
  for (const std::uint64_t size_bytes : {kGranule, 64 * kMiB, 1024 * kMiB}) {
    const ChunkHandle chunk = backend.create(size_bytes);
    const std::uintptr_t at = backend.reserve(size_bytes);
    backend.map(at, size_bytes, chunk);
    backend.set_access(at, size_bytes);
    fill_bytes(at, 0x77, size_bytes);
    synchronize();
    EXPECT_THROW(backend.scrub(chunk), Error) << "mapped";
    backend.unmap(at, size_bytes);
    const auto start = std::chrono::steady_clock::now();
    backend.scrub(chunk);
    const auto took_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
    std::printf("[scrub] %llu bytes in %lld us\n", static_cast<unsigned long long>(size_bytes),
                static_cast<long long>(took_us));
    backend.map(at, size_bytes, chunk);
    backend.set_access(at, size_bytes);
    const std::vector<std::uint8_t> bytes = read_bytes(at, size_bytes);
    EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0), static_cast<std::ptrdiff_t>(size_bytes)) << size_bytes;
    backend.unmap(at, size_bytes);
    backend.address_free(at, size_bytes);
    backend.release(chunk);
  }
  EXPECT_EQ(backend.live_chunks(), 0u);
}

}  // namespace
}  // namespace gmlake
