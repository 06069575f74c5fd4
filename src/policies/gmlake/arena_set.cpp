#include "arena_set.h"

#include <algorithm>
#include <exception>
#include <string>

#include "engine_checks.h"
#include "gmlake/error.h"
#include "../common/teardown.h"

namespace gmlake::engine {

ArenaSet::~ArenaSet() {
  for (auto& arena : arenas_) {
    if (!arena->retired) attempt_twice([&] { backend_.address_free(arena->base, arena->virtual_bytes); });
  }
}

Arena& ArenaSet::get_or_make(bool small, StreamId stream) {
  std::uint32_t* slot;
  if (!per_stream_) {
    slot = &shared_[small];
  } else {
    auto [it, inserted] = per_stream_slots_.try_emplace({stream, small}, UINT32_MAX);
    slot = &it->second;
  }
  const std::int64_t now_ns = clock_ != nullptr ? clock_->now_ns() : 0;
  if (*slot != UINT32_MAX) {
    Arena& arena = *arenas_[*slot];
    arena.last_active_ns = now_ns;
    return arena;
  }
  // An arena taken over; else a new one, the empty ones going back beyond kSpareArenas, and all of them when
  // address space runs out.
  std::uintptr_t base = 0;
  std::uint64_t bytes = 0;
  try {
    if (per_stream_ && handover_) {
      if (Arena* taken = take_over(small, stream, now_ns)) {
        taken->last_active_ns = now_ns;
        return *taken;
      }
    }
    if (per_stream_ && empty_stream_arenas() >= kSpareArenas) retire_empty(false);
    bytes = new_arena_bytes();
    try {
      base = backend_.reserve(bytes);
    } catch (const OutOfMemoryError&) {
      const std::exception_ptr full_size = std::current_exception();
      bool reserved = false;
      if (retire_empty(true) != 0) {
        try {
          base = backend_.reserve(bytes);
          reserved = true;
        } catch (const OutOfMemoryError&) {
        }
      }
      if (!reserved && !reserve_smaller(&base, &bytes)) std::rethrow_exception(full_size);
      if (retries_ != nullptr) ++*retries_;
    }
  } catch (...) {  // OutOfMemoryError (no address space left) or Error, as the backend or the Handover said
    if (per_stream_) per_stream_slots_.erase({stream, small});
    throw;
  }
  const StreamId arena_stream = per_stream_ ? stream : 0;
  std::uint32_t id;
  if (!retired_ids_.empty()) {
    id = retired_ids_.back();
    retired_ids_.pop_back();
    arenas_[id] = std::make_unique<Arena>(id, arena_stream, base, bytes, small);
  } else {
    id = static_cast<std::uint32_t>(arenas_.size());
    arenas_.push_back(std::make_unique<Arena>(id, arena_stream, base, bytes, small));
  }
  arenas_[id]->given_seq = ++given_seq_;
  arenas_[id]->last_active_ns = now_ns;
  // The slot may have moved while arenas were retired (per_stream_slots_ is a std::map: its nodes stay put).
  if (!per_stream_) {
    shared_[small] = id;
  } else {
    per_stream_slots_[{stream, small}] = id;
  }
  return *arenas_[id];
}

std::uint64_t ArenaSet::new_arena_bytes() const {
  unsigned halvings = 0;
  for (std::uint64_t n = arenas_.size() - retired_ids_.size(); n >= kFullSizeArenas && halvings < kMaxArenaHalvings;
       n /= 2) {
    ++halvings;
  }
  while (halvings > 0 && ((virtual_bytes_ >> halvings) == 0 ||
                          (virtual_bytes_ >> halvings) % backend_.granularity_bytes() != 0)) {
    --halvings;
  }
  return virtual_bytes_ >> halvings;
}

bool ArenaSet::reserve_smaller(std::uintptr_t* base, std::uint64_t* bytes) {
  const std::uint64_t floor = virtual_bytes_ >> kMaxArenaHalvings;
  for (std::uint64_t smaller = *bytes / 2; smaller >= floor && smaller != 0; smaller /= 2) {
    if (smaller % backend_.granularity_bytes() != 0) return false;
    try {
      *base = backend_.reserve(smaller);
      *bytes = smaller;
      return true;
    } catch (const OutOfMemoryError&) {
    }
  }
  return false;
}

Arena* ArenaSet::take_over(bool small, StreamId stream, std::int64_t now_ns) {
  // The empty arenas of this pool, the one held longest first: a job that makes its streams anew each step makes
  // them in the same order, so each new stream finds the layout of the one made in its place before. With a quiet
  // time, the arenas of streams quiet that long come first, empty or keeping at most kMaxKeptBlocks blocks, the
  // quietest first (a job's streams went quiet in the order it made them, and its new ones come in that order:
  // each finds the arena of the stream in its role before); a live stream's empty arena last.
  struct Candidate {
    int rank;            // 0: its stream quiet (empty or keeping a few blocks); 1: empty, its stream live
    std::int64_t order;  // the stream's last activity (rank 0), else given_seq
    std::uint32_t id;
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank < o.rank : order != o.order ? order < o.order : id < o.id;
    }
  };
  std::vector<Candidate> candidates;
  for (const auto& [key, id] : per_stream_slots_) {
    if (id == UINT32_MAX || key.second != small) continue;  // UINT32_MAX: the slot get() is filling
    const Arena& arena = *arenas_[id];
    const std::int64_t active_ns = clock_ != nullptr ? last_active_ns(key.first) : 0;
    const bool quiet = clock_ != nullptr && now_ns - active_ns >= quiet_ns_;
    if (quiet && arena.blocks - arena.kept_blocks <= kMaxKeptBlocks) {  // its own stream's blocks
      candidates.push_back({0, active_ns, id});
    } else if (arena.blocks == 0) {
      candidates.push_back({1, static_cast<std::int64_t>(arena.given_seq), id});
    }
  }
  std::sort(candidates.begin(), candidates.end());
  for (const Candidate& c : candidates) {
    Arena& arena = *arenas_[c.id];
    const std::uint64_t tick = handover_(arena);  // throws: nothing changed
    if (tick == 0) continue;
    per_stream_slots_.erase({arena.stream, small});
    per_stream_slots_[{stream, small}] = c.id;
    arena.stream = stream;
    arena.handover_tick = tick;
    arena.given_seq = ++given_seq_;
    ++arena.generation;
    arena.kept_blocks = arena.blocks;
    return &arena;
  }
  return nullptr;
}

std::int64_t ArenaSet::last_active_ns(StreamId stream) const {
  std::int64_t newest = 0;
  for (const bool small : {false, true}) {
    const auto it = per_stream_slots_.find({stream, small});
    if (it != per_stream_slots_.end() && it->second != UINT32_MAX) {
      newest = std::max(newest, arenas_[it->second]->last_active_ns);
    }
  }
  return newest;
}

std::uint64_t ArenaSet::empty_stream_arenas() const {
  std::uint64_t n = 0;
  for (const auto& [key, id] : per_stream_slots_) n += id != UINT32_MAX && arenas_[id]->blocks == 0;
  return n;
}

std::uint64_t ArenaSet::retire_empty(bool wait) {
  if (!per_stream_) return 0;
  if (wait) wait_all_();
  std::uint64_t retired = 0;
  for (auto it = per_stream_slots_.begin(); it != per_stream_slots_.end();) {
    const std::uint32_t id = it->second;
    if (id == UINT32_MAX || arenas_[id]->blocks != 0) {  // UINT32_MAX: the slot get() is filling
      ++it;
      continue;
    }
    Arena& arena = *arenas_[id];
    try {
      if (!unmap_(arena)) {  // queued work may still touch a chunk of it
        ++it;
        continue;
      }
      backend_.address_free(arena.base, arena.virtual_bytes);
    } catch (const Error&) {  // it stays, usable; what was unmapped is free memory
      ++it;
      continue;
    }
    arena.retired = true;
    retired_ids_.push_back(id);
    it = per_stream_slots_.erase(it);
    ++retired;
  }
  return retired;
}

void ArenaSet::check_invariants() const {
  std::vector<int> named(arenas_.size(), 0);  // how many slots name each arena
  auto check_slot = [&](std::uint32_t id, bool small, StreamId stream) {
    if (id >= arenas_.size()) broken("a slot names arena " + std::to_string(id) + ", which does not exist");
    const Arena& a = *arenas_[id];
    if (a.retired) broken("a slot names retired arena " + std::to_string(id));
    if (a.id != id || a.small != small || a.stream != stream)
      broken("arena " + std::to_string(id) + " differs from the slot that names it");
    ++named[id];
  };
  for (bool small : {false, true}) {
    if (per_stream_ && shared_[small] != UINT32_MAX) broken("a per-stream set has a shared slot");
    if (shared_[small] != UINT32_MAX) check_slot(shared_[small], small, 0);
  }
  if (!per_stream_ && !per_stream_slots_.empty()) broken("a shared set has a per-stream slot");
  for (const auto& [key, id] : per_stream_slots_) check_slot(id, key.second, key.first);
  std::vector<int> spare(arenas_.size(), 0);
  for (const std::uint32_t id : retired_ids_) {
    if (id >= arenas_.size() || !arenas_[id]->retired) broken("a spare id names an arena in use");
    ++spare[id];
  }
  for (std::size_t id = 0; id < arenas_.size(); ++id) {
    const Arena& a = *arenas_[id];
    if (!a.retired && named[id] != 1) broken("arena " + std::to_string(id) + " in use is not named by one slot");
    if (a.kept_blocks > a.blocks) broken("arena " + std::to_string(id) + " keeps more blocks than it holds");
    if (!a.retired && (a.given_seq == 0 || a.given_seq > given_seq_))
      broken("arena " + std::to_string(id) + " in use has no place in the order arenas were given out");
    if (a.retired && (spare[id] != 1 || a.pages.mapped_chunks() != 0 || a.blocks != 0))
      broken("retired arena " + std::to_string(id) + " is not a spare id once, or has chunks or blocks");
  }
}

}  // namespace gmlake::engine
