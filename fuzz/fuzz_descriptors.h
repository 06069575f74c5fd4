// Shared by the fuzz targets that open descriptors (sockets, memfds): how many this process has open, so that a
// target can check that an input leaked none.
#pragma once

#include <dirent.h>

#include <cstdio>
#include <cstdlib>

namespace gmlake::fuzz {

// Descriptors open in this process now (entries of /proc/self/fd, less the one that reads it). Aborts, as a
// finding, when /proc/self/fd cannot be read.
inline int open_descriptors() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) {
    std::fprintf(stderr, "gmlake fuzz finding: cannot read /proc/self/fd\n");
    std::abort();
  }
  int n = 0;
  while (const dirent* e = ::readdir(dir)) n += e->d_name[0] != '.' ? 1 : 0;
  ::closedir(dir);
  return n - 1;
}

}  // namespace gmlake::fuzz
