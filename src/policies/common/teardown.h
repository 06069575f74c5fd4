// Backend calls made while tearing an allocator down, in a destructor that must not throw. Each call is tried,
// and tried once more at once when it fails (a transient OS or driver error, or a fault injected once); a
// call that fails twice is given up and what it held stays with the backend, whose live counts show it.
#pragma once

namespace gmlake {

// Runs `call` until it returns without throwing, at most twice. True when it succeeded.
template <typename Call>
bool attempt_twice(Call&& call) noexcept {
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      call();
      return true;
    } catch (...) {
    }
  }
  return false;
}

}  // namespace gmlake
