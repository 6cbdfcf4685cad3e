#include "runner/launch/run_identity.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <ctime>

#include "core/clock.h"
#include "core/subprocess.h"

namespace partrain::launch {
namespace {

StatusOr<std::string> random_hex(size_t bytes) {
  UniqueFd fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return failed("cannot open /dev/urandom: {}", strerror(errno));
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::read(fd.get(), raw.data() + got, bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return failed("cannot read /dev/urandom: {}", strerror(errno));
    got += static_cast<size_t>(n);
  }
  std::string hex;
  for (char c : raw) hex += fmt::format("{:02x}", static_cast<unsigned char>(c));
  return hex;
}

}  // namespace

StatusOr<std::string> random_token() { return random_hex(16); }

StatusOr<std::string> new_run_id() {
  ASSIGN_OR_RETURN(std::string suffix, random_hex(2));
  std::time_t now = static_cast<std::time_t>(wall_ns() / 1000000000);
  std::tm local{};
  localtime_r(&now, &local);
  std::array<char, 32> stamp{};
  std::strftime(stamp.data(), stamp.size(), "%Y%m%d-%H%M%S", &local);
  return fmt::format("{}-{}", stamp.data(), suffix);
}

}  // namespace partrain::launch
