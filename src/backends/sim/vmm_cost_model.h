// VmmCostModel: what each CUDA virtual-memory call costs on one GPU, as a function of the chunk's size, so the
// sim backend can charge modelled time (`--backend sim:h100`) and a CPU-only machine (CI) can weigh policies
// by time as well as memory.
//
// The tables come from measurements: sim:h100 from bench/cuda/vmm_cost_probe.py run on an H100 (its JSON,
// bench/cuda/vmm_costs_h100.json, turned into vmm_costs_h100.inc by scripts/gen-vmm-costs.py); sim:h200 from the
// H200 figures of docs/benchmarks.md ("Reference: CUDA VMM call costs"). A call on a chunk of size s costs the table's time at s, interpolated
// linearly in log(size) between measured sizes and held at the ends. cuMemSetAccess and cuMemUnmap over a range
// of several mappings cost the sum over the mappings (the probe measured set_access over k chunks at k times
// one chunk's cost).
// Thread safety: immutable after construction; safe to share.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "gmlake/backend.h"

namespace gmlake {

struct VmmCostModel {
  using Table = std::vector<std::pair<std::uint64_t, std::uint64_t>>;  // (size_bytes, ns), by increasing size
  std::string_view name;
  // create, map, set_access, unmap, release: per one chunk of the size.
  std::vector<Table> per_chunk;
  std::uint64_t reserve_ns;
  std::uint64_t address_free_ns;
  // cuMemSetAccess over a range holding chunks of another device (the lake's peer chunks), granting this device
  // access: a fixed cost per call plus a cost per such chunk; the own device's chunks in the range cost their
  // table's time as usual. Measured on two H200s joined by NVLink (bench/cuda/vmm_costs_h200_quick_peer.json:
  // 1.51 ms for one 2 MiB chunk, 1.83 ms for 16, 3.01 ms for 64); no pair of H100s was measured, so both models
  // take these figures.
  std::uint64_t peer_set_access_call_ns = 1'490'000;
  std::uint64_t peer_set_access_chunk_ns = 23'700;

  // Modelled ns of call `c` on one chunk (or reservation) of `size_bytes`.
  std::uint64_t ns(BackendCall c, std::uint64_t size_bytes) const;
};

// The models shipped ("h100", "h200"); nullopt for another name.
std::optional<VmmCostModel> vmm_cost_model(std::string_view gpu);
// "h100", "h200".
std::vector<std::string_view> vmm_cost_model_names();

}  // namespace gmlake
