// PickleWriter (src/trace/pickle_writer.h): what it writes, read back by our own restricted reader.
#include "trace/pickle_writer.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "trace/pickle_reader.h"

namespace gmlake::pickle {
namespace {

// The Document points into `bytes`: keep them alive as long as it.
Document read_back(const std::vector<std::uint8_t>& bytes) { return parse_pickle(bytes, "written"); }

TEST(PickleWriterTest, ScalarsOfEveryWidthReadBackExactly) {
  const std::int64_t ints[] = {0, 1, 255, 256, -1, -129, 65535, INT32_MAX, INT32_MIN, std::int64_t{1} << 40,
                               INT64_MAX, INT64_MIN};
  PickleWriter w;
  w.begin_list();
  for (std::int64_t v : ints) w.integer(v);
  w.none();
  w.boolean(true);
  w.boolean(false);
  w.number(-2.5);
  w.str("");
  w.str(std::string(300, 'x'));
  w.str("caf\xc3\xa9");
  w.int_pair(0, 7);
  w.end_list();
  const std::vector<std::uint8_t> bytes = w.finish();
  EXPECT_EQ(bytes[0], 0x80);
  EXPECT_EQ(bytes[1], 2) << "protocol 2";
  EXPECT_EQ(bytes.back(), 0x2e) << "ends in STOP";
  const Document doc = read_back(bytes);
  ASSERT_TRUE(doc.root().is(Kind::kList));
  const auto items = doc.list(doc.root());
  ASSERT_EQ(items.size(), std::size(ints) + 8);
  for (std::size_t i = 0; i < std::size(ints); ++i) {
    ASSERT_TRUE(items[i].is(Kind::kInt));
    EXPECT_FALSE(items[i].wide);
    EXPECT_EQ(items[i].integer, ints[i]) << i;
  }
  std::size_t i = std::size(ints);
  EXPECT_TRUE(items[i++].is(Kind::kNone));
  EXPECT_EQ(items[i].kind, Kind::kBool);
  EXPECT_EQ(items[i++].integer, 1);
  EXPECT_EQ(items[i++].integer, 0);
  ASSERT_TRUE(items[i].is(Kind::kFloat));
  EXPECT_EQ(items[i++].number, -2.5);
  EXPECT_EQ(items[i++].text(), "");
  EXPECT_EQ(items[i++].text(), std::string(300, 'x'));
  EXPECT_EQ(items[i++].text(), "caf\xc3\xa9");
  ASSERT_TRUE(items[i].is(Kind::kList)) << "a tuple reads back as a list";
  const auto pair = doc.list(items[i]);
  ASSERT_EQ(pair.size(), 2u);
  EXPECT_EQ(pair[0].integer, 0);
  EXPECT_EQ(pair[1].integer, 7);
}

TEST(PickleWriterTest, LargeContainersAreWrittenInBatchesAndReadBackWhole) {
  PickleWriter w;
  w.begin_dict();
  w.key("numbers");
  w.begin_list();
  for (int i = 0; i < 2500; ++i) w.integer(i);
  w.end_list();
  w.key("many");
  w.begin_dict();
  for (int i = 0; i < 2100; ++i) {
    w.key("k" + std::to_string(i));  // past 256 memo entries: LONG_BINPUT / LONG_BINGET
    w.integer(i);
  }
  w.end_dict();
  w.key("empty");
  w.begin_list();
  w.end_list();
  w.end_dict();
  const std::vector<std::uint8_t> bytes = w.finish();
  const Document doc = read_back(bytes);
  const Value* numbers = doc.find(doc.root(), "numbers");
  ASSERT_NE(numbers, nullptr);
  const auto list = doc.list(*numbers);
  ASSERT_EQ(list.size(), 2500u);
  for (int i = 0; i < 2500; ++i) ASSERT_EQ(list[i].integer, i);
  const Value* many = doc.find(doc.root(), "many");
  ASSERT_NE(many, nullptr);
  ASSERT_EQ(doc.dict_items(*many).size(), 2 * 2100u);
  EXPECT_EQ(doc.find(*many, "k2099")->integer, 2099);
  EXPECT_EQ(doc.find(*many, "k300")->integer, 300);
  EXPECT_EQ(doc.list(*doc.find(doc.root(), "empty")).size(), 0u);
}

TEST(PickleWriterTest, RepeatedKeysAreStoredOnceAndFetchedFromTheMemo) {
  auto size_of = [](int dicts) {
    PickleWriter w;
    w.begin_list();
    for (int i = 0; i < dicts; ++i) {
      w.begin_dict();
      w.key("a_rather_long_key_name");
      w.integer(i % 100);
      w.end_dict();
    }
    w.end_list();
    return w.finish();
  };
  const auto one = size_of(1), hundred = size_of(101);
  // Each further dict costs its opcodes and a 2-byte BINGET, not the 22-byte key again.
  EXPECT_LT((hundred.size() - one.size()) / 100, 10u);
  const Document doc = read_back(hundred);
  const auto dicts = doc.list(doc.root());
  ASSERT_EQ(dicts.size(), 101u);
  EXPECT_EQ(doc.find(dicts[57], "a_rather_long_key_name")->integer, 57);
}

TEST(PickleWriterTest, MisuseIsALogicErrorNotABadPickle) {
  {
    PickleWriter w;
    EXPECT_THROW(w.end_list(), std::logic_error);
  }
  {
    PickleWriter w;
    w.begin_list();
    EXPECT_THROW(w.end_dict(), std::logic_error);
    EXPECT_THROW(w.finish(), std::logic_error) << "a container is still open";
  }
  {
    PickleWriter w;
    w.begin_dict();
    w.key("lonely");
    EXPECT_THROW(w.end_dict(), std::logic_error) << "a key without a value";
  }
  {
    PickleWriter w;
    w.none();
    EXPECT_THROW(w.none(), std::logic_error) << "a second top-level value";
  }
  {
    PickleWriter w;
    EXPECT_THROW(w.finish(), std::logic_error) << "nothing written";
  }
}

}  // namespace
}  // namespace gmlake::pickle
