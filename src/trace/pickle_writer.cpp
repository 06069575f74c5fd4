#include "pickle_writer.h"

#include <bit>
#include <cstring>
#include <stdexcept>

namespace gmlake::pickle {
namespace {

// Opcode bytes (Python's pickletools names).
constexpr std::uint8_t kProto = 0x80, kStop = 0x2e, kMark = 0x28, kNone = 0x4e, kNewTrue = 0x88, kNewFalse = 0x89,
                       kBinInt1 = 0x4b, kBinInt = 0x4a, kLong1 = 0x8a, kBinFloat = 0x47, kBinUnicode = 0x58,
                       kEmptyList = 0x5d, kEmptyDict = 0x7d, kAppends = 0x65, kSetItems = 0x75, kTuple2 = 0x86,
                       kBinPut = 0x71, kLongBinPut = 0x72, kBinGet = 0x68, kLongBinGet = 0x6a;

}  // namespace

PickleWriter::PickleWriter() {
  raw(kProto);
  raw(2);
}

void PickleWriter::le(std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i) raw(static_cast<std::uint8_t>(v >> (8 * i)));
}

void PickleWriter::before_value() {
  if (open_.empty()) {
    if (top_values_++ != 0) throw std::logic_error("pickle writer: a second top-level value");
    return;
  }
  if (open_.back().pending == 0) raw(kMark);
}

void PickleWriter::after_value() {
  if (open_.empty()) return;
  Open& open = open_.back();
  ++open.pending;
  const std::uint32_t full = open.dict ? 2 * kBatch : kBatch;
  if (open.pending == full) flush_batch(open);
}

void PickleWriter::flush_batch(Open& open) {
  if (open.pending == 0) return;
  if (open.dict && open.pending % 2 != 0) throw std::logic_error("pickle writer: a dict key has no value");
  raw(open.dict ? kSetItems : kAppends);
  open.pending = 0;
}

void PickleWriter::none() {
  before_value();
  raw(kNone);
  after_value();
}

void PickleWriter::boolean(bool v) {
  before_value();
  raw(v ? kNewTrue : kNewFalse);
  after_value();
}

void PickleWriter::integer(std::int64_t v) {
  before_value();
  if (v >= 0 && v < 256) {
    raw(kBinInt1);
    le(static_cast<std::uint64_t>(v), 1);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    raw(kBinInt);
    le(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4);
  } else {
    raw(kLong1);  // 8 bytes, little-endian two's complement: the value itself
    raw(8);
    le(static_cast<std::uint64_t>(v), 8);
  }
  after_value();
}

void PickleWriter::number(double v) {
  before_value();
  raw(kBinFloat);
  const auto bits = std::bit_cast<std::uint64_t>(v);
  for (int i = 7; i >= 0; --i) raw(static_cast<std::uint8_t>(bits >> (8 * i)));  // big-endian
  after_value();
}

void PickleWriter::str(std::string_view s, bool memo) {
  before_value();
  if (memo) {
    const auto it = memo_.find(std::string(s));
    if (it != memo_.end()) {
      if (it->second < 256) {
        raw(kBinGet);
        le(it->second, 1);
      } else {
        raw(kLongBinGet);
        le(it->second, 4);
      }
      after_value();
      return;
    }
  }
  raw(kBinUnicode);
  le(s.size(), 4);
  out_.insert(out_.end(), s.begin(), s.end());
  if (memo) {
    const auto index = static_cast<std::uint32_t>(memo_.size());
    memo_.emplace(std::string(s), index);
    if (index < 256) {
      raw(kBinPut);
      le(index, 1);
    } else {
      raw(kLongBinPut);
      le(index, 4);
    }
  }
  after_value();
}

void PickleWriter::int_pair(std::int64_t a, std::int64_t b) {
  before_value();
  open_.push_back({false, 1});  // inside the pair: no MARK (TUPLE2 takes the top two values)
  integer(a);
  open_.back().pending = 1;
  integer(b);
  open_.pop_back();
  raw(kTuple2);
  after_value();
}

void PickleWriter::begin_list() {
  before_value();
  raw(kEmptyList);
  open_.push_back({false, 0});
}

void PickleWriter::begin_dict() {
  before_value();
  raw(kEmptyDict);
  open_.push_back({true, 0});
}

void PickleWriter::end_list() {
  if (open_.empty() || open_.back().dict) throw std::logic_error("pickle writer: end_list without begin_list");
  flush_batch(open_.back());
  open_.pop_back();
  after_value();
}

void PickleWriter::end_dict() {
  if (open_.empty() || !open_.back().dict) throw std::logic_error("pickle writer: end_dict without begin_dict");
  flush_batch(open_.back());
  open_.pop_back();
  after_value();
}

std::vector<std::uint8_t> PickleWriter::finish() {
  if (!open_.empty()) throw std::logic_error("pickle writer: finish with containers open");
  if (top_values_ != 1) throw std::logic_error("pickle writer: finish without a top-level value");
  raw(kStop);
  return std::move(out_);
}

}  // namespace gmlake::pickle
