// Prose on the dashboard, word-wrapped to a view's width (findings, notes): a sentence cut at the
// screen's edge loses the part that says what to do.
#pragma once

#include <string>
#include <vector>

namespace partrain::tui {

// `text` after `prefix`, in lines of at most `width` columns where its words allow; later lines
// start with `indent` spaces. A word longer than a line gets one of its own.
std::vector<std::string> wrap_words(const std::string& prefix, const std::string& text, int width,
                                    int indent);

}  // namespace partrain::tui
