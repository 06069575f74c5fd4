// Test helpers that write pickles opcode by opcode: PickleBuilder for any pickle, snapshot_pickle() for a
// PyTorch memory snapshot described by plain structs (with the extra keys PyTorch writes, which readers skip).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gmlake::test {

// Opcode bytes the tests write, as in Python's pickletools.
namespace op {
inline constexpr std::uint8_t kMark = 0x28, kStop = 0x2e, kPop = 0x30, kPopMark = 0x31, kDup = 0x32,
                              kBinInt = 0x4a, kBinInt1 = 0x4b, kNone = 0x4e, kReduce = 0x52, kBinUnicode = 0x58,
                              kAppend = 0x61, kBuild = 0x62, kGlobal = 0x63, kDict = 0x64, kAppends = 0x65,
                              kBinGet = 0x68, kLongBinGet = 0x6a, kList = 0x6c, kEmptyList = 0x5d,
                              kBinPut = 0x71, kLongBinPut = 0x72, kSetItem = 0x73, kTuple = 0x74,
                              kSetItems = 0x75, kEmptyDict = 0x7d, kBinFloat = 0x47, kProto = 0x80, kTuple2 = 0x86,
                              kNewTrue = 0x88, kLong1 = 0x8a, kLong4 = 0x8b, kShortBinUnicode = 0x8c,
                              kBinUnicode8 = 0x8d, kStackGlobal = 0x93, kMemoize = 0x94, kFrame = 0x95;
}  // namespace op

class PickleBuilder {
 public:
  PickleBuilder& raw(std::uint8_t byte) {
    bytes_.push_back(byte);
    return *this;
  }
  PickleBuilder& le(std::uint64_t v, int width) {
    for (int i = 0; i < width; ++i) raw(static_cast<std::uint8_t>(v >> (8 * i)));
    return *this;
  }
  PickleBuilder& text(std::string_view s) {
    for (char c : s) raw(static_cast<std::uint8_t>(c));
    return *this;
  }
  PickleBuilder& proto(std::uint8_t version = 4) { return raw(op::kProto).raw(version); }
  PickleBuilder& str(std::string_view s) {
    if (s.size() < 256) return raw(op::kShortBinUnicode).le(s.size(), 1).text(s);
    return raw(op::kBinUnicode).le(s.size(), 4).text(s);
  }
  // The shortest integer opcode, as Python's pickler picks it.
  PickleBuilder& integer(std::int64_t v) {
    if (v >= 0 && v < 256) return raw(op::kBinInt1).le(static_cast<std::uint64_t>(v), 1);
    if (v >= INT32_MIN && v <= INT32_MAX) return raw(op::kBinInt).le(static_cast<std::uint32_t>(v), 4);
    return raw(op::kLong1).raw(8).le(static_cast<std::uint64_t>(v), 8);
  }
  PickleBuilder& key_int(std::string_view key, std::int64_t v) { return str(key).integer(v); }
  PickleBuilder& key_str(std::string_view key, std::string_view v) { return str(key).str(v); }
  PickleBuilder& none() { return raw(op::kNone); }
  PickleBuilder& mark() { return raw(op::kMark); }
  PickleBuilder& stop() { return raw(op::kStop); }
  PickleBuilder& empty_dict() { return raw(op::kEmptyDict); }
  PickleBuilder& empty_list() { return raw(op::kEmptyList); }
  PickleBuilder& setitems() { return raw(op::kSetItems); }
  PickleBuilder& appends() { return raw(op::kAppends); }
  PickleBuilder& memoize() { return raw(op::kMemoize); }

  const std::vector<std::uint8_t>& bytes() const { return bytes_; }
  std::size_t size() const { return bytes_.size(); }

 private:
  std::vector<std::uint8_t> bytes_;
};

struct FakeEvent {
  std::string action;
  std::uint64_t addr = 0;
  std::uint64_t size = 0;
  std::optional<std::uint64_t> stream = 0;  // nullopt: key absent, as in old snapshots
  std::optional<std::int64_t> time_us = 0;
};

struct FakeBlock {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  std::optional<std::uint64_t> requested_size;
  std::string state = "active_allocated";
};

struct FakeSegment {
  int device = 0;
  std::uint64_t address = 0;
  std::uint64_t total_size = 0;
  std::uint64_t stream = 0;
  std::vector<FakeBlock> blocks;
};

// A snapshot dict {device_traces, segments (when given), allocator_settings} written the way PyTorch's
// pickler lays it out (EMPTY_DICT MARK ... SETITEMS, EMPTY_LIST MARK ... APPENDS), with frames lists.
inline std::vector<std::uint8_t> snapshot_pickle(const std::vector<std::vector<FakeEvent>>& device_traces,
                                                 const std::optional<std::vector<FakeSegment>>& segments = {}) {
  PickleBuilder p;
  p.proto().empty_dict().memoize().mark();
  p.str("device_traces").empty_list().mark();
  for (const auto& events : device_traces) {
    p.empty_list().mark();
    for (const FakeEvent& e : events) {
      p.empty_dict().mark().key_str("action", e.action).key_int("addr", static_cast<std::int64_t>(e.addr));
      p.key_int("size", static_cast<std::int64_t>(e.size));
      if (e.stream) p.key_int("stream", static_cast<std::int64_t>(*e.stream));
      if (e.time_us) p.key_int("time_us", *e.time_us);
      p.str("frames").empty_list().key_str("compile_context", "N/A").setitems();
    }
    p.appends();
  }
  p.appends();
  if (segments) {
    p.str("segments").empty_list().mark();
    for (const FakeSegment& s : *segments) {
      p.empty_dict().mark().key_int("device", s.device).key_int("address", static_cast<std::int64_t>(s.address));
      p.key_int("total_size", static_cast<std::int64_t>(s.total_size)).key_int("stream", static_cast<std::int64_t>(s.stream));
      p.str("segment_type").str("large").str("blocks").empty_list().mark();
      for (const FakeBlock& b : s.blocks) {
        p.empty_dict().mark().key_int("address", static_cast<std::int64_t>(b.address));
        p.key_int("size", static_cast<std::int64_t>(b.size));
        if (b.requested_size) p.key_int("requested_size", static_cast<std::int64_t>(*b.requested_size));
        p.key_str("state", b.state).str("frames").empty_list().setitems();
      }
      p.appends().setitems();
    }
    p.appends();
  }
  p.str("allocator_settings").empty_dict().mark().key_str("PYTORCH_CUDA_ALLOC_CONF", "").setitems();
  p.setitems().stop();
  return p.bytes();
}

}  // namespace gmlake::test
