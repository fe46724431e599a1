// Output files (common/output_file.h): a regular file is replaced whole, a symbolic link keeps
// being a link to the file written, a device or FIFO is written through and never replaced, and
// an output that is the input is refused.
#include "common/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace spillway {
namespace {

std::string Scratch(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/output_file_test_" + name;
  std::remove(path.c_str());
  return path;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(OutputFile, ARegularFileIsReplacedWhole) {
  const std::string path = Scratch("regular");
  { std::ofstream(path) << "a much longer old content"; }
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  EXPECT_EQ(Read(path), "new");
  const std::string fresh = Scratch("fresh");
  ASSERT_TRUE(WriteFileAtomically(fresh, "made").ok());
  EXPECT_EQ(Read(fresh), "made");
}

TEST(OutputFile, ASymbolicLinkStaysALinkAndItsTargetIsWritten) {
  const std::string target = Scratch("target"), link = Scratch("link");
  { std::ofstream(target) << "old"; }
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(link, "through the link").ok());
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link was replaced by a file";
  EXPECT_EQ(Read(target), "through the link");

  const std::string dangling = Scratch("dangling");
  ASSERT_EQ(::symlink((target + ".missing/x").c_str(), dangling.c_str()), 0);
  const absl::Status s = WriteFileAtomically(dangling, "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot write '" + dangling + "': a symbolic link"), std::string::npos)
      << s;
}

TEST(OutputFile, ADeviceIsWrittenThroughNeverReplaced) {
  // /dev/null takes the bytes and stays a character device; /dev/full refuses them: one line.
  ASSERT_TRUE(WriteFileAtomically("/dev/null", "dropped").ok());
  struct stat st;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  const absl::Status full = WriteFileAtomically("/dev/full", std::string(8192, 'x'));
  EXPECT_FALSE(full.ok());
  EXPECT_NE(full.message().find("cannot write '/dev/full': "), std::string::npos) << full;
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // A link to a device: written through too.
  const std::string link = Scratch("null_link");
  ASSERT_EQ(::symlink("/dev/null", link.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(link, "dropped").ok());
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

TEST(OutputFile, AFifoNobodyReadsIsAnErrorNotAHangAndADirectoryIsRefused) {
  const std::string fifo = Scratch("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const absl::Status s = WriteFileAtomically(fifo, "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("a FIFO that nobody reads"), std::string::npos) << s;
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  const absl::Status dir = WriteFileAtomically(::testing::TempDir(), "x");
  EXPECT_FALSE(dir.ok());
  EXPECT_NE(dir.message().find("it is a directory"), std::string::npos) << dir;
}

TEST(OutputFile, AnOutputThatIsTheInputIsRefused) {
  const std::string input = Scratch("input"), other = Scratch("other"), link = Scratch("in_link");
  { std::ofstream(input) << "trace"; }
  ASSERT_EQ(::symlink(input.c_str(), link.c_str()), 0);
  EXPECT_TRUE(CheckOutputIsNotInput(other, input, "the trace").ok());  // does not exist yet
  { std::ofstream(other) << "x"; }
  EXPECT_TRUE(CheckOutputIsNotInput(other, input, "the trace").ok());
  const absl::Status same = CheckOutputIsNotInput(input, input, "the trace");
  EXPECT_FALSE(same.ok());
  EXPECT_NE(same.message().find("is the trace itself"), std::string::npos) << same;
  EXPECT_FALSE(CheckOutputIsNotInput(link, input, "the trace").ok());
  EXPECT_EQ(Read(input), "trace");
}

}  // namespace
}  // namespace spillway
