// The cost of always detecting double frees and unknown pointers (docs/reliability.md).
//
// Every policy finds a freed block's metadata by looking its start address up in a hash table of live blocks
// (GPU memory has no header the allocator could read before the block). A pointer that is not found (never
// returned, already freed, interior) is rejected by that same lookup, so detection adds one compare and branch
// to a lookup every free needs anyway. These benchmarks put figures on it:
//   free_check/alloc_free_pair/<policy>   allocate + deallocate of 4 KiB among kLiveBlocks live blocks
//   free_check/live_table_find/absl       one find among kLiveBlocks entries of gmlake's live table
//                                         (absl::flat_hash_map): the lookup itself
//   free_check/live_table_find/pmr        the same in caching's and expandable's (std::pmr::unordered_map)
//   free_check/rejected_free/<policy>     deallocate of a pointer that is not a block: the lookup, then the
//                                         Error thrown and caught (the caller's cost on a bug, not on the
//                                         hot path)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory_resource>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gmlake/allocator.h"
#include "gmlake/error.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace {

constexpr int kLiveBlocks = 10000;

struct Pool {
  gmlake::SimBackend backend;
  std::unique_ptr<gmlake::Allocator> allocator;
  std::vector<void*> live;

  explicit Pool(gmlake::Policy policy) {
    gmlake::Config config;
    config.policy = policy;
    allocator = gmlake::make_allocator(config, backend);
    std::mt19937_64 rng(1);
    for (int i = 0; i < kLiveBlocks; ++i) live.push_back(allocator->allocate(1 + rng() % (64 * gmlake::kKiB), 0));
  }
  ~Pool() {
    for (void* p : live) allocator->deallocate(p);
  }
};

void BM_AllocFreePair(benchmark::State& state, gmlake::Policy policy) {
  Pool pool(policy);
  for (auto _ : state) {
    void* p = pool.allocator->allocate(4 * gmlake::kKiB, 0);
    benchmark::DoNotOptimize(p);
    pool.allocator->deallocate(p);
  }
}

void BM_RejectedFree(benchmark::State& state, gmlake::Policy policy) {
  Pool pool(policy);
  void* interior = static_cast<char*>(pool.live[kLiveBlocks / 2]) + gmlake::kRoundBytes;
  for (auto _ : state) {
    try {
      pool.allocator->deallocate(interior);
    } catch (const gmlake::Error& e) {
      benchmark::DoNotOptimize(e.code());
    }
  }
}

// The live table's lookup alone, with the policies' key, over kLiveBlocks block starts.
std::vector<std::uintptr_t> block_starts() {
  std::vector<std::uintptr_t> keys;
  std::mt19937_64 rng(2);
  std::uintptr_t address = gmlake::kTiB;
  for (int i = 0; i < kLiveBlocks; ++i) {
    address += gmlake::kRoundBytes * (1 + rng() % 128);
    keys.push_back(address);
  }
  return keys;
}

template <typename Table>
void BM_LiveTableFind(benchmark::State& state) {
  std::pmr::unsynchronized_pool_resource pool;
  Table table(&pool);
  const std::vector<std::uintptr_t> keys = block_starts();
  for (std::uintptr_t k : keys) table.emplace(k, typename Table::mapped_type{});
  std::size_t i = 0;
  for (auto _ : state) {
    const auto it = table.find(keys[i]);
    benchmark::DoNotOptimize(it);
    i = (i + 7919) % keys.size();
  }
}

struct GmlakeRecord {
  std::uint64_t fields[5];  // the size of gmlake's block record
};
// gmlake's table type, with an allocator argument accepted and ignored, so both tables are built alike.
struct AbslTable : absl::flat_hash_map<std::uintptr_t, GmlakeRecord> {
  explicit AbslTable(std::pmr::memory_resource*) {}
};
using PmrTable = std::pmr::unordered_map<std::uintptr_t, void*>;

int register_all() {
  for (gmlake::Policy policy : {gmlake::Policy::kGmlake, gmlake::Policy::kCaching, gmlake::Policy::kExpandable}) {
    const std::string name = gmlake::to_string(policy);
    benchmark::RegisterBenchmark(("free_check/alloc_free_pair/" + name).c_str(), BM_AllocFreePair, policy);
    benchmark::RegisterBenchmark(("free_check/rejected_free/" + name).c_str(), BM_RejectedFree, policy);
  }
  benchmark::RegisterBenchmark("free_check/live_table_find/absl", BM_LiveTableFind<AbslTable>);
  benchmark::RegisterBenchmark("free_check/live_table_find/pmr", BM_LiveTableFind<PmrTable>);
  return 0;
}

const int registered = register_all();

}  // namespace
