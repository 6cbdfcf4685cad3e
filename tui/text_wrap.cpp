#include "tui/text_wrap.h"

namespace partrain::tui {

std::vector<std::string> wrap_words(const std::string& prefix, const std::string& text, int width,
                                    int indent) {
  std::vector<std::string> lines;
  std::string line = prefix;
  bool fresh = true;  // no word on this line yet
  for (size_t pos = 0; pos <= text.size();) {
    size_t next = text.find(' ', pos);
    if (next == std::string::npos) next = text.size();
    const std::string word = text.substr(pos, next - pos);
    pos = next + 1;
    if (word.empty()) continue;
    if (!fresh && static_cast<int>(line.size() + 1 + word.size()) > width) {
      lines.push_back(line);
      line.assign(static_cast<size_t>(indent), ' ');
      fresh = true;
    }
    if (!fresh) line += ' ';
    line += word;
    fresh = false;
  }
  if (!fresh) lines.push_back(line);
  return lines;
}

}  // namespace partrain::tui
