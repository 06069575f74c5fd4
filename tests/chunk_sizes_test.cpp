// ChunkSizes (src/policies/gmlake/chunk_sizes.h): a block's chunk limit and the growth limit, as tables over the
// configuration keys that set them, and their bounds over random blocks and reserved sizes.
// How ChunkSource uses them (a growth chunk covering more of a run, a free chunk up to the growth size) is
// chunk_source_test's.
#include "policies/gmlake/chunk_sizes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "gmlake/config.h"
#include "gmlake/units.h"

namespace gmlake::engine {
namespace {

constexpr PageGeometry kGeometry = PageGeometry::from_shift(21);  // 2 MiB pages
constexpr std::uint64_t kPage = std::uint64_t{1} << 21;

TEST(ChunkSizesTest, ABlocksChunksAreItsShareUpToMaxChunkBytesUnlessItWouldNeedMoreThan4096) {
  // 2 MiB pages: max_chunk_bytes 4 MiB = 2 pages; kMaxChunksPerBlock = 4096.
  struct Row {
    const char* config;
    std::uint64_t block_pages, limit;
  };
  const Row rows[] = {
      {"", 1, 1},                      // a page: one page, whatever the share
      {"", 31, 1},                     // 31 / 32 rounds down, at least one page
      {"", 64, 2},                     // the share (2) and max_chunk_bytes (2) agree
      {"", 512, 2},                    // 1 GiB: max_chunk_bytes bounds it, 256 chunks
      {"", 8192, 2},                   // 16 GiB: still 2 pages, exactly 4096 chunks
      {"", 8193, 3},                   // past 4096 x max_chunk_bytes: ceil(8193 / 4096) pages
      {"", 524288, 128},               // 1 TiB: 256 MiB chunks, 4096 of them
      {"chunks_per_block:0", 3, 2},    // no share bound: max_chunk_bytes
      {"chunks_per_block:0", 1 << 20, 256},
      {"chunks_per_block:4096", 1 << 20, 256},
      {"chunks_per_block:1,max_chunk_bytes:256M", 100, 100},  // a block as one chunk, up to 128 pages
      {"chunks_per_block:1,max_chunk_bytes:256M", 1000, 128},
  };
  for (const Row& row : rows) {
    const ChunkSizes sizes(parse_config(row.config), kGeometry);
    EXPECT_EQ(sizes.chunk_limit(Pages{row.block_pages}), Pages{row.limit}) << row.config << " " << row.block_pages;
  }
}

TEST(ChunkSizesTest, TheGrowthLimitIsGrowthChunkBytesAndAShareOfReservedBytes) {
  // growth_chunk_bytes 16 MiB = 8 pages, growth_chunk_share 768 by default.
  struct Row {
    const char* config;
    std::uint64_t reserved_pages, limit;
  };
  const Row rows[] = {
      {"", 0, 1},                                  // nothing reserved: a page
      {"", 767, 1},                                // under 768 pages, 1/768 of it is under a page
      {"", 768 * 3, 3},                            // 1/768 of reserved bytes
      {"", 768 * 3 - 1, 2},                        // rounded down to whole pages
      {"", 768 * 8, 8},                            // growth_chunk_bytes bounds it
      {"", 768 * 100, 8},
      {"growth_chunk_share:4", 20, 5},             // 40 MiB / 4 = 10 MiB: 5 pages (rounded down)
      {"growth_chunk_share:4,growth_chunk_bytes:7M", 100, 3},  // 7 MiB: 3 whole pages
      {"growth_chunk_share:1,growth_chunk_bytes:32M", 100, 16},
      {"growth_chunk_share:1,growth_chunk_bytes:2M", 100, 1},   // one page: off
      {"growth_chunk_share:1,growth_chunk_bytes:0", 100, 1},    // under a page: off
      {"growth_chunk_share:1,max_chunk_bytes:2M", 100, 1},      // one chunk size: off
      {"growth_chunk_share:1,headroom_permille:0", 100, 1},     // memory over calls: off
  };
  for (const Row& row : rows) {
    const ChunkSizes sizes(parse_config(row.config), kGeometry);
    EXPECT_EQ(sizes.growth_limit(row.reserved_pages * kPage, false), Pages{row.limit})
        << row.config << " " << row.reserved_pages;
    EXPECT_EQ(sizes.growth_on(), sizes.growth_chunk_pages() > Pages{1}) << row.config;
  }
}

TEST(ChunkSizesTest, WhileTheDeviceWaitsTheGrowthLimitTakesTheWaitingShare) {
  // growth_chunk_share 768 (the default); waiting_growth_chunk_share 32 where given (the default is 768: none).
  struct Row {
    const char* config;
    std::uint64_t reserved_pages, busy, waiting;
  };
  const Row rows[] = {
      {"waiting_growth_chunk_share:32", 31, 1, 1},       // under 32 pages: a page either way
      {"waiting_growth_chunk_share:32", 100, 1, 3},      // 200 MiB: 1/768 is under a page, 1/32 is 3 pages
      {"waiting_growth_chunk_share:32", 768 * 3, 3, 8},  // growth_chunk_bytes bounds the waiting share
      {"", 100, 1, 1},                                   // the default: the same share, no difference
      {"", 768 * 3, 3, 3},
      {"waiting_growth_chunk_share:1,growth_chunk_bytes:32M", 10, 1, 10},
      {"waiting_growth_chunk_share:1,growth_chunk_bytes:2M", 100, 1, 1},  // growth chunks off: a page
  };
  for (const Row& row : rows) {
    const ChunkSizes sizes(parse_config(row.config), kGeometry);
    EXPECT_EQ(sizes.growth_limit(row.reserved_pages * kPage, false), Pages{row.busy}) << row.config;
    EXPECT_EQ(sizes.growth_limit(row.reserved_pages * kPage, true), Pages{row.waiting}) << row.config;
  }
}

TEST(ChunkSizesTest, LimitsAreAtLeastAPageAndABlockMapsAtMostAbout4096Chunks) {
  std::mt19937_64 rng(1234);
  const char* configs[] = {"", "chunks_per_block:0", "chunks_per_block:1,max_chunk_bytes:256M",
                           "growth_chunk_share:1,growth_chunk_bytes:64M", "waiting_growth_chunk_share:2"};
  for (const char* config : configs) {
    const ChunkSizes sizes(parse_config(config), kGeometry);
    for (int i = 0; i < 2000; ++i) {
      const std::uint64_t block_pages = 1 + rng() % (std::uint64_t{1} << (1 + rng() % 24));
      const Pages limit = sizes.chunk_limit(Pages{block_pages});
      ASSERT_GE(limit, Pages{1}) << config << " " << block_pages;
      const std::uint64_t chunks = (block_pages + limit.count() - 1) / limit.count();
      ASSERT_LE(chunks, std::max<std::uint64_t>(ChunkSizes::kMaxChunksPerBlock, 32u)) << config << " " << block_pages;
      const std::uint64_t reserved = rng() % (std::uint64_t{1} << 40);
      for (const bool waits : {false, true}) {
        const Pages growth = sizes.growth_limit(reserved, waits);
        ASSERT_GE(growth, Pages{1}) << config;
        ASSERT_LE(growth, std::max(Pages{1}, sizes.growth_chunk_pages())) << config;
      }
    }
  }
}

}  // namespace
}  // namespace gmlake::engine
