// The settings a ps job's tasks agree on (ps/job_settings.h, train/ps_job_settings.h): a
// difference is named by its key and both values; a ps adopts the chief's exactly as it would its
// own flags; and settings no chief would send — a negative or enormous shape, an unknown optimizer
// or placement, more replicas than workers — are refused by name before anything is allocated.
// Then a PsService that learns them, spoken to by hand as a task holding the secret could: nothing
// but kSettings is served before the chief's arrive; settings that are not JSON, or that it cannot
// take, are refused by name and leave it waiting, usable; the chief's settle it; and every later
// worker's are checked against them.
#include "ps/job_settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "comm/connect.h"
#include "comm/loopback.h"
#include "ps/ps_protocol.h"
#include "ps/ps_service.h"
#include "train/ps_job_settings.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
namespace proto = ps_protocol;

PsClusterConfig two_worker_ps() {
  PsClusterConfig c;
  c.cluster.cluster =
      ClusterSpec({{"ps", {HostPort{"127.0.0.1", 1}}},
                   {"worker", {HostPort{"127.0.0.1", 2}, HostPort{"127.0.0.1", 3}}}});
  c.cluster.task = TaskId{"ps", 0};
  return c;
}

std::vector<ParamSpec> two_variables() {
  ParamSpec w{.name = "w", .shape = {3, 4}};
  ParamSpec mean{.name = "bn/moving_mean", .shape = {4}};
  mean.trainable = false;
  return {w, mean};
}

nlohmann::json chief_settings(Precision precision = Precision::kFp32) {
  OptimizerConfig adam;
  adam.name = "adam";
  adam.beta2 = 0.99f;
  PsClusterConfig c = two_worker_ps();
  c.sync.sync_replicas = true;
  return ps_job_settings("tiny", two_variables(), precision, adam, c);
}

TEST(JobSettings, ADifferenceIsNamedByItsKeyWithBothValues) {
  nlohmann::json ours = chief_settings();
  EXPECT_EQ(settings_difference(ours, ours), std::nullopt);
  nlohmann::json theirs = ours;
  theirs["optimizer"]["name"] = "rmsprop";
  EXPECT_EQ(settings_difference(ours, theirs), "optimizer.name (\"adam\" here, \"rmsprop\" there)");
  EXPECT_EQ(settings_flag("optimizer.name"), "--optimizer");
  theirs = ours;
  theirs["model"]["layout"][1]["shape"] = {5};
  EXPECT_EQ(settings_difference(ours, theirs), "model.layout[1].shape ([4] here, [5] there)");
  EXPECT_EQ(settings_flag("model.layout[1].shape"), "--model");
  theirs = ours;
  theirs["sync"]["replicas_to_aggregate"] = 1;
  const auto difference = settings_difference(ours, theirs);
  ASSERT_TRUE(difference.has_value());
  EXPECT_EQ(settings_flag(difference->substr(0, difference->find(' '))), "--replicas_to_aggregate");
  // A worker that computes its gradients in bf16 where the chief's are fp32.
  const auto precision = settings_difference(ours, chief_settings(Precision::kBf16));
  EXPECT_EQ(precision, "model.precision (\"fp32\" here, \"bf16\" there)");
  EXPECT_EQ(settings_flag(precision->substr(0, precision->find(' '))), "--precision");
  // What one side leaves out is not compared: a joining worker is not told the job's size.
  theirs = ours;
  theirs["sync"].erase("max_workers");
  EXPECT_EQ(settings_difference(ours, theirs), std::nullopt);
}

TEST(JobSettings, APsAdoptsTheChiefsSettingsAsItWouldItsOwnFlags) {
  PsServiceOptions learnt;
  EXPECT_EQ(adopt_ps_job_settings(chief_settings(), two_worker_ps(), learnt), "tiny");
  ASSERT_EQ(learnt.specs.size(), 2u);
  EXPECT_EQ(learnt.specs[0].name, "w");
  EXPECT_EQ(learnt.specs[0].shape, (Shape{3, 4}));
  EXPECT_TRUE(learnt.specs[0].trainable);
  EXPECT_FALSE(learnt.specs[1].trainable);  // a statistic stays one: its deltas are assigned
  EXPECT_EQ(learnt.optimizer.name, "adam");
  EXPECT_FLOAT_EQ(learnt.optimizer.beta2, 0.99f);
  EXPECT_FALSE(learnt.optimizer.epsilon.has_value());  // unset stays unset: adam's own default
  EXPECT_TRUE(learnt.sync.sync_replicas);
  EXPECT_EQ(learnt.sync.total_num_replicas, 2);  // resolved against this ps's cluster
  EXPECT_EQ(learnt.sync.replicas_to_aggregate, 2);
  EXPECT_EQ(learnt.map.num_ps(), 1);
  EXPECT_EQ(nlohmann::json::parse(learnt.settings), chief_settings());
}

TEST(JobSettings, SettingsNoChiefWouldSendAreRefusedByName) {
  const auto refusal = [](const std::function<void(nlohmann::json&)>& spoil) {
    nlohmann::json settings = chief_settings();
    spoil(settings);
    PsServiceOptions learnt;
    try {
      adopt_ps_job_settings(settings, two_worker_ps(), learnt);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(refusal([](auto& s) {
                s["model"]["layout"][0]["shape"] = {-1, 4};
              }),
              HasSubstr("variable w has a shape out of range"));
  EXPECT_THAT(refusal([](auto& s) {
                s["model"]["layout"][0]["shape"] = {1 << 30, 1 << 30};
              }),
              HasSubstr("out of range"));
  EXPECT_THAT(refusal([](auto& s) { s["model"]["layout"][0]["name"] = ""; }), HasSubstr("no name"));
  EXPECT_THAT(refusal([](auto& s) { s["model"]["layout"] = "all of them"; }),
              HasSubstr("model.layout is not a list"));
  EXPECT_THAT(refusal([](auto& s) { s["optimizer"]["name"] = "lion"; }),
              HasSubstr("unknown optimizer \"lion\""));
  EXPECT_THAT(refusal([](auto& s) { s["optimizer"]["rho"] = "high"; }),
              HasSubstr("optimizer.rho is not a number"));
  EXPECT_THAT(refusal([](auto& s) { s["model"]["placement"] = "random"; }),
              HasSubstr("model.placement"));
  EXPECT_THAT(refusal([](auto& s) { s["model"]["min_shard_bytes"] = -5; }),
              HasSubstr("model.min_shard_bytes is out of range"));
  EXPECT_THAT(refusal([](auto& s) { s["sync"]["replicas_to_aggregate"] = 3; }),
              HasSubstr("the chief's settings:"));
  EXPECT_THAT(refusal([](auto& s) { s.erase("sync"); }), HasSubstr("no \"sync\" object"));
  EXPECT_EQ(refusal([](auto&) {}), "accepted");
}

TEST(JobSettings, APsKeepsOnlyTheSettingsItsFlagsGave) {
  const nlohmann::json own = given_settings(chief_settings(), {"optimizer", "beta_2"});
  EXPECT_EQ(own, (nlohmann::json{{"optimizer", {{"name", "adam"}, {"beta_2", 0.99f}}}}));
  EXPECT_TRUE(given_settings(chief_settings(), {"strategy"})["sync"].contains("sync_replicas"));
  EXPECT_TRUE(given_settings(chief_settings(), {"hidden_units"})["model"].contains("layout"));
  EXPECT_TRUE(names_a_model({"hidden_units"}));
  EXPECT_FALSE(names_a_model({"optimizer", "sync_replicas"}));
}

nlohmann::json settings_with(const std::string& optimizer, int64_t rows = 8) {
  OptimizerConfig o;
  o.name = optimizer;
  return ps_job_settings("tiny", {ParamSpec{"w", {rows, 3}}, ParamSpec{"b", {3}}}, Precision::kFp32,
                         o, two_worker_ps());
}

std::unique_ptr<PsService> learning_service() {
  PsServiceOptions o;
  o.server = testing::loopback_options();
  o.learn = [](const nlohmann::json& chief, PsServiceOptions& into) {
    adopt_ps_job_settings(chief, two_worker_ps(), into);
    return std::optional<PsRestoredState>();
  };
  return std::make_unique<PsService>(std::move(o));
}

class LearningPeer {
 public:
  LearningPeer(const PsService& service, int worker) {
    ConnectionOptions options = testing::client_options();
    options.identity = proto::worker_identity(worker);
    connection_ = connect("127.0.0.1", service.port(), testing::kLoopbackSecret, options);
  }
  // The reply's type and, for a kError, its text; for a kSettingsReply, "agreed" or "not yet".
  std::pair<uint16_t, std::string> send(uint16_t type, const proto::MetaWriter& meta) {
    connection_->send(type, 0, meta.bytes(), {});
    const auto in = connection_->receive();
    std::string text;
    if (in.type == proto::kSettingsReply) {
      text = proto::MetaReader(in.meta).get<uint8_t>() != 0 ? "agreed" : "not yet";
    } else {
      text = proto::MetaReader(in.meta).rest_as_peer_text();
    }
    connection_->discard_tensors();
    return {in.type, text};
  }
  std::pair<uint16_t, std::string> settings(const std::string& text, uint32_t wait_ms = 0) {
    proto::MetaWriter meta;
    meta.put(wait_ms).put_string(text);
    return send(proto::kSettings, meta);
  }

 private:
  std::unique_ptr<Connection> connection_;
};

TEST(PsServiceLearning, BeforeTheChiefSpeaksOnlySettingsAreServedAndBadOnesRefusedByName) {
  const auto service = learning_service();
  LearningPeer worker1(*service, 1);
  proto::MetaWriter hello;
  hello.put(uint64_t{0}).put(int32_t{1});
  const auto early = worker1.send(proto::kHello, hello);
  EXPECT_EQ(early.first, proto::kError);
  EXPECT_THAT(early.second,
              HasSubstr("before this task learnt from the chief what the job trains"));
  const auto junk = worker1.settings("{\"model\": [1, 2");
  EXPECT_EQ(junk.first, proto::kError);
  EXPECT_THAT(junk.second, HasSubstr("sent settings that are not a JSON object"));
  // A million levels would overflow the stack of whatever copied or freed the parsed value.
  const auto deep = worker1.settings(std::string(1'000'000, '['));
  EXPECT_EQ(deep.first, proto::kError);
  EXPECT_THAT(deep.second, HasSubstr("sent settings nested deeper than 64 levels (at byte 64)"));
  // A worker's settings do not settle the task, whatever they say: it asks again.
  EXPECT_EQ(worker1.settings(settings_with("adam").dump()).second, "not yet");
  EXPECT_FALSE(service->configured());

  // The chief's that the task cannot take leave it waiting, and say why.
  LearningPeer chief(*service, 0);
  const auto bad = chief.settings(settings_with("adam", -4).dump());
  EXPECT_EQ(bad.first, proto::kError);
  EXPECT_THAT(bad.second, HasSubstr("variable w has a shape out of range"));
  EXPECT_FALSE(service->configured());

  EXPECT_EQ(chief.settings(settings_with("adam").dump()).second, "agreed");
  ASSERT_TRUE(service->configured());
  EXPECT_EQ(service->store().slot_suffixes().size(), 2u);  // Adam's m and v: the chief's optimizer
  EXPECT_EQ(worker1.settings(settings_with("adam").dump()).second, "agreed");
  const auto other = worker1.settings(settings_with("rmsprop").dump());
  EXPECT_EQ(other.first, proto::kError);
  EXPECT_THAT(other.second,
              HasSubstr("trains with another optimizer.name than this task (\"adam\" here, "
                        "\"rmsprop\" there); start every task with the same --optimizer"));
}

}  // namespace
}  // namespace dtrain
