// GrowableBuffer: grows in place (same address, bytes kept, nothing copied), maps only the chunks it needs,
// shrinks by unmapping its tail; exhaustion, backend out of memory, and readers working while it grows.
#include "gmlake/classic/growable_buffer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"
#include "classic_test_support.h"

namespace gmlake::classic {
namespace {

TEST(GrowableBufferTest, GrowingKeepsTheAddressAndEveryByteWritten) {
  HostBackend backend;
  GrowableBuffer buffer(backend, {.max_bytes = 64 * kMiB});
  buffer.resize(kMiB);
  char* const data = static_cast<char*>(buffer.data());
  std::memset(data, 'a', kMiB);
  buffer.resize(10 * kMiB);
  EXPECT_EQ(buffer.data(), data);
  std::memset(data + kMiB, 'b', 9 * kMiB);
  buffer.resize(64 * kMiB);
  EXPECT_EQ(buffer.data(), data);
  EXPECT_EQ(data[0], 'a');
  EXPECT_EQ(data[kMiB - 1], 'a');
  EXPECT_EQ(data[kMiB], 'b');
  EXPECT_EQ(data[10 * kMiB - 1], 'b');
  data[64 * kMiB - 1] = 'z';
  EXPECT_EQ(data[64 * kMiB - 1], 'z');
  buffer.check_invariants();
}

TEST(GrowableBufferTest, EachGrowthMapsTheBytesItNeedsAsOneChunk) {
  SimBackend backend;
  GrowableBuffer buffer(backend, {.max_bytes = kGiB});
  buffer.resize(1);
  EXPECT_EQ(buffer.capacity_bytes(), kPageBytes);
  buffer.resize(kPageBytes);  // fits: no backend call
  EXPECT_EQ(backend.counters()[BackendCall::kMap], 1u);
  buffer.resize(5 * kPageBytes + 1);
  EXPECT_EQ(buffer.capacity_bytes(), 6 * kPageBytes);
  EXPECT_EQ(backend.live_chunk_bytes(), 6 * kPageBytes);
  EXPECT_EQ(backend.counters()[BackendCall::kCreate], 2u);
  EXPECT_EQ(backend.counters()[BackendCall::kMap], 2u);
  EXPECT_EQ(backend.counters()[BackendCall::kSetAccess], 2u);
  EXPECT_EQ(buffer.stats().num_allocs, 2u);
  EXPECT_EQ(buffer.stats().chunks_created, 2u);
  buffer.check_invariants();
}

TEST(GrowableBufferTest, MaxChunkBytesSplitsALargeGrowthIntoChunksWithOneSetAccess) {
  SimBackend backend;
  GrowableBuffer buffer(backend, {.max_bytes = kGiB, .max_chunk_bytes = 4 * kPageBytes});
  buffer.resize(10 * kPageBytes);  // 4 + 4 + 2 chunks
  EXPECT_EQ(backend.counters()[BackendCall::kCreate], 3u);
  EXPECT_EQ(backend.counters()[BackendCall::kSetAccess], 2u);  // one per equal-size run
  buffer.resize(3 * kPageBytes);
  buffer.shrink_to_fit();
  EXPECT_EQ(buffer.capacity_bytes(), 4 * kPageBytes);
  buffer.check_invariants();
}

TEST(GrowableBufferTest, AFailedSplitGrowthUnmapsItsFirstChunksAgain) {
  SimBackend backend(kPageBytes, 9 * kPageBytes);
  GrowableBuffer buffer(backend, {.max_bytes = kGiB, .max_chunk_bytes = 4 * kPageBytes});
  buffer.resize(kPageBytes);
  EXPECT_THROW(buffer.resize(10 * kPageBytes), OutOfMemoryError);  // 1 + 4 + 4 fit, the last 1 does not
  EXPECT_EQ(buffer.capacity_bytes(), kPageBytes);
  EXPECT_EQ(backend.live_chunk_bytes(), kPageBytes);
  buffer.check_invariants();
}

TEST(GrowableBufferTest, ShrinkToFitUnmapsTheWholeChunksPastTheSizeAndGivesThemBack) {
  HostBackend backend;
  GrowableBuffer buffer(backend, {.max_bytes = kGiB, .step_bytes = 2 * kPageBytes});
  buffer.resize(8 * kMiB);   // one chunk [0, 8 MiB)
  buffer.resize(20 * kMiB);  // one chunk [8, 20 MiB)
  buffer.resize(30 * kMiB);  // one chunk [20, 32 MiB)
  char* const data = static_cast<char*>(buffer.data());
  std::memset(data, 'k', 30 * kMiB);
  buffer.resize(5 * kMiB);
  EXPECT_EQ(buffer.capacity_bytes(), 32 * kMiB);  // resize alone keeps the mapping
  buffer.shrink_to_fit();
  EXPECT_EQ(buffer.capacity_bytes(), 8 * kMiB);
  EXPECT_EQ(backend.live_chunk_bytes(), 8 * kMiB);
  EXPECT_FALSE(backend.is_accessible(reinterpret_cast<std::uintptr_t>(data) + 8 * kMiB, kPageBytes));
  EXPECT_EQ(data[5 * kMiB - 1], 'k');
  buffer.resize(12 * kMiB);  // grows again at the same address
  EXPECT_EQ(buffer.data(), data);
  EXPECT_EQ(data[0], 'k');
  EXPECT_EQ(buffer.stats().chunks_released, 2u);
  buffer.check_invariants();
  buffer.resize(0);
  buffer.shrink_to_fit();
  EXPECT_EQ(backend.live_chunks(), 0u);
  buffer.check_invariants();
}

TEST(GrowableBufferTest, AChunkThatStraddlesTheNewSizeStaysMapped) {
  SimBackend backend;
  GrowableBuffer buffer(backend, {.max_bytes = kGiB});
  buffer.resize(8 * kPageBytes);  // one chunk
  buffer.resize(kPageBytes);
  buffer.shrink_to_fit();
  EXPECT_EQ(buffer.capacity_bytes(), 8 * kPageBytes);
  buffer.check_invariants();
}

TEST(GrowableBufferTest, GrowingPastMaxBytesThrowsOutOfMemoryWithItsFiguresAndChangesNothing) {
  SimBackend backend;
  GrowableBuffer buffer(backend, {.max_bytes = 8 * kMiB});
  buffer.resize(3 * kMiB);
  try {
    buffer.resize(8 * kMiB + 1);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), 8 * kMiB + 1);
    EXPECT_EQ(e.reserved_bytes(), 4 * kMiB);
    EXPECT_EQ(e.allocated_bytes(), 3 * kMiB);
    EXPECT_EQ(e.cap_bytes(), 8 * kMiB);
  }
  EXPECT_EQ(buffer.size_bytes(), 3 * kMiB);
  EXPECT_EQ(buffer.capacity_bytes(), 4 * kMiB);
  buffer.resize(8 * kMiB);  // exactly the reservation still works
  EXPECT_EQ(buffer.stats().num_ooms, 1u);
  buffer.check_invariants();
}

TEST(GrowableBufferTest, ABackendOutOfMemoryLeavesTheBufferAsItWas) {
  SimBackend backend(kPageBytes, 4 * kPageBytes);
  GrowableBuffer buffer(backend, {.max_bytes = kGiB});
  buffer.resize(kPageBytes);
  EXPECT_THROW(buffer.resize(6 * kPageBytes), OutOfMemoryError);
  EXPECT_EQ(buffer.size_bytes(), kPageBytes);
  EXPECT_EQ(buffer.capacity_bytes(), kPageBytes);
  EXPECT_EQ(backend.live_chunks(), 1u);
  buffer.resize(4 * kPageBytes);
  buffer.check_invariants();
}

TEST(GrowableBufferTest, ReserveMapsAheadWithoutChangingTheSize) {
  SimBackend backend;
  GrowableBuffer buffer(backend, {.max_bytes = kGiB});
  buffer.reserve(10 * kMiB);
  EXPECT_EQ(buffer.size_bytes(), 0u);
  EXPECT_EQ(buffer.capacity_bytes(), 10 * kMiB);
  buffer.resize(10 * kMiB);
  EXPECT_EQ(backend.counters()[BackendCall::kSetAccess], 1u);
  buffer.check_invariants();
}

TEST(GrowableBufferTest, BadOptionsAreInvalidArgumentsAndDestructionGivesEverythingBack) {
  HostBackend backend;
  test::expect_error([&] { GrowableBuffer b(backend, {.max_bytes = 0}); }, ErrorCode::kInvalidArgument,
                     "GrowableBuffer: ");
  test::expect_error([&] { GrowableBuffer b(backend, {.max_bytes = ~std::uint64_t{0}}); }, ErrorCode::kInvalidArgument,
                     "GrowableBuffer: ");
  {
    GrowableBuffer buffer(backend, {.max_bytes = kGiB, .step_bytes = kMiB});  // rounded up to 2 MiB
    EXPECT_EQ(buffer.step_bytes(), kPageBytes);
    buffer.resize(7 * kMiB);
  }
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TEST(GrowableBufferTest, ReadersKeepWorkingOnTheBytesTheyKnowWhileAnotherThreadGrowsTheBuffer) {
  HostBackend backend;
  GrowableBuffer buffer(backend, {.max_bytes = 256 * kMiB});
  buffer.resize(kMiB);
  auto* const words = static_cast<std::uint64_t*>(buffer.data());
  constexpr std::uint64_t kWordsPerMiB = kMiB / sizeof(std::uint64_t);
  for (std::uint64_t i = 0; i < kWordsPerMiB; ++i) words[i] = i;
  std::atomic<std::uint64_t> published_words{kWordsPerMiB};  // words below this are written
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      std::uint64_t k = 0;
      while (!done.load(std::memory_order_acquire)) {
        const std::uint64_t n = published_words.load(std::memory_order_acquire);
        k = (k * 2862933555777941757ULL + 3037000493ULL) % n;
        if (words[k] != k) wrong.fetch_add(1);
      }
    });
  }
  for (std::uint64_t mib = 2; mib <= 128; mib *= 2) {
    buffer.resize(mib * kMiB);
    ASSERT_EQ(buffer.data(), words);
    const std::uint64_t old_words = published_words.load();
    for (std::uint64_t i = old_words; i < mib * kWordsPerMiB; ++i) words[i] = i;
    published_words.store(mib * kWordsPerMiB, std::memory_order_release);
  }
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  buffer.check_invariants();
}

}  // namespace
}  // namespace gmlake::classic
