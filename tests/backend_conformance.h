// The backend conformance suite: the contract of backend.h (include/gmlake/backend.h), checked the same way on
// every backend. A type-parameterized GoogleTest suite: a test program instantiates it once for its backends
// with a factory per backend, as tests/backend_test.cpp does for sim and host and tests/gpu/ for cuda:
//
//   struct MyFactory {
//     static constexpr const char* kName = "My";
//     // A fresh backend with granularity kGranule; physical_limit_bytes: the most chunk bytes live at once
//     // (create() throws OutOfMemoryError past it, with cap_bytes() = the limit), 0 for none.
//     static std::unique_ptr<Backend> make(std::uint64_t physical_limit_bytes = 0);
//     // Why this backend cannot run here (no device), or nullopt: each test is skipped with that message.
//     static std::optional<std::string> unavailable();
//   };
//   INSTANTIATE_TYPED_TEST_SUITE_P(Prefix, BackendConformanceTest, ::testing::Types<MyFactory>, FactoryNames);
//
// Include this header in one file per test program (it defines the tests). The helpers (Snapshot,
// expect_rejected) serve other backend tests too.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmlake/backend.h"
#include "gmlake/error.h"
#include "gmlake/units.h"

namespace gmlake::conformance {

constexpr std::uint64_t kGranule = kPageBytes;

// What a rejected call must leave unchanged.
struct Snapshot {
  BackendCounters counters;
  std::uint64_t chunks, chunk_bytes, mappings, reservations;

  explicit Snapshot(const Backend& b)
      : counters(b.counters()),
        chunks(b.live_chunks()),
        chunk_bytes(b.live_chunk_bytes()),
        mappings(b.live_mappings()),
        reservations(b.live_reservations()) {}
  bool operator==(const Snapshot& o) const {
    return counters.calls == o.counters.calls && chunks == o.chunks && chunk_bytes == o.chunk_bytes &&
           mappings == o.mappings && reservations == o.reservations;
  }
};

inline std::uint64_t total_calls(const Backend& b) {
  std::uint64_t n = 0;
  for (std::uint64_t c : b.counters().calls) n += c;
  return n;
}

// Expects `call` to throw Error(kInvalidArgument) whose message names `call_name`, and to change nothing.
inline void expect_rejected(Backend& backend, const std::string& call_name, const std::function<void()>& call) {
  const Snapshot before(backend);
  try {
    call();
    ADD_FAILURE() << call_name << ": no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("Backend::" + call_name), std::string::npos) << e.what();
  }
  EXPECT_TRUE(Snapshot(backend) == before) << call_name << " changed the backend";
}

template <typename Factory>
class BackendConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::optional<std::string> why = Factory::unavailable()) GTEST_SKIP() << *why;
    backend_ = Factory::make();
  }

  std::unique_ptr<Backend> backend_;
};

struct FactoryNames {
  template <typename Factory>
  static std::string GetName(int) {
    return Factory::kName;
  }
};

TYPED_TEST_SUITE_P(BackendConformanceTest);

TYPED_TEST_P(BackendConformanceTest, RoundTripCountsEachCallOnceAndLeavesNothingLive) {
  Backend& b = *this->backend_;
  EXPECT_EQ(b.granularity_bytes(), kGranule);
  const std::uintptr_t addr = b.reserve(4 * kGranule);
  EXPECT_NE(addr, 0u);
  EXPECT_EQ(addr % kGranule, 0u);
  EXPECT_EQ(b.live_reservations(), 1u);
  const ChunkHandle chunk = b.create(2 * kGranule);
  EXPECT_NE(chunk.value, 0u);
  EXPECT_EQ(b.live_chunks(), 1u);
  EXPECT_EQ(b.live_chunk_bytes(), 2 * kGranule);
  b.map(addr + kGranule, 2 * kGranule, chunk);
  EXPECT_EQ(b.live_mappings(), 1u);
  b.set_access(addr + kGranule, 2 * kGranule);
  b.unmap(addr + kGranule, 2 * kGranule);
  EXPECT_EQ(b.live_mappings(), 0u);
  b.release(chunk);
  EXPECT_EQ(b.live_chunks(), 0u);
  EXPECT_EQ(b.live_chunk_bytes(), 0u);
  b.address_free(addr, 4 * kGranule);
  EXPECT_EQ(b.live_reservations(), 0u);
  for (std::size_t i = 0; i < kBackendCallKinds; ++i) {
    EXPECT_EQ(b.counters().calls[i], 1u) << to_string(static_cast<BackendCall>(i));
  }
}

TYPED_TEST_P(BackendConformanceTest, PeakMappingsRemembersTheMostMappingsLiveAtOnce) {
  Backend& b = *this->backend_;
  const std::uintptr_t addr = b.reserve(4 * kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  for (std::uint64_t i = 0; i < 3; ++i) b.map(addr + i * kGranule, kGranule, chunk);
  b.unmap(addr, 3 * kGranule);
  b.map(addr, kGranule, chunk);
  EXPECT_EQ(b.live_mappings(), 1u);
  EXPECT_EQ(b.peak_mappings(), 3u);
  b.unmap(addr, kGranule);
  b.release(chunk);
  b.address_free(addr, 4 * kGranule);
}

TYPED_TEST_P(BackendConformanceTest, ReservationsAreAlignedDistinctAndDoNotOverlap) {
  Backend& b = *this->backend_;
  const std::uintptr_t a = b.reserve(3 * kGranule);
  const std::uintptr_t c = b.reserve(kGranule);
  EXPECT_EQ(a % kGranule, 0u);
  EXPECT_EQ(c % kGranule, 0u);
  EXPECT_TRUE(c >= a + 3 * kGranule || a >= c + kGranule);
  b.address_free(a, 3 * kGranule);
  b.address_free(c, kGranule);
}

TYPED_TEST_P(BackendConformanceTest, IsAccessibleOnlyAfterSetAccessAndNotAfterUnmap) {
  Backend& b = *this->backend_;
  const std::uintptr_t addr = b.reserve(4 * kGranule);
  const ChunkHandle x = b.create(kGranule);
  const ChunkHandle y = b.create(kGranule);
  b.map(addr, kGranule, x);
  b.map(addr + kGranule, kGranule, y);
  EXPECT_FALSE(b.is_accessible(addr, kGranule));
  b.set_access(addr, 2 * kGranule);  // one call over two mappings
  EXPECT_EQ(b.counters()[BackendCall::kSetAccess], 1u);
  EXPECT_TRUE(b.is_accessible(addr, 2 * kGranule));
  EXPECT_TRUE(b.is_accessible(addr + kGranule / 2, kGranule));  // any bytes inside, across the seam
  EXPECT_TRUE(b.is_accessible(addr + 2 * kGranule - 1, 1));
  EXPECT_FALSE(b.is_accessible(addr, 2 * kGranule + 1));  // one byte past the last mapping
  EXPECT_FALSE(b.is_accessible(addr - 1, 2));
  EXPECT_FALSE(b.is_accessible(addr, 0));
  b.unmap(addr + kGranule, kGranule);
  EXPECT_TRUE(b.is_accessible(addr, kGranule));
  EXPECT_FALSE(b.is_accessible(addr + kGranule, 1));
  EXPECT_FALSE(b.is_accessible(addr, 2 * kGranule));
  b.map(addr + kGranule, kGranule, y);  // a fresh mapping has no access
  EXPECT_FALSE(b.is_accessible(addr + kGranule, kGranule));
  b.set_access(addr + kGranule, kGranule);
  EXPECT_TRUE(b.is_accessible(addr, 2 * kGranule));
  b.unmap(addr, 2 * kGranule);  // one call over two mappings
  EXPECT_FALSE(b.is_accessible(addr, 1));
  b.release(x);
  b.release(y);
  b.address_free(addr, 4 * kGranule);
}

TYPED_TEST_P(BackendConformanceTest, OneChunkMayBeMappedAtSeveralAddresses) {
  Backend& b = *this->backend_;
  const std::uintptr_t addr = b.reserve(2 * kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  b.map(addr, kGranule, chunk);
  b.map(addr + kGranule, kGranule, chunk);
  EXPECT_EQ(b.live_mappings(), 2u);
  expect_rejected(b, "release", [&] { b.release(chunk); });
  b.unmap(addr, kGranule);
  expect_rejected(b, "release", [&] { b.release(chunk); });  // still mapped at the second address
  b.unmap(addr + kGranule, kGranule);
  b.release(chunk);
  b.address_free(addr, 2 * kGranule);
}

TYPED_TEST_P(BackendConformanceTest, SizesThatAreZeroOrNotGranuleMultiplesAreRejected) {
  Backend& b = *this->backend_;
  expect_rejected(b, "reserve", [&] { b.reserve(0); });
  expect_rejected(b, "reserve", [&] { b.reserve(kGranule + kGranule / 2); });
  expect_rejected(b, "create", [&] { b.create(0); });
  expect_rejected(b, "create", [&] { b.create(kGranule / 2); });
  const std::uintptr_t addr = b.reserve(2 * kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  expect_rejected(b, "map", [&] { b.map(addr, 0, chunk); });
  expect_rejected(b, "address_free", [&] { b.address_free(addr, 0); });
  expect_rejected(b, "unmap", [&] { b.unmap(addr, 0); });
  expect_rejected(b, "set_access", [&] { b.set_access(addr, kGranule / 2); });
  EXPECT_EQ(total_calls(b), 2u);  // only the two that passed
}

TYPED_TEST_P(BackendConformanceTest, MapOutsideOrAcrossReservationsIsRejected) {
  Backend& b = *this->backend_;
  const std::uintptr_t addr = b.reserve(2 * kGranule);
  const ChunkHandle one = b.create(kGranule);
  const ChunkHandle two = b.create(2 * kGranule);
  expect_rejected(b, "map", [&] { b.map(addr - kGranule, kGranule, one); });
  expect_rejected(b, "map", [&] { b.map(addr + 2 * kGranule, kGranule, one); });
  expect_rejected(b, "map", [&] { b.map(addr + kGranule, 2 * kGranule, two); });             // runs past the end
  expect_rejected(b, "map", [&] { b.map(addr + kGranule / 2, kGranule, one); });             // unaligned
  expect_rejected(b, "map", [&] { b.map(UINTPTR_MAX - kGranule + 1, 2 * kGranule, two); });  // wraps
  b.address_free(addr, 2 * kGranule);
  expect_rejected(b, "map", [&] { b.map(addr, kGranule, one); });  // freed reservation
  b.release(one);
  b.release(two);
}

TYPED_TEST_P(BackendConformanceTest, MapOverALiveMappingIsRejected) {
  Backend& b = *this->backend_;
  const std::uintptr_t addr = b.reserve(4 * kGranule);
  const ChunkHandle one = b.create(kGranule);
  const ChunkHandle two = b.create(2 * kGranule);
  const ChunkHandle other = b.create(kGranule);
  b.map(addr + kGranule, 2 * kGranule, two);
  expect_rejected(b, "map", [&] { b.map(addr + kGranule, kGranule, one); });      // same start
  expect_rejected(b, "map", [&] { b.map(addr + 2 * kGranule, kGranule, one); });  // inside it
  expect_rejected(b, "map", [&] { b.map(addr, 2 * kGranule, two); });             // straddles its start
  b.map(addr, kGranule, one);                                                     // the neighbours are free
  b.map(addr + 3 * kGranule, kGranule, other);
  EXPECT_EQ(b.live_mappings(), 3u);
  b.unmap(addr, 4 * kGranule);
  for (ChunkHandle c : {one, two, other}) b.release(c);
  b.address_free(addr, 4 * kGranule);
}

TYPED_TEST_P(BackendConformanceTest, MapOfAnUnknownReleasedOrMismatchedChunkIsRejected) {
  Backend& b = *this->backend_;
  const std::uintptr_t addr = b.reserve(2 * kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  const ChunkHandle released = b.create(kGranule);
  b.release(released);
  expect_rejected(b, "map", [&] { b.map(addr, kGranule, ChunkHandle{}); });
  expect_rejected(b, "map", [&] { b.map(addr, kGranule, ChunkHandle{chunk.value + 1000}); });
  expect_rejected(b, "map", [&] { b.map(addr, kGranule, released); });
  expect_rejected(b, "map", [&] { b.map(addr, 2 * kGranule, chunk); });  // a chunk is mapped whole
  b.release(chunk);
  b.address_free(addr, 2 * kGranule);
}

TYPED_TEST_P(BackendConformanceTest, UnmapAndSetAccessOfAnythingButWholeMappingsAreRejected) {
  Backend& b = *this->backend_;
  const std::uintptr_t addr = b.reserve(6 * kGranule);
  const ChunkHandle two = b.create(2 * kGranule);
  const ChunkHandle one = b.create(kGranule);
  b.map(addr, 2 * kGranule, two);
  b.map(addr + 3 * kGranule, kGranule, one);  // a hole at addr + 2 granules
  for (const char* call : {"unmap", "set_access"}) {
    const auto attempt = [&](std::uintptr_t a, std::uint64_t size) {
      if (std::string(call) == "unmap") {
        b.unmap(a, size);
      } else {
        b.set_access(a, size);
      }
    };
    expect_rejected(b, call, [&] { attempt(addr, kGranule); });                     // half a mapping
    expect_rejected(b, call, [&] { attempt(addr + kGranule, kGranule); });          // its other half
    expect_rejected(b, call, [&] { attempt(addr + 2 * kGranule, kGranule); });      // the hole
    expect_rejected(b, call, [&] { attempt(addr, 3 * kGranule); });                 // a mapping and the hole
    expect_rejected(b, call, [&] { attempt(addr, 4 * kGranule); });                 // across the hole
    expect_rejected(b, call, [&] { attempt(addr + 3 * kGranule, 2 * kGranule); });  // past the last
    expect_rejected(b, call, [&] { attempt(addr + 5 * kGranule, kGranule); });      // unmapped tail
    expect_rejected(b, call, [&] { attempt(addr + kGranule / 2, kGranule); });      // unaligned
  }
  EXPECT_FALSE(b.is_accessible(addr, 1));
  b.unmap(addr, 2 * kGranule);
  b.unmap(addr + 3 * kGranule, kGranule);
  b.release(two);
  b.release(one);
  b.address_free(addr, 6 * kGranule);
}

TYPED_TEST_P(BackendConformanceTest, ReleaseOfAMappedUnknownOrReleasedChunkIsRejected) {
  Backend& b = *this->backend_;
  const std::uintptr_t addr = b.reserve(kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  b.map(addr, kGranule, chunk);
  expect_rejected(b, "release", [&] { b.release(chunk); });
  expect_rejected(b, "release", [&] { b.release(ChunkHandle{}); });
  expect_rejected(b, "release", [&] { b.release(ChunkHandle{chunk.value + 1000}); });
  b.unmap(addr, kGranule);
  b.release(chunk);
  expect_rejected(b, "release", [&] { b.release(chunk); });
  b.address_free(addr, kGranule);
}

TYPED_TEST_P(BackendConformanceTest, AddressFreeOfAnythingButOneEmptyReservationIsRejected) {
  Backend& b = *this->backend_;
  const std::uintptr_t addr = b.reserve(3 * kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  b.map(addr + 2 * kGranule, kGranule, chunk);
  expect_rejected(b, "address_free", [&] { b.address_free(addr, 3 * kGranule); });  // a live mapping inside
  b.unmap(addr + 2 * kGranule, kGranule);
  expect_rejected(b, "address_free", [&] { b.address_free(addr, 2 * kGranule); });             // part of it
  expect_rejected(b, "address_free", [&] { b.address_free(addr + kGranule, 2 * kGranule); });  // interior
  expect_rejected(b, "address_free", [&] { b.address_free(addr, 4 * kGranule); });             // more than it
  expect_rejected(b, "address_free", [&] { b.address_free(addr + 8 * kGranule, kGranule); });  // unknown
  b.address_free(addr, 3 * kGranule);
  expect_rejected(b, "address_free", [&] { b.address_free(addr, 3 * kGranule); });  // twice
  b.release(chunk);
}

TYPED_TEST_P(BackendConformanceTest, ABackendStaysUsableAfterRejectedCalls) {
  Backend& b = *this->backend_;
  const std::uintptr_t addr = b.reserve(kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  b.map(addr, kGranule, chunk);
  b.set_access(addr, kGranule);
  expect_rejected(b, "map", [&] { b.map(addr, kGranule, chunk); });
  expect_rejected(b, "release", [&] { b.release(chunk); });
  expect_rejected(b, "address_free", [&] { b.address_free(addr, kGranule); });
  EXPECT_TRUE(b.is_accessible(addr, kGranule));  // the rejected calls did not disturb the mapping
  b.unmap(addr, kGranule);
  b.map(addr, kGranule, chunk);
  b.unmap(addr, kGranule);
  b.release(chunk);
  b.address_free(addr, kGranule);
  EXPECT_EQ(b.live_chunks() + b.live_mappings() + b.live_reservations(), 0u);
}

TYPED_TEST_P(BackendConformanceTest, CreatePastThePhysicalLimitThrowsOutOfMemoryUntilAChunkIsReleased) {
  const std::unique_ptr<Backend> backend = TypeParam::make(3 * kGranule);
  Backend& b = *backend;
  const ChunkHandle two = b.create(2 * kGranule);
  const ChunkHandle one = b.create(kGranule);
  try {
    b.create(kGranule);
    ADD_FAILURE() << "no OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_EQ(e.requested_bytes(), kGranule);
    EXPECT_EQ(e.reserved_bytes(), 3 * kGranule);
    EXPECT_EQ(e.allocated_bytes(), 0u);
    EXPECT_EQ(e.cap_bytes(), 3 * kGranule);
  }
  EXPECT_EQ(b.live_chunks(), 2u);
  EXPECT_EQ(b.live_chunk_bytes(), 3 * kGranule);
  EXPECT_EQ(b.counters()[BackendCall::kCreate], 3u);  // the failed call reached the backend: counted
  b.release(two);
  EXPECT_THROW(b.create(3 * kGranule), OutOfMemoryError);
  const ChunkHandle again = b.create(2 * kGranule);
  EXPECT_EQ(b.live_chunk_bytes(), 3 * kGranule);
  b.release(again);
  b.release(one);
}

TYPED_TEST_P(BackendConformanceTest, TearingDownLeavesNothingLive) {
  Backend& b = *this->backend_;
  std::vector<std::uintptr_t> ranges;
  std::vector<ChunkHandle> chunks;
  for (int i = 0; i < 4; ++i) ranges.push_back(b.reserve(4 * kGranule));
  for (int i = 0; i < 8; ++i) chunks.push_back(b.create(kGranule));
  for (int i = 0; i < 16; ++i) {  // every chunk mapped twice, in different reservations
    b.map(ranges[i / 4] + (i % 4) * kGranule, kGranule, chunks[i % 8]);
  }
  for (std::uintptr_t r : ranges) b.set_access(r, 4 * kGranule);
  EXPECT_EQ(b.live_mappings(), 16u);
  EXPECT_EQ(b.live_chunk_bytes(), 8 * kGranule);
  for (std::uintptr_t r : ranges) b.unmap(r, 4 * kGranule);
  for (ChunkHandle c : chunks) b.release(c);
  for (std::uintptr_t r : ranges) b.address_free(r, 4 * kGranule);
  EXPECT_EQ(b.live_chunks(), 0u);
  EXPECT_EQ(b.live_chunk_bytes(), 0u);
  EXPECT_EQ(b.live_mappings(), 0u);
  EXPECT_EQ(b.live_reservations(), 0u);
  EXPECT_EQ(b.counters()[BackendCall::kMap], 16u);
  EXPECT_EQ(b.counters()[BackendCall::kUnmap], 4u);
}
// set_device_limit_bytes (`gmlake replay --device-bytes`): the chunk that would pass the limit is refused before
// the backend is called, what fits still is, and device_free_bytes follows.
TYPED_TEST_P(BackendConformanceTest, ADeviceLimitRefusesTheChunkThatWouldPassItAndCountsNothingForIt) {
  Backend& b = *this->backend_;
  EXPECT_EQ(b.device_limit_bytes(), 0u);
  b.set_device_limit_bytes(3 * kGranule);
  EXPECT_EQ(b.device_free_bytes(), 3 * kGranule) << "on a GPU with at least 3 granules free";
  const ChunkHandle a = b.create(2 * kGranule);
  EXPECT_EQ(b.device_free_bytes(), kGranule);
  const std::uint64_t creates = b.counters()[BackendCall::kCreate];
  EXPECT_THROW(b.create(2 * kGranule), OutOfMemoryError);
  EXPECT_EQ(b.counters()[BackendCall::kCreate], creates) << "refused before the backend is called";
  EXPECT_EQ(b.live_chunk_bytes(), 2 * kGranule);
  const ChunkHandle c = b.create(kGranule);  // what fits still does
  EXPECT_EQ(b.device_free_bytes(), 0u);
  b.release(a);
  EXPECT_EQ(b.device_free_bytes(), 2 * kGranule);
  b.release(c);
  b.set_device_limit_bytes(0);
  EXPECT_GT(b.device_free_bytes(), 3 * kGranule) << "no limit: the device's own free memory, or unknown (UINT64_MAX)";
}

REGISTER_TYPED_TEST_SUITE_P(BackendConformanceTest,
                            ADeviceLimitRefusesTheChunkThatWouldPassItAndCountsNothingForIt,
                            RoundTripCountsEachCallOnceAndLeavesNothingLive,
                            PeakMappingsRemembersTheMostMappingsLiveAtOnce,
                            ReservationsAreAlignedDistinctAndDoNotOverlap,
                            IsAccessibleOnlyAfterSetAccessAndNotAfterUnmap,
                            OneChunkMayBeMappedAtSeveralAddresses,
                            SizesThatAreZeroOrNotGranuleMultiplesAreRejected,
                            MapOutsideOrAcrossReservationsIsRejected,
                            MapOverALiveMappingIsRejected,
                            MapOfAnUnknownReleasedOrMismatchedChunkIsRejected,
                            UnmapAndSetAccessOfAnythingButWholeMappingsAreRejected,
                            ReleaseOfAMappedUnknownOrReleasedChunkIsRejected,
                            AddressFreeOfAnythingButOneEmptyReservationIsRejected,
                            ABackendStaysUsableAfterRejectedCalls,
                            CreatePastThePhysicalLimitThrowsOutOfMemoryUntilAChunkIsReleased,
                            TearingDownLeavesNothingLive);

}  // namespace gmlake::conformance
