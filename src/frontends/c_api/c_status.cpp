#include "frontends/c_api/c_status.h"

#include <cstddef>
#include <cstdio>
#include <exception>
#include <new>

#include "pool/sessions.h"

namespace gmlake::capi {
namespace {

constexpr std::size_t kMessageBytes = 512;
struct LastError {
  int code;
  char message[kMessageBytes];
};
thread_local LastError t_last_error{};

void set_last_error(int code, const char* message) noexcept {
  t_last_error.code = code;
  std::snprintf(t_last_error.message, kMessageBytes, "%s", message);
}

}  // namespace

int status_of(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kOutOfMemory: return GMLAKE_ERROR_OUT_OF_MEMORY;
    case ErrorCode::kInvalidPointer: return GMLAKE_ERROR_INVALID_POINTER;
    case ErrorCode::kInvalidArgument: return GMLAKE_ERROR_INVALID_ARGUMENT;
    case ErrorCode::kConfig: return GMLAKE_ERROR_CONFIG;
    case ErrorCode::kBackend: return GMLAKE_ERROR_BACKEND;
    case ErrorCode::kTrace: break;
  }
  return GMLAKE_ERROR_INTERNAL;
}

const char* status_name(int status) noexcept {
  switch (status) {
#define GMLAKE_STATUS_CASE(name, value, meaning) \
  case value: return #name;
    GMLAKE_STATUSES(GMLAKE_STATUS_CASE)
#undef GMLAKE_STATUS_CASE
  }
  return "GMLAKE_UNKNOWN_STATUS";
}

int last_error_code() noexcept { return t_last_error.code; }
const char* last_error_message() noexcept { return t_last_error.message; }

void clear_last_error() noexcept {
  t_last_error.code = GMLAKE_OK;
  t_last_error.message[0] = '\0';
}

void record_current_exception() noexcept {
  try {
    throw;
  } catch (const ShutDownError& e) {
    set_last_error(GMLAKE_ERROR_SHUT_DOWN, e.what());
  } catch (const AlreadyInitializedError& e) {
    set_last_error(GMLAKE_ERROR_ALREADY_INITIALIZED, e.what());
  } catch (const Error& e) {
    set_last_error(status_of(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    set_last_error(GMLAKE_ERROR_OUT_OF_MEMORY, "gmlake: the host is out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    set_last_error(GMLAKE_ERROR_INTERNAL, e.what());
  } catch (...) {
    set_last_error(GMLAKE_ERROR_INTERNAL, "gmlake: unknown exception");
  }
}

}  // namespace gmlake::capi
