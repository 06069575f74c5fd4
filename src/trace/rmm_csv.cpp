// RMM logging_resource_adaptor logs to Trace. The log is CSV with the header Thread,Time,Action,Pointer,Size,
// Stream (columns in any order, spaces around fields ignored); one line per allocate, free or "allocate
// failure". Pointers and streams are hex (0x...) or decimal, sizes decimal. RMM frees are immediate, so a
// free becomes free_requested then free_completed; failed allocations changed nothing and are skipped.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>

#include "gmlake/error.h"
#include "gmlake/trace.h"
#include "trace_parsers.h"

namespace gmlake {
namespace {

enum Column : std::size_t { kThread, kTime, kAction, kPointer, kSize, kStream, kColumnCount };
constexpr std::array<std::string_view, kColumnCount> kColumnNames = {"Thread", "Time",  "Action",
                                                                     "Pointer", "Size", "Stream"};
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

// For each Column, its position in a line.
using ColumnOrder = std::array<std::size_t, kColumnCount>;

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// The trimmed comma-separated fields of `line`.
std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  for (;;) {
    const std::size_t comma = line.find(',');
    fields.push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return fields;
    line.remove_prefix(comma + 1);
  }
}

std::optional<ColumnOrder> header_order(std::string_view line) {
  const std::vector<std::string_view> fields = split_fields(line);
  if (fields.size() != kColumnCount) return std::nullopt;
  ColumnOrder order;
  for (std::size_t c = 0; c < kColumnCount; ++c) {
    const auto it = std::find(fields.begin(), fields.end(), kColumnNames[c]);
    if (it == fields.end()) return std::nullopt;
    order[c] = static_cast<std::size_t>(it - fields.begin());
  }
  return order;
}

std::string_view first_line(std::string_view text) {
  if (text.starts_with(kUtf8Bom)) text.remove_prefix(kUtf8Bom.size());
  return text.substr(0, text.find('\n'));
}

// A whole field as an unsigned number: hex with a 0x prefix, else decimal.
std::optional<std::uint64_t> parse_unsigned(std::string_view s, bool allow_hex) {
  int base = 10;
  if (allow_hex && (s.starts_with("0x") || s.starts_with("0X"))) {
    s.remove_prefix(2);
    base = 16;
  }
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// Time as microseconds when it is a number (integer or float); 0 for RMM's clock strings ("09:59:08:542316").
std::int64_t parse_time_us(std::string_view s) {
  std::int64_t whole = 0;
  const auto [iptr, iec] = std::from_chars(s.data(), s.data() + s.size(), whole);
  if (!s.empty() && iec == std::errc() && iptr == s.data() + s.size()) return whole;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v) || std::fabs(v) > 9.2e18) {
    return 0;
  }
  return static_cast<std::int64_t>(v);
}

class CsvReader {
 public:
  explicit CsvReader(const std::string& source) : source_(source) {}

  DeviceTrace read(std::string_view text) {
    if (text.starts_with(kUtf8Bom)) text.remove_prefix(kUtf8Bom.size());
    DeviceTrace device;
    for (line_ = 1; !text.empty() || line_ == 1; ++line_) {
      const std::size_t nl = text.find('\n');
      const std::string_view line = text.substr(0, nl);
      text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
      if (line_ == 1) {
        read_header(line);
      } else if (!trim(line).empty()) {
        read_line(line, &device.events);
      }
    }
    return device;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::kTrace, "gmlake trace: " + source_ + ": line " + std::to_string(line_) + ": " + what);
  }

  void read_header(std::string_view line) {
    const std::optional<ColumnOrder> order = header_order(line);
    if (!order) {
      fail("bad RMM log header '" + std::string(trim(line)) +
           "': expected the columns Thread,Time,Action,Pointer,Size,Stream");
    }
    order_ = *order;
  }

  void read_line(std::string_view line, std::vector<TraceEvent>* out) {
    const std::vector<std::string_view> fields = split_fields(line);
    if (fields.size() != kColumnCount) {
      fail("expected " + std::to_string(kColumnCount) + " fields, found " + std::to_string(fields.size()));
    }
    const std::string_view action = fields[order_[kAction]];
    if (action == "allocate failure") return;
    TraceEvent e{TraceAction::kAlloc, number(fields, kPointer, true), size(fields),
                 number(fields, kStream, true), parse_time_us(fields[order_[kTime]])};
    if (action == "allocate") {
      out->push_back(e);
    } else if (action == "free") {
      e.action = TraceAction::kFreeRequested;
      out->push_back(e);
      e.action = TraceAction::kFreeCompleted;
      out->push_back(e);
    } else {
      fail("unknown Action '" + std::string(action) + "'");
    }
  }

  std::uint64_t number(const std::vector<std::string_view>& fields, Column c, bool allow_hex) const {
    const std::string_view s = fields[order_[c]];
    const std::optional<std::uint64_t> v = parse_unsigned(s, allow_hex);
    if (!v) fail("bad " + std::string(kColumnNames[c]) + " '" + std::string(s) + "'");
    return *v;
  }

  // Sizes below 2^63, as the snapshot reader (a Python int that fits int64) and the allocators require.
  std::uint64_t size(const std::vector<std::string_view>& fields) const {
    const std::uint64_t v = number(fields, kSize, false);
    if (v > static_cast<std::uint64_t>(INT64_MAX)) {
      fail("Size '" + std::string(fields[order_[kSize]]) + "' is 2^63 or more: no allocation is that large");
    }
    return v;
  }

  const std::string& source_;
  std::size_t line_ = 0;
  ColumnOrder order_{};
};

}  // namespace

namespace trace_detail {

bool starts_with_rmm_header(std::string_view text) { return header_order(first_line(text)).has_value(); }

Trace parse_rmm(std::string_view text, std::string name, const std::string& source) {
  DeviceTrace device = CsvReader(source).read(text);
  add_blocks_freed_before_alloc(&device);
  std::sort(device.initial_blocks.begin(), device.initial_blocks.end(),
            [](const InitialBlock& a, const InitialBlock& b) { return a.addr < b.addr; });
  Trace trace;
  trace.name = std::move(name);
  if (!device.events.empty() || !device.initial_blocks.empty()) trace.devices.push_back(std::move(device));
  return trace;
}

}  // namespace trace_detail

Trace parse_rmm_csv(std::string_view text, std::string name) {
  const std::string source = name;
  return trace_detail::parse_rmm(text, std::move(name), source);
}

}  // namespace gmlake
