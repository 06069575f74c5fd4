// The tables the C library describes itself with (src/frontends/c_api/c_tables.h): one row per entry of the
// stats table, of the config table and of GMLAKE_C_API, with the signatures the declarations in gmlake.h give.
#include "frontends/c_api/c_tables.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "gmlake/config.h"
#include "gmlake/gmlake.h"

namespace gmlake::capi {
namespace {

std::vector<std::vector<std::string>> rows_of(const char* text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> fields;
    std::size_t start = 0;
    for (std::size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) {
      fields.push_back(line.substr(start, tab - start));
    }
    fields.push_back(line.substr(start));
    rows.push_back(fields);
  }
  return rows;
}

TEST(CTablesTest, TheStatTableHasEveryStatInOrderWithItsKindAndPyTorchKey) {
  std::vector<std::vector<std::string>> expected;
#define GMLAKE_TEST_GAUGE(name, torch_key) expected.push_back({#name, "gauge", torch_key});
#define GMLAKE_TEST_COUNTER(name, torch_key) expected.push_back({#name, "counter", torch_key});
  GMLAKE_GAUGE_FIELDS(GMLAKE_TEST_GAUGE)
  GMLAKE_COUNTER_FIELDS(GMLAKE_TEST_COUNTER)
  EXPECT_EQ(rows_of(stat_table_text()), expected);
  std::string names;
  for (const auto& row : expected) names += (names.empty() ? "" : ",") + row[0] + ":" + row[1];
  EXPECT_EQ(stat_names_text(), names) << "gmlake_stat_names is the same table in its own form";
  EXPECT_EQ(sizeof(gmlake_stats), 16 * 6 + 8 * (expected.size() - 6)) << "6 gauges, then the counters";
}

TEST(CTablesTest, TheConfigTableHasEveryKey) {
  const auto rows = rows_of(config_table_text());
  ASSERT_EQ(rows.size(), config_fields().size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 5u);
    EXPECT_EQ(rows[i][0], config_fields()[i].name);
  }
}

TEST(CTablesTest, TheCApiTableListsEveryFunctionWithItsSignature) {
  const auto rows = rows_of(c_api_table_text());
  std::vector<std::string> names;
#define GMLAKE_TEST_NAME(name) names.push_back(#name);
  GMLAKE_C_API(GMLAKE_TEST_NAME)
#undef GMLAKE_TEST_NAME
  ASSERT_EQ(rows.size(), names.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 3u) << rows[i][0];
    EXPECT_EQ(rows[i][0], names[i]);
  }
  auto row = [&](const std::string& name) {
    for (const auto& r : rows) {
      if (r[0] == name) return r;
    }
    return std::vector<std::string>{};
  };
  EXPECT_EQ(row("gmlake_malloc"), (std::vector<std::string>{"gmlake_malloc", "pointer", "uint64,int32,uint64"}));
  EXPECT_EQ(row("gmlake_shutdown"), (std::vector<std::string>{"gmlake_shutdown", "void", ""}));
  EXPECT_EQ(row("gmlake_last_error"), (std::vector<std::string>{"gmlake_last_error", "string", ""}));
  EXPECT_EQ(row("gmlake_pool_use_count"),
            (std::vector<std::string>{"gmlake_pool_use_count", "int32", "int32,gmlake_pool_id,pointer"}));
  EXPECT_EQ(row("gmlake_ipc_import"),
            (std::vector<std::string>{"gmlake_ipc_import", "int32", "string,uint64,int32,pointer"}));
}

}  // namespace
}  // namespace gmlake::capi
