#include "core/subprocess.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace partrain {
namespace {

SpawnOptions shell(const std::string& script, std::vector<std::string> env = {"PATH=/usr/bin:/bin"}) {
  return SpawnOptions{{"sh", "-c", script}, std::move(env), true};
}

std::string read_all(int fd) {
  std::string text;
  char buffer[256];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 5000);
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EAGAIN) {
      return text;
    }
  }
}

bool dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, comm, state;
  if (!(stat >> pid_field >> comm >> state)) return true;
  return state == "Z";
}

TEST(Subprocess, ExplicitEnvironmentSeparateStreamsAndExitCode) {
  auto child = Subprocess::spawn(shell("echo out=$GREETING; echo err >&2; exit 3",
                                       {"PATH=/usr/bin:/bin", "GREETING=hi"}));
  ASSERT_TRUE(child.is_ok()) << child.status().message();
  EXPECT_EQ(read_all(child->stdout_fd()), "out=hi\n");
  EXPECT_EQ(read_all(child->stderr_fd()), "err\n");
  ExitStatus status = child->wait();
  EXPECT_FALSE(status.signaled);
  EXPECT_EQ(status.value, 3);
}

TEST(Subprocess, ChildLeadsItsOwnProcessGroup) {
  auto child = Subprocess::spawn(shell("ps -o pgid= -p $$"));
  ASSERT_TRUE(child.is_ok());
  EXPECT_EQ(std::stoi(read_all(child->stdout_fd())), child->pid());
  child->wait();
}

TEST(Subprocess, MissingCommandIsNotFoundNamingCommandAndPath) {
  auto child = Subprocess::spawn({{"partrain-no-such-command"}, {"PATH=/nonexistent"}, true});
  ASSERT_FALSE(child.is_ok());
  EXPECT_EQ(child.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(child.status().exit_code(), 127);
  EXPECT_NE(child.status().message().find("partrain-no-such-command"), std::string::npos);
  EXPECT_NE(child.status().message().find("/nonexistent"), std::string::npos);
}

// A file that is there but cannot be executed is exit 126, as shells report it, with the fix.
TEST(Subprocess, CommandThatIsNotExecutableIs126) {
  const std::string script = ::testing::TempDir() + "/partrain-not-executable.sh";
  { std::ofstream(script) << "echo never\n"; }
  ::chmod(script.c_str(), 0644);
  auto child = Subprocess::spawn({{script}, {"PATH=/usr/bin:/bin"}, true});
  ASSERT_FALSE(child.is_ok());
  EXPECT_EQ(child.status().code(), StatusCode::kNotExecutable);
  EXPECT_EQ(child.status().exit_code(), 126);
  EXPECT_NE(child.status().message().find("chmod +x"), std::string::npos)
      << child.status().message();
  EXPECT_NE(child.status().message().find("`-- sh " + script + "`"), std::string::npos)
      << child.status().message();
  std::remove(script.c_str());
  // A Python script's interpreter is python3, not sh.
  const std::string python = ::testing::TempDir() + "/partrain-not-executable.py";
  { std::ofstream(python) << "print('never')\n"; }
  ::chmod(python.c_str(), 0644);
  auto py = Subprocess::spawn({{python}, {"PATH=/usr/bin:/bin"}, true});
  ASSERT_FALSE(py.is_ok());
  EXPECT_NE(py.status().message().find("`-- python3 " + python + "`"), std::string::npos)
      << py.status().message();
  std::remove(python.c_str());
}

// A directory named as the command: 126 too, saying what it is rather than "permission denied".
TEST(Subprocess, CommandThatIsADirectoryIs126AndSaysSo) {
  auto child = Subprocess::spawn({{"/tmp"}, {"PATH=/usr/bin:/bin"}, true});
  ASSERT_FALSE(child.is_ok());
  EXPECT_EQ(child.status().exit_code(), 126);
  EXPECT_NE(child.status().message().find("cannot run '/tmp': it is a directory"),
            std::string::npos)
      << child.status().message();
}

// check_runnable looks as execvp does and says what spawn would: found along PATH, a file that
// cannot be run (126), a directory of that name skipped, nothing (127), a path not searched.
TEST(Subprocess, CheckRunnableLooksAsExecvpDoes) {
  const std::string dir = ::testing::TempDir() + "/partrain-check-runnable";
  const std::string bin = dir + "/bin", other = dir + "/other";
  std::filesystem::create_directories(bin);
  std::filesystem::create_directories(other + "/tool");  // a directory named like the program
  { std::ofstream(bin + "/tool") << "#!/bin/sh\n"; }
  ::chmod((bin + "/tool").c_str(), 0755);
  { std::ofstream(bin + "/plain") << "echo\n"; }
  ::chmod((bin + "/plain").c_str(), 0644);
  const std::vector<std::string> env = {"PATH=" + other + ":" + bin};
  EXPECT_TRUE(Subprocess::check_runnable("tool", env).is_ok());
  EXPECT_TRUE(Subprocess::check_runnable(bin + "/tool", {}).is_ok());
  const Status plain = Subprocess::check_runnable("plain", env);
  EXPECT_EQ(plain.exit_code(), 126) << plain.message();
  EXPECT_NE(plain.message().find("chmod +x"), std::string::npos) << plain.message();
  const Status missing = Subprocess::check_runnable("absent", env);
  EXPECT_EQ(missing.exit_code(), 127);
  EXPECT_NE(missing.message().find("(searched PATH=" + other + ":" + bin + ")"), std::string::npos)
      << missing.message();
  const Status no_file = Subprocess::check_runnable(bin + "/absent", env);
  EXPECT_EQ(no_file.exit_code(), 127);
  EXPECT_NE(no_file.message().find("(no such file)"), std::string::npos) << no_file.message();
  EXPECT_EQ(Subprocess::check_runnable(other + "/tool", env).exit_code(), 126);
  std::filesystem::remove_all(dir);
}

TEST(Subprocess, SignalGroupReachesGrandchildrenAndReapReportsTheSignal) {
  auto child = Subprocess::spawn(shell("sleep 30 & echo $!; wait"));
  ASSERT_TRUE(child.is_ok());
  std::string line;
  char c;
  while (true) {
    pollfd p{child->stdout_fd(), POLLIN, 0};
    ::poll(&p, 1, 5000);
    if (::read(child->stdout_fd(), &c, 1) != 1 || c == '\n') break;
    line += c;
  }
  const pid_t grandchild = std::stoi(line);
  EXPECT_FALSE(child->try_reap().has_value());
  ASSERT_TRUE(child->signal_group(SIGKILL).is_ok());
  ExitStatus status = child->wait();
  EXPECT_TRUE(status.signaled);
  EXPECT_EQ(status.value, SIGKILL);
  EXPECT_EQ(status.exit_code(), 137);
  // The grandchild was in the group: dead. It was orphaned, so it may linger as a zombie of init
  // (or of whatever PID 1 this container has, which may never reap it).
  for (int i = 0; i < 100 && !dead(grandchild); ++i) ::usleep(10000);
  EXPECT_TRUE(dead(grandchild));
}

TEST(Subprocess, DestructorKillsAndReapsARunningChild) {
  pid_t pid = 0;
  {
    auto child = Subprocess::spawn(shell("sleep 30"));
    ASSERT_TRUE(child.is_ok());
    pid = child->pid();
  }
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);  // reaped, not a zombie
}

}  // namespace
}  // namespace partrain
