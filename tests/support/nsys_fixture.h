// The Nsight Systems fixtures of tests/data/nsys (SQL scripts written by make_fixtures.py) built
// into the SQLite files `nsys export --type sqlite` would have written.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "profiler/sqlite_db.h"

namespace partrain::testing {

// tests/data/nsys/NAME.sql built into DIR/NAME.sqlite.
inline std::filesystem::path build_nsys_report(const std::filesystem::path& dir,
                                               const std::string& name) {
  std::ifstream in(std::filesystem::path(PARTRAIN_SOURCE_DIR) / "tests/data/nsys" /
                   (name + ".sql"));
  std::stringstream sql;
  sql << in.rdbuf();
  const std::filesystem::path out = dir / (name + ".sqlite");
  auto db = profiler::SqliteDb::open(out.string(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  EXPECT_TRUE(db.is_ok());
  if (db.is_ok()) {
    EXPECT_TRUE(db->exec("BEGIN; " + sql.str() + " COMMIT;").is_ok()) << db->error_message();
  }
  return out;
}

}  // namespace partrain::testing
