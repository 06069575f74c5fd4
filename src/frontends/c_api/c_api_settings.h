// The C API's configuration: the GMLAKE_CONF string (gmlake.h) split into the allocator's Config and the C
// API's own keys (backend, debug). Parsed once per initialization, never on a call's path.
#pragma once

#include <string>
#include <string_view>

#include "gmlake/config.h"

namespace gmlake::capi {

struct Settings {
  Config config;
  std::string backend = "host";  // a make_backend name
  bool debug = false;            // PoisoningAllocator around every pool
};

// Parses "key:value,..." (gmlake.h). Throws Error(kConfig) naming the key for an unknown key, a bad value or an
// overflow; nothing is half-applied.
Settings parse_settings(std::string_view text);

}  // namespace gmlake::capi
