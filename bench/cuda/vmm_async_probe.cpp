// Does moving cuMemUnmap / cuMemRelease to a second thread take their time off the allocating thread, or does
// the driver serialize VMM calls? Times the allocating thread's calls (cuMemCreate + cuMemMap + cuMemSetAccess
// of a new chunk; cuMemMap + cuMemSetAccess of a chunk still mapped elsewhere, as an eviction that leaves its
// unmap to another thread) alone, and while a second thread unmaps and releases other chunks of the same size.
//
//   nvcc -O2 -std=c++17 -o vmm_async_probe bench/cuda/vmm_async_probe.cpp -lcuda && ./vmm_async_probe > out.json
//
// Prints one JSON object: per chunk size and case, the allocating thread's median and mean ns per chunk, and the
// second thread's ns per unmap + release.
#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <vector>

#include "probe_support.h"

namespace {

using probe::access_of;
using probe::Figures;
using probe::now_ns;
using probe::ok;
using probe::prop_of;
using probe::summarize;


struct Chunk {
  CUmemGenericAllocationHandle handle;
  CUdeviceptr va;
};

}  // namespace

int main() {
  CUcontext ctx = probe::primary_context(0);
  const CUmemAllocationProp prop = prop_of(0);
  const CUmemAccessDesc access = access_of(0);
  std::printf("{\"cases\": [\n");
  bool first_row = true;
  for (const std::uint64_t size : {std::uint64_t{2} << 20, std::uint64_t{64} << 20}) {
    const int n = size == (std::uint64_t{2} << 20) ? 400 : 60;
    CUdeviceptr base;  // four regions of n chunks: new chunks, chunks to alias, their aliases, chunks to tear down
    ok(cuMemAddressReserve(&base, size * n * 4, size, 0, 0), "reserve");
    auto slot = [&](int region, int i) { return base + size * (static_cast<std::uint64_t>(region) * n + i); };
    auto make_mapped = [&](int region) {
      std::vector<Chunk> v(n);
      for (int i = 0; i < n; ++i) {
        ok(cuMemCreate(&v[i].handle, size, &prop, 0), "create");
        v[i].va = slot(region, i);
        ok(cuMemMap(v[i].va, size, 0, v[i].handle, 0), "map");
        ok(cuMemSetAccess(v[i].va, size, &access, 1), "set access");
      }
      return v;
    };
    auto teardown = [&](std::vector<Chunk>& v) {
      for (Chunk& c : v) {
        ok(cuMemUnmap(c.va, size), "unmap");
        ok(cuMemRelease(c.handle), "release");
      }
      v.clear();
    };
    for (const char* mode : {"new_alone", "new_beside_teardown", "alias_alone", "alias_beside_unmap"}) {
      const bool alias = mode[0] == 'a';
      const bool beside = std::string_view(mode).find("beside") != std::string_view::npos;
      // Alias: chunks already mapped in region 1 get a second mapping in region 2 (what an eviction maps when
      // its unmap is left to another thread); the other thread then unmaps region 1's mappings.
      std::vector<Chunk> victims;
      if (alias) victims = make_mapped(1);
      std::vector<Chunk> made;
      std::vector<std::uint64_t> fg, bg;
      std::atomic<bool> go{false};
      std::thread worker;
      std::vector<Chunk> others;
      if (beside && !alias) others = make_mapped(3);
      if (beside) {
        worker = std::thread([&] {
          ok(cuCtxSetCurrent(ctx), "worker context");
          while (!go.load()) {
          }
          for (int i = 0; i < n; ++i) {
            const std::uint64_t t = now_ns();
            if (alias) {
              ok(cuMemUnmap(victims[i].va, size), "unmap");  // the handle stays mapped in region 2
            } else {
              ok(cuMemUnmap(others[i].va, size), "unmap");
              ok(cuMemRelease(others[i].handle), "release");
            }
            bg.push_back(now_ns() - t);
          }
        });
      }
      go.store(true);
      for (int i = 0; i < n; ++i) {
        const std::uint64_t t = now_ns();
        Chunk c;
        if (alias) {
          c = {victims[i].handle, slot(2, i)};
        } else {
          ok(cuMemCreate(&c.handle, size, &prop, 0), "create");
          c.va = slot(0, i);
        }
        ok(cuMemMap(c.va, size, 0, c.handle, 0), "map");
        ok(cuMemSetAccess(c.va, size, &access, 1), "set access");
        fg.push_back(now_ns() - t);
        if (!alias) made.push_back(c);
      }
      if (worker.joinable()) worker.join();
      if (alias) {
        for (int i = 0; i < n; ++i) {
          ok(cuMemUnmap(slot(2, i), size), "unmap alias");
          if (!beside) ok(cuMemUnmap(victims[i].va, size), "unmap");
          ok(cuMemRelease(victims[i].handle), "release");
        }
        victims.clear();
      } else {
        teardown(made);
      }
      const Figures f = summarize(fg);
      std::printf("%s{\"size_bytes\": %llu, \"case\": \"%s\", \"chunks\": %d, \"fg_median_ns\": %.0f, "
                  "\"fg_mean_ns\": %.0f",
                  first_row ? "" : ",\n", static_cast<unsigned long long>(size), mode, n, f.median_ns, f.mean_ns);
      if (!bg.empty()) {
        const Figures b = summarize(bg);
        std::printf(", \"bg_median_ns\": %.0f, \"bg_mean_ns\": %.0f", b.median_ns, b.mean_ns);
      }
      std::printf("}");
      first_row = false;
    }
    ok(cuMemAddressFree(base, size * n * 4), "address free");
  }
  std::printf("\n]}\n");
  return 0;
}
