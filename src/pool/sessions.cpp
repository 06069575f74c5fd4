#include "pool/sessions.h"

#include <string>
#include <utility>

#include "gmlake/backend_factory.h"
#include "gmlake/error.h"

namespace gmlake {

Config parse_session_config(std::string_view text) {
  Config config = parse_config(text);
  for (std::string_view name : backend_names()) {
    if (backend_base_name(config.backend) == name) return config;
  }
  std::string expected;
  for (std::string_view name : backend_names()) expected += (expected.empty() ? "" : ", ") + std::string(name);
  throw Error(ErrorCode::kConfig, "gmlake config: backend: unknown backend '" + config.backend +
                                      "': expected one of this build's: " + expected);
}

void Sessions::start(std::string_view conf) {
  Config config = parse_session_config(conf);
  MutexLock lifecycle(&lifecycle_mutex_);
  if (state_.load(std::memory_order_acquire) == SessionState::kReady) {
    throw AlreadyInitializedError("gmlake is already initialized (gmlake_shutdown first to start afresh)");
  }
  publish(std::move(config));
}

void Sessions::start_from_environment() {
  MutexLock lifecycle(&lifecycle_mutex_);
  if (state_.load(std::memory_order_acquire) != SessionState::kUninitialized) return;
  publish(parse_session_config(environment_conf()));
}

void Sessions::publish(Config config) {
  // No pool holds an allocator of the previous session any more (end tore them down), so it can be freed.
  owned_ = std::make_unique<Session>(Session{std::move(config)});
  session_.store(owned_.get(), std::memory_order_release);
  state_.store(SessionState::kReady, std::memory_order_release);
}

}  // namespace gmlake
