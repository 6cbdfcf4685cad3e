#include "runner/workload/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace partrain::runner {
namespace {

using Kind = PipelineActionKind;
using Program = std::vector<PipelineAction>;

// ---------------------------------------------------------------------------------------------
// A simulator of the executor contract in pipeline_schedule.h: sends are posted and never block,
// a receive blocks its rank until the matching send (kind, micro_batch, chunk, src, dst) has been
// posted, and, as Gloo completes one communicator's transfers in posting order, until every send
// the rank posted before it on the same channel has met its peer's receive. Every rank runs its
// list in order; compute has a cost in time units, transfers are free, so the finishing time
// measures the bubble. The first broken rule stops the run.
// ---------------------------------------------------------------------------------------------

struct Simulation {
  std::string error;                // empty: every check passed
  std::vector<int> forwards;        // per rank
  std::vector<int> backwards;       // per rank
  std::vector<int> weights;         // per rank: weight passes (split backwards)
  std::vector<int> peak_in_flight;  // per rank: forwards whose backward has not run yet
  int64_t makespan = 0;             // time of the last action over all ranks
};

using MessageKey = std::tuple<bool, int, int, int, int>;  // gradient?, mb, chunk, src, dst
using WorkKey = std::pair<int, int>;                       // mb, chunk

class Simulator {
 public:
  // channel_of: the communicator of a transfer (pipeline_channel unless a test overrides it).
  using ChannelOf = std::function<int(const PipelineAction&)>;
  Simulator(const PipelineShape& shape, const std::vector<Program>& programs, int64_t forward_cost,
            int64_t backward_cost, bool rendezvous_sends, ChannelOf channel_of = nullptr)
      : shape_(shape),
        programs_(programs),
        channel_of_(channel_of ? std::move(channel_of) : default_channel(shape)),
        forward_cost_(forward_cost),
        backward_cost_(memory::splits_backward(shape.schedule) ? backward_cost / 2 : backward_cost),
        weight_cost_(backward_cost - backward_cost_),
        rendezvous_sends_(rendezvous_sends),
        pc_(programs.size()),
        clock_(programs.size()),
        waiting_send_(programs.size()),
        in_flight_(programs.size()),
        received_(programs.size()) {
    result_.forwards.assign(programs.size(), 0);
    result_.backwards.assign(programs.size(), 0);
    result_.weights.assign(programs.size(), 0);
    result_.peak_in_flight.assign(programs.size(), 0);
  }

  Simulation run() {
    bool progress = true;
    while (progress && result_.error.empty()) {
      progress = false;
      for (int r = 0; r < ranks() && result_.error.empty(); ++r) {
        while (pc_[r] < programs_[r].size() && result_.error.empty() && step(r)) {
          ++pc_[r];
          progress = true;
        }
      }
    }
    if (result_.error.empty()) finish();
    for (int64_t t : clock_) result_.makespan = std::max(result_.makespan, t);
    return result_;
  }

 private:
  int ranks() const { return static_cast<int>(programs_.size()); }
  int last_chunk() const { return shape_.chunks() - 1; }
  int owner(int chunk) const { return chunk_rank(shape_, chunk); }
  void fail(int rank, const PipelineAction& action, const std::string& why) {
    result_.error = "rank " + std::to_string(rank) + " " + describe_action(action) + ": " + why;
  }

  // Runs the action at rank r's program counter; false when it must wait (a receive).
  bool step(int r) {
    const PipelineAction& a = programs_[r][pc_[r]];
    const bool gradient = a.kind == Kind::kSendGradient || a.kind == Kind::kRecvGradient;
    if (a.micro_batch < 0 || a.micro_batch >= shape_.micro_batches || a.chunk < 0 ||
        a.chunk > last_chunk()) {
      fail(r, a, "micro-batch or chunk out of range");
      return false;
    }
    if (is_send(a.kind) || is_recv(a.kind)) {
      // Message (mb, c) crosses the boundary between chunk c - 1 and chunk c.
      const int from = gradient ? owner(a.chunk) : owner(a.chunk - 1);
      const int to = gradient ? owner(a.chunk - 1) : owner(a.chunk);
      const int self = is_send(a.kind) ? from : to;
      const int peer = is_send(a.kind) ? to : from;
      if (a.chunk < 1 || self != r || a.peer != peer) {
        fail(r, a, "this rank is not an end of that boundary or the peer is wrong");
        return false;
      }
    }
    switch (a.kind) {
      case Kind::kSendActivation:
        if (!forward_done_.contains({a.micro_batch, a.chunk - 1})) {
          fail(r, a, "sends an activation before the forward that produces it");
          return false;
        }
        return post(r, a, gradient);
      case Kind::kSendGradient:
        if (!backward_done_.contains({a.micro_batch, a.chunk})) {
          fail(r, a, "sends a gradient before the backward that produces it");
          return false;
        }
        return post(r, a, gradient);
      case Kind::kRecvActivation:
      case Kind::kRecvGradient: {
        const MessageKey key{gradient, a.micro_batch, a.chunk, a.peer, r};
        recvs_posted_.insert(key);
        auto it = mailbox_.find(key);
        if (it == mailbox_.end()) return false;  // blocked until the peer sends
        // ... and until this rank's earlier sends on the channel have met their receives.
        auto& before = pending_sends_[{r, channel_of_(a)}];
        std::erase_if(before, [&](const MessageKey& send) { return recvs_posted_.contains(send); });
        if (!before.empty()) return false;
        clock_[r] = std::max(clock_[r], it->second);
        mailbox_.erase(it);
        if (!received_[r].insert({gradient, a.micro_batch, a.chunk}).second) {
          fail(r, a, "received twice");
          return false;
        }
        return true;
      }
      case Kind::kForward: return forward(r, a);
      case Kind::kBackward: return backward(r, a);
      case Kind::kWeight:
        return weight(r, a);
    }
    return false;
  }

  bool post(int r, const PipelineAction& a, bool gradient) {
    const MessageKey key{gradient, a.micro_batch, a.chunk, r, a.peer};
    if (rendezvous_sends_ && waiting_send_[r]) {
      if (mailbox_.contains(key)) return false;  // the peer has not posted its receive yet
      waiting_send_[r] = false;
      return true;
    }
    if (!mailbox_.emplace(key, clock_[r]).second ||
        !sent_.insert({gradient, a.micro_batch, a.chunk}).second) {
      fail(r, a, "message sent twice");
      return false;
    }
    pending_sends_[{r, channel_of_(a)}].push_back(key);
    if (!rendezvous_sends_) return true;
    waiting_send_[r] = true;
    return false;
  }

  // Consumes a received message that a compute needs; false if it has not arrived on this rank.
  // A neighbouring chunk on the same rank hands it over with no message: its producer must have
  // run (the forward of chunk - 1, or the backward of chunk).
  bool consume(int r, bool gradient, int micro_batch, int chunk) {
    const int producer = gradient ? chunk : chunk - 1;
    if (owner(producer) == r) {
      return gradient ? backward_done_.contains({micro_batch, producer})
                      : forward_done_.contains({micro_batch, producer});
    }
    return received_[r].erase({gradient, micro_batch, chunk}) == 1;
  }

  bool forward(int r, const PipelineAction& a) {
    if (owner(a.chunk) != r) return fail(r, a, "chunk runs on another rank"), false;
    if (forward_done_.contains({a.micro_batch, a.chunk})) return fail(r, a, "ran twice"), false;
    if (a.chunk > 0 && !consume(r, false, a.micro_batch, a.chunk)) {
      return fail(r, a, "runs before its input activation was received"), false;
    }
    clock_[r] += forward_cost_;
    forward_done_.insert({a.micro_batch, a.chunk});
    ++result_.forwards[r];
    result_.peak_in_flight[r] = std::max(result_.peak_in_flight[r], ++in_flight_[r]);
    return true;
  }

  bool backward(int r, const PipelineAction& a) {
    if (owner(a.chunk) != r) return fail(r, a, "chunk runs on another rank"), false;
    if (!forward_done_.contains({a.micro_batch, a.chunk})) {
      return fail(r, a, "runs before its forward"), false;
    }
    if (backward_done_.contains({a.micro_batch, a.chunk})) return fail(r, a, "ran twice"), false;
    if (a.chunk < last_chunk() && !consume(r, true, a.micro_batch, a.chunk + 1)) {
      return fail(r, a, "runs before its output gradient was received"), false;
    }
    clock_[r] += backward_cost_;
    backward_done_.insert({a.micro_batch, a.chunk});
    ++result_.backwards[r];
    if (!memory::splits_backward(shape_.schedule)) --in_flight_[r];
    return true;
  }

  // A split backward's weight gradients: after its B, once; the activations go with it.
  bool weight(int r, const PipelineAction& a) {
    if (!memory::splits_backward(shape_.schedule)) {
      return fail(r, a, "a weight pass in a schedule that does not split the backward"), false;
    }
    if (owner(a.chunk) != r) return fail(r, a, "chunk runs on another rank"), false;
    if (!backward_done_.contains({a.micro_batch, a.chunk})) {
      return fail(r, a, "runs before its backward"), false;
    }
    if (!weight_done_.insert({a.micro_batch, a.chunk}).second)
      return fail(r, a, "ran twice"), false;
    clock_[r] += weight_cost_;
    ++result_.weights[r];
    --in_flight_[r];
    return true;
  }

  // After the loop: everyone finished, every message matched and used, all work done.
  void finish() {
    for (int r = 0; r < ranks(); ++r) {
      if (pc_[r] < programs_[r].size()) {
        fail(r, programs_[r][pc_[r]], "deadlock: waits forever");
        return;
      }
      if (!received_[r].empty()) {
        result_.error = "rank " + std::to_string(r) + " received a message no compute used";
        return;
      }
    }
    if (!mailbox_.empty()) {
      result_.error = "a send was never received (it would never complete)";
      return;
    }
    const auto expected = static_cast<size_t>(shape_.micro_batches * shape_.chunks());
    if (forward_done_.size() != expected || backward_done_.size() != expected) {
      result_.error = "not every (micro-batch, chunk) ran forward and backward";
    }
    if (memory::splits_backward(shape_.schedule) && weight_done_.size() != expected) {
      result_.error = "not every (micro-batch, chunk) ran its weight pass";
    }
  }

  static ChannelOf default_channel(const PipelineShape& shape) {
    return
        [shape](const PipelineAction& a) { return static_cast<int>(pipeline_channel(shape, a)); };
  }

  PipelineShape shape_;
  const std::vector<Program>& programs_;
  ChannelOf channel_of_;
  int64_t forward_cost_;
  int64_t backward_cost_;  // of B: half the backward when it is split, W the rest
  int64_t weight_cost_;
  bool rendezvous_sends_;  // a send blocks its rank until the peer posts the receive
  std::vector<size_t> pc_;
  std::vector<int64_t> clock_;
  std::vector<bool> waiting_send_;  // per rank: blocked in a rendezvous send
  std::vector<int> in_flight_;
  std::vector<std::set<std::tuple<bool, int, int>>> received_;
  std::map<MessageKey, int64_t> mailbox_;  // posted, not yet received: send time
  std::set<MessageKey> recvs_posted_;      // receives a rank has reached (posted)
  std::map<std::pair<int, int>, std::vector<MessageKey>> pending_sends_;  // (rank, channel)
  std::set<std::tuple<bool, int, int>> sent_;
  std::set<WorkKey> forward_done_;
  std::set<WorkKey> backward_done_;
  std::set<WorkKey> weight_done_;
  Simulation result_;
};

std::vector<Program> all_programs(const PipelineShape& shape) {
  std::vector<Program> programs;
  for (int r = 0; r < shape.pp; ++r) {
    auto actions = pipeline_actions(shape, r);
    EXPECT_TRUE(actions.is_ok()) << actions.status().message();
    programs.push_back(actions.is_ok() ? *actions : Program{});
  }
  return programs;
}

Simulation simulate(const PipelineShape& shape, const std::vector<Program>& programs,
                    int64_t forward_cost = 1, int64_t backward_cost = 2) {
  return Simulator(shape, programs, forward_cost, backward_cost, /*rendezvous_sends=*/false).run();
}

// Every shape the brief asks for: p 1-4, v 1-3, m 1-8, each schedule where it is valid.
std::vector<PipelineShape> all_shapes() {
  std::vector<PipelineShape> shapes;
  for (auto schedule : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB,
                        PipelineSchedule::kInterleaved}) {
    for (int pp = 1; pp <= 4; ++pp) {
      for (int vpp = 1; vpp <= 3; ++vpp) {
        for (int m = 1; m <= 8; ++m) {
          PipelineShape shape{schedule, pp, vpp, m};
          if (check_pipeline_shape(shape).is_ok()) shapes.push_back(shape);
        }
      }
    }
  }
  return shapes;
}

std::string name_of(const PipelineShape& shape) {
  return std::string(memory::schedule_name(shape.schedule)) + " pp=" + std::to_string(shape.pp) +
         " vpp=" + std::to_string(shape.vpp) + " m=" + std::to_string(shape.micro_batches);
}

// "F0 F1 B0 ..." with the chunk after a dot when there are several: the compute order only.
std::string compute_order(const Program& program, bool with_chunk) {
  std::string text;
  for (const PipelineAction& a : program) {
    if (a.kind != Kind::kForward && a.kind != Kind::kBackward) continue;
    if (!text.empty()) text += ' ';
    text += (a.kind == Kind::kForward ? "F" : "B") + std::to_string(a.micro_batch);
    if (with_chunk) text += "." + std::to_string(a.chunk);
  }
  return text;
}

// ---------------------------------------------------------------------------------------------

TEST(PipelineSchedule, EveryShapePassesTheSimulator) {
  const auto shapes = all_shapes();
  // gpipe and 1f1b: 4 x 8 each; interleaved: m % p == 0 gives 4 + 2 + 2 per vpp in {2, 3}.
  ASSERT_EQ(shapes.size(), 32u + 32u + 16u);
  for (const PipelineShape& shape : shapes) {
    SCOPED_TRACE(name_of(shape));
    const Simulation sim = simulate(shape, all_programs(shape));
    EXPECT_EQ(sim.error, "");
  }
}

TEST(PipelineSchedule, EachRankRunsEveryOwnChunkForwardAndBackwardOnce) {
  for (const PipelineShape& shape : all_shapes()) {
    SCOPED_TRACE(name_of(shape));
    const auto programs = all_programs(shape);
    const Simulation sim = simulate(shape, programs);
    ASSERT_EQ(sim.error, "");
    for (int r = 0; r < shape.pp; ++r) {
      EXPECT_EQ(sim.forwards[r], shape.micro_batches * shape.vpp);
      EXPECT_EQ(sim.backwards[r], shape.micro_batches * shape.vpp);
      std::set<int> compute_chunks;
      for (const PipelineAction& a : programs[r]) {
        if (a.peer < 0) compute_chunks.insert(a.chunk);
      }
      const std::vector<int> own = rank_chunks(shape, r);
      EXPECT_EQ(std::vector<int>(compute_chunks.begin(), compute_chunks.end()), own);
    }
  }
}

TEST(PipelineSchedule, ActivationsInFlightReachTheTheoryAndNeverExceedIt) {
  for (const PipelineShape& shape : all_shapes()) {
    SCOPED_TRACE(name_of(shape));
    const Simulation sim = simulate(shape, all_programs(shape));
    ASSERT_EQ(sim.error, "");
    for (int r = 0; r < shape.pp; ++r) {
      EXPECT_EQ(sim.peak_in_flight[r], peak_activations_in_flight(shape, r)) << "rank " << r;
      const int m = shape.micro_batches;
      if (shape.schedule == PipelineSchedule::kGpipe) {
        EXPECT_EQ(sim.peak_in_flight[r], m);
      } else if (shape.schedule == PipelineSchedule::kOneFOneB) {
        EXPECT_EQ(sim.peak_in_flight[r], std::min(shape.pp - r, m));
      }
    }
  }
}

TEST(PipelineSchedule, OneFOneBHoldsFewerActivationsThanGpipe) {
  const PipelineShape gpipe{PipelineSchedule::kGpipe, 4, 1, 8};
  const PipelineShape one_f_one_b{PipelineSchedule::kOneFOneB, 4, 1, 8};
  const Simulation g = simulate(gpipe, all_programs(gpipe));
  const Simulation f = simulate(one_f_one_b, all_programs(one_f_one_b));
  ASSERT_EQ(g.error, "");
  ASSERT_EQ(f.error, "");
  EXPECT_EQ(g.peak_in_flight, (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(f.peak_in_flight, (std::vector<int>{4, 3, 2, 1}));
  // Same bubble, less memory: that is the whole point of 1F1B.
  EXPECT_EQ(g.makespan, f.makespan);
  // GPipe's lists break 1F1B's memory bound on every rank when m > p.
  for (int r = 0; r < 4; ++r) {
    EXPECT_GT(g.peak_in_flight[r], peak_activations_in_flight(one_f_one_b, r));
  }
}

TEST(PipelineSchedule, MeasuredBubbleMatchesNarayanan) {
  // Forward 1, backward 2 time units per chunk, free transfers: the step takes the ideal
  // m x v x 3 plus exactly the theoretical bubble on the slowest rank.
  for (const PipelineShape& shape : all_shapes()) {
    SCOPED_TRACE(name_of(shape));
    const Simulation sim = simulate(shape, all_programs(shape));
    ASSERT_EQ(sim.error, "");
    const double ideal = 3.0 * shape.micro_batches * shape.vpp;
    const double measured = (static_cast<double>(sim.makespan) - ideal) / ideal;
    const double theory =
        theoretical_bubble_fraction(shape.schedule, shape.pp, shape.vpp, shape.micro_batches);
    EXPECT_NEAR(measured, theory, 1e-12);
  }
}

TEST(PipelineSchedule, BubbleFractionsForKnownValues) {
  // Narayanan 2021 sec. 2.2: (p-1)/m, and (p-1)/(v m) with v chunks per rank.
  EXPECT_DOUBLE_EQ(theoretical_bubble_fraction(PipelineSchedule::kGpipe, 4, 1, 8), 3.0 / 8);
  EXPECT_DOUBLE_EQ(theoretical_bubble_fraction(PipelineSchedule::kOneFOneB, 8, 1, 32), 0.21875);
  EXPECT_DOUBLE_EQ(theoretical_bubble_fraction(PipelineSchedule::kInterleaved, 8, 2, 32), 0.109375);
  EXPECT_DOUBLE_EQ(theoretical_bubble_fraction(PipelineSchedule::kInterleaved, 4, 4, 8), 3.0 / 32);
  EXPECT_DOUBLE_EQ(theoretical_bubble_fraction(PipelineSchedule::kOneFOneB, 1, 1, 5), 0.0);
}

TEST(PipelineSchedule, InterleavedRankZeroHoldsKorthikantisExtraFraction) {
  // Korthikanti 2022: interleaving multiplies the first stage's activations, p micro-batches of
  // a whole stage under 1F1B, by 1 + (p-1)/(p v).
  for (int pp : {2, 4, 8}) {
    for (int vpp : {2, 3, 4}) {
      const PipelineShape shape{PipelineSchedule::kInterleaved, pp, vpp, 4 * pp};
      const double stages_held = static_cast<double>(peak_activations_in_flight(shape, 0)) / vpp;
      EXPECT_DOUBLE_EQ(stages_held, pp * (1.0 + (pp - 1.0) / (pp * vpp))) << pp << " " << vpp;
    }
  }
}

TEST(PipelineSchedule, OneFOneBOrderIsWarmupSteadyCooldown) {
  const PipelineShape shape{PipelineSchedule::kOneFOneB, 4, 1, 6};
  const auto programs = all_programs(shape);
  EXPECT_EQ(compute_order(programs[0], false), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(compute_order(programs[2], false), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(compute_order(programs[3], false), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  const PipelineShape gpipe{PipelineSchedule::kGpipe, 4, 1, 3};
  EXPECT_EQ(compute_order(all_programs(gpipe)[1], false), "F0 F1 F2 B0 B1 B2");
}

TEST(PipelineSchedule, InterleavedOrderFollowsMegatron) {
  // pp 2, vpp 2, m 4: rank 0 owns chunks 0 and 2. Warm-up (2-0-1) x 2 + (2-1) x 2 = 4 forwards
  // in groups of pp micro-batches per chunk; backwards walk the chunks in reverse.
  const PipelineShape shape{PipelineSchedule::kInterleaved, 2, 2, 4};
  const auto programs = all_programs(shape);
  EXPECT_EQ(compute_order(programs[0], true),
            "F0.0 F1.0 F0.2 F1.2 F2.0 B0.2 F3.0 B1.2 F2.2 B0.0 F3.2 B1.0 B2.2 B3.2 B2.0 B3.0");
  EXPECT_EQ(compute_order(programs[1], true),
            "F0.1 F1.1 F0.3 B0.3 F1.3 B1.3 F2.1 B0.1 F3.1 B1.1 F2.3 B2.3 F3.3 B3.3 B2.1 B3.1");
  EXPECT_EQ(warmup_forwards(shape, 0), 4);
  EXPECT_EQ(warmup_forwards(shape, 1), 2);
}

TEST(PipelineSchedule, InterleavedAtTwoRanksKeepsBothStreamsBetweenTheSamePeers) {
  const PipelineShape shape{PipelineSchedule::kInterleaved, 2, 2, 2};
  const auto programs = all_programs(shape);
  ASSERT_EQ(simulate(shape, programs).error, "");
  // Rank 0 both sends and receives activations and gradients, all with rank 1.
  std::set<Kind> kinds;
  std::set<uint64_t> tags;
  for (const PipelineAction& a : programs[0]) {
    if (a.peer < 0) continue;
    EXPECT_EQ(a.peer, 1);
    kinds.insert(a.kind);
    tags.insert(message_tag(a));
  }
  EXPECT_EQ(kinds.size(), 4u);
  // Rank 0's messages: activations into chunks 1 and 3 out, into 2 in; gradients the reverse;
  // each (kind, mb, chunk) is one message with one tag.
  size_t p2p = 0;
  for (const PipelineAction& a : programs[0]) p2p += a.peer >= 0 ? 1 : 0;
  EXPECT_EQ(tags.size(), p2p);
  // Rank 0's action list, in full, for the record (docs/pipeline.md shows it).
  std::string text;
  for (const PipelineAction& a : programs[0]) text += describe_action(a) + " ";
  EXPECT_EQ(text,
            "F(mb=0,c=0) send-A(mb=0,c=1)->1 F(mb=1,c=0) send-A(mb=1,c=1)->1 "
            "recv-A(mb=0,c=2)<-1 F(mb=0,c=2) send-A(mb=0,c=3)->1 "
            "recv-A(mb=1,c=2)<-1 F(mb=1,c=2) send-A(mb=1,c=3)->1 "
            "recv-G(mb=0,c=3)<-1 B(mb=0,c=2) send-G(mb=0,c=2)->1 "
            "recv-G(mb=1,c=3)<-1 B(mb=1,c=2) send-G(mb=1,c=2)->1 "
            "recv-G(mb=0,c=1)<-1 B(mb=0,c=0) recv-G(mb=1,c=1)<-1 B(mb=1,c=0) ");
}

TEST(PipelineSchedule, OneRankHasNoTransfers) {
  for (auto schedule : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB}) {
    auto actions = pipeline_actions({schedule, 1, 1, 3}, 0);
    ASSERT_TRUE(actions.is_ok());
    EXPECT_EQ(actions->size(), 6u);
    for (const PipelineAction& a : *actions) EXPECT_EQ(a.peer, -1);
  }
}

TEST(PipelineSchedule, TagsSeparateActivationFromGradientAndAreUnique) {
  std::set<uint64_t> tags;
  for (int mb = 0; mb < 64; ++mb) {
    for (int chunk = 0; chunk < 48; ++chunk) {
      const uint64_t activation = message_tag(PipelineMessage::kActivation, mb, chunk);
      const uint64_t gradient = message_tag(PipelineMessage::kGradient, mb, chunk);
      EXPECT_NE(activation, gradient);
      tags.insert(activation);
      tags.insert(gradient);
    }
  }
  EXPECT_EQ(tags.size(), 2u * 64 * 48);
  // Large values stay apart too: the chunk field does not spill into the micro-batch field.
  EXPECT_NE(message_tag(PipelineMessage::kActivation, 1, 0),
            message_tag(PipelineMessage::kActivation, 0, (1 << 24) - 1));
  EXPECT_NE(message_tag(PipelineMessage::kGradient, 1 << 20, 5),
            message_tag(PipelineMessage::kGradient, (1 << 20) + 1, 5));
  // Both ends of a transfer compute the same tag; compute actions have none.
  const PipelineAction send{Kind::kSendGradient, 3, 2, 1};
  const PipelineAction recv{Kind::kRecvGradient, 3, 2, 0};
  EXPECT_EQ(message_tag(send), message_tag(recv));
  EXPECT_EQ(message_tag(send), message_tag(PipelineMessage::kGradient, 3, 2));
  EXPECT_EQ(message_tag(PipelineAction{Kind::kForward, 3, 2, -1}), UINT64_MAX);
}

TEST(PipelineSchedule, EverySendHasOneReceiveWithTheSameTag) {
  for (const PipelineShape& shape : all_shapes()) {
    SCOPED_TRACE(name_of(shape));
    std::multiset<std::tuple<uint64_t, int, int>> sends;  // tag, src, dst
    std::multiset<std::tuple<uint64_t, int, int>> recvs;
    const auto programs = all_programs(shape);
    for (int r = 0; r < shape.pp; ++r) {
      for (const PipelineAction& a : programs[r]) {
        if (is_send(a.kind)) sends.insert({message_tag(a), r, a.peer});
        if (is_recv(a.kind)) recvs.insert({message_tag(a), a.peer, r});
      }
    }
    EXPECT_EQ(sends, recvs);
    // Two boundary crossings (activation, gradient) per micro-batch per chunk boundary.
    EXPECT_EQ(sends.size(), static_cast<size_t>(2 * shape.micro_batches * (shape.chunks() - 1)));
    const std::set<std::tuple<uint64_t, int, int>> distinct(sends.begin(), sends.end());
    EXPECT_EQ(distinct.size(), sends.size());
  }
}

TEST(PipelineSchedule, RanksOwnChunksTheMegatronWay) {
  const PipelineShape shape{PipelineSchedule::kInterleaved, 4, 3, 4};
  EXPECT_EQ(rank_chunks(shape, 0), (std::vector<int>{0, 4, 8}));
  EXPECT_EQ(rank_chunks(shape, 3), (std::vector<int>{3, 7, 11}));
  EXPECT_EQ(chunk_rank(shape, 9), 1);
  EXPECT_EQ(rank_chunks({PipelineSchedule::kOneFOneB, 4, 1, 4}, 2), std::vector<int>{2});
}

TEST(PipelineSchedule, RejectsWhatTheLayoutRejects) {
  EXPECT_FALSE(pipeline_actions({PipelineSchedule::kInterleaved, 2, 2, 3}, 0).is_ok());  // m % p
  EXPECT_FALSE(pipeline_actions({PipelineSchedule::kInterleaved, 1, 2, 2}, 0).is_ok());  // p < 2
  EXPECT_FALSE(pipeline_actions({PipelineSchedule::kInterleaved, 2, 1, 2}, 0).is_ok());  // v < 2
  EXPECT_FALSE(pipeline_actions({PipelineSchedule::kOneFOneB, 2, 2, 2}, 0).is_ok());     // vpp
  EXPECT_FALSE(pipeline_actions({PipelineSchedule::kGpipe, 2, 1, 0}, 0).is_ok());        // m < 1
  auto outside = pipeline_actions({PipelineSchedule::kGpipe, 2, 1, 2}, 2);
  ASSERT_FALSE(outside.is_ok());
  EXPECT_EQ(outside.status().exit_code(), 2);
}

TEST(PipelineSchedule, ShapeComesFromTheResolvedLayout) {
  TrainingLayout layout;
  layout.pp = 2;
  layout.schedule = PipelineSchedule::kInterleaved;
  layout.vpp = 2;
  layout.global_batch = 4;
  auto resolved = memory::resolve_layout(
      layout, memory::workload_model_config(WorkloadKind::kGpt, {4, 64, 4, 16, 128, 256}), {},
      memory::LayoutWorld{2, false});
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  const PipelineShape shape = pipeline_shape(*resolved);
  EXPECT_EQ(shape.schedule, PipelineSchedule::kInterleaved);
  EXPECT_EQ(shape.pp, 2);
  EXPECT_EQ(shape.vpp, 2);
  EXPECT_EQ(shape.micro_batches, 4);
  EXPECT_TRUE(check_pipeline_shape(shape).is_ok());
}

// The checker itself must catch broken schedules, or the tests above prove nothing.

TEST(PipelineSimulator, CatchesADeadlock) {
  const PipelineShape shape{PipelineSchedule::kOneFOneB, 2, 1, 2};
  auto programs = all_programs(shape);
  // Rank 0 waits for the gradient of micro-batch 0 before sending its activation: a cycle.
  auto& rank0 = programs[0];
  auto recv = std::find_if(rank0.begin(), rank0.end(),
                           [](const PipelineAction& a) { return a.kind == Kind::kRecvGradient; });
  ASSERT_NE(recv, rank0.end());
  std::rotate(rank0.begin(), recv, recv + 1);
  EXPECT_NE(simulate(shape, programs).error.find("deadlock"), std::string::npos);
}

TEST(PipelineSimulator, CatchesAComputeWithoutItsInput) {
  const PipelineShape shape{PipelineSchedule::kGpipe, 2, 1, 2};
  auto programs = all_programs(shape);
  auto& rank1 = programs[1];
  rank1.erase(std::find_if(rank1.begin(), rank1.end(), [](const PipelineAction& a) {
    return a.kind == Kind::kRecvActivation;
  }));
  EXPECT_NE(simulate(shape, programs).error.find("input activation"), std::string::npos);
}

TEST(PipelineSimulator, CatchesBackwardBeforeForwardAndUnmatchedSends) {
  const PipelineShape shape{PipelineSchedule::kOneFOneB, 1, 1, 1};
  std::vector<Program> swapped{{{Kind::kBackward, 0, 0, -1}, {Kind::kForward, 0, 0, -1}}};
  EXPECT_NE(simulate(shape, swapped).error.find("before its forward"), std::string::npos);

  const PipelineShape two{PipelineSchedule::kGpipe, 2, 1, 1};
  auto programs = all_programs(two);
  programs[1].push_back({Kind::kSendGradient, 0, 1, 0});  // a second gradient nobody receives
  EXPECT_NE(simulate(two, programs).error.find("sent twice"), std::string::npos);
  programs = all_programs(two);
  programs[0].pop_back();  // rank 0 never runs its backward: its gradient stays unreceived
  programs[0].pop_back();
  EXPECT_NE(simulate(two, programs).error.find("never received"), std::string::npos);
}

TEST(PipelineSimulator, BlockingSendsWouldDeadlockOneFOneB) {
  // Why the contract makes sends asynchronous: with sends that wait for the peer's receive, rank 0
  // sends activation 1 while rank 1 sends gradient 0, and each waits for the other.
  const PipelineShape shape{PipelineSchedule::kOneFOneB, 2, 1, 2};
  const auto programs = all_programs(shape);
  const Simulation sim = Simulator(shape, programs, 1, 2, /*rendezvous_sends=*/true).run();
  EXPECT_NE(sim.error.find("deadlock"), std::string::npos) << sim.error;
  // GPipe has no such crossing at pp 2: the same simulator accepts it, so it is not just broken.
  const PipelineShape gpipe{PipelineSchedule::kGpipe, 2, 1, 2};
  const auto gpipe_programs = all_programs(gpipe);
  EXPECT_EQ(Simulator(gpipe, gpipe_programs, 1, 2, /*rendezvous_sends=*/true).run().error, "");
}

TEST(PipelineSimulator, CatchesAWrongInterleavedChunkOrder) {
  // Swapping two forwards of rank 1 makes chunk 3 run before chunk 2's activation exists.
  const PipelineShape shape{PipelineSchedule::kInterleaved, 2, 2, 2};
  auto programs = all_programs(shape);
  auto& rank1 = programs[1];
  std::vector<size_t> forwards;
  for (size_t i = 0; i < rank1.size(); ++i) {
    if (rank1[i].kind == Kind::kForward) forwards.push_back(i);
  }
  ASSERT_GE(forwards.size(), 3u);
  std::swap(rank1[forwards[0]], rank1[forwards[2]]);
  EXPECT_NE(simulate(shape, programs).error, "");
}

// ---------------------------------------------------------------------------------------------
// The zero-bubble schedules: ZB-H1 and DualPipeV over p 2-5 and every m they run with up to 12.
// ---------------------------------------------------------------------------------------------

std::vector<PipelineShape> zero_bubble_shapes() {
  std::vector<PipelineShape> shapes;
  for (auto schedule : {PipelineSchedule::kZbH1, PipelineSchedule::kDualPipeV}) {
    for (int pp = 2; pp <= 5; ++pp) {
      for (int m = 1; m <= 12; ++m) {
        const PipelineShape shape{schedule, pp, 1, m};
        if (check_pipeline_shape(shape).is_ok()) shapes.push_back(shape);
      }
    }
  }
  return shapes;
}

TEST(ZeroBubbleSchedule, EveryShapeCompletesRunningEachPassOnce) {
  const auto shapes = zero_bubble_shapes();
  // zb-h1: 4 x 12; dualpipev: m >= 2p gives 9 + 7 + 5 + 3.
  ASSERT_EQ(shapes.size(), 48u + 24u);
  for (const PipelineShape& shape : shapes) {
    SCOPED_TRACE(name_of(shape));
    const auto programs = all_programs(shape);
    const Simulation sim = simulate(shape, programs);
    ASSERT_EQ(sim.error, "");
    const int per_rank = shape.micro_batches * shape.chunks() / shape.pp;
    for (int r = 0; r < shape.pp; ++r) {
      EXPECT_EQ(sim.forwards[r], per_rank);
      EXPECT_EQ(sim.backwards[r], per_rank);
      EXPECT_EQ(sim.weights[r], per_rank);
    }
  }
}

TEST(ZeroBubbleSchedule, ActivationsInFlightMatchTheory) {
  for (const PipelineShape& shape : zero_bubble_shapes()) {
    SCOPED_TRACE(name_of(shape));
    const Simulation sim = simulate(shape, all_programs(shape));
    ASSERT_EQ(sim.error, "");
    for (int r = 0; r < shape.pp; ++r) {
      EXPECT_EQ(sim.peak_in_flight[r], peak_activations_in_flight(shape, r)) << "rank " << r;
      if (shape.schedule == PipelineSchedule::kZbH1) {
        // Qi 2023: 1F1B's first-stage memory, pp micro-batches, on every stage.
        EXPECT_EQ(sim.peak_in_flight[r], std::min(shape.pp, shape.micro_batches));
      } else {
        // DualPipe README: PP + 1 chunk activations over the 2 pp stages of the V.
        EXPECT_EQ(sim.peak_in_flight[r], 2 * shape.pp + 1);
      }
    }
  }
}

TEST(ZeroBubbleSchedule, WeightPassesShrinkOneFOneBsBubbleAsQiPredicts) {
  // F = 2, B = 4 split into B = 2 and W = 2: 1F1B idles (p - 1)(F + B) = 6 (p - 1) per rank,
  // ZB-H1 (p - 1)(F + B - W) = 2 (p - 1) (Qi 2023 sec. 3.1).
  for (int pp = 2; pp <= 5; ++pp) {
    const int m = 3 * pp;
    const PipelineShape zb{PipelineSchedule::kZbH1, pp, 1, m};
    const PipelineShape one{PipelineSchedule::kOneFOneB, pp, 1, m};
    const Simulation z = simulate(zb, all_programs(zb), 2, 4);
    const Simulation o = simulate(one, all_programs(one), 2, 4);
    ASSERT_EQ(z.error, "");
    const int64_t ideal = 6 * m;
    EXPECT_EQ(o.makespan - ideal, 6 * (pp - 1)) << "pp " << pp;
    EXPECT_EQ(z.makespan - ideal, 2 * (pp - 1)) << "pp " << pp;
  }
}

TEST(ZeroBubbleSchedule, DualPipeVFoldsTheModelIntoAV) {
  const PipelineShape shape{PipelineSchedule::kDualPipeV, 4, 1, 8};
  EXPECT_EQ(shape.chunks(), 8);
  EXPECT_EQ(rank_chunks(shape, 0), (std::vector<int>{0, 7}));
  EXPECT_EQ(rank_chunks(shape, 3), (std::vector<int>{3, 4}));
  EXPECT_EQ(chunk_rank(shape, 5), 2);
  // The tip of the V hands chunk 3's output to chunk 4 on the same rank: no message.
  auto actions = pipeline_actions(shape, 3);
  ASSERT_TRUE(actions.is_ok());
  for (const PipelineAction& a : *actions) {
    if (a.peer >= 0) EXPECT_NE(a.chunk, 4) << describe_action(a);
  }
  // Rank 0 starts with 2 (pp - 1) = 6 forwards of chunk 0, then alternates chunk 0 and 7
  // (DeepSeek's dualpipev.py steps 1 and 2).
  auto first = pipeline_actions(shape, 0);
  ASSERT_TRUE(first.is_ok());
  std::string text;
  int computes = 0;
  for (const PipelineAction& a : *first) {
    if (a.peer >= 0 || computes == 8) continue;
    text += describe_action(a) + " ";
    ++computes;
  }
  EXPECT_EQ(text,
            "F(mb=0,c=0) F(mb=1,c=0) F(mb=2,c=0) F(mb=3,c=0) F(mb=4,c=0) F(mb=5,c=0) "
            "F(mb=6,c=0) F(mb=0,c=7) ");
}

TEST(ZeroBubbleSchedule, RefusesWhatItCannotRun) {
  EXPECT_FALSE(pipeline_actions({PipelineSchedule::kZbH1, 1, 1, 4}, 0).is_ok());       // pp 1
  EXPECT_FALSE(pipeline_actions({PipelineSchedule::kDualPipeV, 3, 1, 5}, 0).is_ok());  // m < 2p
  auto dual = pipeline_actions({PipelineSchedule::kDualPipe, 2, 1, 4}, 0);
  ASSERT_FALSE(dual.is_ok());
  EXPECT_NE(dual.status().message().find("dualpipev"), std::string::npos);
}

TEST(PipelineSimulator, DualPipeVOnTwoChannelsDeadlocksAsGlooDid) {
  // What the four channels are for: DualPipeV's lists over one activation and one gradient
  // communicator wait forever from pp 3 on (a receive queued behind the rank's own send the
  // other way), as the first runs on Gloo did; at pp 2 the neighbours are one pair each way.
  for (int pp = 2; pp <= 4; ++pp) {
    const PipelineShape shape{PipelineSchedule::kDualPipeV, pp, 1, 2 * pp};
    const auto programs = all_programs(shape);
    const Simulation two = Simulator(shape, programs, 1, 2, false, [](const PipelineAction& a) {
                             const bool activation =
                                 a.kind == Kind::kSendActivation || a.kind == Kind::kRecvActivation;
                             return activation ? 0 : 1;
                           }).run();
    if (pp == 2) {
      EXPECT_EQ(two.error, "");
    } else {
      EXPECT_NE(two.error.find("deadlock"), std::string::npos) << "pp " << pp << two.error;
    }
    EXPECT_EQ(simulate(shape, programs).error, "") << "pp " << pp;
  }
}

TEST(PipelineSimulator, CatchesAWeightPassBeforeItsBackward) {
  const PipelineShape shape{PipelineSchedule::kZbH1, 2, 1, 2};
  auto programs = all_programs(shape);
  auto& rank1 = programs[1];
  auto weight = std::find_if(rank1.begin(), rank1.end(),
                             [](const PipelineAction& a) { return a.kind == Kind::kWeight; });
  ASSERT_NE(weight, rank1.end());
  std::rotate(rank1.begin(), weight, weight + 1);
  EXPECT_NE(simulate(shape, programs).error.find("before its backward"), std::string::npos);
}

}  // namespace
}  // namespace partrain::runner
