#include "pool/ipc_import_table.h"

#include "gmlake/backend_factory.h"
#include "gmlake/error.h"

namespace gmlake {

IpcImportTable::IpcImportTable(std::size_t devices) : devices_(std::make_unique<DeviceImports[]>(devices)) {}

void* IpcImportTable::open(int device, const Config& config, std::string_view handle) {
  const std::string name = backend_for_device(config.backend, device);
  DeviceImports& entry = devices_[static_cast<std::size_t>(device)];
  MutexLock lock(&entry.mutex);
  if (!entry.imports || (entry.imports->open_count() == 0 &&
                         (entry.backend_name != name || entry.granularity_bytes != config.page_bytes))) {
    entry.imports.reset();
    entry.backend = make_backend(name, config.page_bytes);
    entry.imports = std::make_unique<IpcImports>(*entry.backend);
    entry.backend_name = name;
    entry.granularity_bytes = config.page_bytes;
  }
  return entry.imports->open(handle);
}

void IpcImportTable::close(int device, void* ptr) {
  DeviceImports& entry = devices_[static_cast<std::size_t>(device)];
  MutexLock lock(&entry.mutex);
  if (!entry.imports) {
    throw Error(ErrorCode::kInvalidPointer, "gmlake_ipc_close: nothing was ever imported on device " +
                                                std::to_string(device));
  }
  entry.imports->close(ptr);
}

}  // namespace gmlake
