// The allocator policies on the CUDA backend, with real device memory: every live block keeps exactly the bytes
// written into it while the engine splits, merges, stitches chunks from anywhere into new ranges, evicts idle
// pages and empties its cache around it; and out-of-memory (a cap, the device itself) leaves the allocator
// consistent and usable.
//
// Each block is filled with a pattern derived from its id and from the 2 MiB page each of its pieces lies in,
// so a piece backed by the wrong chunk (or by a chunk another block also uses) reads back wrong. The device
// runs the fills asynchronously: the test synchronizes before every free (the engine may unmap the pages at
// once: the stream-ordered front end, not the engine, is what makes that safe in real use) and before reading.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmlake/allocator.h"
#include "gmlake/config.h"
#include "backends/cuda/cuda_backend.h"
#include "gmlake/error.h"
#include "gmlake/units.h"
#include "gpu/cuda_test_support.h"

namespace gmlake {
namespace {

using gpu_test::copy_from_device;
using gpu_test::fill_words;
using gpu_test::synchronize;

constexpr std::uint64_t kWordBytes = sizeof(std::uint32_t);
constexpr std::uint64_t kFullCheckBytes = kMiB;  // blocks up to this size are checked word by word
constexpr std::uint64_t kSampleBytes = 4 * kKiB;  // else each piece's first, middle and last 4 KiB

// The word written into the piece of block `id` that lies in absolute page `page`: never 0, so memory that
// was never written (or zeroed) is told apart.
std::uint32_t pattern_word(std::uint64_t id, std::uint64_t page) {
  std::uint64_t z = id * 0x9e3779b97f4a7c15ULL + page + 1;  // splitmix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<std::uint32_t>(z ^ (z >> 31)) | 1u;
}

struct LiveBlock {
  std::uint64_t id;
  std::uintptr_t addr;
  std::uint64_t size_bytes;  // a multiple of kWordBytes
  bool pending;              // between begin_deferred_free and end_deferred_free
};

// Calls f(piece_addr, piece_bytes, page) for each piece of [addr, addr+size_bytes) cut at chunk boundaries.
template <typename F>
void for_each_piece(std::uintptr_t addr, std::uint64_t size_bytes, F&& f) {
  const std::uintptr_t end = addr + size_bytes;
  for (std::uintptr_t start = addr; start < end;) {
    const std::uintptr_t next = std::min<std::uintptr_t>(end, round_down(start, kPageBytes) + kPageBytes);
    f(start, next - start, start / kPageBytes);
    start = next;
  }
}

void write_block(const LiveBlock& b) {
  for_each_piece(b.addr, b.size_bytes, [&](std::uintptr_t addr, std::uint64_t bytes, std::uint64_t page) {
    fill_words(addr, pattern_word(b.id, page), bytes / kWordBytes);
  });
}

// Compares [addr, addr+bytes) on the device with `expected` in every word; "" or what differs.
std::string check_words(std::uintptr_t addr, std::uint64_t bytes, std::uint32_t expected,
                        std::vector<std::uint32_t>& buffer) {
  buffer.resize(bytes / kWordBytes);
  copy_from_device(buffer.data(), addr, bytes);
  const auto bad = std::find_if(buffer.begin(), buffer.end(), [&](std::uint32_t w) { return w != expected; });
  if (bad == buffer.end()) return "";
  return "word at +" + std::to_string((bad - buffer.begin()) * kWordBytes) + " of piece " + std::to_string(addr) +
         " is " + std::to_string(*bad) + ", expected " + std::to_string(expected);
}

// "" when the block reads back its pattern (every word of small blocks, samples of each piece of large ones).
std::string verify_block(const LiveBlock& b, std::vector<std::uint32_t>& buffer) {
  std::string failure;
  for_each_piece(b.addr, b.size_bytes, [&](std::uintptr_t addr, std::uint64_t bytes, std::uint64_t page) {
    if (!failure.empty()) return;
    const std::uint32_t expected = pattern_word(b.id, page);
    if (b.size_bytes <= kFullCheckBytes || bytes <= 3 * kSampleBytes) {
      failure = check_words(addr, bytes, expected, buffer);
      return;
    }
    const std::uintptr_t middle = addr + round_down(bytes / 2, kWordBytes);
    for (std::uintptr_t at : {addr, middle, addr + bytes - kSampleBytes}) {
      if (failure.empty()) failure = check_words(at, kSampleBytes, expected, buffer);
    }
  });
  return failure.empty() ? "" : "block " + std::to_string(b.id) + " (" + std::to_string(b.size_bytes) +
                                    " bytes): " + failure;
}

// A seeded random workload over one allocator: allocations of 512 B to 64 MiB (mostly small, some large),
// frees (some deferred), a cap that makes large requests fail now and then, bursts that free half of what
// is live, empty_cache, bad frees; every live block verified every verify_every_ops ops and at the end.
class Workload {
 public:
  Workload(Allocator& allocator, std::uint64_t live_target_bytes, std::uint64_t cap_bytes)
      : allocator_(allocator), live_target_bytes_(live_target_bytes), cap_bytes_(cap_bytes) {}

  void run(std::uint64_t ops, std::uint64_t verify_every_ops) {
    for (std::uint64_t op = 1; op <= ops; ++op) {
      step(op);
      if (::testing::Test::HasFatalFailure()) return;
      if (op % verify_every_ops == 0 || op == ops) verify_all();
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  // Frees everything still live (completing deferred frees), then empties the cache.
  void drain() {
    synchronize();
    for (auto& [addr, b] : live_) {
      if (b.pending) {
        allocator_.end_deferred_free(reinterpret_cast<void*>(addr));
      } else {
        allocator_.deallocate(reinterpret_cast<void*>(addr));
      }
    }
    live_.clear();
    allocator_.empty_cache();
    allocator_.check_invariants();
  }

  void verify_all() {
    synchronize();
    std::vector<std::uint32_t> buffer;
    for (const auto& [addr, b] : live_) {
      const std::string failure = verify_block(b, buffer);
      ASSERT_TRUE(failure.empty()) << failure;
    }
    ASSERT_NO_THROW(allocator_.check_invariants());
  }

 private:
  void step(std::uint64_t op) {
    if (op % 2500 == 0) allocator_.empty_cache();
    if (op % 5000 == 0) try_oversized();
    if (op % 7000 == 0) try_bad_free();
    if (op % 20000 == 0) free_half();
    if (pending_count_ != 0 && coin(0.3)) {
      end_one_deferred();
      return;
    }
    const bool want_more = live_bytes_ < live_target_bytes_;
    if (live_.empty() || coin(want_more ? 0.65 : 0.35)) {
      allocate_one();
    } else {
      free_one(coin(0.1));
    }
  }

  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  // Log-uniform in [lo, hi], rounded down to whole words.
  std::uint64_t log_uniform(std::uint64_t lo, std::uint64_t hi) {
    const double x = std::uniform_real_distribution<double>(std::log(static_cast<double>(lo)),
                                                            std::log(static_cast<double>(hi)))(rng_);
    return std::max(lo, round_down(static_cast<std::uint64_t>(std::exp(x)), kWordBytes));
  }

  std::uint64_t random_size() {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (u < 0.55) return log_uniform(kRoundBytes, kMiB);
    if (u < 0.9) return log_uniform(kMiB, 8 * kMiB);
    return log_uniform(8 * kMiB, 64 * kMiB);
  }

  void allocate_one() {
    const std::uint64_t size_bytes = random_size();
    void* p = nullptr;
    try {
      p = allocator_.allocate(size_bytes, next_id_ % 2);
    } catch (const OutOfMemoryError&) {
      return;  // the cap: counted by the allocator, nothing placed
    }
    const LiveBlock b{next_id_++, reinterpret_cast<std::uintptr_t>(p), size_bytes, false};
    write_block(b);
    live_.emplace(b.addr, b);
    live_bytes_ += size_bytes;
  }

  std::map<std::uintptr_t, LiveBlock>::iterator random_block(bool pending) {
    std::vector<std::map<std::uintptr_t, LiveBlock>::iterator> candidates;
    for (auto it = live_.begin(); it != live_.end(); ++it) {
      if (it->second.pending == pending) candidates.push_back(it);
    }
    if (candidates.empty()) return live_.end();
    return candidates[std::uniform_int_distribution<std::size_t>(0, candidates.size() - 1)(rng_)];
  }

  void free_one(bool deferred) {
    const auto it = random_block(false);
    if (it == live_.end()) return;
    synchronize();  // the device must be done with the block before the engine may unmap its pages
    void* p = reinterpret_cast<void*>(it->first);
    live_bytes_ -= it->second.size_bytes;
    if (deferred) {
      allocator_.begin_deferred_free(p);  // its bytes stay as they are until end_deferred_free
      it->second.pending = true;
      ++pending_count_;
    } else {
      allocator_.deallocate(p);
      live_.erase(it);
    }
  }

  void end_one_deferred() {
    const auto it = random_block(true);
    allocator_.end_deferred_free(reinterpret_cast<void*>(it->first));
    live_.erase(it);
    --pending_count_;
  }

  void free_half() {
    const std::size_t n = live_.size() / 2;
    for (std::size_t i = 0; i < n; ++i) free_one(false);
  }

  void try_oversized() {
    EXPECT_THROW(allocator_.allocate(cap_bytes_ + kPageBytes, 0), OutOfMemoryError);
  }

  void try_bad_free() {
    const auto it = random_block(false);
    if (it == live_.end()) return;
    void* interior = reinterpret_cast<void*>(it->first + kWordBytes);
    try {
      allocator_.deallocate(interior);
      ADD_FAILURE() << "freeing an interior pointer succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidPointer);
    }
  }

  Allocator& allocator_;
  std::uint64_t live_target_bytes_;
  std::uint64_t cap_bytes_;
  std::mt19937_64 rng_{20240501};
  std::map<std::uintptr_t, LiveBlock> live_;  // live and pending blocks by address
  std::uint64_t live_bytes_ = 0;              // of the live ones
  std::uint64_t pending_count_ = 0;
  std::uint64_t next_id_ = 1;
};

Config config_for(Policy policy, std::uint64_t cap_bytes) {
  Config config;
  config.policy = policy;
  config.cap_bytes = cap_bytes;
  return config;
}

constexpr std::uint64_t kCapBytes = 2 * kGiB;
constexpr std::uint64_t kLiveTargetBytes = kGiB;

class CudaEngineTest : public gpu_test::CudaTest {};

TEST_F(CudaEngineTest, GmlakeKeepsEveryBlocksBytesThroughSplitsMergesStitchesEvictionsAndEmptyCache) {
  CudaBackend backend;
  std::unique_ptr<Allocator> allocator = make_allocator(config_for(Policy::kGmlake, kCapBytes), backend);
  Workload workload(*allocator, kLiveTargetBytes, kCapBytes);
  workload.run(100000, 10000);
  if (HasFatalFailure()) return;
  const Stats s = allocator->stats();
  EXPECT_EQ(static_cast<std::uint64_t>(s.reserved_bytes.current), backend.live_chunk_bytes());
  // Every counter the gmlake policy keeps has moved (num_alloc_retries is the caching policy's: gmlake evicts
  // idle pages instead of retrying).
  EXPECT_GT(s.num_allocs, 0u);
  EXPECT_GT(s.num_frees, 0u);
  EXPECT_GT(s.num_ooms, 0u);
  EXPECT_GT(s.invalid_frees, 0u);
  EXPECT_GT(s.stitches, 0u);
  EXPECT_GT(s.stitched_chunks, s.stitches);  // some stitches took several chunks
  EXPECT_GT(s.stitch_reuses, 0u);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_GT(s.chunks_created, 0u);
  EXPECT_GT(s.chunks_released, 0u);
  EXPECT_LE(static_cast<std::uint64_t>(s.reserved_bytes.peak), kCapBytes);
  workload.drain();
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_mappings(), 0u);
  allocator.reset();
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TEST_F(CudaEngineTest, CachingAndExpandableKeepEveryBlocksBytesToo) {
  for (Policy policy : {Policy::kCaching, Policy::kExpandable}) {
    SCOPED_TRACE(to_string(policy));
    CudaBackend backend;
    std::unique_ptr<Allocator> allocator = make_allocator(config_for(policy, kCapBytes), backend);
    Workload workload(*allocator, kLiveTargetBytes, kCapBytes);
    workload.run(20000, 5000);
    if (HasFatalFailure()) return;
    workload.drain();
    EXPECT_EQ(backend.live_chunks(), 0u);
  }
}

TEST_F(CudaEngineTest, ACapBelowTheNeedIsACleanOutOfMemoryAndTheAllocatorStaysUsable) {
  constexpr std::uint64_t kCap = 64 * kMiB;
  CudaBackend backend;
  std::unique_ptr<Allocator> allocator = make_allocator(config_for(Policy::kGmlake, kCap), backend);
  const LiveBlock kept{1, reinterpret_cast<std::uintptr_t>(allocator->allocate(32 * kMiB, 0)), 32 * kMiB, false};
  write_block(kept);
  try {
    allocator->allocate(kCap, 0);
    ADD_FAILURE() << "no OutOfMemoryError past the cap";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.cap_bytes(), kCap);
    EXPECT_EQ(e.requested_bytes(), kCap);
    EXPECT_LE(e.reserved_bytes(), kCap);
  }
  allocator->check_invariants();
  EXPECT_EQ(allocator->stats().num_ooms, 1u);
  synchronize();
  std::vector<std::uint32_t> buffer;
  EXPECT_EQ(verify_block(kept, buffer), "");
  allocator->deallocate(reinterpret_cast<void*>(kept.addr));
  const LiveBlock again{2, reinterpret_cast<std::uintptr_t>(allocator->allocate(48 * kMiB, 0)), 48 * kMiB, false};
  write_block(again);
  synchronize();
  EXPECT_EQ(verify_block(again, buffer), "");
  allocator->deallocate(reinterpret_cast<void*>(again.addr));
  allocator->check_invariants();
}

// Holds all but `left_bytes` of the device's free memory in chunks of its own backend, so the driver itself
// runs out (cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY) for whoever asks for more.
class DeviceHog {
 public:
  explicit DeviceHog(std::uint64_t left_bytes) {
    constexpr std::uint64_t kBigBytes = kGiB;
    const std::uint64_t max_chunks = gpu_test::device_memory().total_bytes / kPageBytes + 1;
    for (std::uint64_t i = 0; i < max_chunks; ++i) {
      const std::uint64_t free_bytes = gpu_test::device_memory().free_bytes;
      if (free_bytes <= left_bytes) return;
      const std::uint64_t size = free_bytes - left_bytes >= kBigBytes ? kBigBytes : kPageBytes;
      chunks_.push_back(backend_.create(size));
    }
  }
  ~DeviceHog() {
    for (ChunkHandle c : chunks_) backend_.release(c);
  }
  bool holding() const { return !chunks_.empty(); }

 private:
  CudaBackend backend_;
  std::vector<ChunkHandle> chunks_;
};

TEST_F(CudaEngineTest, TheDeviceRunningOutIsACleanOutOfMemoryAndTheAllocatorStaysUsable) {
  constexpr std::uint64_t kLeftBytes = 512 * kMiB;
  CudaBackend backend;
  std::unique_ptr<Allocator> allocator = make_allocator(config_for(Policy::kGmlake, 0), backend);
  std::vector<std::uint32_t> buffer;
  {
    const DeviceHog hog(kLeftBytes);
    ASSERT_TRUE(hog.holding());
    ASSERT_LE(gpu_test::device_memory().free_bytes, kLeftBytes + kGiB) << "the hog could not take the memory";
    const LiveBlock kept{1, reinterpret_cast<std::uintptr_t>(allocator->allocate(64 * kMiB, 0)), 64 * kMiB, false};
    write_block(kept);
    try {
      allocator->allocate(4 * kGiB, 0);
      ADD_FAILURE() << "4 GiB fit in what the hog left";
    } catch (const OutOfMemoryError& e) {
      EXPECT_EQ(e.cap_bytes(), 0u);
      EXPECT_NE(std::string(e.what()).find("cuda backend has no physical memory left"), std::string::npos)
          << e.what();
    }
    allocator->check_invariants();
    EXPECT_EQ(static_cast<std::uint64_t>(allocator->stats().reserved_bytes.current), backend.live_chunk_bytes());
    synchronize();
    EXPECT_EQ(verify_block(kept, buffer), "");
    const LiveBlock more{2, reinterpret_cast<std::uintptr_t>(allocator->allocate(128 * kMiB, 0)), 128 * kMiB, false};
    write_block(more);
    synchronize();
    EXPECT_EQ(verify_block(more, buffer), "");
    EXPECT_EQ(verify_block(kept, buffer), "");
    allocator->deallocate(reinterpret_cast<void*>(kept.addr));
    allocator->deallocate(reinterpret_cast<void*>(more.addr));
  }  // the hog lets go
  const LiveBlock big{3, reinterpret_cast<std::uintptr_t>(allocator->allocate(4 * kGiB, 0)), 4 * kGiB, false};
  write_block(big);
  synchronize();
  EXPECT_EQ(verify_block(big, buffer), "");
  allocator->deallocate(reinterpret_cast<void*>(big.addr));
  allocator->empty_cache();
  allocator->check_invariants();
  EXPECT_EQ(backend.live_chunks(), 0u);
}

}  // namespace
}  // namespace gmlake
