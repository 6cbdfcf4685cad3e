// The directory for a run's temporary files (the launcher's flight dumps, a --json run's
// summary, a collector socket's fallback directory): $TMPDIR when it names a directory this
// user can write into (made absolute: the paths are handed to ranks that may change directory),
// else /tmp, as Python's tempfile falls back. A TMPDIR that does not exist
// or is read-only broke launches (std::filesystem::temp_directory_path throws on the first).
#pragma once

#include <filesystem>

namespace partrain {

std::filesystem::path temporary_directory();

}  // namespace partrain
