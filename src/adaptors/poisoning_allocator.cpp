#include "poisoning_allocator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gmlake/error.h"

namespace gmlake {
namespace {

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

constexpr std::uint64_t kLowBits = 0x7F7F7F7F7F7F7F7FULL;
constexpr std::uint64_t kHighBits = ~kLowBits;
constexpr std::uint64_t kPoisonWord = 0x0101010101010101ULL * kPoisonByte;

// 0x80 in each byte of `v` that is zero, 0 in the others (exact: no carry crosses bytes).
constexpr std::uint64_t zero_byte_mask(std::uint64_t v) { return ~(((v & kLowBits) + kLowBits) | v | kLowBits); }

}  // namespace

void PoisoningAllocator::abort_on_violation(const PoisonViolation& v) {
  std::fprintf(stderr,
               "gmlake debug: block %#llx (%llu bytes) being handed out holds byte 0x%02x at offset %llu: memory "
               "was written while free (after a free, or past the end of a block)\n",
               static_cast<unsigned long long>(v.block), static_cast<unsigned long long>(v.size_bytes), v.value,
               static_cast<unsigned long long>(v.offset_bytes));
  std::abort();
}

PoisoningAllocator::PoisoningAllocator(std::unique_ptr<Allocator> inner, ViolationHandler on_violation)
    : ForwardingAllocator(std::move(inner)), on_violation_(on_violation) {
  if (!backend().host_accessible()) {
    throw Error(ErrorCode::kConfig, "gmlake config: debug: needs a backend the CPU can touch (host), not " +
                                        std::string(backend().name()));
  }
}

void* PoisoningAllocator::allocate(std::uint64_t size_bytes, StreamId stream) {
  void* p = inner().allocate(size_bytes, stream);
  if (p == nullptr) return p;
  try {
    live_.emplace(address(p), Live{size_bytes, false});
  } catch (...) {
    inner().deallocate(p);
    throw;
  }
  check(p, size_bytes);
  return p;
}

void PoisoningAllocator::check(void* ptr, std::uint64_t size_bytes) const {
  const auto* bytes = static_cast<const unsigned char*>(ptr);
  std::uint64_t i = 0;
  // Eight bytes at a time while every byte is 0 or the poison (blocks are 512 B-aligned).
  constexpr std::uint64_t kWordBytes = sizeof(std::uint64_t);
  for (; i + kWordBytes <= size_bytes; i += kWordBytes) {
    std::uint64_t word;
    std::memcpy(&word, bytes + i, kWordBytes);
    if ((zero_byte_mask(word) | zero_byte_mask(word ^ kPoisonWord)) != kHighBits) break;
  }
  for (; i < size_bytes; ++i) {
    if (bytes[i] != 0 && bytes[i] != kPoisonByte) {
      on_violation_({address(ptr), size_bytes, i, bytes[i]});
      return;
    }
  }
}

void PoisoningAllocator::deallocate(void* ptr) {
  const auto it = live_.find(address(ptr));
  if (it == live_.end() || it->second.pending_free) {
    inner().deallocate(ptr);  // throws Error(kInvalidPointer) (or does nothing for nullptr)
    return;
  }
  std::memset(ptr, kPoisonByte, it->second.size_bytes);
  inner().deallocate(ptr);
  live_.erase(it);
}

void PoisoningAllocator::begin_deferred_free(void* ptr) {
  inner().begin_deferred_free(ptr);  // the stream may still use the memory: poisoned when the free completes
  const auto it = live_.find(address(ptr));
  if (it != live_.end()) it->second.pending_free = true;
}

void PoisoningAllocator::end_deferred_free(void* ptr) {
  const auto it = live_.find(address(ptr));
  if (it == live_.end() || !it->second.pending_free) {
    inner().end_deferred_free(ptr);  // throws Error(kInvalidPointer)
    return;
  }
  std::memset(ptr, kPoisonByte, it->second.size_bytes);
  inner().end_deferred_free(ptr);
  live_.erase(it);
}

}  // namespace gmlake
