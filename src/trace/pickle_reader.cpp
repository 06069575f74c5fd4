// The restricted unpickler (see pickle_reader.h): one loop over opcodes, a value stack with marks, a memo.
// Opcode semantics follow the pickle format as documented by Python's pickletools module.
#include "pickle_reader.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "gmlake/error.h"

namespace gmlake::pickle {
namespace {

// Every pickle opcode: enumerator, Python's name, byte. One table feeds the enum and the names in errors.
#define GMLAKE_PICKLE_OPCODES(X)                                                                               \
  X(kMark, "MARK", 0x28) X(kStop, "STOP", 0x2e) X(kPop, "POP", 0x30) X(kPopMark, "POP_MARK", 0x31)             \
  X(kDup, "DUP", 0x32) X(kFloat, "FLOAT", 0x46) X(kInt, "INT", 0x49) X(kBinInt, "BININT", 0x4a)                \
  X(kBinInt1, "BININT1", 0x4b) X(kLong, "LONG", 0x4c) X(kBinInt2, "BININT2", 0x4d) X(kNone, "NONE", 0x4e)     \
  X(kPersId, "PERSID", 0x50) X(kBinPersId, "BINPERSID", 0x51) X(kReduce, "REDUCE", 0x52)                       \
  X(kString, "STRING", 0x53) X(kBinString, "BINSTRING", 0x54) X(kShortBinString, "SHORT_BINSTRING", 0x55)      \
  X(kUnicode, "UNICODE", 0x56) X(kBinUnicode, "BINUNICODE", 0x58) X(kAppend, "APPEND", 0x61)                   \
  X(kBuild, "BUILD", 0x62) X(kGlobal, "GLOBAL", 0x63) X(kDict, "DICT", 0x64) X(kEmptyDict, "EMPTY_DICT", 0x7d) \
  X(kAppends, "APPENDS", 0x65) X(kGet, "GET", 0x67) X(kBinGet, "BINGET", 0x68) X(kInst, "INST", 0x69)          \
  X(kLongBinGet, "LONG_BINGET", 0x6a) X(kList, "LIST", 0x6c) X(kEmptyList, "EMPTY_LIST", 0x5d)                 \
  X(kObj, "OBJ", 0x6f) X(kPut, "PUT", 0x70) X(kBinPut, "BINPUT", 0x71) X(kLongBinPut, "LONG_BINPUT", 0x72)     \
  X(kSetItem, "SETITEM", 0x73) X(kTuple, "TUPLE", 0x74) X(kEmptyTuple, "EMPTY_TUPLE", 0x29)                    \
  X(kSetItems, "SETITEMS", 0x75) X(kBinFloat, "BINFLOAT", 0x47) X(kProto, "PROTO", 0x80)                       \
  X(kNewObj, "NEWOBJ", 0x81) X(kExt1, "EXT1", 0x82) X(kExt2, "EXT2", 0x83) X(kExt4, "EXT4", 0x84)              \
  X(kTuple1, "TUPLE1", 0x85) X(kTuple2, "TUPLE2", 0x86) X(kTuple3, "TUPLE3", 0x87)                             \
  X(kNewTrue, "NEWTRUE", 0x88) X(kNewFalse, "NEWFALSE", 0x89) X(kLong1, "LONG1", 0x8a)                         \
  X(kLong4, "LONG4", 0x8b) X(kBinBytes, "BINBYTES", 0x42) X(kShortBinBytes, "SHORT_BINBYTES", 0x43)            \
  X(kShortBinUnicode, "SHORT_BINUNICODE", 0x8c) X(kBinUnicode8, "BINUNICODE8", 0x8d)                           \
  X(kBinBytes8, "BINBYTES8", 0x8e) X(kEmptySet, "EMPTY_SET", 0x8f) X(kAddItems, "ADDITEMS", 0x90)              \
  X(kFrozenSet, "FROZENSET", 0x91) X(kNewObjEx, "NEWOBJ_EX", 0x92) X(kStackGlobal, "STACK_GLOBAL", 0x93)       \
  X(kMemoize, "MEMOIZE", 0x94) X(kFrame, "FRAME", 0x95) X(kByteArray8, "BYTEARRAY8", 0x96)                     \
  X(kNextBuffer, "NEXT_BUFFER", 0x97) X(kReadonlyBuffer, "READONLY_BUFFER", 0x98)

enum class Op : std::uint8_t {
#define GMLAKE_OP_ENUM(id, name, code) id = code,
  GMLAKE_PICKLE_OPCODES(GMLAKE_OP_ENUM)
#undef GMLAKE_OP_ENUM
};

// Python's name of opcode byte `code`, or "" for a byte that is no opcode.
const char* op_name(std::uint8_t code) {
  switch (code) {
#define GMLAKE_OP_NAME(id, name, value) \
  case value: return name;
    GMLAKE_PICKLE_OPCODES(GMLAKE_OP_NAME)
#undef GMLAKE_OP_NAME
  }
  return "";
}

// The highest pickle protocol this reader knows (Python 3.8+ writes 5 at most).
constexpr unsigned kHighestProtocol = 5;

Value int_value(std::int64_t v) {
  Value x;
  x.kind = Kind::kInt;
  x.integer = v;
  return x;
}

Value bool_value(bool v) {
  Value x;
  x.kind = Kind::kBool;
  x.integer = v ? 1 : 0;
  return x;
}

Value float_value(double v) {
  Value x;
  x.kind = Kind::kFloat;
  x.number = v;
  return x;
}

// Appends code point `cp` (<= 0x10FFFF; lone surrogates allowed, as Python strings hold them) as UTF-8.
void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

Value wide_int_value(bool negative) {
  Value x = int_value(negative ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int64_t>::max());
  x.wide = true;
  return x;
}

// The two's-complement little-endian integer of LONG1/LONG4: its value when it fits 64 bits, else the nearest
// 64-bit value marked wide.
Value decode_long(const std::uint8_t* p, std::size_t n) {
  if (n == 0) return int_value(0);
  const bool negative = (p[n - 1] & 0x80) != 0;
  const std::uint8_t fill = negative ? 0xFF : 0x00;
  for (std::size_t i = 8; i < n; ++i) {
    if (p[i] != fill) return wide_int_value(negative);
  }
  if (n > 8 && ((p[7] & 0x80) != 0) != negative) return wide_int_value(negative);
  const std::size_t width = n < 8 ? n : 8;
  std::uint64_t bits = negative ? ~std::uint64_t{0} : 0;
  for (std::size_t i = 0; i < width; ++i) {
    bits &= ~(std::uint64_t{0xFF} << (8 * i));
    bits |= std::uint64_t{p[i]} << (8 * i);
  }
  return int_value(static_cast<std::int64_t>(bits));
}

// What the budget counts: a container (its vector and the heap block behind it), a value, a memo entry in
// the hash map (a node).
constexpr std::uint64_t kContainerBytes = sizeof(std::vector<Value>) + 16;
constexpr std::uint64_t kValueBytes = sizeof(Value);
constexpr std::uint64_t kSparseMemoBytes = 64;

}  // namespace

static_assert(sizeof(Value) == 16 && std::is_trivially_copyable_v<Value>, "Value is copied on every memo get");

const char* to_string(Kind kind) {
  switch (kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kBytes: return "bytes";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
  }
  return "unknown";
}

const Value* Document::find(const Value& dict, std::string_view key) const {
  const std::vector<Value>& items = containers_[dict.container];
  for (std::size_t i = items.size() & ~std::size_t{1}; i >= 2; i -= 2) {
    const Value& k = items[i - 2];
    if (k.kind == Kind::kString && k.text() == key) return &items[i - 1];
  }
  return nullptr;
}

// The pickle machine over one input. Not in the anonymous namespace: Document befriends it.
class Parser {
 public:
  Parser(std::span<const std::uint8_t> in, const std::string& source, std::uint64_t budget, Document* doc)
      : begin_(in.data()), pos_(in.data()), end_(in.data() + in.size()), source_(source), doc_(doc),
        budget_(budget) {}

  // Runs to STOP; the value it pops becomes the document's root.
  void run() {
    while (pos_ < end_) {
      if (!step()) {
        doc_->root_ = pop();
        return;
      }
    }
    op_offset_ = offset();
    fail_truncated("no STOP opcode");
  }

 private:
  // --- errors ---
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::kTrace, "gmlake trace: " + source_ + ": " + what);
  }
  std::string where() const { return " at offset " + std::to_string(op_offset_); }
  std::string op_label() const { return std::string(op_name(op_)) + where(); }
  [[noreturn]] void fail_truncated(const std::string& in) const {
    fail("truncated pickle at offset " + std::to_string(op_offset_) + " (" + in + ")");
  }
  [[noreturn]] void fail_malformed(const std::string& what) const {
    fail("malformed pickle: " + what + " (" + op_label() + ")");
  }

  // --- the memory budget ---
  void charge(std::uint64_t bytes) {
    if (bytes > budget_ - doc_->counted_bytes_) {
      fail("not a PyTorch memory snapshot: the pickle would take more than " + std::to_string(budget_ >> 20) +
           " MiB of memory to read (" + std::to_string(static_cast<std::size_t>(end_ - begin_)) +
           " bytes of input; the budget is in TraceReadLimits) at offset " + std::to_string(op_offset_));
    }
    doc_->counted_bytes_ += bytes;
  }

  // --- input ---
  std::size_t offset() const { return static_cast<std::size_t>(pos_ - begin_); }
  std::size_t left() const { return static_cast<std::size_t>(end_ - pos_); }

  const std::uint8_t* take(std::size_t n) {
    if (n > left()) fail_truncated(op_name(op_));
    const std::uint8_t* p = pos_;
    pos_ += n;
    return p;
  }

  std::uint64_t take_le(std::size_t width) {
    const std::uint8_t* p = take(width);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < width; ++i) v |= std::uint64_t{p[i]} << (8 * i);
    return v;
  }

  // A length field of `width` bytes followed by that many bytes, which must be there.
  std::span<const std::uint8_t> take_sized(std::size_t width) {
    const std::uint64_t n = take_le(width);
    if (n > left()) fail_truncated(op_name(op_));
    return {take(static_cast<std::size_t>(n)), static_cast<std::size_t>(n)};
  }

  // The text argument of a protocol-0 opcode, up to (not including) its newline.
  std::string_view take_line() {
    const void* nl = std::memchr(pos_, '\n', left());
    if (nl == nullptr) fail_truncated(op_name(op_));
    const auto* p = reinterpret_cast<const char*>(pos_);
    const std::size_t n = static_cast<std::size_t>(static_cast<const std::uint8_t*>(nl) - pos_);
    pos_ += n + 1;
    return {p, n};
  }

  // --- the stack; `floor` is where the innermost MARK began ---
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void need_items(std::size_t n) const {
    if (stack_.size() - floor() < n) fail_malformed("stack underflow");
  }
  void push(const Value& v) {
    if (stack_.size() == stack_high_) {
      charge(kValueBytes);
      ++stack_high_;
    }
    stack_.push_back(v);
  }
  Value pop() {
    need_items(1);
    const Value v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value& top() {
    need_items(1);
    return stack_.back();
  }
  // Ends the innermost MARK; returns where its items begin (they stay on the stack for the caller).
  std::size_t pop_mark() {
    if (marks_.empty()) fail_malformed("no MARK");
    const std::size_t first = marks_.back();
    marks_.pop_back();
    return first;
  }

  // --- values ---
  Value new_container(Kind kind, std::size_t first) {
    if (doc_->containers_.size() >= std::numeric_limits<std::uint32_t>::max()) fail_malformed("too many objects");
    charge(kContainerBytes + kValueBytes * (stack_.size() - first));
    doc_->containers_.emplace_back(stack_.begin() + static_cast<std::ptrdiff_t>(first), stack_.end());
    stack_.resize(first);
    Value v;
    v.kind = kind;
    v.container = static_cast<std::uint32_t>(doc_->containers_.size() - 1);
    return v;
  }

  std::vector<Value>& container(const Value& v, Kind kind) {
    if (v.kind != kind) fail_malformed(std::string("target is a ") + to_string(v.kind) + ", not a " + to_string(kind));
    return doc_->containers_[v.container];
  }

  Value text_value(Kind kind, std::span<const std::uint8_t> bytes) {
    if (bytes.size() > std::numeric_limits<std::uint32_t>::max()) fail_malformed("string longer than 4 GiB");
    Value v;
    v.kind = kind;
    v.length = static_cast<std::uint32_t>(bytes.size());
    v.chars = reinterpret_cast<const char*>(bytes.data());
    return v;
  }

  Value owned_string(const std::string& s) {
    charge(s.size() + 1 + sizeof(std::unique_ptr<char[]>) + 16);
    auto storage = std::make_unique<char[]>(s.size() + 1);
    std::memcpy(storage.get(), s.data(), s.size());
    const auto* p = reinterpret_cast<const std::uint8_t*>(storage.get());
    doc_->owned_text_.push_back(std::move(storage));
    return text_value(Kind::kString, {p, s.size()});
  }

  // --- the memo: dense while indexes come in order (as every pickler writes them), sparse otherwise ---
  std::size_t memo_size() const { return memo_.size() + sparse_memo_.size(); }
  void memo_put(std::uint64_t index, const Value& v) {
    if (index < memo_.size()) {
      memo_[index] = v;
    } else if (index == memo_.size() && sparse_memo_.empty()) {
      charge(kValueBytes);
      memo_.push_back(v);
    } else {
      if (!sparse_memo_.contains(index)) charge(kSparseMemoBytes);
      sparse_memo_[index] = v;
    }
  }
  const Value& memo_get(std::uint64_t index) const {
    if (index < memo_.size()) return memo_[index];
    const auto it = sparse_memo_.find(index);
    if (it == sparse_memo_.end()) fail_malformed("memo index " + std::to_string(index) + " not defined");
    return it->second;
  }

  // --- protocol-0 text arguments ---
  std::uint64_t text_index(std::string_view s) const {
    std::uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size()) fail_malformed("bad memo index '" + std::string(s) + "'");
    return v;
  }
  Value text_int(std::string_view s) const {
    if (s == "00" || s == "01") return bool_value(s == "01");
    if (!s.empty() && s.back() == 'L') s.remove_suffix(1);  // LONG's Python-2 suffix
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range) {
      const bool digits = std::all_of(s.begin() + (s.starts_with('-') ? 1 : 0), s.end(),
                                      [](char c) { return c >= '0' && c <= '9'; });
      if (digits) return wide_int_value(s.starts_with('-'));
    }
    if (ec != std::errc() || ptr != s.data() + s.size()) fail_malformed("bad integer '" + std::string(s) + "'");
    return int_value(v);
  }
  Value text_float(std::string_view s) const {
    double v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size()) fail_malformed("bad float '" + std::string(s) + "'");
    return float_value(v);
  }
  // raw-unicode-escape: bytes are Latin-1, except \uXXXX and \UXXXXXXXX after an odd run of backslashes.
  std::string decode_raw_unicode(std::string_view in) const {
    std::string out;
    out.reserve(in.size());
    std::size_t i = 0;
    while (i < in.size()) {
      if (in[i] != '\\') {
        append_utf8(out, static_cast<unsigned char>(in[i++]));
        continue;
      }
      std::size_t run = 0;
      while (i + run < in.size() && in[i + run] == '\\') ++run;
      const std::size_t after = i + run;
      if (run % 2 == 0 || after >= in.size() || (in[after] != 'u' && in[after] != 'U')) {
        out.append(run, '\\');
        i = after;
        continue;
      }
      out.append(run - 1, '\\');
      const std::size_t digits = in[after] == 'u' ? 4 : 8;
      std::uint32_t cp = 0;
      const char* first = in.data() + after + 1;
      const auto [ptr, ec] = std::from_chars(first, first + std::min(digits, in.size() - after - 1), cp, 16);
      if (ec != std::errc() || ptr != first + digits || cp > 0x10FFFF) fail_malformed("bad \\u escape");
      append_utf8(out, cp);
      i = after + 1 + digits;
    }
    return out;
  }

  // --- opcodes ---
  bool step();
  void reject_object_opcode() const {
    fail("not a PyTorch memory snapshot: pickle opcode " + op_label() + " would construct an object");
  }
  void collection_from_mark(Kind kind) {
    const std::size_t first = pop_mark();
    if (kind == Kind::kDict && (stack_.size() - first) % 2 != 0) fail_malformed("odd number of dict items");
    push(new_container(kind, first));
  }
  void tuple_of(std::size_t n) {
    need_items(n);
    push(new_container(Kind::kList, stack_.size() - n));
  }
  // APPENDS, ADDITEMS, SETITEMS: the items above the mark go into the container just below it.
  void extend_from_mark(Kind kind) {
    const std::size_t first = pop_mark();
    if (first == 0 || first - 1 < floor()) fail_malformed("stack underflow");
    if (kind == Kind::kDict && (stack_.size() - first) % 2 != 0) fail_malformed("odd number of dict items");
    std::vector<Value>& items = container(stack_[first - 1], kind);
    charge(kValueBytes * (stack_.size() - first));
    items.insert(items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(first), stack_.end());
    stack_.resize(first);
  }
  void append_one() {
    const Value v = pop();
    std::vector<Value>& items = container(top(), Kind::kList);
    charge(kValueBytes);
    items.push_back(v);
  }
  void set_one() {
    const Value v = pop();
    const Value k = pop();
    std::vector<Value>& items = container(top(), Kind::kDict);
    charge(2 * kValueBytes);
    items.push_back(k);
    items.push_back(v);
  }
  void pop_any() {
    if (stack_.size() > floor()) {
      stack_.pop_back();
    } else {
      pop_mark();
    }
  }
  void proto() {
    const unsigned version = *take(1);
    if (version > kHighestProtocol) fail_malformed("unsupported pickle protocol " + std::to_string(version));
  }
  void long_n(std::size_t width) {
    const std::uint64_t n = take_le(width);
    if (width == 4 && (n & 0x80000000u) != 0) fail_malformed("negative length");
    if (n > left()) fail_truncated(op_name(op_));
    push(decode_long(take(static_cast<std::size_t>(n)), static_cast<std::size_t>(n)));
  }
  void bin_float() {
    const std::uint8_t* p = take(8);
    std::uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[i];  // big-endian
    push(float_value(std::bit_cast<double>(bits)));
  }

  const std::uint8_t* begin_;
  const std::uint8_t* pos_;
  const std::uint8_t* end_;
  const std::string& source_;
  Document* doc_;
  std::size_t op_offset_ = 0;
  std::uint8_t op_ = 0;
  std::uint64_t budget_;
  std::vector<Value> stack_;
  std::size_t stack_high_ = 0;  // the most values the stack held (each charged once)
  std::vector<std::size_t> marks_;
  std::size_t marks_high_ = 0;
  std::vector<Value> memo_;
  std::unordered_map<std::uint64_t, Value> sparse_memo_;
};

// Executes one opcode; false after STOP.
bool Parser::step() {
  op_offset_ = offset();
  op_ = *take(1);
  switch (static_cast<Op>(op_)) {
    case Op::kStop: return false;
    case Op::kProto: proto(); break;
    case Op::kFrame: take(8); break;  // frames only group opcodes for buffered reads
    case Op::kMark:
      if (marks_.size() == marks_high_) {
        charge(sizeof(std::size_t));
        ++marks_high_;
      }
      marks_.push_back(stack_.size());
      break;
    case Op::kPop: pop_any(); break;
    case Op::kPopMark: stack_.resize(pop_mark()); break;
    case Op::kDup: { const Value v = top(); push(v); break; }
    case Op::kNone: push(Value{}); break;
    case Op::kNewTrue: push(bool_value(true)); break;
    case Op::kNewFalse: push(bool_value(false)); break;
    case Op::kBinInt: push(int_value(static_cast<std::int32_t>(static_cast<std::uint32_t>(take_le(4))))); break;
    case Op::kBinInt1: push(int_value(static_cast<std::int64_t>(take_le(1)))); break;
    case Op::kBinInt2: push(int_value(static_cast<std::int64_t>(take_le(2)))); break;
    case Op::kLong1: long_n(1); break;
    case Op::kLong4: long_n(4); break;
    case Op::kInt:
    case Op::kLong: push(text_int(take_line())); break;
    case Op::kBinFloat: bin_float(); break;
    case Op::kFloat: push(text_float(take_line())); break;
    case Op::kShortBinUnicode: push(text_value(Kind::kString, take_sized(1))); break;
    case Op::kBinUnicode: push(text_value(Kind::kString, take_sized(4))); break;
    case Op::kBinUnicode8: push(text_value(Kind::kString, take_sized(8))); break;
    case Op::kUnicode: push(owned_string(decode_raw_unicode(take_line()))); break;
    case Op::kShortBinBytes: push(text_value(Kind::kBytes, take_sized(1))); break;
    case Op::kBinBytes: push(text_value(Kind::kBytes, take_sized(4))); break;
    case Op::kBinBytes8: push(text_value(Kind::kBytes, take_sized(8))); break;
    case Op::kEmptyDict: push(new_container(Kind::kDict, stack_.size())); break;
    case Op::kDict: collection_from_mark(Kind::kDict); break;
    case Op::kSetItem: set_one(); break;
    case Op::kSetItems: extend_from_mark(Kind::kDict); break;
    case Op::kEmptyList:
    case Op::kEmptyTuple:
    case Op::kEmptySet: push(new_container(Kind::kList, stack_.size())); break;
    case Op::kList:
    case Op::kTuple:
    case Op::kFrozenSet: collection_from_mark(Kind::kList); break;
    case Op::kAppend: append_one(); break;
    case Op::kAppends:
    case Op::kAddItems: extend_from_mark(Kind::kList); break;
    case Op::kTuple1: tuple_of(1); break;
    case Op::kTuple2: tuple_of(2); break;
    case Op::kTuple3: tuple_of(3); break;
    case Op::kMemoize: memo_put(memo_size(), top()); break;
    case Op::kBinPut: memo_put(take_le(1), top()); break;
    case Op::kLongBinPut: memo_put(take_le(4), top()); break;
    case Op::kPut: memo_put(text_index(take_line()), top()); break;
    case Op::kBinGet: push(memo_get(take_le(1))); break;
    case Op::kLongBinGet: push(memo_get(take_le(4))); break;
    case Op::kGet: push(memo_get(text_index(take_line()))); break;
    case Op::kGlobal:
    case Op::kStackGlobal:
    case Op::kReduce:
    case Op::kBuild:
    case Op::kInst:
    case Op::kObj:
    case Op::kNewObj:
    case Op::kNewObjEx:
    case Op::kPersId:
    case Op::kBinPersId:
    case Op::kExt1:
    case Op::kExt2:
    case Op::kExt4:
    case Op::kByteArray8:
    case Op::kNextBuffer:
    case Op::kReadonlyBuffer: reject_object_opcode(); break;
    case Op::kString:
    case Op::kBinString:
    case Op::kShortBinString: fail("not a PyTorch memory snapshot: unsupported Python-2 string opcode " + op_label());
    default: {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", op_);
      fail("not a PyTorch memory snapshot: unknown pickle opcode " + std::string(hex) + where());
    }
  }
  return true;
}

Document parse_pickle(std::span<const std::uint8_t> bytes, const std::string& source,
                      std::uint64_t max_memory_bytes) {
  Document doc;
  Parser(bytes, source, max_memory_bytes, &doc).run();
  return doc;
}

}  // namespace gmlake::pickle
