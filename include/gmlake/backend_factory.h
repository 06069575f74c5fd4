// Backends by name, for front ends (CLI, replay, tests) that choose one at run time.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "gmlake/backend.h"

namespace gmlake {

// "sim" (accounting only) or "host" (mmap + memfd), with chunks of granularity_bytes. Throws
// Error(kInvalidArgument) naming the backend for any other name.
std::unique_ptr<Backend> make_backend(std::string_view name, std::uint64_t granularity_bytes);

// The names make_backend accepts on this build.
std::vector<std::string_view> backend_names();

}  // namespace gmlake
