// Where a command writes a file it was given: through a symbolic link to the file it names, and
// what kind of thing is there, so that replacing an output never replaces a link or a device.
#pragma once

#include <filesystem>

namespace partrain {

// `path` with its symbolic links followed (also a link to a file not yet made); `path` itself
// when it is no link. Replacing the result replaces the link's target and keeps the link, as a
// shell's `>` does.
std::filesystem::path follow_links(const std::filesystem::path& path);

// What is at an output path once its links are followed.
enum class OutputKind {
  kAbsent,       // nothing: the output is new
  kRegularFile,  // a file to replace (with --force)
  kDirectory,
  kSpecial,      // a device, FIFO or socket: written into, never replaced (/dev/null, a pipe)
};
OutputKind output_kind(const std::filesystem::path& path);

}  // namespace partrain
