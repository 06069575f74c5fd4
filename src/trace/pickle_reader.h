// A restricted unpickler: the data opcodes of pickle protocols 0-5 turned into a small tree of None, bools,
// 64-bit ints, floats, strings, bytes, lists and dicts. It never imports, calls or constructs anything: an
// opcode that would (GLOBAL, REDUCE, BUILD, NEWOBJ, ...) is rejected, so a file cannot run code here.
//
// It reads untrusted files, so:
// - every read is bounds-checked; a short input throws "truncated pickle at offset N";
// - it never recurses (the pickle machine is a loop over a value stack), so nesting depth cannot overflow the
//   C++ stack, and a tree with cycles (a list that contains itself through the memo) is harmless;
// - each opcode byte adds at most one 16-byte Value, one container or one memo entry, so memory stays within a
//   small multiple of the input size (under 100 bytes per input byte at worst, vector growth included), and
//   no length field is trusted before the bytes it announces are known to be there;
// - on top of that, the memory it builds (values, containers, memo, decoded strings) is counted as it goes and
//   held to a budget the caller gives (parse_pickle's max_memory_bytes): a pickle of nothing but empty
//   containers fails once it has cost that much, long before the machine runs out;
// - integers of any width are accepted (LONG1, LONG4, INT, LONG): one that does not fit 64 bits is kept as
//   the nearest 64-bit value with Value::wide set, so a reader that needs the exact value (an address, a
//   size) refuses it and one that does not (a frame's line number) never looks;
// - the memo shares containers by index, exactly as Python shares objects, and never copies them.
//
// Tuples, sets and frozensets become lists. Python-2 `str` opcodes (STRING, BINSTRING, SHORT_BINSTRING) and
// out-of-band buffers are not supported. Dict keys may be any value; duplicate keys are kept and the last one
// wins in find(), as in Python.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gmlake::pickle {

enum class Kind : std::uint8_t { kNone, kBool, kInt, kFloat, kString, kBytes, kList, kDict };

// Python's name for a kind ("None", "bool", "int", "float", "str", "bytes", "list", "dict").
const char* to_string(Kind kind);

// One value of the tree: 16 bytes, trivially copyable. Scalars hold their value; strings and bytes point
// into the parsed input or into the Document's own storage (valid while both live); lists and dicts are
// indexes into the Document, read through Document::list / Document::dict_items.
struct Value {
  Kind kind = Kind::kNone;
  bool wide = false;         // kInt: the integer does not fit 64 bits; `integer` is INT64_MIN or INT64_MAX
  std::uint32_t length = 0;  // kString, kBytes: byte count (strings are UTF-8)
  union {
    std::int64_t integer = 0;  // kInt; kBool: 0 or 1
    double number;             // kFloat
    const char* chars;         // kString, kBytes: `length` bytes
    std::uint32_t container;   // kList, kDict: index into the Document's containers
  };

  bool is(Kind k) const { return kind == k; }
  std::string_view text() const { return {chars, length}; }  // kString or kBytes only
};

// The tree a pickle decodes to. Move-only; not thread-safe to build, safe to read from several threads.
class Document {
 public:
  const Value& root() const { return root_; }

  // The elements of a list (tuples and sets are lists). Precondition: v.kind == Kind::kList.
  std::span<const Value> list(const Value& v) const { return containers_[v.container]; }

  // The entries of a dict as key0, value0, key1, value1, ... in insertion order, duplicates included.
  // Precondition: v.kind == Kind::kDict.
  std::span<const Value> dict_items(const Value& v) const { return containers_[v.container]; }

  // The value stored under the string key `key` (the last one if repeated), or nullptr. O(entries).
  // Precondition: dict.kind == Kind::kDict.
  const Value* find(const Value& dict, std::string_view key) const;

  std::size_t container_count() const { return containers_.size(); }
  // The memory the parse counted against its budget (values, containers, memo entries, decoded strings).
  std::uint64_t counted_bytes() const { return counted_bytes_; }

 private:
  friend class Parser;
  Value root_;
  std::vector<std::vector<Value>> containers_;       // lists and dicts; dicts interleave keys and values
  std::vector<std::unique_ptr<char[]>> owned_text_;  // strings decoded from text opcodes (stable addresses)
  std::uint64_t counted_bytes_ = 0;
};

// Decodes the pickle in `bytes` up to its STOP opcode (trailing bytes are ignored, as Python does). Strings
// in the result point into `bytes`, which must outlive the Document. `source` names the input in error
// messages. Throws Error(kTrace) for a truncated or malformed pickle, an unsupported protocol (> 5), and any
// opcode that would construct an object ("not a PyTorch memory snapshot: pickle opcode GLOBAL at offset 2
// would construct an object"), and once the document would take more than max_memory_bytes.
Document parse_pickle(std::span<const std::uint8_t> bytes, const std::string& source,
                      std::uint64_t max_memory_bytes = UINT64_MAX);

}  // namespace gmlake::pickle
