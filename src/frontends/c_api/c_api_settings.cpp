#include "c_api_settings.h"

#include <cctype>
#include <string>

#include "gmlake/backend_factory.h"
#include "gmlake/error.h"

namespace gmlake::capi {
namespace {

[[noreturn]] void fail(std::string_view key, const std::string& why) {
  throw Error(ErrorCode::kConfig, "gmlake config: " + std::string(key) + ": " + why);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Applies one of the C API's own keys to `out`; false when `key` is not one of them.
bool apply_own_key(std::string_view key, std::string_view value, Settings* out) {
  if (key == "backend") {
    for (std::string_view name : backend_names()) {
      if (value == name) {
        out->backend = std::string(name);
        return true;
      }
    }
    fail(key, "unknown backend '" + std::string(value) + "': expected one of this build's: host, sim" +
                  (backend_names().size() > 2 ? ", cuda" : ""));
  }
  if (key == "debug") {
    if (value == "1" || value == "true") out->debug = true;
    else if (value == "0" || value == "false") out->debug = false;
    else fail(key, "bad value '" + std::string(value) + "': expected 0 or 1");
    return true;
  }
  return false;
}

}  // namespace

Settings parse_settings(std::string_view text) {
  Settings out;
  std::string rest;  // the allocator's own keys, for Config::apply
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view entry = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t colon = entry.find(':');
    const bool own = colon != std::string_view::npos &&
                     apply_own_key(trim(entry.substr(0, colon)), trim(entry.substr(colon + 1)), &out);
    if (!own && !entry.empty()) rest += std::string(entry) + ",";
  }
  // With a device backend, streams run asynchronously: each stream keeps its own arenas (stream_events.h).
  if (out.backend == "cuda") rest = "cross_stream_reuse:false," + rest;
  out.config.apply(rest);
  if (out.debug && out.backend != "host") fail("debug", "needs backend:host (the sim backend's memory is not real)");
  return out;
}

}  // namespace gmlake::capi
