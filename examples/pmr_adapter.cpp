// std::pmr containers on gmlake pools: the container code stays standard, the memory comes from the pool.
//
// Build and run: cmake --build build && build/examples/example_pmr_adapter
#include "gmlake/classic/pmr_adapter.h"

#include <cstdio>
#include <memory_resource>
#include <string>
#include <unordered_map>
#include <vector>

#include "gmlake/host_backend.h"
#include "gmlake/classic/bump_allocator.h"
#include "gmlake/classic/block_pool.h"
#include "gmlake/units.h"

int main() {
  gmlake::HostBackend backend;

  // Hash-map nodes (all one size) from a block pool; bucket arrays from the upstream (default) resource.
  gmlake::classic::BlockPool nodes(backend, {.block_bytes = 64, .max_regions = 8});
  gmlake::classic::BlockPoolResource<gmlake::classic::BlockPool> node_resource(nodes);
  std::pmr::unordered_map<int, double> squares(&node_resource);
  for (int i = 0; i < 10000; ++i) squares[i] = static_cast<double>(i) * i;
  std::printf("map of %zu entries; the block pool serves %llu of its nodes\n", squares.size(),
              static_cast<unsigned long long>(nodes.capacity_blocks() - nodes.available()));

  // Temporary strings in a bump allocator: no frees at all, one reset at the end.
  gmlake::classic::BumpAllocator scratch(backend, 4 * gmlake::kMiB);
  gmlake::classic::BumpAllocatorResource<gmlake::classic::BumpAllocator> scratch_resource(scratch);
  {
    std::pmr::vector<std::pmr::string> lines(&scratch_resource);
    for (int i = 0; i < 1000; ++i) lines.emplace_back("line number " + std::to_string(i) + " of a scratch report");
    std::printf("%zu lines, %llu bytes of arena used\n", lines.size(),
                static_cast<unsigned long long>(scratch.used_bytes()));
  }
  scratch.reset();
  return squares.at(100) == 10000.0 && scratch.used_bytes() == 0 ? 0 : 1;
}
