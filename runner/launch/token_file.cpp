#include "runner/launch/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "runner/launch/run_identity.h"
#include "runner/rendezvous/protocol.h"

namespace partrain::launch {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(100);

StatusOr<std::string> read_token(const std::string& path) {
  struct stat info{};
  if (::stat(path.c_str(), &info) != 0) {
    return make_status(StatusCode::kNotFound, "--token-file {}: {}", path, std::strerror(errno));
  }
  if ((info.st_mode & 077) != 0) {
    return invalid_argument(
        "--token-file {} can be read by other users (mode {:03o}): the token is the run's secret; "
        "`chmod 600 {}`",
        path, info.st_mode & 0777, path);
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  if (token.empty()) {
    return invalid_argument("--token-file {} is empty: put the run's secret in it, or remove it "
                            "and node 0 writes a fresh one",
                            path);
  }
  if (token.size() > rendezvous::kMaxTokenBytes) {
    return invalid_argument("--token-file {} holds {} bytes, more than a token's {}", path,
                            token.size(), rendezvous::kMaxTokenBytes);
  }
  return token;
}

// Written under a temporary name and linked into place, so a reader never sees half a token
// and two writers cannot both win.
Status create_token_file(const std::string& path) {
  ASSIGN_OR_RETURN(std::string token, random_token());
  const std::string temporary = fmt::format("{}.{}.tmp", path, ::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return invalid_argument("--token-file {}: cannot create it: {}", path, std::strerror(errno));
  }
  const std::string line = token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  const int linked = written ? ::link(temporary.c_str(), path.c_str()) : -1;
  const int error = errno;
  ::unlink(temporary.c_str());
  if (!written) return failed("--token-file {}: cannot write it", path);
  if (linked != 0 && error != EEXIST) {
    return invalid_argument("--token-file {}: cannot create it: {}", path, std::strerror(error));
  }
  return Status::ok();
}

}  // namespace

StatusOr<std::string> token_from_file(const std::string& path, bool create, Nanoseconds wait,
                                      const std::function<bool()>& interrupted) {
  if (create && ::access(path.c_str(), F_OK) != 0) RETURN_IF_ERROR(create_token_file(path));
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    auto token = read_token(path);
    if (token.is_ok() || token.status().code() != StatusCode::kNotFound) return token;
    if (interrupted && interrupted()) return failed("interrupted while waiting for {}", path);
    if (std::chrono::steady_clock::now() >= deadline) {
      return timeout_error(
          "--token-file {} did not appear within {}: node 0's launcher writes it; give every node "
          "the same path in a directory they share",
          path, format_duration(wait));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace partrain::launch
