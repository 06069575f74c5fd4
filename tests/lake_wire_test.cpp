// The lake's wire format (src/lake/lake_wire.*): messages and descriptors over a SOCK_SEQPACKET socket pair.
#include "lake/lake_wire.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"

namespace gmlake::lake {
namespace {

class LakeWireTest : public ::testing::Test {
 protected:
  LakeWireTest() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends_), 0); }
  ~LakeWireTest() override {
    for (const int e : ends_) {
      if (e >= 0) ::close(e);
    }
  }
  int ends_[2] = {-1, -1};
};

TEST_F(LakeWireTest, AGrantArrivesWholeWithItsDescriptor) {
  const int memfd = ::memfd_create("lake-wire-test", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(::ftruncate(memfd, 4096), 0);
  const Message sent{MessageType::kGrant, 7, 2 * 1024 * 1024, 4096, 0};
  ASSERT_TRUE(send_message(ends_[0], sent, memfd));
  ::close(memfd);  // the receiver's copy keeps the file
  int fd = -1;
  const std::optional<Message> got = receive_message(ends_[1], &fd);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->type, MessageType::kGrant);
  EXPECT_EQ(got->loan_id, 7u);
  EXPECT_EQ(got->size_bytes, 2u * 1024 * 1024);
  EXPECT_EQ(got->fd_offset_bytes, 4096u);
  ASSERT_GE(fd, 0);
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 4096);
  ::close(fd);
}

TEST_F(LakeWireTest, TheOtherSideClosingIsEndOfFileNotAnError) {
  ::close(ends_[0]);
  ends_[0] = -1;
  EXPECT_TRUE(wait_readable(ends_[1], 0)) << "end of file is readable at once";
  int fd = 7;
  EXPECT_FALSE(receive_message(ends_[1], &fd).has_value());
  EXPECT_EQ(fd, -1);
  EXPECT_FALSE(send_message(ends_[1], Message{MessageType::kReturn, 1, 0, 0, 0})) << "peer gone: false, no SIGPIPE";
}

TEST_F(LakeWireTest, AShortOrForeignPacketIsRefused) {
  const char shorter[10] = {};
  ASSERT_EQ(::send(ends_[0], shorter, sizeof shorter, 0), static_cast<ssize_t>(sizeof shorter));
  int fd = -1;
  test::expect_error([&] { receive_message(ends_[1], &fd); }, ErrorCode::kInvalidArgument, "10 bytes");
  unsigned char foreign[kMessageBytes] = {'H', 'T', 'T', 'P'};
  ASSERT_EQ(::send(ends_[0], foreign, sizeof foreign, 0), static_cast<ssize_t>(sizeof foreign));
  test::expect_error([&] { receive_message(ends_[1], &fd); }, ErrorCode::kInvalidArgument, "wrong magic");
  EXPECT_FALSE(wait_readable(ends_[1], 0)) << "each bad packet was consumed";
}

TEST_F(LakeWireTest, ADescriptorWithAnythingButAGrantIsRefusedAndClosed) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  ASSERT_TRUE(send_message(ends_[0], Message{MessageType::kRecall, 3, 0, 0, 0}, pipe_fds[0]));
  ::close(pipe_fds[0]);
  int fd = -1;
  test::expect_error([&] { receive_message(ends_[1], &fd); }, ErrorCode::kInvalidArgument, "only with it");
  EXPECT_EQ(fd, -1);
  char byte = 0;
  const auto previous = ::signal(SIGPIPE, SIG_IGN);  // EPIPE instead of the signal
  EXPECT_EQ(::write(pipe_fds[1], &byte, 1), -1) << "the received read end was closed: no reader is left";
  EXPECT_EQ(errno, EPIPE);
  ::signal(SIGPIPE, previous);
  ::close(pipe_fds[1]);
}

TEST(LakeWire, BadAddressesAndAbsentListenersAreClearErrors) {
  test::expect_error([] { listen_at(""); }, ErrorCode::kInvalidArgument, "empty or longer");
  test::expect_error([] { connect_to(std::string(200, 'x')); }, ErrorCode::kInvalidArgument, "empty or longer");
  test::expect_error([] { connect_to("@gmlake-lake-wire-test-nobody"); }, ErrorCode::kBackend, "no gmlake lender");
  const int listener = listen_at("@gmlake-lake-wire-test-" + std::to_string(::getpid()));
  const int client = connect_to("@gmlake-lake-wire-test-" + std::to_string(::getpid()));
  EXPECT_GE(client, 0);
  ::close(client);
  ::close(listener);
}

TEST(LakeWire, APathSocketIsCreatedOwnerOnly) {
  const std::string path = "/tmp/gmlake-lake-wire-test-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  const mode_t previous = ::umask(0);  // the widest umask: the mode comes from listen_at, not from the umask
  const int listener = listen_at(path);
  ::umask(previous);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u) << std::oct << (st.st_mode & 0777);
  ::close(listener);
  ::unlink(path.c_str());
}

TEST_F(LakeWireTest, PeerCredentialsAreTheKernelsRecordOfTheOtherEnd) {
  const PeerCredentials peer = peer_credentials(ends_[0]);
  EXPECT_EQ(peer.pid, ::getpid());
  EXPECT_EQ(peer.uid, ::geteuid());
  EXPECT_EQ(peer.gid, ::getegid());
  test::expect_error([] { peer_credentials(-1); }, ErrorCode::kBackend, "SO_PEERCRED");
}

TEST(LakeWire, OnlyTheOwnUidAndTheListedOnesAreAllowed) {
  const std::uint32_t own = ::geteuid();
  const std::uint32_t other = own == 65534 ? 65533 : 65534;
  EXPECT_TRUE(uid_allowed(own, {}));
  EXPECT_FALSE(uid_allowed(other, {}));
  EXPECT_FALSE(uid_allowed(other, {own, other + 1}));
  EXPECT_TRUE(uid_allowed(other, {12, other}));
}

TEST(LakeWire, AConnectedSocketDoesNotBlockASenderWhoseReaderStopped) {
  const std::string address = "@gmlake-lake-wire-test-full-" + std::to_string(::getpid());
  const int listener = listen_at(address);
  const int client = connect_to(address);
  std::uint64_t sent = 0;
  bool full = false;
  while (!full && sent < 1'000'000) {  // nobody accepts, nobody reads
    try {
      if (!send_message(client, Message{MessageType::kRequest, 0, 4096, 0, 0})) break;
      ++sent;
    } catch (const BackendError& e) {
      full = std::string(e.what()).find("EAGAIN") != std::string::npos ||
             std::string(e.what()).find("errno 11") != std::string::npos;
      if (!full) ADD_FAILURE() << e.what();
    }
  }
  EXPECT_TRUE(full) << "a full socket is an error at once, not a wait (sent " << sent << ")";
  EXPECT_GT(sent, 0u);
  ::close(client);
  ::close(listener);
}

TEST(LakeWire, AListenerThatNeverAcceptsIsAnErrorAfterASecondNotAWaitWithoutEnd) {
  // Found by lake_fuzzer (fuzz/corpus/lake/finding-connect-waited-on-a-full-backlog.bin): with the backlog full,
  // connect(2) blocked forever; a borrower's constructor hung on a lender that was busy or flooded.
  const std::string address = "@gmlake-lake-wire-test-backlog-" + std::to_string(::getpid());
  const int listener = listen_at(address);
  std::vector<int> clients;
  std::string error;
  while (clients.size() < 64 && error.empty()) {
    try {
      clients.push_back(connect_to(address));
    } catch (const BackendError& e) {
      error = e.what();
    }
  }
  EXPECT_NE(error.find("backlog stayed full"), std::string::npos) << clients.size() << " connects; " << error;
  EXPECT_GE(clients.size(), 16u) << "the backlog (16) took as many as it holds";
  for (const int c : clients) ::close(c);
  ::close(listener);
}

}  // namespace
}  // namespace gmlake::lake
