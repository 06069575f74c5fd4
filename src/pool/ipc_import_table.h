// IpcImportTable: the blocks other processes exported (include/gmlake/ipc.h) that this process mapped, per
// device. Imports live apart from the pools: each device's behind a lock of its own, through a backend of their
// own (made like a pool's from the session's backend and page_bytes, since a pool's backend would fail the
// policy's invariants, which count its mappings), and they outlive the session: an import stays mapped until
// closed, gmlake_shutdown included.
//
// Thread safety: every function may be called from any thread; calls on one device serialize on its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gmlake/backend.h"
#include "gmlake/config.h"
#include "gmlake/ipc.h"
#include "gmlake/mutex.h"

namespace gmlake {

class IpcImportTable {
 public:
  // A table for devices 0 .. devices - 1.
  explicit IpcImportTable(std::size_t devices);
  IpcImportTable(const IpcImportTable&) = delete;
  IpcImportTable& operator=(const IpcImportTable&) = delete;

  // Maps the block `handle` describes on `device` (0 .. devices - 1: the caller checks it) through a backend
  // made from `config` (its backend for `device`, and page_bytes; made anew when they changed and nothing is
  // open) and returns its start. Throws what make_backend and IpcImports::open throw (ipc.h), nothing left open.
  void* open(int device, const Config& config, std::string_view handle);
  // Unmaps an import open returned on `device`. Throws Error(kInvalidPointer) when nothing was ever imported on
  // the device, and what IpcImports::close throws (ipc.h).
  void close(int device, void* ptr);

 private:
  struct DeviceImports {
    absl::Mutex mutex;
    std::string backend_name ABSL_GUARDED_BY(mutex);  // what backend and imports were made for
    std::uint64_t granularity_bytes ABSL_GUARDED_BY(mutex) = 0;
    std::unique_ptr<Backend> backend ABSL_GUARDED_BY(mutex);
    std::unique_ptr<IpcImports> imports ABSL_GUARDED_BY(mutex);
  };
  std::unique_ptr<DeviceImports[]> devices_;
};

}  // namespace gmlake
