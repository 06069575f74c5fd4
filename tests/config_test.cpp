#include "gmlake/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"

namespace gmlake {
namespace {

TEST(ConfigTest, DefaultsMatchPyTorchConstants) {
  const Config c;
  EXPECT_EQ(c.policy, Policy::kGmlake);
  EXPECT_EQ(c.page_bytes, 2 * kMiB);
  EXPECT_EQ(c.small_request_max_bytes, 1 * kMiB);
  EXPECT_EQ(c.large_segment_bytes, 20 * kMiB);
  EXPECT_EQ(c.large_segment_threshold_bytes, 10 * kMiB);
  EXPECT_NO_THROW(c.validate());
}

TEST(ConfigTest, ParsesSizesWithUnitsAndBooleans) {
  const Config c = parse_config("cap_bytes:24GiB, cross_stream_reuse:false,policy:caching,fit_candidates:3");
  EXPECT_EQ(c.cap_bytes, 24 * kGiB);
  EXPECT_FALSE(c.cross_stream_reuse);
  EXPECT_EQ(c.policy, Policy::kCaching);
  EXPECT_EQ(c.fit_candidates, 3u);
  EXPECT_EQ(parse_config("cap_bytes:512k").cap_bytes, 512 * kKiB);
  EXPECT_EQ(parse_config("").cap_bytes, 0u);
}

// async: PyTorch's backend:cudaMallocAsync, named as the config names it and as PyTorch does.
TEST(ConfigTest, AsyncIsAPolicyNamedAsyncOrCudaMallocAsync) {
  EXPECT_EQ(parse_config("policy:async").policy, Policy::kAsync);
  EXPECT_EQ(parse_config("policy:cudaMallocAsync").policy, Policy::kAsync);
  EXPECT_STREQ(to_string(Policy::kAsync), "async");
  EXPECT_EQ(parse_config(parse_config("policy:async").to_string()).policy, Policy::kAsync);
  test::expect_error([&] { parse_config("policy:magic"); }, ErrorCode::kConfig, "expected gmlake, caching, expandable or async");
}

TEST(ConfigTest, ToStringRoundTrips) {
  const Config c = parse_config("cap_bytes:3G,policy:expandable,cross_stream_reuse:0");
  const Config back = parse_config(c.to_string());
  EXPECT_EQ(back.to_string(), c.to_string());
  EXPECT_EQ(back.cap_bytes, 3 * kGiB);
}

void expect_config_error(const std::string& text, const std::string& must_name) {
  test::expect_error([&] { parse_config(text); }, ErrorCode::kConfig, must_name);
}

TEST(ConfigTest, UnknownKeyBadValueAndOverflowNameTheKey) {
  expect_config_error("no_such_key:1", "no_such_key: unknown key (`gmlake conf` lists the keys)");
  expect_config_error("cap_bytes:lots", "cap_bytes");
  expect_config_error("cap_bytes:99999999999999999999", "cap_bytes");
  expect_config_error("cap_bytes:17179869184T", "cap_bytes");
  expect_config_error("cap_bytes:5X", "cap_bytes");
  expect_config_error("cross_stream_reuse:maybe", "cross_stream_reuse");
  expect_config_error("policy:magic", "policy");
  expect_config_error("page_bytes:3000000", "page_bytes");
  expect_config_error("cap_bytes", "cap_bytes");
}

TEST(ConfigTest, ChunkBytesIsAcceptedAsTheOlderNameOfPageBytes) {
  EXPECT_EQ(parse_config("chunk_bytes:4M").page_bytes, 4 * kMiB);
  EXPECT_EQ(parse_config("chunk_bytes:4M,page_bytes:4M").page_bytes, 4 * kMiB) << "the same value twice is fine";
  EXPECT_EQ(parse_config("page_bytes:4M").to_string().find(",chunk_bytes:"), std::string::npos)
      << "the config is written with the new name only";
  expect_config_error("chunk_bytes:lots", "chunk_bytes: bad value");
  expect_config_error("chunk_bytes:3000000", "page_bytes: must be a power of two");
  for (const Config& c : {parse_config(""), parse_config("chunk_bytes:4M")}) {
    EXPECT_EQ(parse_config(c.to_string()).to_string(), c.to_string());
  }
}

TEST(ConfigTest, PageBytesAndChunkBytesWithDifferentValuesAreRefused) {
  expect_config_error("page_bytes:2M,chunk_bytes:4M", "page_bytes: given as 2097152 and as chunk_bytes");
  expect_config_error("chunk_bytes:4M,page_bytes:2M", "page_bytes: given as 2097152 and as chunk_bytes");
  Config c = parse_config("page_bytes:4M");
  EXPECT_THROW(c.apply("cap_bytes:1G,chunk_bytes:2M,page_bytes:4M"), Error);
  EXPECT_EQ(c.page_bytes, 4 * kMiB) << "nothing applied";
  EXPECT_EQ(c.cap_bytes, 0u) << "nothing applied";
  c.apply("chunk_bytes:2M");
  EXPECT_EQ(c.page_bytes, 2 * kMiB) << "a later text may set either name";
}

TEST(ConfigTest, LagGrowChunksIsAcceptedAsTheOlderNameOfLagGrowPages) {
  EXPECT_EQ(parse_config("lag_grow_chunks:8").lag_grow_pages, 8u);
  EXPECT_EQ(parse_config("lag_grow_chunks:8").to_string(), parse_config("lag_grow_pages:8").to_string())
      << "the older name sets the same field, nothing else";
  EXPECT_EQ(parse_config("lag_grow_chunks:8,lag_grow_pages:8").lag_grow_pages, 8u) << "the same value twice is fine";
  EXPECT_EQ(parse_config("lag_grow_pages:8").to_string().find("lag_grow_chunks:"), std::string::npos)
      << "the config is written with the new name only";
  expect_config_error("lag_grow_chunks:lots", "lag_grow_chunks: bad value");
  expect_config_error("lag_grow_pages:8,lag_grow_chunks:16", "lag_grow_pages: given as 8 and as lag_grow_chunks");
  expect_config_error("lag_grow_chunks:16,lag_grow_pages:8", "lag_grow_pages: given as 8 and as lag_grow_chunks");
  Config c = parse_config("lag_grow_pages:8");
  c.apply("lag_grow_chunks:16");
  EXPECT_EQ(c.lag_grow_pages, 16u) << "a later text may set either name";
}

TEST(ConfigTest, ABadEntryLeavesTheConfigUnchanged) {
  Config c = parse_config("cap_bytes:1G");
  EXPECT_THROW(c.apply("cap_bytes:2G,bogus:1"), Error);
  EXPECT_EQ(c.cap_bytes, 1 * kGiB);
}

TEST(ConfigTest, FieldTableListsEveryField) {
  const auto fields = config_fields();
  ASSERT_GE(fields.size(), 10u);
  EXPECT_STREQ(fields[0].name, "policy");
  for (const auto& f : fields) EXPECT_NE(std::string(f.description), "");
}

TEST(ConfigTest, BackendAndDebugAreKeysOfTheOneTable) {
  const Config c = parse_config("backend:sim:h100,debug:0");
  EXPECT_EQ(c.backend, "sim:h100");  // the value is what follows the first colon
  EXPECT_FALSE(c.debug);
  EXPECT_EQ(parse_config(c.to_string()).backend, "sim:h100");
  EXPECT_EQ(Config{}.backend, "host");
  EXPECT_THROW(parse_config("backend:"), Error);
}

TEST(ConfigTest, GrowthChunksAreSixteenMiBAndAShareOfReservedBytesByDefault) {
  const Config c;
  EXPECT_EQ(c.growth_chunk_bytes, 16 * kMiB) << "at max_strand_bytes: a growth chunk is never re-cut";
  EXPECT_EQ(c.growth_chunk_bytes, c.max_strand_bytes);
  EXPECT_EQ(c.growth_chunk_share, 768u);
  EXPECT_EQ(c.waiting_growth_chunk_share, 768u);
  EXPECT_EQ(c.waiting_headroom_permille, 0u);
  EXPECT_FALSE(c.assume_device_waits);
  // Any size is accepted (whole pages count, under two pages is off); the share must be at least 1.
  EXPECT_EQ(parse_config("growth_chunk_bytes:0").growth_chunk_bytes, 0u);
  EXPECT_EQ(parse_config("growth_chunk_bytes:7M").growth_chunk_bytes, 7 * kMiB);
  expect_config_error("growth_chunk_share:0", "growth_chunk_share");
  expect_config_error("waiting_growth_chunk_share:0", "waiting_growth_chunk_share");
  expect_config_error("waiting_headroom_permille:1001", "waiting_headroom_permille");
  expect_config_error("growth_chunk_bytes:2T", "growth_chunk_bytes");  // past arena_virtual_bytes (1 TiB)
}

TEST(ConfigTest, DebugNeedsTheHostBackend) {
  EXPECT_TRUE(parse_config("debug:1").debug);
  try {
    parse_config("backend:sim,debug:1");
    FAIL() << "debug:1 on sim accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("debug: needs backend:host"), std::string::npos) << e.what();
  }
}

TEST(ConfigTest, CudaBackendTurnsCrossStreamReuseOffUnlessTheSameTextSetsIt) {
  EXPECT_FALSE(parse_config("backend:cuda").cross_stream_reuse);
  EXPECT_FALSE(parse_config("backend:cuda:1").cross_stream_reuse);
  EXPECT_TRUE(parse_config("backend:cuda,cross_stream_reuse:true").cross_stream_reuse);
  EXPECT_TRUE(parse_config("cross_stream_reuse:true,backend:cuda").cross_stream_reuse);
  EXPECT_TRUE(parse_config("backend:host").cross_stream_reuse);
}

TEST(ConfigTest, EnvironmentConfIsGmlakeConfOrEmpty) {
  ::setenv("GMLAKE_CONF", "cap_bytes:8M", 1);
  EXPECT_EQ(environment_conf(), "cap_bytes:8M");
  ::unsetenv("GMLAKE_CONF");
  EXPECT_EQ(environment_conf(), "");
}


TEST(ConfigTest, PeerDevicesAreNoneOrDistinctDeviceIdsSeparatedBySemicolons) {
  EXPECT_TRUE(parse_peer_devices("none").empty());
  EXPECT_EQ(parse_peer_devices("1"), std::vector<int>{1});
  EXPECT_EQ(parse_peer_devices("3; 1;2"), (std::vector<int>{3, 1, 2}));
  const Config c = parse_config("peer_devices:1;2,peer_budget_bytes:4G");
  EXPECT_EQ(c.peer_devices, "1;2");
  EXPECT_EQ(c.peer_budget_bytes, 4 * kGiB);
  EXPECT_EQ(parse_config(c.to_string()).peer_devices, "1;2") << "round trip";
  for (const char* bad : {"peer_devices:x", "peer_devices:1;1", "peer_devices:-1", "peer_devices:1;", "peer_devices:4096"}) {
    try {
      parse_config(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kConfig);
      EXPECT_NE(std::string(e.what()).find("peer_devices"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_config("peer_budget_bytes:3M"), Error) << "not a multiple of chunk_bytes";
}

TEST(ConfigTest, LakeSocketIsNoneAnAbsolutePathOrAnAbstractNameAndNotWithPeerDevices) {
  EXPECT_EQ(Config{}.lake_socket, "none");
  EXPECT_EQ(parse_config("lake_socket:@lender0").lake_socket, "@lender0");
  const Config c = parse_config("lake_socket:/run/gmlake/lender0.sock,peer_budget_bytes:4G");
  EXPECT_EQ(parse_config(c.to_string()).lake_socket, "/run/gmlake/lender0.sock") << "round trip";
  const std::string too_long = "lake_socket:/" + std::string(107, 'x');
  for (const std::string& bad : {std::string("lake_socket:relative.sock"), std::string("lake_socket:@"), too_long,
                                 std::string("lake_socket:@a,peer_devices:1")}) {
    try {
      parse_config(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kConfig);
      EXPECT_NE(std::string(e.what()).find("lake_socket"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(check_lake_socket("/" + std::string(106, 'x'))) << "107 bytes fit";
}

TEST(ConfigTest, LakeAllowedUidsAreNoneOrDistinctUidsSeparatedBySemicolons) {
  EXPECT_EQ(Config{}.lake_allowed_uids, "none");
  EXPECT_TRUE(parse_lake_allowed_uids("none").empty());
  EXPECT_EQ(parse_lake_allowed_uids("1000"), std::vector<std::uint32_t>{1000});
  EXPECT_EQ(parse_lake_allowed_uids("0; 4294967294;1001"), (std::vector<std::uint32_t>{0, 4294967294u, 1001}));
  const Config c = parse_config("lake_socket:@lender0,lake_allowed_uids:1000;1001");
  EXPECT_EQ(parse_config(c.to_string()).lake_allowed_uids, "1000;1001") << "round trip";
  for (const char* bad : {"lake_allowed_uids:x", "lake_allowed_uids:5;5", "lake_allowed_uids:-1",
                          "lake_allowed_uids:1;", "lake_allowed_uids:4294967295", "lake_allowed_uids:99999999999999999999"}) {
    try {
      parse_config(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kConfig);
      EXPECT_NE(std::string(e.what()).find("lake_allowed_uids"), std::string::npos) << e.what();
    }
  }
}
}  // namespace
}  // namespace gmlake
