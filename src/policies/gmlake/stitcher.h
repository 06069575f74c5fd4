// Stitcher: the only code that maps, unmaps and grants access to chunks (cuMemMap, cuMemUnmap, cuMemSetAccess),
// keeping the arenas' PageMaps and the chunks' records in step with the backend.
//
// A stitch backs a run of unmapped pages with one or more chunks laid end to end, then grants access over the
// whole run in ONE set_access call (CUDA charges cuMemSetAccess mostly per chunk and per call, not per byte:
// ../shared/REFERENCE.md), so a run backed by one large chunk costs one map and one set_access whatever its size.
// Failure atomicity: map() changes nothing when the backend throws; grant() failing leaves the chunks mapped
// without access, and the caller undoes with unmap(). unmap() changes nothing when the backend throws.
// Thread safety: none.
#pragma once

#include <cstdint>

#include "arena.h"
#include "chunk_pool.h"
#include "gmlake/backend.h"

namespace gmlake::engine {

class Stitcher {
 public:
  Stitcher(Backend& backend, ChunkPool& pool, unsigned page_shift)
      : backend_(backend), pool_(pool), page_shift_(page_shift) {}

  std::uintptr_t address(const Arena& arena, std::uint64_t page) const { return arena.base + (page << page_shift_); }
  // Maps free chunk `id` (not in the free index) whole at `first_page` of `arena`; its pages must be unmapped.
  // The chunk has no access until grant() covers it. Throws BackendError: nothing changed.
  void map(Arena& arena, std::uint64_t first_page, ChunkId id);
  // Grants read/write access to pages [first_page, first_page + pages), exactly a run of whole mapped chunks.
  void grant(Arena& arena, std::uint64_t first_page, std::uint64_t pages);
  // Unmaps chunk `id` (mapped in `arena`); it is then free but not in the free index. Throws BackendError:
  // nothing changed.
  void unmap(Arena& arena, ChunkId id);

 private:
  Backend& backend_;
  ChunkPool& pool_;
  unsigned page_shift_;
};

}  // namespace gmlake::engine
