// The elastic job's coordinator and its clients over real loopback sockets: the first view waits
// for --workers, a lost or leaving worker interrupts the others' rings and the next view takes the
// state of the member furthest along, a joiner comes in at the next view, too few workers fail the
// job naming who left, and a worker that trains otherwise is refused naming the difference.
#include "cluster/membership_service.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "cluster/membership_client.h"
#include "cluster/membership_view.h"
#include "comm/connect.h"
#include "comm/connection.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr std::string_view kMembershipSecret = "membership test secret, 32 bytes";

struct Job {
  explicit Job(int workers, int min_workers, int max_workers, int timeout_ms = 30'000)
      : service(MembershipOptions{.secret = std::string(kMembershipSecret),
                                  .workers = workers,
                                  .min_workers = min_workers,
                                  .max_workers = max_workers,
                                  .timeout_ms = timeout_ms}) {}

  std::unique_ptr<MembershipClient> connect(int index, const std::string& model = "mlp") const {
    return connect_as("worker" + std::to_string(index), model);
  }
  std::unique_ptr<MembershipClient> connect_as(const std::string& name,
                                               const std::string& model = "mlp") const {
    return std::make_unique<MembershipClient>(
        MembershipClientOptions{.coordinator = {"127.0.0.1", service.port()},
                                .secret = std::string(kMembershipSecret),
                                .name = name,
                                .settings = settings(model),
                                .timeout_ms = 30'000});
  }
  static nlohmann::json settings(const std::string& model = "mlp") {
    return {{"model", model}, {"batch_size", 100}};
  }

  MembershipService service;
};

// A peer that holds the secret and speaks the protocol in frames of its own choosing.
class RawMember {
 public:
  RawMember(const Job& job, const std::string& name) {
    ConnectionOptions options;
    options.identity = name;
    options.type_carries_tensors = membership_protocol::carries_no_tensors;
    connection_ = dtrain::connect("127.0.0.1", job.service.port(), kMembershipSecret, options);
    send(membership_protocol::kHello, {{"name", name}, {"settings", Job::settings()}});
    EXPECT_EQ(receive().first, membership_protocol::kWelcome);
  }
  void send(uint16_t type, const nlohmann::json& meta) {
    const std::string text = meta.dump();
    connection_->send(type, 0, std::as_bytes(std::span(text.data(), text.size())), {});
  }
  std::pair<uint16_t, nlohmann::json> receive() {
    const Connection::Incoming in = connection_->receive();
    return {in.type, nlohmann::json::parse(in.meta.begin(), in.meta.end())};
  }

 private:
  std::unique_ptr<Connection> connection_;
};

HostPort address_of(int index) { return {"127.0.0.1", static_cast<uint16_t>(40000 + index)}; }

// Each client reports ready at its step on a thread of its own; the views they receive.
std::vector<MembershipView> views(const std::vector<MembershipClient*>& clients,
                                  const std::vector<int64_t>& steps,
                                  const std::vector<int>& indices) {
  std::vector<std::future<MembershipView>> pending;
  for (size_t i = 0; i < clients.size(); ++i) {
    pending.push_back(std::async(std::launch::async, [&, i] {
      return clients[i]->next_view(steps[i], address_of(indices[i]));
    }));
  }
  std::vector<MembershipView> got;
  for (auto& view : pending) got.push_back(view.get());
  return got;
}

// Waits (on the interrupt's own descriptor) until the client's rings of `view` are interrupted.
bool interrupted_past(MembershipClient& client, uint64_t view) {
  for (int i = 0; i < 100 && client.interrupt().raised() <= view; ++i) {
    pollfd fd{client.interrupt().fd(), POLLIN, 0};
    ::poll(&fd, 1, 100);
    client.interrupt().rearm();
  }
  return client.interrupt().raised() > view;
}

TEST(MembershipService, TheFirstViewHoldsEveryWorkerInTheOrderOfTheirTasks) {
  Job job(3, 2, 4);
  auto w2 = job.connect(2), w0 = job.connect(0), w1 = job.connect(1);
  // Admitted with the job's --workers, by which every worker counts the job's steps.
  EXPECT_EQ(w1->planned_workers(), 3);
  const std::vector<MembershipView> got =
      views({w2.get(), w0.get(), w1.get()}, {-1, -1, -1}, {2, 0, 1});
  for (const MembershipView& view : got) {
    EXPECT_EQ(view.id, 1u);
    EXPECT_THAT(view.names(), ElementsAre("worker0", "worker1", "worker2"));
    EXPECT_TRUE(view.fresh);
    EXPECT_EQ(view.source, 0);
    EXPECT_EQ(view.members[1].address, address_of(1));
    EXPECT_TRUE(view.changes.empty());
  }
  EXPECT_EQ(job.service.views(), 1u);
}

TEST(MembershipService, ALostWorkerInterruptsTheOthersAndTheFurthestStateIsEveryonesNext) {
  Job job(3, 2, 3);
  auto w0 = job.connect(0), w1 = job.connect(1), w2 = job.connect(2);
  views({w0.get(), w1.get(), w2.get()}, {-1, -1, -1}, {0, 1, 2});
  w1.reset();  // its process ended: the connection closes without a word
  ASSERT_TRUE(interrupted_past(*w0, 1));
  ASSERT_TRUE(interrupted_past(*w2, 1));
  EXPECT_THAT(w0->interrupt().why(), HasSubstr("worker1 was lost"));
  // worker2 finished the step under way (its all-reduce completed); worker0 did not.
  const std::vector<MembershipView> got = views({w0.get(), w2.get()}, {41, 42}, {0, 2});
  for (const MembershipView& view : got) {
    EXPECT_EQ(view.id, 2u);
    EXPECT_THAT(view.names(), ElementsAre("worker0", "worker2"));
    EXPECT_FALSE(view.fresh);
    EXPECT_EQ(view.source, 1) << "worker2's state, at step 42, is the furthest";
    ASSERT_EQ(view.changes.size(), 1u);
    EXPECT_EQ(view.changes[0],
              "worker1 was lost at step 42 (its connection to the coordinator closed: the "
              "process ended)");
  }
}

TEST(MembershipService, AJoinerComesInAtTheNextViewAfterTheMembers) {
  Job job(2, 1, 3);
  auto w0 = job.connect(0), w1 = job.connect(1);
  views({w0.get(), w1.get()}, {-1, -1}, {0, 1});
  auto w5 = job.connect(5);
  // Its report starts the change, not its hello.
  auto joined = std::async(std::launch::async, [&] { return w5->next_view(-1, address_of(5)); });
  ASSERT_TRUE(interrupted_past(*w0, 1));
  EXPECT_THAT(w0->interrupt().why(), HasSubstr("worker5 asks to join"));
  std::vector<MembershipView> got = views({w1.get(), w0.get()}, {7, 7}, {1, 0});
  got.push_back(joined.get());
  for (const MembershipView& view : got) {
    EXPECT_EQ(view.id, 2u);
    EXPECT_THAT(view.names(), ElementsAre("worker0", "worker1", "worker5"));
    EXPECT_EQ(view.source, 0);
    EXPECT_THAT(view.changes, ElementsAre("worker5 joined at step 7"));
  }
  // A fourth is one beyond --max_workers 3.
  EXPECT_THAT([&] { job.connect(6); },
              ThrowsMessage<Error>(HasSubstr("the job has its --max_workers 3 workers")));
}

TEST(MembershipService, TooFewWorkersFailTheJobNamingWhoLeft) {
  Job job(2, 2, 2);
  auto w0 = job.connect(0), w1 = job.connect(1);
  views({w0.get(), w1.get()}, {-1, -1}, {0, 1});
  w1->leave(3, "SIGTERM", /*finished=*/false);
  EXPECT_THAT([&] { w0->next_view(3, address_of(0)); },
              ThrowsMessage<Error>(AllOf(HasSubstr("worker1 left at step 3 (SIGTERM)"),
                                         HasSubstr("1 worker(s) remain, fewer than "
                                                   "--min_workers 2"))));
}

TEST(MembershipService, AWorkerThatTrainsOtherwiseIsRefusedNamingTheDifference) {
  Job job(2, 1, 2);
  auto w0 = job.connect(0);
  EXPECT_THAT(
      [&] { job.connect(1, "softmax"); },
      ThrowsMessage<Error>(HasSubstr(
          R"(worker1 trains otherwise than the job: /model: "softmax" here, "mlp" in the job)")));
  // The job goes on with the one that fits, once its other worker arrives.
  auto w1 = job.connect(1);
  const std::vector<MembershipView> got = views({w0.get(), w1.get()}, {-1, -1}, {0, 1});
  EXPECT_THAT(got[0].names(), ElementsAre("worker0", "worker1"));
}

TEST(MembershipService, AWorkerWithoutTheSecretIsNotLetIn) {
  Job job(1, 1, 1);
  EXPECT_THROW(
      MembershipClient(MembershipClientOptions{.coordinator = {"127.0.0.1", job.service.port()},
                                               .secret = "another secret of 32 bytes....",
                                               .name = "worker0",
                                               .settings = {{"model", "mlp"}},
                                               .timeout_ms = 5'000}),
      AuthError);
}

// ---- what a peer that holds the secret may not do ----

TEST(MembershipService, AJoinerThatSaidHelloButNeverReportsStallsNoChange) {
  Job job(2, 1, 3);
  auto w0 = job.connect(0), w1 = job.connect(1);
  views({w0.get(), w1.get()}, {-1, -1}, {0, 1});
  auto half_open = job.connect(5);  // hello, and never a report
  w1->leave(9, "SIGTERM", /*finished=*/false);
  ASSERT_TRUE(interrupted_past(*w0, 1));
  // The change is worker1's, and it settles at worker0's report, without the joiner.
  EXPECT_THAT(w0->interrupt().why(), HasSubstr("worker1 left"));
  const MembershipView view = w0->next_view(9, address_of(0));
  EXPECT_EQ(view.id, 2u);
  EXPECT_THAT(view.names(), ElementsAre("worker0"));
  EXPECT_THAT(view.changes, ElementsAre("worker1 left at step 9 (SIGTERM)"));
}

TEST(MembershipService, AJoinerThatNeverReportsIsLetGoAtItsJoinDeadline) {
  Job job(1, 1, 2, /*timeout_ms=*/2'000);
  auto w0 = job.connect(0);
  views({w0.get()}, {-1}, {0});
  auto half_open = job.connect(5);
  ASSERT_TRUE(interrupted_past(*half_open, 0));
  EXPECT_THAT(half_open->interrupt().why(),
              HasSubstr("worker5 said hello but did not report ready within 2 s"));
  // Its name is free again: the same worker, started again, is let in.
  half_open.reset();
  EXPECT_NO_THROW(job.connect(5));
}

TEST(MembershipService, AFinishedLeaveFromAJoinerEndsOnlyItsOwnSession) {
  Job job(2, 1, 3);
  auto w0 = job.connect(0), w1 = job.connect(1);
  views({w0.get(), w1.get()}, {-1, -1}, {0, 1});
  auto w5 = job.connect(5);
  w5->leave(0, "finished", /*finished=*/true);
  ASSERT_TRUE(interrupted_past(*w5, 0));  // its session ended: the coordinator closed the link
  // The job goes on: a change settles, and a joiner is still let in.
  w1->leave(4, "SIGTERM", /*finished=*/false);
  const MembershipView view = w0->next_view(4, address_of(0));
  EXPECT_THAT(view.names(), ElementsAre("worker0"));
  EXPECT_NO_THROW(job.connect(6));
}

TEST(MembershipService, AJoinerWaitingWhenTheMembersFinishHearsItCameTooLate) {
  Job job(2, 1, 3);
  auto w0 = job.connect(0), w1 = job.connect(1);
  views({w0.get(), w1.get()}, {-1, -1}, {0, 1});
  auto w5 = job.connect(5);
  auto joined = std::async(std::launch::async, [&] { return w5->next_view(-1, address_of(5)); });
  ASSERT_TRUE(interrupted_past(*w0, 1));  // its report arrived
  // The members were past their last step: they finish rather than report.
  w0->leave(600, "finished", /*finished=*/true);
  w1->leave(600, "finished", /*finished=*/true);
  try {
    joined.get();
    ADD_FAILURE() << "worker5 joined a job that had finished";
  } catch (const JobEnded& ended) {
    // Named by whichever member's finish came first.
    EXPECT_THAT(ended.what(), ::testing::ContainsRegex(
                                  R"(^worker5 came too late to join: the job finished at step 600 )"
                                  R"(\(worker[01] reached the end of its training\))"));
  }
  // And so does one that comes later.
  EXPECT_THAT([&] { job.connect(6); }, ThrowsMessage<JobEnded>(HasSubstr("came too late")));
}

TEST(MembershipService, ANameThatIsNoWorkersIsRefusedByNameAndTheJobGoesOn) {
  Job job(2, 1, 3);
  auto w0 = job.connect(0), w1 = job.connect(1);
  views({w0.get(), w1.get()}, {-1, -1}, {0, 1});
  for (const char* name : {"worker99999999999", "worker", "7", "worker07", "worker-1"}) {
    EXPECT_THAT([&] { job.connect_as(name); },
                ThrowsMessage<Error>(HasSubstr(fmt::format("'{}' is not a worker's name", name))))
        << name;
  }
  auto w9 = job.connect(9);
  auto joined = std::async(std::launch::async, [&] { return w9->next_view(-1, address_of(9)); });
  ASSERT_TRUE(interrupted_past(*w0, 1));
  views({w0.get(), w1.get()}, {5, 5}, {0, 1});
  EXPECT_THAT(joined.get().names(), ElementsAre("worker0", "worker1", "worker9"));
}

// The session of a member whose report its handler cannot take (an address that is none) ends
// with its handler: the change it makes names why, and nothing touches its connection again.
// (Under AddressSanitizer, a session that outlived its connection was a heap-use-after-free.)
TEST(MembershipService, AMemberWhoseReportFailsItsSessionIsLostNamingWhy) {
  Job job(2, 1, 2);
  auto w0 = job.connect(0);
  RawMember w1(job, "worker1");
  w1.send(membership_protocol::kReady, {{"view", 0}, {"step", -1}, {"address", "127.0.0.1:40001"}});
  views({w0.get()}, {-1}, {0});
  EXPECT_EQ(w1.receive().first, membership_protocol::kView);
  w1.send(membership_protocol::kReady, {{"view", 1}, {"step", 3}, {"address", "no address"}});
  const MembershipView view = w0->next_view(3, address_of(0));
  EXPECT_THAT(view.names(), ElementsAre("worker0"));
  ASSERT_EQ(view.changes.size(), 1u);
  EXPECT_THAT(view.changes[0], AllOf(HasSubstr("worker1 was lost at step 3 (its session failed"),
                                     HasSubstr("'no address'")));
}

TEST(MembershipService, AMemberThatDoesNotReportInTimeIsToldItWasDroppedAndMayJoinAgain) {
  Job job(2, 1, 2, /*timeout_ms=*/2'000);
  auto w0 = job.connect(0), w1 = job.connect(1);
  views({w0.get(), w1.get()}, {-1, -1}, {0, 1});
  // worker0's ring failed; worker1 (stopped, say) never reports.
  const MembershipView view = w0->next_view(5, address_of(0));
  EXPECT_THAT(view.names(), ElementsAre("worker0"));
  // Alive after all, it must not train on as if it were still in the job.
  ASSERT_TRUE(interrupted_past(*w1, 2));  // past the change's own interrupt, of view 2
  EXPECT_THAT(w1->interrupt().why(),
              HasSubstr("worker1 was dropped from the job: no report within 2 s after the change "
                        "to view 2 began"));
  EXPECT_THAT([&] { w1->next_view(5, address_of(1)); },
              ThrowsMessage<DroppedFromJob>(HasSubstr("worker1 was dropped from the job")));
  // It may join again, as a worker that holds no state.
  auto again = job.connect(1);
  auto joined = std::async(std::launch::async, [&] { return again->next_view(-1, address_of(1)); });
  ASSERT_TRUE(interrupted_past(*w0, 2));
  views({w0.get()}, {6}, {0});
  const MembershipView rejoined = joined.get();
  EXPECT_THAT(rejoined.names(), ElementsAre("worker0", "worker1"));
  EXPECT_EQ(rejoined.source, 0);
}

}  // namespace
}  // namespace dtrain
