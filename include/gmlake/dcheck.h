// GMLAKE_DCHECK(cond, msg): a cheap precondition or invariant, checked in debug builds and compiled out in
// release builds.
//
// On (GMLAKE_DCHECK_IS_ON=1: CMake sets it for CMAKE_BUILD_TYPE=Debug and for the sanitizer and fuzzer builds,
// GMLAKE_SANITIZE / GMLAKE_BUILD_FUZZERS), a false `cond` throws std::logic_error("gmlake check failed: <msg>
// (<cond>) at <file>:<line>"): a bug in gmlake, never a user error, reported as the engine's invariant checks
// report theirs (src/policies/gmlake/engine_checks.h). Off, `cond` and `msg` are still compiled (so they stay
// valid code) but never evaluated: no cost. So `cond` must have no side effect the program relies on.
// For checks whose cost grows with the structure (a walk over every chunk), use a check_invariants() that the
// tests call instead.
#pragma once

#include <stdexcept>
#include <string>

#ifndef GMLAKE_DCHECK_IS_ON
#define GMLAKE_DCHECK_IS_ON 0
#endif

namespace gmlake::detail {

[[noreturn]] inline void dcheck_failed(const char* cond, const std::string& msg, const char* file, int line) {
  throw std::logic_error("gmlake check failed: " + msg + " (" + cond + ") at " + file + ":" + std::to_string(line));
}

}  // namespace gmlake::detail

#if GMLAKE_DCHECK_IS_ON
#define GMLAKE_DCHECK(cond, msg)                                                                 \
  do {                                                                                           \
    if (!(cond)) ::gmlake::detail::dcheck_failed(#cond, (msg), __FILE__, __LINE__);              \
  } while (false)
#else
#define GMLAKE_DCHECK(cond, msg)  \
  do {                            \
    if (false) {                  \
      static_cast<void>(cond);    \
      static_cast<void>(msg);     \
    }                             \
  } while (false)
#endif
