// PoisoningAllocator: a debug wrapper around any Allocator whose backend the CPU can touch (host). Every block
// freed is filled with kPoisonByte; every block handed out is checked to hold nothing but kPoisonByte and 0
// (memory never written reads as 0). Any other byte was written while the memory was free: after a free, or
// past the end of a block. The violation handler is then called; the default one prints the block and the
// offset to stderr and aborts.
//
// What it finds: writes of any value but 0 and 0xDB into freed memory that is handed out again. What it does
// not: reads after free, writes of 0 or 0xDB, writes into memory never handed out again.
// Cost: a pass over each block on allocate and on free (O(size)); it touches every byte, so every block takes
// real memory. For debugging only (GMLAKE_CONF debug:1 in the C API).
//
// Sizes, alignment, streams and errors are the inner allocator's. deallocate of a pointer that is not a live
// block is passed to the inner allocator without touching memory (it throws Error(kInvalidPointer)).
// Thread safety: none, like every Allocator.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "forwarding_allocator.h"
#include "gmlake/allocator.h"

namespace gmlake {

inline constexpr unsigned char kPoisonByte = 0xDB;

struct PoisonViolation {
  std::uintptr_t block;        // the block being handed out
  std::uint64_t size_bytes;    // its size as requested
  std::uint64_t offset_bytes;  // of the first byte that is neither 0 nor kPoisonByte
  unsigned char value;         // that byte
};

class PoisoningAllocator final : public ForwardingAllocator {
 public:
  using ViolationHandler = void (*)(const PoisonViolation&);
  // Prints the violation to stderr and aborts.
  static void abort_on_violation(const PoisonViolation& violation);

  // Throws Error(kConfig) unless inner->backend().host_accessible().
  explicit PoisoningAllocator(std::unique_ptr<Allocator> inner, ViolationHandler on_violation = abort_on_violation);

  void* allocate(std::uint64_t size_bytes, StreamId stream) override;
  void deallocate(void* ptr) override;
  void begin_deferred_free(void* ptr) override;
  void end_deferred_free(void* ptr) override;

 private:
  struct Live {
    std::uint64_t size_bytes;
    bool pending_free;
  };
  void check(void* ptr, std::uint64_t size_bytes) const;

  ViolationHandler on_violation_;
  std::unordered_map<std::uintptr_t, Live> live_;
};

}  // namespace gmlake
