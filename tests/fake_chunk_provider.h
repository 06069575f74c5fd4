// FakeChunkProvider: a ChunkProvider in this process for the engine's tests (include/gmlake/chunk_provider.h),
// no socket: each chunk is created by a host backend of its own (the lender's memory, at most `limit_bytes` at
// once: OutOfMemoryError past it), exported and imported into the engine's backend, as the lake does across
// processes. The test recalls chunks (recall) and makes the provider go (go).
// Thread safety: none.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gmlake/chunk_provider.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"

namespace gmlake::test {

class FakeChunkProvider final : public ChunkProvider {
 public:
  // Imports into `into` (must outlive this and import: host); the lender has `limit_bytes` (0: no limit).
  FakeChunkProvider(Backend& into, std::uint64_t limit_bytes) : into_(into), lender_(into.granularity_bytes(), limit_bytes) {}
  ~FakeChunkProvider() override {
    for (const auto& [value, lent] : chunks_) {
      try {
        into_.release(ChunkHandle{value});
        lender_.release(lent.chunk);
      } catch (...) {
      }
    }
  }

  bool available() const override { return !gone_; }
  std::optional<ChunkHandle> create(std::uint64_t size_bytes) override {
    asked_.push_back(size_bytes);
    if (gone_) return std::nullopt;
    const ChunkHandle lent = lender_.create(size_bytes);  // OutOfMemoryError past the limit
    try {
      const ExportedChunk exported = lender_.export_chunk(lent);
      const ChunkHandle chunk = into_.import_chunk(::dup(exported.fd), exported.fd_offset_bytes, size_bytes);
      chunks_.emplace(chunk.value, Lent{lent, size_bytes});
      return chunk;
    } catch (...) {
      lender_.release(lent);
      throw;
    }
  }
  void release(ChunkHandle chunk) override {
    const auto it = chunks_.find(chunk.value);
    if (it == chunks_.end()) {
      throw Error(ErrorCode::kInvalidArgument, "fake provider: chunk " + std::to_string(chunk.value) + " is not lent");
    }
    into_.release(chunk);  // throws while mapped: nothing changed
    lender_.release(it->second.chunk);
    chunks_.erase(it);
  }
  bool may_recall() const override { return !recalls_.empty() || (gone_ && !gone_told_ && !chunks_.empty()); }
  std::vector<ChunkHandle> recalled() override {
    std::vector<ChunkHandle> out;
    if (gone_ && !gone_told_) {
      gone_told_ = true;
      for (const auto& [value, lent] : chunks_) out.push_back(ChunkHandle{value});
    } else {
      for (const ChunkHandle c : recalls_) {
        if (chunks_.contains(c.value)) out.push_back(c);
      }
    }
    recalls_.clear();
    return out;
  }
  std::uint64_t live_bytes() const override {
    std::uint64_t bytes = 0;
    for (const auto& [value, lent] : chunks_) bytes += lent.size_bytes;
    return bytes;
  }
  std::uint64_t refusals() const override { return 0; }

  // The test's side: asks for `chunk` back; makes the provider go (every chunk recalled once, none lent after).
  void recall(ChunkHandle chunk) { recalls_.push_back(chunk); }
  void go() { gone_ = true; }
  // The chunks lent now, and the sizes asked by create() so far, in order.
  std::vector<ChunkHandle> lent() const {
    std::vector<ChunkHandle> out;
    for (const auto& [value, lent] : chunks_) out.push_back(ChunkHandle{value});
    return out;
  }
  const std::vector<std::uint64_t>& asked() const { return asked_; }
  const HostBackend& lender() const { return lender_; }

 private:
  struct Lent {
    ChunkHandle chunk;  // the lender's
    std::uint64_t size_bytes;
  };
  Backend& into_;
  HostBackend lender_;
  absl::flat_hash_map<std::uint64_t, Lent> chunks_;  // imported handle -> the lender's chunk
  std::vector<ChunkHandle> recalls_;
  std::vector<std::uint64_t> asked_;
  bool gone_ = false;
  bool gone_told_ = false;
};

}  // namespace gmlake::test
