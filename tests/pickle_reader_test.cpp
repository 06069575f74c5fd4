#include "trace/pickle_reader.h"

#include <gtest/gtest.h>

#include "expect_error.h"

#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gmlake/error.h"
#include "pickle_builder.h"
#include "pickle_fixtures.h"

namespace gmlake::pickle {
namespace {

using test::PickleBuilder;
namespace op = test::op;

Document parse(std::span<const std::uint8_t> bytes) { return parse_pickle(bytes, "test.pickle"); }

void expect_trace_error(const std::function<void()>& f, const std::string& must_contain) {
  test::expect_error(f, ErrorCode::kTrace, must_contain);
}

void expect_parse_error(const PickleBuilder& p, const std::string& must_contain) {
  expect_trace_error([&] { parse(p.bytes()); }, must_contain);
}

// Checks the `extra` list of the fixture object (see pickle_fixtures.h) written at `protocol`.
void expect_fixture_extra(const Document& doc, int protocol) {
  ASSERT_TRUE(doc.root().is(Kind::kDict));
  const Value* extra_value = doc.find(doc.root(), "extra");
  ASSERT_NE(extra_value, nullptr);
  ASSERT_TRUE(extra_value->is(Kind::kList));
  const std::span<const Value> extra = doc.list(*extra_value);
  ASSERT_EQ(extra.size(), protocol >= 4 ? 17u : protocol >= 3 ? 15u : 14u);
  EXPECT_TRUE(extra[0].is(Kind::kFloat));
  EXPECT_EQ(extra[0].number, 1.5);
  EXPECT_TRUE(extra[1].is(Kind::kNone));
  EXPECT_TRUE(extra[2].is(Kind::kBool));
  EXPECT_EQ(extra[2].integer, 1);
  EXPECT_TRUE(extra[3].is(Kind::kBool));
  EXPECT_EQ(extra[3].integer, 0);
  EXPECT_EQ(extra[4].integer, -3);
  EXPECT_EQ(extra[5].integer, std::int64_t{1} << 62);
  EXPECT_EQ(extra[6].integer, INT64_MIN);
  EXPECT_TRUE(extra[6].is(Kind::kInt));
  EXPECT_TRUE(extra[7].is(Kind::kString));
  EXPECT_EQ(extra[7].text(), "h\xC3\xA9\xE1\x88\xB4\xF0\x9F\x98\x80");
  ASSERT_TRUE(extra[8].is(Kind::kList));  // the tuple (1, 2)
  ASSERT_EQ(doc.list(extra[8]).size(), 2u);
  EXPECT_EQ(doc.list(extra[8])[1].integer, 2);
  ASSERT_EQ(doc.list(extra[9]).size(), 1u);
  EXPECT_EQ(doc.list(extra[9])[0].text(), "x");
  EXPECT_TRUE(doc.list(extra[10]).empty());
  EXPECT_EQ(extra[11].container, extra[12].container);  // `shared`, twice, is one list
  ASSERT_EQ(doc.list(extra[11]).size(), 2u);
  EXPECT_EQ(doc.list(extra[11])[0].integer, 7);
  ASSERT_TRUE(extra[13].is(Kind::kDict));  // {5: 'five'}: an int key
  const std::span<const Value> int_keyed = doc.dict_items(extra[13]);
  ASSERT_EQ(int_keyed.size(), 2u);
  EXPECT_EQ(int_keyed[0].integer, 5);
  EXPECT_EQ(int_keyed[1].text(), "five");
  if (protocol >= 3) {
    EXPECT_TRUE(extra[14].is(Kind::kBytes));
    EXPECT_EQ(extra[14].text(), std::string_view("by\0tes", 6));
  }
  if (protocol >= 4) {
    ASSERT_EQ(doc.list(extra[15]).size(), 1u);  // {3}
    EXPECT_EQ(doc.list(extra[15])[0].integer, 3);
    ASSERT_EQ(doc.list(extra[16]).size(), 1u);  // frozenset([4])
    EXPECT_EQ(doc.list(extra[16])[0].integer, 4);
  }
}

TEST(PickleReaderTest, ReadsEveryValueThatPythonsPicklerWritesAtProtocol0) {
  expect_fixture_extra(parse(test::kProtocol0Pickle), 0);
}

TEST(PickleReaderTest, ReadsEveryValueThatPythonsPicklerWritesAtProtocol2) {
  expect_fixture_extra(parse(test::kProtocol2Pickle), 2);
}

TEST(PickleReaderTest, ReadsEveryValueThatPythonsPicklerWritesAtProtocol4) {
  expect_fixture_extra(parse(test::kProtocol4Pickle), 4);
}

TEST(PickleReaderTest, AcceptsProtocol5AndRejectsProtocol6) {
  std::vector<std::uint8_t> bytes(std::begin(test::kProtocol4Pickle), std::end(test::kProtocol4Pickle));
  ASSERT_EQ(bytes[0], op::kProto);
  bytes[1] = 5;
  expect_fixture_extra(parse(bytes), 4);
  bytes[1] = 6;
  expect_trace_error([&] { parse(bytes); }, "unsupported pickle protocol 6");
}

TEST(PickleReaderTest, ReadsNestedSnapshotFieldsFromPythonOutput) {
  const Document doc = parse(test::kProtocol2Pickle);
  const Value* traces = doc.find(doc.root(), "device_traces");
  ASSERT_NE(traces, nullptr);
  ASSERT_EQ(doc.list(*traces).size(), 1u);
  const std::span<const Value> events = doc.list(doc.list(*traces)[0]);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(doc.find(events[1], "action")->text(), "alloc");
  EXPECT_EQ(doc.find(events[1], "addr")->integer, std::int64_t{1} << 40);
  EXPECT_EQ(doc.find(events[1], "stream")->integer, 7);
  EXPECT_EQ(doc.find(events[1], "no_such_key"), nullptr);
}

TEST(PickleReaderTest, AListThatContainsItselfThroughTheMemoIsHarmless) {
  PickleBuilder p;
  p.proto().empty_list().memoize().raw(op::kBinGet).raw(0).raw(op::kAppend).stop();
  const Document doc = parse(p.bytes());
  ASSERT_TRUE(doc.root().is(Kind::kList));
  ASSERT_EQ(doc.list(doc.root()).size(), 1u);
  EXPECT_EQ(doc.list(doc.root())[0].container, doc.root().container);
}

TEST(PickleReaderTest, DeeplyNestedListsParseWithoutRecursion) {
  constexpr std::size_t kDepth = 200000;
  PickleBuilder p;
  p.proto();
  for (std::size_t i = 0; i < kDepth; ++i) p.empty_list();
  for (std::size_t i = 1; i < kDepth; ++i) p.raw(op::kAppend);
  p.stop();
  const Document doc = parse(p.bytes());
  std::size_t depth = 1;
  for (Value v = doc.root(); !doc.list(v).empty(); v = doc.list(v)[0]) ++depth;
  EXPECT_EQ(depth, kDepth);
}

TEST(PickleReaderTest, EveryObjectConstructingOpcodeIsRejected) {
  const std::pair<std::uint8_t, const char*> opcodes[] = {
      {0x63, "GLOBAL"}, {0x93, "STACK_GLOBAL"}, {0x52, "REDUCE"},     {0x62, "BUILD"},       {0x69, "INST"},
      {0x6f, "OBJ"},    {0x81, "NEWOBJ"},       {0x92, "NEWOBJ_EX"},  {0x50, "PERSID"},      {0x51, "BINPERSID"},
      {0x82, "EXT1"},   {0x83, "EXT2"},         {0x84, "EXT4"},       {0x96, "BYTEARRAY8"},  {0x97, "NEXT_BUFFER"},
      {0x98, "READONLY_BUFFER"}};
  for (const auto& [code, name] : opcodes) {
    PickleBuilder p;
    p.proto().none().raw(code).text("builtins\nprint\n").stop();
    expect_parse_error(p, std::string("not a PyTorch memory snapshot: pickle opcode ") + name + " at offset 3 would construct an object");
  }
}

TEST(PickleReaderTest, UnknownAndPython2StringOpcodesAreRejected) {
  PickleBuilder unknown;
  unknown.proto().raw(0xff).stop();
  expect_parse_error(unknown, "unknown pickle opcode 0xff at offset 2");
  PickleBuilder py2_string;
  py2_string.proto(2).raw(0x55).raw(1).text("a").stop();  // SHORT_BINSTRING
  expect_parse_error(py2_string, "SHORT_BINSTRING");
}

TEST(PickleReaderTest, TextUnicodeDecodesRawUnicodeEscapesLikePython) {
  // Python: pickle.loads(b'Va\\u00e9b\\\\u0041\xe9\n.') == 'aéb\\\\u0041é'
  PickleBuilder p;
  p.raw(0x56).text("a\\u00e9b\\\\u0041").raw(0xE9).raw('\n').stop();
  const Document doc = parse(p.bytes());
  EXPECT_EQ(doc.root().text(), "a\xC3\xA9" "b\\\\u0041\xC3\xA9");
  PickleBuilder bad;
  bad.raw(0x56).text("\\u12").raw('\n').stop();
  expect_parse_error(bad, "bad \\u escape");
}

TEST(PickleReaderTest, LongIntegersDecodeUpTo64BitsAndMarkWiderOnes) {
  const auto long1 = [](std::vector<std::uint8_t> le_bytes) {
    PickleBuilder p;
    p.proto().raw(op::kLong1).raw(static_cast<std::uint8_t>(le_bytes.size()));
    for (std::uint8_t b : le_bytes) p.raw(b);
    return p.stop();
  };
  EXPECT_EQ(parse(long1({}).bytes()).root().integer, 0);
  EXPECT_EQ(parse(long1({0xff}).bytes()).root().integer, -1);
  EXPECT_EQ(parse(long1({0x00, 0x80}).bytes()).root().integer, -32768);
  EXPECT_EQ(parse(long1({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}).bytes()).root().integer, -1);
  EXPECT_EQ(parse(long1({1, 0, 0, 0, 0, 0, 0, 0x40, 0}).bytes()).root().integer, (std::int64_t{1} << 62) + 1);
  EXPECT_FALSE(parse(long1({0xff}).bytes()).root().wide);
  // Wider than 64 bits: kept as the nearest 64-bit value, marked wide (a real snapshot holds a
  // frame line of 2**64-1); the snapshot reader refuses them only where it needs the exact value.
  const Value big = parse(long1({0, 0, 0, 0, 0, 0, 0, 0x80, 0}).bytes()).root();  // 2**63
  EXPECT_TRUE(big.wide);
  EXPECT_EQ(big.integer, INT64_MAX);
  EXPECT_TRUE(parse(long1({0, 0, 0, 0, 0, 0, 0, 0, 1}).bytes()).root().wide);  // 2**64
  const Value small = parse(long1({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff}).bytes()).root();
  EXPECT_TRUE(small.wide);  // -2**63 - 1
  EXPECT_EQ(small.integer, INT64_MIN);
  PickleBuilder negative_length;
  negative_length.proto().raw(op::kLong4).le(0xffffffff, 4).stop();
  expect_parse_error(negative_length, "negative length");
  PickleBuilder text_long;
  text_long.raw(0x4c).text("99999999999999999999L\n").stop();
  EXPECT_TRUE(parse(text_long.bytes()).root().wide);
  PickleBuilder bad_text_long;
  bad_text_long.raw(0x4c).text("99999999999999999999x\n").stop();
  expect_parse_error(bad_text_long, "bad integer");
}

TEST(PickleReaderTest, EveryTruncatedPrefixOfAValidPickleThrowsATruncationError) {
  const std::span<const std::uint8_t> fixtures[] = {test::kProtocol0Pickle, test::kProtocol2Pickle,
                                                    test::kProtocol4Pickle};
  for (const std::span<const std::uint8_t> full : fixtures) {
    for (std::size_t n = 0; n < full.size(); ++n) {
      const std::vector<std::uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
      expect_trace_error([&] { parse(prefix); }, "truncated pickle at offset");
    }
  }
}

TEST(PickleReaderTest, LengthsBeyondTheInputAreTruncationsNotAllocations) {
  PickleBuilder huge_string;
  huge_string.proto().raw(op::kBinUnicode8).le(std::uint64_t{1} << 62, 8).text("abc").stop();
  expect_parse_error(huge_string, "truncated pickle at offset 2 (BINUNICODE8)");
  PickleBuilder huge_bytes;
  huge_bytes.proto().raw(0x42).le(0xffffffff, 4).stop();
  expect_parse_error(huge_bytes, "truncated pickle at offset 2 (BINBYTES)");
  PickleBuilder huge_frame;  // a frame length is only a hint
  huge_frame.proto().raw(op::kFrame).le(UINT64_MAX, 8).none().stop();
  EXPECT_TRUE(parse(huge_frame.bytes()).root().is(Kind::kNone));
}

TEST(PickleReaderTest, MemoIndexesMayBeSparseAndMissingOnesAreErrors) {
  PickleBuilder sparse;
  sparse.proto().integer(42).raw(op::kLongBinPut).le(0xffffffff, 4).raw(op::kPop);
  sparse.raw(op::kLongBinGet).le(0xffffffff, 4).stop();
  EXPECT_EQ(parse(sparse.bytes()).root().integer, 42);
  PickleBuilder missing;
  missing.proto().integer(1).memoize().raw(op::kBinGet).raw(3).stop();
  expect_parse_error(missing, "memo index 3 not defined");
  PickleBuilder text_memo;  // protocol 0: PUT and GET with decimal indexes
  text_memo.raw(0x4e).text("p7\n").raw(op::kPop).text("g7\n").stop();
  EXPECT_TRUE(parse(text_memo.bytes()).root().is(Kind::kNone));
}

TEST(PickleReaderTest, MalformedStacksAreErrors) {
  PickleBuilder append_to_nothing;
  append_to_nothing.proto().none().raw(op::kAppend).stop();
  expect_parse_error(append_to_nothing, "stack underflow");
  PickleBuilder setitems_without_mark;
  setitems_without_mark.proto().empty_dict().setitems().stop();
  expect_parse_error(setitems_without_mark, "no MARK");
  PickleBuilder odd_dict;
  odd_dict.proto().mark().str("k").raw(op::kDict).stop();
  expect_parse_error(odd_dict, "odd number of dict items");
  PickleBuilder append_to_dict;
  append_to_dict.proto().empty_dict().none().raw(op::kAppend).stop();
  expect_parse_error(append_to_dict, "target is a dict, not a list");
  PickleBuilder stop_on_empty;
  stop_on_empty.proto().stop();
  expect_parse_error(stop_on_empty, "stack underflow");
  PickleBuilder pop_on_empty;
  pop_on_empty.proto().raw(op::kPop).none().stop();
  expect_parse_error(pop_on_empty, "no MARK");
}

TEST(PickleReaderTest, AMarkHidesTheItemsBelowIt) {
  PickleBuilder dup_after_mark;
  dup_after_mark.proto().none().mark().raw(op::kDup).stop();
  expect_parse_error(dup_after_mark, "stack underflow");
  PickleBuilder pop_mark;
  pop_mark.proto().integer(5).mark().none().none().raw(op::kPopMark).stop();
  EXPECT_EQ(parse(pop_mark.bytes()).root().integer, 5);
}

TEST(PickleReaderTest, FindReturnsTheLastOfRepeatedKeysAndTrailingBytesAreIgnored) {
  PickleBuilder p;
  p.proto().empty_dict().mark().key_int("a", 1).key_int("b", 2).key_int("a", 3).setitems().stop().text("junk");
  const Document doc = parse(p.bytes());
  EXPECT_EQ(doc.find(doc.root(), "a")->integer, 3);
  EXPECT_EQ(doc.dict_items(doc.root()).size(), 6u);
}

TEST(PickleReaderTest, BinFloatIsBigEndianIeee754) {
  PickleBuilder p;
  p.proto().raw(op::kBinFloat);
  for (std::uint8_t b : {0xC0, 0x09, 0x21, 0xFB, 0x54, 0x44, 0x2D, 0x18}) p.raw(b);  // -3.141592653589793
  EXPECT_DOUBLE_EQ(parse(p.stop().bytes()).root().number, -3.141592653589793);
}

// Random damage to real pickler output must end in a Document or an Error(kTrace), nothing else.
TEST(PickleReaderTest, RandomlyCorruptedPicklesParseOrThrowTraceErrors) {
  std::mt19937 rng(1234);
  const std::span<const std::uint8_t> fixtures[] = {test::kProtocol0Pickle, test::kProtocol2Pickle,
                                                    test::kProtocol4Pickle};
  int errors = 0;
  for (const std::span<const std::uint8_t> full : fixtures) {
    for (int trial = 0; trial < 2000; ++trial) {
      std::vector<std::uint8_t> bytes(full.begin(), full.end());
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<std::uint8_t>(rng());
      try {
        parse(bytes);
      } catch (const Error& e) {
        ASSERT_EQ(e.code(), ErrorCode::kTrace) << e.what();
        ++errors;
      }
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(PickleReaderTest, RandomBytesParseOrThrowTraceErrors) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<std::uint8_t> bytes(rng() % 48);
    for (std::uint8_t& b : bytes) b = static_cast<std::uint8_t>(rng());
    try {
      parse(bytes);
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), ErrorCode::kTrace) << e.what();
    }
  }
}

}  // namespace
}  // namespace gmlake::pickle
