// PickleWriter: writes Python pickles (protocol 2) of the plain values a memory snapshot holds: None, bools,
// 64-bit ints, floats, str, lists, tuples and dicts. Only data opcodes are written, all of which the restricted
// reader (pickle_reader.h) reads back and Python's pickle.load accepts: PROTO, NONE, NEWTRUE, NEWFALSE, BININT1,
// BININT, LONG1, BINFLOAT, BINUNICODE, EMPTY_LIST, EMPTY_DICT, MARK, APPENDS, SETITEMS, TUPLE2, BINPUT/LONG_BINPUT,
// BINGET/LONG_BINGET, STOP.
//
// Use: begin a container (begin_list / begin_dict), write its items (a dict takes key, value, key, value, ...),
// end it; finish() once the one top-level value is written. Items are flushed in batches of 1000 (MARK ...
// APPENDS / SETITEMS), as Python's pickler does, so no container needs to be held whole. Strings written with
// `memo = true` (dict keys, repeated names) are stored once and fetched from the memo afterwards.
//
// Errors: misuse (end without begin, a dict ended after a key with no value, finish with containers open or a
// second top-level value) throws std::logic_error. Thread safety: none.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gmlake::pickle {

class PickleWriter {
 public:
  PickleWriter();

  void none();
  void boolean(bool v);
  // Any 64-bit value, as Python's int of that value.
  void integer(std::int64_t v);
  void number(double v);
  // A str; with `memo`, written once and fetched from the memo when written again.
  void str(std::string_view s, bool memo = false);
  // A dict key: str(key, /*memo=*/true).
  void key(std::string_view k) { str(k, true); }
  // A tuple of two ints (PyTorch's segment_pool_id).
  void int_pair(std::int64_t a, std::int64_t b);

  void begin_list();
  void end_list();
  void begin_dict();
  void end_dict();

  // The pickle, ending in STOP. Throws std::logic_error unless exactly one top-level value was written and every
  // container is closed.
  std::vector<std::uint8_t> finish();

 private:
  static constexpr std::uint32_t kBatch = 1000;  // items per MARK ... APPENDS / SETITEMS, as Python writes them
  struct Open {
    bool dict;
    std::uint32_t pending;  // values written since the last MARK (keys and values count apart for dicts)
  };
  void raw(std::uint8_t byte) { out_.push_back(byte); }
  void le(std::uint64_t v, int width);
  // Called before each value: opens a batch (MARK) when the container has none open.
  void before_value();
  // Called after each value: closes a full batch.
  void after_value();
  void flush_batch(Open& open);

  std::vector<std::uint8_t> out_;
  std::vector<Open> open_;
  std::unordered_map<std::string, std::uint32_t> memo_;
  std::uint32_t top_values_ = 0;
};

}  // namespace gmlake::pickle
