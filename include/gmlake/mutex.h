// The lock gmlake uses: absl::Mutex, taken through gmlake::MutexLock, with clang's thread-safety annotations
// (ABSL_GUARDED_BY on what a mutex guards, ABSL_EXCLUSIVE_LOCKS_REQUIRED on functions called with it held),
// which clang builds check (-Wthread-safety, CMakeLists.txt).
//
// Take an absl::Mutex only through MutexLock, never through absl::MutexLock or Mutex::Lock: the abseil the
// build links (Debian's libabsl) is not compiled with ThreadSanitizer, so TSan cannot see the ordering a Mutex
// gives and would report every guarded access as a race. In TSan builds MutexLock tells it (__tsan_acquire
// after each lock, __tsan_release before each unlock, on the mutex's address); elsewhere it is absl::MutexLock.
// Thread safety: that of absl::Mutex (not recursive; released by the thread that took it).
#pragma once

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#ifdef ABSL_HAVE_THREAD_SANITIZER
#include <sanitizer/tsan_interface.h>
#endif

namespace gmlake {

// Holds `mu` from construction to destruction.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(absl::Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
#ifdef ABSL_HAVE_THREAD_SANITIZER
    __tsan_acquire(mu_);
#endif
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
#ifdef ABSL_HAVE_THREAD_SANITIZER
    __tsan_release(mu_);
#endif
    mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  absl::Mutex* const mu_;
};

}  // namespace gmlake
