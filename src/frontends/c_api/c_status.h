// The C API's error boundary: every entry point runs its body through guarded or guarded_status, which clear this
// thread's last error, turn any exception into a gmlake_status and a message (the one mapping from gmlake's
// errors to statuses), and throw nothing across the C boundary.
//
// Mapping: ShutDownError -> GMLAKE_ERROR_SHUT_DOWN; AlreadyInitializedError -> GMLAKE_ERROR_ALREADY_INITIALIZED;
// Error by its code (kOutOfMemory, kInvalidPointer, kInvalidArgument, kConfig, kBackend; kTrace ->
// GMLAKE_ERROR_INTERNAL); std::bad_alloc -> GMLAKE_ERROR_OUT_OF_MEMORY; anything else -> GMLAKE_ERROR_INTERNAL.
//
// Thread safety: the last error is per thread; it is trivially destructible, so it stays usable while threads
// and the process exit.
#pragma once

#include "gmlake/error.h"
#include "gmlake/gmlake.h"

namespace gmlake::capi {

// The gmlake_status of a gmlake::Error's code.
int status_of(ErrorCode code) noexcept;
// The name of a gmlake_status as gmlake.h spells it, "GMLAKE_UNKNOWN_STATUS" for any other value.
const char* status_name(int status) noexcept;

// This thread's last error: its status (GMLAKE_OK after a call that succeeded) and message ("" then).
int last_error_code() noexcept;
const char* last_error_message() noexcept;
void clear_last_error() noexcept;
// Records the exception being handled as this thread's last error (message truncated to 511 bytes). Call only
// inside a catch handler.
void record_current_exception() noexcept;

// Runs `body` with this thread's last error cleared; returns what it returns, or `on_error` after recording
// the exception it threw.
template <typename T, typename Body>
T guarded(T on_error, Body&& body) noexcept {
  clear_last_error();
  try {
    return body();
  } catch (...) {
    record_current_exception();
    return on_error;
  }
}

// The same for a call that returns a status: GMLAKE_OK, or the status of the exception `body` threw.
template <typename Body>
int guarded_status(Body&& body) noexcept {
  clear_last_error();
  try {
    body();
    return GMLAKE_OK;
  } catch (...) {
    record_current_exception();
    return last_error_code();
  }
}

}  // namespace gmlake::capi
