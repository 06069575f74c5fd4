#include "gmlake/stats.h"

namespace gmlake {

void Stats::reset_peaks() {
#define GMLAKE_STATS_RESET(name, torch_key) name.reset_peak();
  GMLAKE_GAUGE_FIELDS(GMLAKE_STATS_RESET)
#undef GMLAKE_STATS_RESET
}

}  // namespace gmlake
