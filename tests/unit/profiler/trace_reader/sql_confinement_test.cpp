// Only the trace store (schema, TraceWriter, open and repair, merge, the SQLite wrappers) and the
// reader layer (profiler/trace_reader/) may query a trace: everything else that reads one for
// analysis, display or export goes through the reader's typed rows and cursors, so a column is
// added in one place (docs/trace-format.md, "Reading a trace in code"). This test reads every
// source file and fails the suite on SQL or SQLite statement calls anywhere else; the Nsight
// Systems importer, which reads another tool's SQLite export, may query only that export.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <initializer_list>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace partrain {
namespace {

namespace fs = std::filesystem;

// The folders of the product's sources (tests build traces by hand and may query them).
constexpr const char* kSourceFolders[] = {"core", "memory", "profiler", "runner",
                                          "analyzers", "tui", "cli"};
// Files that may hold SQL: the store and the reader.
constexpr const char* kStoreFiles[] = {
    "profiler/sqlite_db.h",        "profiler/sqlite_db.cpp",     "profiler/sqlite_row_batch.h",
    "profiler/sqlite_row_batch.cpp", "profiler/trace_writer.h",  "profiler/trace_writer.cpp",
    "profiler/trace_open.h",       "profiler/trace_open.cpp",    "profiler/trace_merge.h",
    "profiler/trace_merge.cpp",    "profiler/trace_schema.h",    "profiler/trace_schema_sql.cpp.in"};
constexpr const char* kReaderFolder = "profiler/trace_reader/";
// The Nsight Systems importer reads another tool's SQLite export (its CUPTI_*, NVTX_* and
// StringIds tables) to turn it into events for TraceWriter: SQL, but never on a partrain trace.
// Its queries may not name a partrain table or view.
constexpr const char* kForeignReaders[] = {
    "profiler/import/nsys_export.cpp", "profiler/import/nsys_rows.cpp",
    "profiler/import/nsys_import.cpp", "profiler/import/nccl_nvtx_payload.cpp"};
// SQL that is text for people, not a query: `partrain merge --help` shows how to query the
// merged file's public views with sqlite3. (file, the example exactly)
const std::pair<std::string, std::string> kUserExamples[] = {
    {"cli/merge_command.cpp",
     "sqlite3 all.db 'SELECT comm_id, seq, count(*) FROM collectives GROUP BY 1, 2 LIMIT 5'"}};

// A source split into what the compiler sees as code and its string literals (adjacent literals
// joined, as the compiler joins them); comments dropped.
struct Lexed {
  std::string code;
  std::vector<std::string> literals;
};

Lexed lex(const std::string& text) {
  Lexed out;
  std::string literal;
  bool joining = false;  // only white space since the last literal ended
  auto end_literal = [&] {
    if (!joining && !literal.empty()) {
      out.literals.push_back(literal);
      literal.clear();
    }
  };
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      i = text.find("*/", i + 2);
      if (i == std::string::npos) break;
      i += 2;
      continue;
    }
    const bool after_identifier =
        i > 0 && (std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_');
    // R"delim( ... )delim", also after an encoding prefix (u8R, LR).
    const bool raw_prefix = !after_identifier || text[i - 1] == '8' || text[i - 1] == 'L' ||
                            text[i - 1] == 'u' || text[i - 1] == 'U';
    if (c == 'R' && raw_prefix && i + 1 < text.size() && text[i + 1] == '"') {
      const size_t open = text.find('(', i + 2);
      const std::string close = ")" + text.substr(i + 2, open - i - 2) + "\"";
      const size_t end = text.find(close, open);
      literal += text.substr(open + 1, end - open - 1);
      i = end + close.size();
      joining = true;
      continue;
    }
    if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\') ++j;
      }
      literal += text.substr(i + 1, j - i - 1);
      i = j + 1;
      joining = true;
      continue;
    }
    if (c == '\'' && after_identifier) {  // a digit separator: 1'000'000
      ++i;
      continue;
    }
    if (c == '\'') {  // a character literal: '"', '\''
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '\''; ++j) {
        if (text[j] == '\\') ++j;
      }
      out.code += ' ';
      i = j + 1;
      continue;
    }
    if (!std::isspace(static_cast<unsigned char>(c))) {
      joining = false;
      end_literal();
    }
    out.code += c;
    ++i;
  }
  joining = false;
  end_literal();
  return out;
}

// Calls that run SQL on a connection, in code.
const std::regex kStatementCalls(
    R"(\bSqliteStatement\b|\bsqlite3_(prepare|exec|step|get_table)\w*|\.\s*exec\s*\(|\.\s*query_text\s*\()");
// SQL in a literal: its statements' keywords as this code base writes them (upper case), or a
// query in lower case that names a raw table (prose such as "counting from rank 0" has no
// select before it).
const std::regex kSqlKeywords(
    R"(\bSELECT\b|\bINSERT\s+(OR\s+\w+\s+)?INTO\b|\bDELETE\s+FROM\b|\bUPDATE\s+\w+\s+SET\b|\bCREATE\s+(TEMP\s+)?(TABLE|INDEX|VIEW)\b|\bPRAGMA\b)");
const std::regex kLowerCaseSql(
    R"(\bselect\b[\s\S]*\b(from|join)\s+(slice|collective|kernel|transfer|memory|counter|step|stat|run|rank|track|string|meta)\b|\b(insert\s+into|delete\s+from)\s+\w+)",
    std::regex::icase);

// Whether `text` holds any of `words` (lower case), whatever the case: a cheap test before the
// regular expressions, which are slow on whole files.
bool mentions(const std::string& text, std::initializer_list<const char*> words) {
  std::string lower(text.size(), ' ');
  std::transform(text.begin(), text.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* word : words) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return false;
}

// What `file` (its path relative to the source tree, and its text) does against the rule.
std::vector<std::string> violations(const std::string& file, const std::string& text) {
  std::vector<std::string> found;
  const Lexed lexed = lex(text);
  std::smatch match;
  if (mentions(lexed.code, {"sqlite", "exec", "query_text"}) &&
      std::regex_search(lexed.code, match, kStatementCalls)) {
    found.push_back(file + ": runs SQL (" + match.str() + ")");
  }
  for (std::string literal : lexed.literals) {
    for (const auto& [path, example] : kUserExamples) {
      if (path != file) continue;
      for (size_t at; (at = literal.find(example)) != std::string::npos;) {
        literal.erase(at, example.size());
      }
    }
    if (!mentions(literal, {"select", "insert", "delete", "update", "create", "pragma"})) continue;
    if (std::regex_search(literal, match, kSqlKeywords) ||
        std::regex_search(literal, match, kLowerCaseSql)) {
      found.push_back(file + ": SQL in a string (\"" + match.str() + "\" in \"" +
                      literal.substr(0, 80) + "\")");
    }
  }
  return found;
}

// A partrain table or view (share/schema.sql, share/views.sql) named where a query reads or
// writes it (FROM, JOIN, INTO, UPDATE).
const std::regex kTraceTable(
    R"(\b(from|join|into|update)\s+)"
    R"((run|rank|track|string|slice|collective|kernel|transfer|memory|counter|step|stat|meta|)"
    R"(track_kind|slice_category|memory_category|runs|ranks|tracks|slices|collectives|kernels|)"
    R"(transfers|memory_events|counters|steps|stats)\b)",
    std::regex::icase);

// What a reader of another tool's export does against the rule: a query of a partrain table.
std::vector<std::string> foreign_violations(const std::string& file, const std::string& text) {
  std::vector<std::string> found;
  std::smatch match;
  for (const std::string& literal : lex(text).literals) {
    if (std::regex_search(literal, match, kTraceTable)) {
      found.push_back(file + ": queries a partrain table (\"" + match.str() + "\")");
    }
  }
  return found;
}

bool is_foreign_reader(const std::string& file) {
  for (const char* allowed : kForeignReaders) {
    if (file == allowed) return true;
  }
  return false;
}

bool may_hold_sql(const std::string& file) {
  if (file.rfind(kReaderFolder, 0) == 0) return true;
  for (const char* allowed : kStoreFiles) {
    if (file == allowed) return true;
  }
  return false;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(SqlConfinement, NoSourceOutsideTheStoreAndTheReaderQueriesATrace) {
  const fs::path root = PARTRAIN_SOURCE_DIR;
  std::vector<std::string> found;
  int scanned = 0;
  for (const char* folder : kSourceFolders) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() ||
          (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".in")) {
        continue;
      }
      const std::string file = fs::relative(entry.path(), root).generic_string();
      if (may_hold_sql(file)) continue;
      ++scanned;
      const std::string text = read_text(entry.path());
      for (std::string& v : is_foreign_reader(file) ? foreign_violations(file, text)
                                                    : violations(file, text)) {
        found.push_back(v);
      }
    }
  }
  EXPECT_GT(scanned, 200);  // the tree was found and read
  std::string list;
  for (const std::string& v : found) list += "\n  " + v;
  EXPECT_TRUE(found.empty())
      << "query the trace through profiler/trace_reader/ (add a typed read there):" << list;
}

TEST(SqlConfinement, TheStoreFilesItAllowsExist) {
  const fs::path root = PARTRAIN_SOURCE_DIR;
  for (const char* file : kStoreFiles) EXPECT_TRUE(fs::exists(root / file)) << file;
  for (const char* file : kForeignReaders) EXPECT_TRUE(fs::exists(root / file)) << file;
  EXPECT_TRUE(fs::is_directory(root / kReaderFolder));
}

// The check itself: what it must catch in an analysis or the dashboard, and what it must not.
TEST(SqlConfinement, CatchesQueriesAndStatementCalls) {
  EXPECT_EQ(violations("analyzers/x.cpp",
                       "auto s = SqliteStatement::prepare(db, \"SELECT state FROM collective\");")
                .size(),
            2u);
  EXPECT_EQ(violations("tui/x.cpp", "const char* kSql =\n  \"select ts_ns \"\n  \"from slice\";")
                .size(),
            1u);
  EXPECT_EQ(violations("tui/x.cpp", "constexpr auto q = R\"sql(\n  SELECT 1)sql\";").size(), 1u);
  EXPECT_EQ(violations("analyzers/x.cpp", "db.exec(text);").size(), 1u);
  // Character literals and digit separators do not hide what follows them.
  EXPECT_EQ(violations("tui/x.cpp", "char q = '\"'; int n = 1'000; f(\"SELECT 1\");").size(), 1u);
  EXPECT_EQ(violations("cli/x.cpp", "auto n = db.query_text(sql);").size(), 1u);
  EXPECT_EQ(violations("analyzers/x.cpp", "Status s = trace_.db.exec (\"BEGIN\");").size(), 1u);
  EXPECT_EQ(violations("cli/x.cpp", "fmt::format(\"INSERT OR REPLACE INTO stat VALUES\")").size(),
            1u);
}

// The Nsight Systems importer may query its export's tables, never a partrain trace's.
TEST(SqlConfinement, AnImporterReadsOnlyItsSourcesTables) {
  EXPECT_TRUE(foreign_violations("profiler/import/nsys_rows.cpp",
                                 "prepare(db, \"SELECT k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                 "JOIN StringIds s ON s.id = k.demangledName\");")
                  .empty());
  EXPECT_TRUE(foreign_violations("profiler/import/nsys_export.cpp",
                                 "f(\"SELECT value FROM META_DATA_EXPORT WHERE name = 'x'\");")
                  .empty());
  EXPECT_EQ(foreign_violations("profiler/import/nsys_rows.cpp",
                               "prepare(db, \"SELECT ts_ns FROM slice WHERE track_id = 1\");")
                .size(),
            1u);
  EXPECT_EQ(foreign_violations("profiler/import/nsys_import.cpp",
                               "exec(\"INSERT INTO collective VALUES (1)\");")
                .size(),
            1u);
  EXPECT_EQ(foreign_violations("profiler/import/nsys_import.cpp",
                               "exec(\"select rank from RANKS\");")
                .size(),
            1u);
}

TEST(SqlConfinement, LeavesProseCommentsAndUserExamplesAlone) {
  EXPECT_TRUE(violations("analyzers/x.cpp", "// SELECT ts_ns FROM slice in a comment\nint x;")
                  .empty());
  EXPECT_TRUE(violations("analyzers/x.cpp", "/* INSERT INTO run */ int y;").empty());
  EXPECT_TRUE(violations("cli/x.cpp", "help(\"only these ranks, counting from rank 0\");").empty());
  EXPECT_TRUE(violations("cli/x.cpp", "help(\"select the steps to export\");").empty());
  EXPECT_TRUE(violations("cli/x.cpp", "help(\"memory from the run's steps\");").empty());
  const std::string example =
      "footer(\"Example:\\n\"\n  \"  sqlite3 all.db 'SELECT comm_id, seq, count(*) FROM "
      "collectives GROUP BY 1, 2 LIMIT 5'\\n\");";
  EXPECT_TRUE(violations("cli/merge_command.cpp", example).empty());
  // The example is allowed where it is, and as it is: not elsewhere, not another query.
  EXPECT_EQ(violations("cli/export_command.cpp", example).size(), 1u);
  EXPECT_EQ(violations("cli/merge_command.cpp",
                       "footer(\"  sqlite3 all.db 'SELECT op FROM collectives'\\n\");")
                .size(),
            1u);
}

}  // namespace
}  // namespace partrain
