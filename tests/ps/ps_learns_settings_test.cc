// A ps task started with only the cluster flags, as every TensorFlow 1 tutorial starts one, learns
// what the job trains — the model, optimizer and sync settings — from the chief, and trains it to
// the bit as a ps given every flag does; a flag it was given is checked against the chief's, and
// a worker that trains otherwise than the chief is refused by the name of the flag (it used to be
// trained with the ps's optimizer, silently). Real processes over loopback.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain {
namespace {

using testing::all_output;
using testing::concat;
using testing::HandStartedCluster;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessResult;

// The training flags of these jobs: a model, optimizer and sync mode none of which is a default.
std::vector<std::string> job_flags(bool sync = true) {
  std::vector<std::string> flags =
      concat(testing::with_flag(testing::softmax_flags(), "--model", "mlp"),
             {"--hidden_units", "24", "--optimizer", "adam", "--learning_rate", "0.003",
              "--train_steps", "40", "--peer_timeout", "60"});
  if (sync) flags.push_back("--sync_replicas");
  return flags;
}

struct JobResult {
  ProcessResult ps, worker0, worker1;
};

// One sync job of a ps and two workers, the ps started with `ps_flags` (and the cluster flags).
JobResult run_job(const std::vector<std::string>& ps_flags) {
  HandStartedCluster cluster(1, 2);
  const auto ps = cluster.start("ps", 0, ps_flags);
  const auto worker0 = cluster.start("worker", 0, job_flags());
  const auto worker1 = cluster.start("worker", 1, job_flags());
  JobResult r;
  r.worker0 = worker0->wait();
  r.worker1 = worker1->wait();
  r.ps = ps->wait();
  return r;
}

TEST(PsLearnsSettings, APsStartedWithOnlyTheClusterFlagsTrainsWhatTheChiefSaysToTheBit) {
  const JobResult learnt = run_job({});
  ASSERT_EQ(learnt.worker0.exit_code, 0) << all_output(learnt.worker0);
  ASSERT_EQ(learnt.worker1.exit_code, 0) << all_output(learnt.worker1);
  ASSERT_EQ(learnt.ps.exit_code, 0) << all_output(learnt.ps);
  EXPECT_THAT(learnt.ps.out, HasSubstr("ps0: serves what the chief (worker 0) trains"));
  // mlp with 24 hidden units, Adam's two slots, sync for both workers: all of it the chief's.
  EXPECT_THAT(learnt.ps.out, HasSubstr("of mlp, sync for 2 workers, 2 gradients per step"));
  EXPECT_THAT(learnt.ps.out, HasSubstr("ps0: done at global step 40:"));

  const JobResult given = run_job(job_flags());
  ASSERT_EQ(given.worker0.exit_code, 0) << all_output(given.worker0);
  ASSERT_EQ(given.ps.exit_code, 0) << all_output(given.ps);
  EXPECT_THAT(given.ps.out, Not(HasSubstr("serves what the chief")));
  // The same arithmetic: a ps that took another optimizer, learning rate rule or sync mode than
  // the chief's would end elsewhere.
  const auto learnt_crcs = testing::parameter_crcs(learnt.worker0.out + learnt.worker1.out);
  const auto given_crcs = testing::parameter_crcs(given.worker0.out + given.worker1.out);
  ASSERT_EQ(learnt_crcs.size(), 2u) << learnt.worker0.out;
  ASSERT_EQ(given_crcs.size(), 2u) << given.worker0.out;
  EXPECT_EQ(learnt_crcs.at(0), learnt_crcs.at(1));
  EXPECT_EQ(learnt_crcs.at(0), given_crcs.at(0));
}

// A ps given --optimizer, which the chief contradicts: the chief is told which flag, and the ps
// goes on waiting for a chief it agrees with (it ends by the signal).
TEST(PsLearnsSettings, AFlagTheLearningPsWasGivenIsCheckedAgainstTheChiefs) {
  HandStartedCluster cluster(1, 1);
  const auto ps = cluster.start("ps", 0, {"--optimizer", "sgd"});
  const ProcessResult chief = cluster.start("worker", 0, job_flags(/*sync=*/false))->wait();
  EXPECT_EQ(chief.exit_code, 1) << all_output(chief);
  EXPECT_THAT(chief.err, HasSubstr("the chief trains with another optimizer.name than this task "
                                   "was started with (\"sgd\" here, \"adam\" there); give it the "
                                   "same --optimizer"));
  ps->send_signal(SIGTERM);
  const ProcessResult r = ps->wait();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << all_output(r);
  EXPECT_THAT(r.out, HasSubstr("ps0: stopped before the chief said what the job trains"));
}

// Worker 1 with another optimizer than the chief's is refused by the flag's name, whether the ps
// learnt the chief's settings or was given its own; started again with the job's flags, it trains.
TEST(PsLearnsSettings, AWorkerThatTrainsOtherwiseThanTheJobIsRefusedNamingTheFlag) {
  for (const bool ps_learns : {true, false}) {
    SCOPED_TRACE(ps_learns ? "the ps learns" : "the ps is given every flag");
    HandStartedCluster cluster(1, 2);
    const auto ps = cluster.start("ps", 0, ps_learns ? std::vector<std::string>{} : job_flags());
    const auto chief = cluster.start("worker", 0, job_flags());
    const ProcessResult refused =
        cluster.start("worker", 1, testing::with_flag(job_flags(), "--optimizer", "rmsprop"))
            ->wait();
    EXPECT_EQ(refused.exit_code, 1) << all_output(refused);
    EXPECT_THAT(refused.err, HasSubstr("trains with another optimizer.name than this task "
                                       "(\"adam\" here, \"rmsprop\" there); start every task with "
                                       "the same --optimizer"));
    const ProcessResult worker1 = cluster.start("worker", 1, job_flags())->wait();
    EXPECT_EQ(worker1.exit_code, 0) << all_output(worker1);
    const ProcessResult chief_result = chief->wait();
    EXPECT_EQ(chief_result.exit_code, 0) << all_output(chief_result);
    const ProcessResult ps_result = ps->wait();
    EXPECT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
    EXPECT_THAT(ps_result.out, HasSubstr("ps0: done at global step 40:"));
  }
}

// A learning ps given --train_dir restores the newest checkpoint there once it knows the layout.
TEST(PsLearnsSettings, ALearningPsRestoresItsTrainDirOnceItKnowsTheModel) {
  const testing::TempDir dir;
  const std::string train_dir = (dir.path() / "run").string();
  for (const char* steps : {"20", "30"}) {
    HandStartedCluster cluster(1, 1);
    const auto ps = cluster.start("ps", 0, {"--train_dir", train_dir});
    const ProcessResult chief =
        cluster
            .start("worker", 0,
                   concat(testing::with_flag(job_flags(/*sync=*/false), "--train_steps", steps),
                          {"--train_dir", train_dir, "--save_steps", "10"}))
            ->wait();
    ASSERT_EQ(chief.exit_code, 0) << all_output(chief);
    const ProcessResult r = ps->wait();
    ASSERT_EQ(r.exit_code, 0) << all_output(r);
    if (std::string(steps) == "30") {
      EXPECT_THAT(r.out, HasSubstr("at global step 20\n")) << r.out;
      EXPECT_THAT(r.out, HasSubstr("ps0: restored ")) << r.out;
      EXPECT_THAT(r.out, HasSubstr("ps0: done at global step 30:")) << r.out;
    }
  }
}

}  // namespace
}  // namespace dtrain
