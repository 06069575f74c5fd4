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

}  // namespace
}  // namespace gmlake::lake
