// Runs the real partrain binary (or any shell command) for integration tests and captures its
// exit code, stdout and stderr.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

namespace partrain::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A command's --json output; a test failure naming the text when it is not JSON.
inline nlohmann::json parse_json_output(const std::string& text) {
  auto json = nlohmann::json::parse(text, nullptr, false);
  EXPECT_FALSE(json.is_discarded()) << text;
  return json;
}

// Whether `pid` has ended within `timeout`: gone, or a zombie (a killed launcher's orphans go to
// init, which may not reap at once).
inline bool ends_within(int pid, std::chrono::milliseconds timeout) {
  auto ended = [pid] {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_field, comm, state;
    return !(stat >> pid_field >> comm >> state) || state == "Z";
  };
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (!ended() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ended();
}

// Runs `sh -c command` with stdout and stderr captured into temporary files.
inline CommandResult run_shell(const std::string& command) {
  char dir_template[] = "/tmp/partrain-test-XXXXXX";
  std::string dir = mkdtemp(dir_template);
  std::string full = "( " + command + " ) >" + dir + "/out 2>" + dir + "/err";
  int status = std::system(full.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(dir + "/out");
  result.err = read_file(dir + "/err");
  std::system(("rm -rf " + dir).c_str());
  return result;
}

// The partrain under test: $PARTRAIN_BINARY when set (a GPU bundle's tests run its bin/partrain,
// scripts/gpu-validate.sh), else the build tree's, compiled in.
inline std::string partrain_binary() {
  const char* binary = std::getenv("PARTRAIN_BINARY");
  return binary != nullptr && *binary != '\0' ? binary : PARTRAIN_BINARY;
}

inline CommandResult run_partrain(const std::string& args, const std::string& env = "") {
  return run_shell(env + (env.empty() ? "" : " ") + partrain_binary() + " " + args);
}

// A loopback TCP port that was free a moment ago (for --master-port of multi-node tests).
inline int free_tcp_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace partrain::testing
