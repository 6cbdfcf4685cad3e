// A scanner of C++ and CUDA source for mutable state that outlives a call (mutable_globals_test):
// namespace-scope variables, static data members and function-local statics that are not const,
// and thread_local ones. It reads tokens, not a syntax tree: comments, literals and preprocessor
// lines are dropped, braces are told apart (namespace, class, function body, initializer) by the
// statement before them, and each declaration is judged by its scope's rule. What it cannot see
// (a variable declared by a macro, a function pointer in a typedef'd form) it lets pass.
#pragma once

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace partrain::testing::source_scan {

struct Token {
  std::string text;
  int line = 0;
};

// The source without comments, string and character literals (each left as "" or ''), and
// preprocessor lines; line breaks kept, so tokens keep their line numbers.
inline std::string strip(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  size_t i = 0;
  bool line_start = true;
  const auto keep_newlines = [&](size_t from, size_t to) {
    for (size_t j = from; j < to && j < source.size(); ++j) {
      if (source[j] == '\n') out += '\n';
    }
  };
  while (i < source.size()) {
    const char c = source[i];
    if (line_start && c == '#') {  // a directive, with its continuation lines
      size_t end = i;
      while (end < source.size() && !(source[end] == '\n' && source[end - 1] != '\\')) ++end;
      keep_newlines(i, end);
      i = end;
      continue;
    }
    if (c == '\n') {
      out += c;
      line_start = true;
      ++i;
      continue;
    }
    if (!std::isspace(static_cast<unsigned char>(c))) line_start = false;
    if (source.substr(i, 2) == "//") {
      while (i < source.size() && source[i] != '\n') ++i;
      continue;
    }
    if (source.substr(i, 2) == "/*") {
      const size_t end = std::min(source.find("*/", i + 2), source.size() - 2) + 2;
      keep_newlines(i, end);
      i = end;
      continue;
    }
    const bool raw = c == 'R' && i + 1 < source.size() && source[i + 1] == '"' &&
                     (i == 0 || !(std::isalnum(static_cast<unsigned char>(source[i - 1])) ||
                                  source[i - 1] == '_'));
    if (raw) {  // R"delim( ... )delim"
      const size_t open = source.find('(', i + 2);
      const std::string closing = ")" + std::string(source.substr(i + 2, open - i - 2)) + "\"";
      const size_t end = std::min(source.find(closing, open), source.size()) + closing.size();
      keep_newlines(i, end);
      out += "\"\"";
      i = end;
      continue;
    }
    if (c == '"' || c == '\'') {
      const bool digit_separator =  // 1'000'000
          c == '\'' && i > 0 && std::isxdigit(static_cast<unsigned char>(source[i - 1])) &&
          i + 1 < source.size() && std::isxdigit(static_cast<unsigned char>(source[i + 1]));
      if (digit_separator) {
        ++i;
        continue;
      }
      size_t j = i + 1;
      while (j < source.size() && source[j] != c && source[j] != '\n') j += source[j] == '\\' ? 2 : 1;
      out += c;
      out += c;
      i = j + 1;
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

inline std::vector<Token> tokenize(std::string_view source) {
  const std::string text = strip(source);
  static const std::vector<std::string> kPunctuators = {
      "<<=", ">>=", "->*", "...", "::", "->", "==", "!=", "<=", ">=", "&&", "||", "+=", "-=",
      "*=",  "/=",  "%=",  "&=",  "|=", "^=", "++", "--", ".*"};
  std::vector<Token> tokens;
  int line = 1;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      while (end < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_' ||
              (std::isdigit(static_cast<unsigned char>(c)) && text[end] == '.'))) {
        ++end;
      }
    } else if (c == '"' || c == '\'') {
      end = i + 2;
    } else {
      for (const std::string& p : kPunctuators) {
        if (text.compare(i, p.size(), p) == 0) {
          end = i + p.size();
          break;
        }
      }
    }
    tokens.push_back({text.substr(i, end - i), line});
    i = end;
  }
  return tokens;
}

struct Finding {
  std::string name;  // the variable
  int line = 0;
  std::string declaration;  // its tokens up to the initializer, joined by spaces
};

enum class Scope { kNamespace, kClass, kFunction };

inline bool is_identifier(const std::string& t) {
  return !t.empty() && (std::isalpha(static_cast<unsigned char>(t[0])) || t[0] == '_');
}

// Walks the tokens' scopes (namespace, class, function body; initializers and lambdas are
// function scope) and judges each declaration statement by its scope's rule.
class Scanner {
 public:
  explicit Scanner(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  std::vector<Finding> run() {
    size_t i = 0;
    while (i < tokens_.size()) scan(i, Scope::kNamespace);  // a stray '}' ends one pass only
    return findings_;
  }

 private:
  enum class Opening { kNamespace, kClass, kEnum, kFunctionBody, kInitializer };

  const std::string& text(size_t index) const { return tokens_[index].text; }

  // One scope's statements, from `i` to its closing brace (consumed) or the end. A statement is
  // the indices of its tokens; an initializer or a class body in braces stands in it as its '{'.
  void scan(size_t& i, Scope scope) {
    std::vector<size_t> statement;
    while (i < tokens_.size()) {
      const std::string& t = text(i);
      if (t == "}") {
        ++i;
        return;
      }
      if (t == ";") {
        evaluate(statement, scope);
        statement.clear();
        ++i;
        continue;
      }
      if (t == "(" || t == "[") {
        consume_group(i, statement);
        continue;
      }
      if (t == ":" && scope == Scope::kClass && statement.size() == 1 &&
          (text(statement[0]) == "public" || text(statement[0]) == "private" ||
           text(statement[0]) == "protected")) {
        statement.clear();
        ++i;
        continue;
      }
      if (t != "{") {
        statement.push_back(i++);
        continue;
      }
      const size_t brace = i++;
      switch (classify(statement, scope, brace)) {
        case Opening::kNamespace:
          scan(i, Scope::kNamespace);
          statement.clear();
          break;
        case Opening::kClass:
          scan(i, Scope::kClass);
          class_bodies_.insert(brace);
          statement.push_back(brace);  // `struct X { ... } x;` declares x: the statement goes on
          break;
        case Opening::kEnum:
          i = skip_balanced(brace);
          class_bodies_.insert(brace);
          statement.push_back(brace);
          break;
        case Opening::kInitializer:  // lambdas in it are function bodies
          scan(i, Scope::kFunction);
          statement.push_back(brace);
          break;
        case Opening::kFunctionBody:
          scan(i, Scope::kFunction);
          statement.clear();
          break;
      }
    }
  }

  // A parenthesised or bracketed group into the statement; braces inside (lambdas, braced
  // arguments) are scanned as function scope.
  void consume_group(size_t& i, std::vector<size_t>& statement) {
    int depth = 0;
    while (i < tokens_.size()) {
      const std::string& t = text(i);
      if (t == "{") {
        statement.push_back(i++);
        scan(i, Scope::kFunction);
        continue;
      }
      if (t == "(" || t == "[") ++depth;
      if (t == ")" || t == "]") --depth;
      statement.push_back(i++);
      if (depth == 0) return;
    }
  }

  // Index past the bracket matching the one at `open`.
  size_t skip_balanced(size_t open) const {
    const std::string& o = text(open);
    const std::string c = o == "(" ? ")" : o == "[" ? "]" : o == "{" ? "}" : ">";
    int depth = 0;
    for (size_t i = open; i < tokens_.size(); ++i) {
      if (text(i) == o) ++depth;
      if (text(i) == c && --depth == 0) return i + 1;
    }
    return tokens_.size();
  }

  // The statement's tokens without a template header, attributes and alignas(...).
  std::vector<size_t> without_preamble(const std::vector<size_t>& statement) const {
    std::vector<size_t> out;
    for (size_t k = 0; k < statement.size(); ++k) {
      const std::string& t = text(statement[k]);
      size_t end = 0;  // a token index past what is dropped
      if (t == "template" && k + 1 < statement.size() && text(statement[k + 1]) == "<") {
        end = skip_balanced(statement[k + 1]);
      } else if ((t == "alignas" || t == "__attribute__" || t == "__align__" ||
                  t == "__launch_bounds__") &&
                 k + 1 < statement.size() && text(statement[k + 1]) == "(") {
        end = skip_balanced(statement[k + 1]);
      } else if (t == "[" && k + 1 < statement.size() && text(statement[k + 1]) == "[") {
        end = skip_balanced(statement[k]);
      }
      if (end == 0) {
        out.push_back(statement[k]);
        continue;
      }
      while (k + 1 < statement.size() && statement[k + 1] < end) ++k;
    }
    return out;
  }

  // The first top-level token of `statement` among `words` (statement.size(): none); top level:
  // outside (), [] and <> (in a declarator, angle brackets are template arguments). An
  // operator's own symbol (`operator=`, `operator()`, `operator<`) is part of a name.
  size_t find_top_level(const std::vector<size_t>& statement,
                        std::initializer_list<std::string_view> words) const {
    int depth = 0;
    for (size_t k = 0; k < statement.size(); ++k) {
      const std::string& t = text(statement[k]);
      if (t == "operator") {
        if (k + 2 < statement.size() && text(statement[k + 1]) == "(" &&
            text(statement[k + 2]) == ")") {
          k += 2;
          continue;
        }
        while (k + 1 < statement.size() && !is_identifier(text(statement[k + 1])) &&
               text(statement[k + 1]) != "(") {
          ++k;
        }
        continue;
      }
      if (depth == 0 && std::find(words.begin(), words.end(), t) != words.end()) return k;
      if (t == "(" || t == "[" || t == "<") ++depth;
      if (t == ")" || t == "]" || t == ">") depth = std::max(0, depth - 1);
    }
    return statement.size();
  }

  // Whether the class key at statement[k] begins a class's definition: `struct Name final :
  // bases` or `struct` alone, not `struct sigaction g_previous` (a variable of that type).
  bool is_class_head(const std::vector<size_t>& statement, size_t k) const {
    size_t j = k + 1;
    if (j < statement.size() && is_identifier(text(statement[j]))) {
      ++j;
      while (j < statement.size()) {
        if (text(statement[j]) == "<") {
          const size_t end = skip_balanced(statement[j]);
          while (j < statement.size() && statement[j] < end) ++j;
        } else if (text(statement[j]) == "::" && j + 1 < statement.size()) {
          j += 2;
        } else {
          break;
        }
      }
    }
    if (j < statement.size() && text(statement[j]) == "final") ++j;
    return j == statement.size() || text(statement[j]) == ":";
  }

  Opening classify(const std::vector<size_t>& raw, Scope scope, size_t brace) const {
    const std::vector<size_t> statement = without_preamble(raw);
    if (statement.empty()) return Opening::kFunctionBody;  // a bare block
    const std::string& first = text(statement[0]);
    if (scope == Scope::kFunction) {
      // Any block is still the function, but a static's initializer is part of its statement.
      return first == "static" || first == "thread_local" ? Opening::kInitializer
                                                           : Opening::kFunctionBody;
    }
    if (first == "namespace" ||
        (first == "inline" && statement.size() > 1 && text(statement[1]) == "namespace") ||
        (first == "extern" && statement.size() == 2 && text(statement[1]) == "\"\"")) {
      return Opening::kNamespace;
    }
    if (find_top_level(statement, {"="}) < statement.size()) return Opening::kInitializer;
    for (size_t k = 0; k < statement.size() && text(statement[k]) != "("; ++k) {
      const std::string& t = text(statement[k]);
      if (t == "enum") return Opening::kEnum;
      if ((t == "class" || t == "struct" || t == "union") && is_class_head(statement, k)) {
        return Opening::kClass;
      }
    }
    const size_t paren = find_top_level(statement, {"("});
    if (paren == statement.size()) return Opening::kInitializer;  // `T x{...}`
    // A constructor's member initializers in braces (`: a_{1}, b_(2) {`): a brace right after a
    // member's name, once a lone ':' followed the parameters.
    bool initializers = false;
    for (size_t k = paren; k < statement.size(); ++k) {
      if (text(statement[k]) == ":") initializers = true;
    }
    const std::string& before = text(brace - 1);
    static const std::set<std::string, std::less<>> kBeforeABody = {
        "const", "noexcept", "override", "final", "mutable", "try", "volatile"};
    if (initializers && (is_identifier(before) || before == ">") &&
        kBeforeABody.count(before) == 0) {
      return Opening::kInitializer;
    }
    return Opening::kFunctionBody;
  }

  // A finished statement: reported when it declares a variable that its scope's rule forbids.
  void evaluate(const std::vector<size_t>& raw, Scope scope) {
    std::vector<size_t> statement = without_preamble(raw);
    bool is_static = false;
    bool is_thread_local = false;
    bool is_extern = false;
    size_t start = 0;  // past the storage and linkage words, `extern "C"` included
    for (; start < statement.size(); ++start) {
      const std::string& t = text(statement[start]);
      if (t == "static") {
        is_static = true;
      } else if (t == "thread_local") {
        is_thread_local = true;
      } else if (t == "extern" && start + 1 < statement.size() &&
                 text(statement[start + 1]) == "\"\"") {
        ++start;
      } else if (t == "extern") {
        is_extern = true;
      } else if (t != "inline" && t != "constinit" && t != "__device__" &&
                 t != "__constant__" && t != "__managed__") {
        break;
      }
    }
    statement.erase(statement.begin(), statement.begin() + static_cast<std::ptrdiff_t>(start));
    if (statement.size() < 2) return;
    if (scope != Scope::kNamespace && !is_static && !is_thread_local) return;
    static const std::set<std::string, std::less<>> kNotVariables = {
        "using",  "typedef", "namespace", "static_assert", "friend",   "concept",
        "asm",    "return",  "template",  "goto",          "co_return", "throw"};
    if (kNotVariables.count(text(statement[0])) > 0) return;
    // A type's definition or declaration: a variable only with a declarator after its body.
    const auto body = std::find_if(statement.begin(), statement.end(),
                                   [&](size_t s) { return class_bodies_.count(s) > 0; });
    if (body != statement.end() && body + 1 == statement.end()) return;  // `struct X { ... };`
    if (body == statement.end() && is_class_key(text(statement[0])) && statement.size() == 2) {
      return;  // `struct X;`
    }
    const size_t equals = find_top_level(statement, {"="});
    // `extern char** environ;`: declared here, defined (and judged) where it is defined.
    if (is_extern && equals == statement.size()) return;
    size_t paren = find_top_level(statement, {"("});
    size_t end = std::min(equals, find_top_level(statement, {"["}));
    size_t name = statement.size();
    if (paren < end && paren + 2 < statement.size() && text(statement[paren + 1]) == "*" &&
        is_identifier(text(statement[paren + 2]))) {
      name = paren + 2;  // `void (*handler)(int)`: a pointer to a function
    } else if (paren < end && scope != Scope::kFunction) {
      return;  // a function's declaration (or a macro's use)
    } else {
      end = std::min(end, paren);
      for (size_t k = 0; k < end; ++k) {  // `T x{...}`: the brace after the name
        if (text(statement[k]) == "{" && class_bodies_.count(statement[k]) == 0 && k > 0 &&
            is_identifier(text(statement[k - 1]))) {
          end = k;
          break;
        }
      }
      name = end;
      while (name > 0 && !is_identifier(text(statement[name - 1]))) --name;
      if (name == 0) return;
      --name;
      if (name == 0) return;  // one word: no type, not a declaration
    }
    if (is_immutable(statement, name)) return;
    std::string declaration = is_static ? "static " : is_thread_local ? "thread_local " : "";
    for (size_t k = 0; k <= name; ++k) {
      declaration += (k ? " " : "") + (text(statement[k]) == "{" ? "{...}" : text(statement[k]));
    }
    findings_.push_back({text(statement[name]), tokens_[statement[name]].line, declaration});
  }

  // const or constexpr at the declaration's top level before its name: after the last
  // top-level * when there is one (`const char* const`), anywhere outside template arguments
  // otherwise.
  bool is_immutable(const std::vector<size_t>& statement, size_t name) const {
    int depth = 0;
    bool constant = false;
    for (size_t k = 0; k < name; ++k) {
      const std::string& t = text(statement[k]);
      if (t == "<") ++depth;
      if (t == ">") depth = std::max(0, depth - 1);
      if (depth > 0) continue;
      if (t == "constexpr") return true;
      if (t == "const") constant = true;
      if (t == "*") constant = false;
    }
    return constant;
  }

  static bool is_class_key(const std::string& t) {
    return t == "class" || t == "struct" || t == "union" || t == "enum";
  }

  std::vector<Token> tokens_;
  std::set<size_t> class_bodies_;  // the '{' of each class or enum body
  std::vector<Finding> findings_;
};

inline std::vector<Finding> scan_source(std::string_view source) {
  return Scanner(tokenize(source)).run();
}

}  // namespace partrain::testing::source_scan
