// Stitcher: the only code that maps, unmaps and grants access to chunks (cuMemMap, cuMemUnmap, cuMemSetAccess),
// keeping the arenas' PageMaps and the chunks' records in step with the backend.
//
// A stitch backs a run of unmapped pages with one or more chunks laid end to end, then grants access over the
// whole run in ONE set_access call (CUDA charges cuMemSetAccess mostly per chunk and per call, not per byte:
// docs/benchmarks.md, "Reference: CUDA VMM call costs"), so a run backed by one large chunk costs one map and one
// set_access whatever its size.
// Failure atomicity: map() changes nothing when the backend throws; grant() failing leaves the chunks mapped
// without access, and the caller undoes with unmap(). unmap() changes nothing when the backend throws.
// A chunk keeps at most one active place; its standby mappings (left where it was mapped before it moved) are
// listed in Chunk::standby and are PageMap entries like the active one.
// The backend's observer (BackendObserver: PyTorch's segment_map / segment_unmap trace events) sees the active
// places only, so that what a trace shows mapped is what the pool holds: a chunk turned standby is told as an
// unmap, a standby mapping activated as a map (no backend call in either), and a standby mapping's own unmap is
// not told.
// It keeps no state of its own (the page maps and chunk records it writes are checked by PageMap's and
// ChunkStore's check_invariants, their agreement by StitchingAllocator's), so it has no check_invariants.
// Thread safety: none.
#pragma once

#include <cstdint>

#include "arena.h"
#include "chunk_store.h"
#include "page_geometry.h"
#include "gmlake/backend.h"

namespace gmlake::engine {

class Stitcher {
 public:
  // `page`: the engine's page (Config::page_bytes). `backend` and `store` must outlive the Stitcher.
  Stitcher(Backend& backend, ChunkStore& store, PageGeometry page) : backend_(backend), store_(store), page_(page) {}

  // The address of page `page` of `arena`.
  std::uintptr_t address(const Arena& arena, PageNumber page) const { return arena.base + page_.offset_of(page); }
  // Maps free chunk `id` (not in the free index) whole at `first_page` of `arena`; its pages must be unmapped.
  // The chunk has no access until grant() covers it. Throws BackendError: nothing changed.
  void map(Arena& arena, PageNumber first_page, ChunkId id);
  // Grants read/write access to pages [first_page, first_page + pages), exactly a run of whole mapped chunks.
  void grant(Arena& arena, PageNumber first_page, Pages pages);
  // Unmaps chunk `id` (mapped in `arena`); it is then free but not in the free index. Throws BackendError:
  // nothing changed.
  void unmap(Arena& arena, ChunkId id);

  // Standby mappings (chunk_store.h). No backend call: chunk `id`'s active mapping stays mapped, as a standby
  // one (the newest), left at `left_tick` (the chunk's idle tick: ChunkUse::idle_since); the chunk is then free
  // but not in the free index. `active_arena`: the arena it is active in. Throws std::bad_alloc only (nothing
  // changed).
  void to_standby(Arena& active_arena, ChunkId id, std::uint64_t left_tick);
  // No backend call: the standby mapping of chunk `id` at `first_page` of `arena` becomes its active place; an
  // active place it had elsewhere (in `active_arena`; null when the chunk is free) becomes a standby one, left
  // at `left_tick` (its idle tick there). Throws std::logic_error when the chunk has no standby mapping there, or
  // is mapped but `active_arena` is null (nothing changed).
  void activate(Arena& arena, PageNumber first_page, ChunkId id, Arena* active_arena, std::uint64_t left_tick);
  // Unmaps the standby mapping of chunk `id` at `first_page` of `arena`; the caller has made sure no queued work
  // touches it (ChunkPlace::left_tick, ChunkSource::unmap_standby). Throws BackendError: nothing changed.
  void unmap_standby(Arena& arena, PageNumber first_page, ChunkId id);
  // backend.unmap(addr, size_bytes) without telling the backend's observer (a standby mapping's unmap; teardown).
  void unmap_unobserved(std::uintptr_t addr, std::uint64_t size_bytes);

 private:
  Backend& backend_;
  ChunkStore& store_;
  PageGeometry page_;
};

}  // namespace gmlake::engine
