// GMLAKE_CONF parsing, driven by the table in gmlake/config.h.
#include "gmlake/config.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <string>

#include "gmlake/error.h"

namespace gmlake {
namespace {

using u64 = std::uint64_t;

[[noreturn]] void fail(std::string_view key, const std::string& why) {
  throw Error(ErrorCode::kConfig, "gmlake config: " + std::string(key) + ": " + why);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Parsers, one per table type: parse_value(key, text, &out).
void parse_value(std::string_view key, std::string_view text, u64* out) {
  u64 number = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, number);
  if (ec == std::errc::result_out_of_range) fail(key, "value '" + std::string(text) + "' overflows 64 bits");
  if (ec != std::errc() || ptr == first) fail(key, "bad value '" + std::string(text) + "': expected a byte count");
  const std::string suffix = lower(std::string_view(ptr, static_cast<std::size_t>(last - ptr)));
  unsigned shift = 0;
  if (suffix.empty() || suffix == "b") shift = 0;
  else if (suffix == "k" || suffix == "kib" || suffix == "kb") shift = 10;
  else if (suffix == "m" || suffix == "mib" || suffix == "mb") shift = 20;
  else if (suffix == "g" || suffix == "gib" || suffix == "gb") shift = 30;
  else if (suffix == "t" || suffix == "tib" || suffix == "tb") shift = 40;
  else fail(key, "bad unit '" + suffix + "' in '" + std::string(text) + "': expected K, M, G or T");
  if (shift != 0 && number > (UINT64_MAX >> shift)) fail(key, "value '" + std::string(text) + "' overflows 64 bits");
  *out = number << shift;
}

void parse_value(std::string_view key, std::string_view text, bool* out) {
  const std::string t = lower(text);
  if (t == "true" || t == "1") *out = true;
  else if (t == "false" || t == "0") *out = false;
  else fail(key, "bad value '" + std::string(text) + "': expected true or false");
}

void parse_value(std::string_view key, std::string_view text, Policy* out) {
  try {
    *out = parse_policy(text);
  } catch (const Error&) {
    fail(key, "unknown policy '" + std::string(text) + "': expected gmlake, caching, expandable or async");
  }
}

void parse_value(std::string_view key, std::string_view text, std::string* out) {
  if (text.empty()) fail(key, "empty value");
  *out = std::string(text);
}

std::string format_value(u64 v) { return std::to_string(v); }
std::string format_value(bool v) { return v ? "true" : "false"; }
std::string format_value(Policy v) { return to_string(v); }
std::string format_value(const std::string& v) { return v; }

// Older names of keys, still accepted by apply(); giving a key and its older name different values in one text
// is an error.
struct KeyAlias {
  std::string_view alias;
  std::string_view key;
  u64 Config::*field;
};
constexpr KeyAlias kKeyAliases[] = {
    {"chunk_bytes", "page_bytes", &Config::page_bytes},              // the engine's page was called a chunk
    {"lag_grow_chunks", "lag_grow_pages", &Config::lag_grow_pages},  // it always counted pages
};
constexpr std::size_t kKeyAliasCount = std::size(kKeyAliases);

bool is_cuda(std::string_view backend) { return backend.substr(0, backend.find(':')) == "cuda"; }

}  // namespace

const char* to_string(Policy p) {
  switch (p) {
    case Policy::kGmlake: return "gmlake";
    case Policy::kCaching: return "caching";
    case Policy::kExpandable: return "expandable";
    case Policy::kAsync: return "async";
  }
  return "unknown";
}

Policy parse_policy(std::string_view text) {
  const std::string t = lower(trim(text));
  if (t == "gmlake") return Policy::kGmlake;
  if (t == "caching" || t == "native") return Policy::kCaching;
  if (t == "expandable" || t == "expandable_segments") return Policy::kExpandable;
  if (t == "async" || t == "cudamallocasync") return Policy::kAsync;
  throw Error(ErrorCode::kConfig, "gmlake config: unknown policy '" + std::string(text) +
                                      "': expected gmlake, caching, expandable or async");
}

void Config::apply(std::string_view text) {
  Config next = *this;  // parse into a copy: a bad entry leaves *this unchanged
  bool sets_cross_stream_reuse = false;
  // Each aliased key and its older name, as given in this text (the last of each), to refuse a conflict.
  std::optional<u64> key_given[kKeyAliasCount];
  std::optional<u64> alias_given[kKeyAliasCount];
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view entry = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (entry.empty()) continue;
    const std::size_t colon = entry.find(':');
    if (colon == std::string_view::npos) fail(entry, "expected key:value");
    const std::string_view key = trim(entry.substr(0, colon));
    const std::string_view value = trim(entry.substr(colon + 1));
    bool known = false;
    for (std::size_t i = 0; i < kKeyAliasCount; ++i) {
      if (key == kKeyAliases[i].alias) {
        parse_value(key, value, &(next.*kKeyAliases[i].field));
        alias_given[i] = next.*kKeyAliases[i].field;
        known = true;
      }
    }
#define GMLAKE_CONFIG_PARSE(type, name, def, unit, desc) \
  if (key == #name) {                                    \
    parse_value(key, value, &next.name);                 \
    known = true;                                        \
  }
    GMLAKE_CONFIG_FIELDS(GMLAKE_CONFIG_PARSE)
#undef GMLAKE_CONFIG_PARSE
    if (!known) fail(key, "unknown key (`gmlake conf` lists the keys)");
    if (key == "cross_stream_reuse") sets_cross_stream_reuse = true;
    for (std::size_t i = 0; i < kKeyAliasCount; ++i) {
      if (key == kKeyAliases[i].key) key_given[i] = next.*kKeyAliases[i].field;
    }
  }
  for (std::size_t i = 0; i < kKeyAliasCount; ++i) {
    if (key_given[i] && alias_given[i] && *key_given[i] != *alias_given[i]) {
      const KeyAlias& a = kKeyAliases[i];
      fail(a.key, "given as " + std::to_string(*key_given[i]) + " and as " + std::string(a.alias) +
                      " (its older name) " + std::to_string(*alias_given[i]) + ": give one of them");
    }
  }
  // A device backend runs streams asynchronously: each stream keeps its own arenas (stream_events.h).
  if (is_cuda(next.backend) && !is_cuda(backend) && !sets_cross_stream_reuse) next.cross_stream_reuse = false;
  next.validate();
  *this = next;
}

std::vector<int> parse_peer_devices(std::string_view text) {
  constexpr int kMaxDeviceId = 1023;
  std::vector<int> devices;
  if (trim(text) == "none") return devices;
  const std::string whole(text);
  while (true) {
    const std::size_t semicolon = text.find(';');
    const std::string_view entry = trim(text.substr(0, semicolon));
    int device = -1;
    const auto [ptr, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), device);
    if (entry.empty() || ec != std::errc() || ptr != entry.data() + entry.size() || device < 0 || device > kMaxDeviceId) {
      fail("peer_devices", "bad device '" + std::string(entry) + "' in '" + whole +
                               "': expected none or device ids 0..1023 separated by ';' (\"1;2\")");
    }
    for (const int d : devices) {
      if (d == device) fail("peer_devices", "device " + std::to_string(device) + " is listed twice");
    }
    devices.push_back(device);
    if (semicolon == std::string_view::npos) return devices;
    text = text.substr(semicolon + 1);
  }
}

std::vector<std::uint32_t> parse_lake_allowed_uids(std::string_view text) {
  constexpr std::uint32_t kMaxUid = 4294967294u;  // (uid_t)-1 is "no uid" to the kernel
  std::vector<std::uint32_t> uids;
  if (trim(text) == "none") return uids;
  const std::string whole(text);
  while (true) {
    const std::size_t semicolon = text.find(';');
    const std::string_view entry = trim(text.substr(0, semicolon));
    std::uint64_t uid = 0;
    const auto [ptr, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), uid);
    if (entry.empty() || ec != std::errc() || ptr != entry.data() + entry.size() || uid > kMaxUid) {
      fail("lake_allowed_uids", "bad uid '" + std::string(entry) + "' in '" + whole +
                                    "': expected none or uids 0..4294967294 separated by ';' (\"1000;1001\")");
    }
    for (const std::uint32_t u : uids) {
      if (u == uid) fail("lake_allowed_uids", "uid " + std::to_string(uid) + " is listed twice");
    }
    uids.push_back(static_cast<std::uint32_t>(uid));
    if (semicolon == std::string_view::npos) return uids;
    text = text.substr(semicolon + 1);
  }
}

void check_lake_socket(std::string_view text) {
  constexpr std::size_t kMaxAddressBytes = 107;  // sockaddr_un::sun_path less its terminating zero
  if (text == "none") return;
  if (text.size() < 2 || (text[0] != '/' && text[0] != '@')) {
    fail("lake_socket", "'" + std::string(text) + "' is not none, an absolute path or @name");
  }
  if (text.size() > kMaxAddressBytes) {
    fail("lake_socket", "'" + std::string(text) + "' is longer than " + std::to_string(kMaxAddressBytes) + " bytes");
  }
}

void Config::validate() const {
  auto need = [](bool ok, std::string_view key, const std::string& why) {
    if (!ok) fail(key, why);
  };
  need(is_pow2(page_bytes) && page_bytes >= 64 * kKiB, "page_bytes", "must be a power of two of at least 64 KiB");
  need(small_request_max_bytes >= kRoundBytes && small_request_max_bytes < page_bytes, "small_request_max_bytes",
       "must be at least 512 and below page_bytes");
  need(arena_virtual_bytes % page_bytes == 0 && arena_virtual_bytes >= 64 * page_bytes, "arena_virtual_bytes",
       "must be a multiple of page_bytes and at least 64 pages");
  need(fit_candidates >= 1 && fit_candidates <= 1024, "fit_candidates", "must be 1..1024");
  need(max_chunk_bytes >= page_bytes && max_chunk_bytes % page_bytes == 0 && max_chunk_bytes <= arena_virtual_bytes,
       "max_chunk_bytes", "must be a multiple of page_bytes, at most arena_virtual_bytes");
  need(chunks_per_block <= 4096, "chunks_per_block", "must be 0..4096");
  need(growth_chunk_bytes <= arena_virtual_bytes, "growth_chunk_bytes", "must be at most arena_virtual_bytes");
  need(growth_chunk_share >= 1, "growth_chunk_share", "must be at least 1");
  need(waiting_growth_chunk_share >= 1, "waiting_growth_chunk_share", "must be at least 1");
  need(move_share_permille <= 1000, "move_share_permille", "must be 0..1000");
  need(move_burst_ms <= 3'600'000, "move_burst_ms", "must be at most 3600000 (an hour)");
  need(handover_quiet_ms <= 3'600'000, "handover_quiet_ms", "must be at most 3600000 (an hour)");
  need(move_headroom_permille <= 1000, "move_headroom_permille", "must be 0..1000");
  need(waiting_headroom_permille <= 1000, "waiting_headroom_permille", "must be 0..1000");
  need(small_segment_bytes % kRoundBytes == 0 && small_segment_bytes > small_request_max_bytes,
       "small_segment_bytes", "must be a multiple of 512 above small_request_max_bytes");
  need(large_segment_bytes % kRoundBytes == 0 && large_segment_bytes >= large_segment_threshold_bytes,
       "large_segment_bytes", "must be a multiple of 512, at least large_segment_threshold_bytes");
  need(large_round_bytes >= kRoundBytes && is_pow2(large_round_bytes), "large_round_bytes",
       "must be a power of two of at least 512");
  need(!debug || backend == "host", "debug", "needs backend:host (only its memory is real and CPU-readable)");
  parse_peer_devices(peer_devices);  // throws naming peer_devices
  need(peer_budget_bytes % page_bytes == 0, "peer_budget_bytes", "must be a multiple of page_bytes");
  check_lake_socket(lake_socket);
  parse_lake_allowed_uids(lake_allowed_uids);  // throws naming lake_allowed_uids
  need(lake_socket == "none" || parse_peer_devices(peer_devices).empty(), "lake_socket",
       "cannot be combined with peer_devices: a pool takes peer memory from one source (set one of them to none)");
  need(expandable_virtual_bytes >= 2 * large_segment_bytes, "expandable_virtual_bytes",
       "must hold at least two large pages");
}

std::string Config::to_string() const {
  std::string out;
#define GMLAKE_CONFIG_FORMAT(type, name, def, unit, desc) \
  out += (out.empty() ? "" : ",");                        \
  out += #name ":" + format_value(name);
  GMLAKE_CONFIG_FIELDS(GMLAKE_CONFIG_FORMAT)
#undef GMLAKE_CONFIG_FORMAT
  return out;
}

Config parse_config(std::string_view text) {
  Config c;
  c.apply(text);
  return c;
}

std::vector<ConfigFieldInfo> config_fields() {
  std::vector<ConfigFieldInfo> out;
  const Config defaults;
#define GMLAKE_CONFIG_INFO(type, name, def, unit, desc) \
  out.push_back({#name, #type, format_value(defaults.name), unit, desc});
  GMLAKE_CONFIG_FIELDS(GMLAKE_CONFIG_INFO)
#undef GMLAKE_CONFIG_INFO
  return out;
}

std::string environment_conf() {
  const char* text = std::getenv("GMLAKE_CONF");
  return text == nullptr ? std::string() : std::string(text);
}

}  // namespace gmlake
