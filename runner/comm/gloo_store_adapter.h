// Lets Gloo's full-mesh bootstrap use partrain's rendezvous Store: every key is prefixed with
// the communicator's id, so the world and each sub-group exchange addresses without clashing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/duration.h"
#include "runner/comm/gloo_headers.h"
#include "runner/rendezvous/store.h"

namespace partrain::comm {

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  // Gloo's Store interface has no error values: failures (a rendezvous timeout) are thrown as
  // gloo::IoException with our Status's message, and caught where the context is built.
  GlooStoreAdapter(std::shared_ptr<rendezvous::Store> store, std::string prefix,
                   Nanoseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::string full_key(const std::string& key) const { return prefix_ + key; }

  std::shared_ptr<rendezvous::Store> store_;
  std::string prefix_;
  Nanoseconds timeout_;
};

}  // namespace partrain::comm
