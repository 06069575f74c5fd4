// Allocator statistics with PyTorch's names and meanings (torch.cuda.memory_stats). The fields, their meanings and
// their PyTorch keys are declared once, in include/gmlake/stat_fields.h; Stats is made from that table.
#pragma once

#include <cstdint>

#include "gmlake/backend.h"
#include "gmlake/stat_fields.h"

namespace gmlake {

struct Gauge {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  void increase(std::int64_t v) {
    current += v;
    if (current > peak) peak = current;
  }
  void decrease(std::int64_t v) { current -= v; }
  void reset_peak() { peak = current; }
};

struct Stats {
#define GMLAKE_STATS_GAUGE(name, torch_key) Gauge name;
#define GMLAKE_STATS_COUNTER(name, torch_key) std::uint64_t name = 0;
  GMLAKE_GAUGE_FIELDS(GMLAKE_STATS_GAUGE)
  GMLAKE_COUNTER_FIELDS(GMLAKE_STATS_COUNTER)
#undef GMLAKE_STATS_GAUGE
#undef GMLAKE_STATS_COUNTER
  BackendCounters backend_calls;  // filled in by Allocator::stats() from the backend

  // Sets every gauge's peak to its current value (torch.cuda.reset_peak_memory_stats).
  void reset_peaks();
};

}  // namespace gmlake
