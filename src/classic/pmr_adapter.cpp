// The pmr adapters are templates (pmr_adapter.h); this file holds their one non-template check.
#include "gmlake/classic/pmr_adapter.h"

#include <string>

#include "gmlake/error.h"

namespace gmlake::classic {

void require_host_memory(const Backend& backend, const char* adapter) {
  if (!backend.host_accessible()) {
    throw Error(ErrorCode::kInvalidArgument, std::string(adapter) + ": the " + std::string(backend.name()) +
                                                 " backend's memory is not host-accessible; std::pmr containers "
                                                 "touch their memory on the CPU");
  }
}

}  // namespace gmlake::classic
