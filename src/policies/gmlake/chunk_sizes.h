// ChunkSizes: how large a new chunk of the gmlake policy may be, in pages (PageGeometry). ChunkSource asks it for
// the chunk of a block's run (chunk_limit) and, where the pool grows past its size, for the growth chunk
// (growth_limit). It reads the configuration once and holds no other state.
//
// A block's chunk (Config::max_chunk_bytes, chunks_per_block):
//     chunk_limit(b) = min(b / chunks_per_block (at least 1; no bound when chunks_per_block is 0),
//                          max(max_chunk_pages, ceil(b / kMaxChunksPerBlock)))
// for a block of b pages: a chunk that a smaller block later covers in part strands little, and however large
// the block, it maps at most about kMaxChunksPerBlock new chunks (a 1 TB block of 4 MiB chunks would be 262,144
// chunks, each walked at every placement, use and free of the block).
// A growth chunk (Config::growth_chunk_bytes, growth_chunk_share, waiting_growth_chunk_share), for R reserved bytes:
//     growth_limit(R, waits) = min(growth_chunk_pages, max(1, whole pages of R / share))
// where share is waiting_growth_chunk_share while the device waits for the host, else growth_chunk_share; it is
// 1 (growth chunks off) when growth_chunk_bytes is under two pages, max_chunk_bytes is one page, or
// headroom_permille is 0 (memory over calls: there, chunks moved every step would strand parts of them). Why the
// share, and why a larger one while the device waits: ChunkSource::growth_limit (chunk_source.h).
// Invariants (by construction): chunk_limit(b) >= 1 and growth_limit(R, waits) >= 1 for every b, R, waits.
// Thread safety: immutable after construction.
#pragma once

#include <algorithm>
#include <cstdint>

#include "gmlake/config.h"
#include "page_geometry.h"
#include "pages.h"

namespace gmlake::engine {

class ChunkSizes {
 public:
  // The most new chunks one block is stitched from: above max_chunk_bytes x this (16 GiB at the default), a
  // block's chunks grow with it. Fewer chunks cost fewer driver calls (one create, map and access grant each).
  static constexpr std::uint64_t kMaxChunksPerBlock = 4096;

  // Reads max_chunk_bytes, chunks_per_block, growth_chunk_bytes, growth_chunk_share, waiting_growth_chunk_share
  // and headroom_permille from `config` (validated by parse_config: shares are at least 1).
  ChunkSizes(const Config& config, PageGeometry page)
      : page_(page),
        max_chunk_pages_(page.pages_in(config.max_chunk_bytes)),
        chunks_per_block_(config.chunks_per_block),
        growth_chunk_pages_(max_chunk_pages_ <= Pages{1} || config.headroom_permille == 0
                                ? Pages{1}
                                : std::max(Pages{1}, page.pages_in(config.growth_chunk_bytes))),
        growth_chunk_share_(config.growth_chunk_share),
        waiting_growth_chunk_share_(config.waiting_growth_chunk_share) {}

  Pages max_chunk_pages() const { return max_chunk_pages_; }
  // The largest chunk a block of `block_pages` pages gets for its unmapped pages (above).
  Pages chunk_limit(Pages block_pages) const {
    const Pages share =
        chunks_per_block_ == 0 ? Pages::max() : std::max(Pages{1}, block_pages / chunks_per_block_);
    const Pages largest =
        std::max(max_chunk_pages_, Pages{(block_pages.count() + kMaxChunksPerBlock - 1) / kMaxChunksPerBlock});
    return std::min(share, largest);
  }
  // True when growth chunks are on (growth_chunk_pages() > 1).
  bool growth_on() const { return growth_chunk_pages_ > Pages{1}; }
  // Config::growth_chunk_bytes in whole pages; 1 when growth chunks are off.
  Pages growth_chunk_pages() const { return growth_chunk_pages_; }
  // The largest growth chunk with `reserved_bytes` reserved, while the device waits for the host or not (above).
  Pages growth_limit(std::uint64_t reserved_bytes, bool device_waits) const {
    if (!growth_on()) return Pages{1};
    const std::uint64_t share = device_waits ? waiting_growth_chunk_share_ : growth_chunk_share_;
    return std::min(growth_chunk_pages_, std::max(Pages{1}, page_.pages_in(reserved_bytes / share)));
  }

 private:
  PageGeometry page_;
  Pages max_chunk_pages_;
  std::uint64_t chunks_per_block_;
  Pages growth_chunk_pages_;                  // Config::growth_chunk_bytes in whole pages (1: off)
  std::uint64_t growth_chunk_share_;          // Config::growth_chunk_share
  std::uint64_t waiting_growth_chunk_share_;  // Config::waiting_growth_chunk_share
};

}  // namespace gmlake::engine
