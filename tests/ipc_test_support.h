// Two processes for the IPC tests: a forked child running a function, and length-prefixed messages over pipes.
// The child is the exporter and the parent (this test) the importer: a parent may always ptrace its child
// (Yama's ptrace_scope 1, common on CI hosts, refuses the other way round), which pidfd_getfd needs.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <string>

namespace gmlake::test {

inline bool write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

inline bool read_all(int fd, void* data, std::size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

inline bool send_message(int fd, const std::string& message) {
  const std::uint64_t n = message.size();
  return write_all(fd, &n, sizeof n) && write_all(fd, message.data(), message.size());
}

// The next message, or "<eof>" when the other side closed the pipe (it exited).
inline std::string receive_message(int fd) {
  std::uint64_t n = 0;
  if (!read_all(fd, &n, sizeof n) || n > (1u << 30)) return "<eof>";
  std::string message(n, '\0');
  if (!read_all(fd, message.data(), n)) return "<eof>";
  return message;
}

// A child process running body(to_parent, from_parent); it exits with body's return value (never returns into
// the test framework).
class ForkedChild {
 public:
  explicit ForkedChild(const std::function<int(int to_parent, int from_parent)>& body) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) ADD_FAILURE() << "pipe failed";
    pid_ = fork();
    if (pid_ == 0) {
      ::close(up[0]);
      ::close(down[1]);
      int code = 99;
      try {
        code = body(up[1], down[0]);
      } catch (...) {
        code = 98;
      }
      _exit(code);
    }
    ::close(up[1]);
    ::close(down[0]);
    from_child_ = up[0];
    to_child_ = down[1];
  }
  ~ForkedChild() {
    if (pid_ > 0 && !waited_) wait();
    ::close(from_child_);
    ::close(to_child_);
  }
  ForkedChild(const ForkedChild&) = delete;
  ForkedChild& operator=(const ForkedChild&) = delete;

  std::string receive() { return receive_message(from_child_); }
  // The pipe the child's messages come on (to poll it beside other descriptors).
  int from_child() const { return from_child_; }
  bool send(const std::string& message) { return send_message(to_child_, message); }
  // The child's exit status (-1 when it did not exit normally).
  int wait() {
    ::close(to_child_);
    to_child_ = -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int from_child_ = -1;
  int to_child_ = -1;
  bool waited_ = false;
};

}  // namespace gmlake::test
