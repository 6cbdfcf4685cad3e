#include "core/input_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/byte_size.h"

namespace partrain {

StatusOr<std::string> read_input_text(std::istream& in, std::string_view name, size_t max_bytes) {
  std::string text;
  char chunk[64 * 1024];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      return make_status(
          StatusCode::kUnreadable,
          "cannot read {}: it holds more than {}, far more than a config, model, GPU or cluster "
          "file (a few KiB; a device such as /dev/zero never ends): name the file itself",
          name, format_bytes(max_bytes));
    }
  }
  if (in.bad()) {
    return make_status(StatusCode::kUnreadable, "cannot read {}: {}", name, std::strerror(errno));
  }
  return text;
}

StatusOr<std::string> read_input_file(const std::filesystem::path& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_status(StatusCode::kUnreadable, "cannot read {}: {}", path.string(),
                       std::strerror(errno));
  }
  return read_input_text(in, path.string(), max_bytes);
}

}  // namespace partrain
