#include "runner/workload/token_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <numeric>

#include "core/hash.h"

namespace partrain::runner {
namespace {

// Neighbouring sample indices must give unrelated start tokens: a well-mixed hash.
uint64_t mix(uint64_t x) { return splitmix64(x); }

class SyntheticTokens final : public TokenSource {
 public:
  SyntheticTokens(uint64_t seed, int vocab) : seed_(seed), vocab_(static_cast<uint64_t>(vocab)) {
    // A multiplier coprime with V makes the map a permutation: every token has one successor.
    multiplier_ = 1 + mix(seed) % (vocab_ > 1 ? vocab_ - 1 : 1);
    while (std::gcd(multiplier_, vocab_) != 1) multiplier_ = multiplier_ % vocab_ + 1;
    increment_ = mix(seed + 1) % vocab_;
  }

  void sample(uint64_t index, int seq, int32_t* inputs, int32_t* targets) const override {
    uint64_t token = mix(seed_ ^ mix(index)) % vocab_;
    for (int i = 0; i < seq; ++i) {
      inputs[i] = static_cast<int32_t>(token);
      token = (multiplier_ * token + increment_) % vocab_;
      targets[i] = static_cast<int32_t>(token);
    }
  }

  std::string describe() const override {
    return fmt::format("synthetic tokens (seed {}, vocab {})", seed_, vocab_);
  }

 private:
  uint64_t seed_;
  uint64_t vocab_;
  uint64_t multiplier_ = 1;
  uint64_t increment_ = 0;
};

constexpr int32_t kLlmcMagic = 20240520;
constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);

class TokenFile final : public TokenSource {
 public:
  TokenFile(std::string path, void* mapping, size_t mapped_bytes, const uint16_t* tokens,
            uint64_t count)
      : path_(std::move(path)),
        mapping_(mapping),
        mapped_bytes_(mapped_bytes),
        tokens_(tokens),
        count_(count) {}
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile() override { munmap(mapping_, mapped_bytes_); }

  void sample(uint64_t index, int seq, int32_t* inputs, int32_t* targets) const override {
    // Consecutive windows, wrapping around: sample i starts i x seq tokens in.
    const uint64_t windows = (count_ - 1) / static_cast<uint64_t>(seq);
    const uint64_t start = (index % windows) * static_cast<uint64_t>(seq);
    for (int i = 0; i < seq; ++i) {
      inputs[i] = tokens_[start + static_cast<uint64_t>(i)];
      targets[i] = tokens_[start + static_cast<uint64_t>(i) + 1];
    }
  }

  std::string describe() const override {
    return fmt::format("{} ({} tokens)", path_, count_);
  }

 private:
  std::string path_;
  void* mapping_;
  size_t mapped_bytes_;
  const uint16_t* tokens_;
  uint64_t count_;
};

Status unreadable(const std::string& path, std::string_view problem) {
  return Status(StatusCode::kUnreadable,
                fmt::format("--data {}: {} (expected uint16 tokens, llm.c's .bin with its "
                            "256-int header or nanoGPT's headerless layout)",
                            path, problem));
}

}  // namespace

std::unique_ptr<TokenSource> make_synthetic_tokens(uint64_t seed, int vocab) {
  return std::make_unique<SyntheticTokens>(seed, vocab);
}

StatusOr<std::unique_ptr<TokenSource>> open_token_file(const std::string& path, int vocab,
                                                       int seq) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return unreadable(path, fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat info {};
  ::fstat(fd, &info);
  const auto bytes = static_cast<size_t>(info.st_size);
  void* mapping = bytes > 0 ? ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (mapping == MAP_FAILED) return unreadable(path, "empty or not mappable");

  const auto* base = static_cast<const unsigned char*>(mapping);
  size_t offset = 0;
  uint64_t count = bytes / sizeof(uint16_t);
  int32_t magic = 0;
  if (bytes >= kLlmcHeaderBytes) std::memcpy(&magic, base, sizeof magic);
  if (magic == kLlmcMagic) {
    int32_t header[3];
    std::memcpy(header, base, sizeof header);
    const uint64_t declared = static_cast<uint32_t>(header[2]);
    offset = kLlmcHeaderBytes;
    count = (bytes - offset) / sizeof(uint16_t);
    if (header[1] != 1 && header[1] != 2) {
      munmap(mapping, bytes);
      return unreadable(path, fmt::format("llm.c header version {} is not 1 or 2", header[1]));
    }
    if (declared > count) {
      munmap(mapping, bytes);
      return unreadable(path, fmt::format("header declares {} tokens but the file holds {}",
                                          declared, count));
    }
    count = declared;
  }
  if (count < static_cast<uint64_t>(seq) + 1) {
    munmap(mapping, bytes);
    return unreadable(path, fmt::format("{} tokens are fewer than one sample of --seq {} + 1",
                                        count, seq));
  }
  const auto* tokens = reinterpret_cast<const uint16_t*>(base + offset);
  for (uint64_t i = 0; i < count; ++i) {
    if (tokens[i] >= vocab) {
      Status status = unreadable(
          path, fmt::format("token {} at position {} is not below --vocab {}", tokens[i], i, vocab));
      munmap(mapping, bytes);  // only after the message has read the token
      return status;
    }
  }
  return std::unique_ptr<TokenSource>(
      std::make_unique<TokenFile>(path, mapping, bytes, tokens, count));
}

}  // namespace partrain::runner
