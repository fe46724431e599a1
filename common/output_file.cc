// Output files that never replace what their path names unless it is a regular file (see
// output_file.h).
#include "common/output_file.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace spillway {
namespace {

absl::Status CannotWrite(const std::string& path, std::string_view why) {
  return absl::UnavailableError(absl::StrCat("cannot write '", path, "': ", std::string(why)));
}

// Writes all of `contents` to `fd`; false with errno set on failure.
bool WriteAll(int fd, std::string_view contents) {
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

// A device, FIFO or socket: written through. A FIFO with no reader is an error, not a hang.
absl::Status WriteThrough(const std::string& path, std::string_view contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return CannotWrite(path, errno == ENXIO ? "a FIFO that nobody reads" : std::strerror(errno));
  }
  // Back to blocking writes: a FIFO's reader may be slower than us.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  const bool written = WriteAll(fd, contents);
  const int error = errno;
  const bool closed = ::close(fd) == 0;
  if (!written || !closed) return CannotWrite(path, std::strerror(written ? errno : error));
  return absl::OkStatus();
}

absl::Status ReplaceRegular(const std::string& path, std::string_view contents) {
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return CannotWrite(path, std::strerror(errno));
  const bool written = WriteAll(fd, contents);
  int error = errno;
  const bool closed = ::close(fd) == 0;
  if (written && !closed) error = errno;
  if (!written || !closed || std::rename(temp.c_str(), path.c_str()) != 0) {
    if (written && closed) error = errno;
    std::remove(temp.c_str());
    return CannotWrite(path, std::strerror(error));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  struct stat link_st;
  if (::lstat(path.c_str(), &link_st) != 0) {
    if (errno != ENOENT) return CannotWrite(path, std::strerror(errno));
    return ReplaceRegular(path, contents);  // a new file
  }
  std::string target = path;
  if (S_ISLNK(link_st.st_mode)) {
    // The link stays; what it points to is written (replaced when regular, through otherwise).
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr) {
      return CannotWrite(path, absl::StrCat("a symbolic link whose target cannot be reached (",
                                            std::strerror(errno), ")"));
    }
    target = resolved;
  }
  struct stat st;
  if (::stat(target.c_str(), &st) != 0) return CannotWrite(path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return CannotWrite(path, "it is a directory");
  if (!S_ISREG(st.st_mode)) return WriteThrough(target, contents);
  return ReplaceRegular(target, contents);
}

absl::Status CheckOutputIsNotInput(const std::string& output, const std::string& input,
                                   std::string_view what) {
  struct stat out_st, in_st;
  if (::stat(output.c_str(), &out_st) != 0 || ::stat(input.c_str(), &in_st) != 0) {
    return absl::OkStatus();
  }
  if (out_st.st_dev == in_st.st_dev && out_st.st_ino == in_st.st_ino) {
    return absl::InvalidArgumentError(absl::StrCat("'", output, "' is ", std::string(what),
                                                   " itself ('", input,
                                                   "'): writing it would destroy it; give "
                                                   "another output path"));
  }
  return absl::OkStatus();
}

}  // namespace spillway
