// Cluster specs: the tutorial flags, TF_CONFIG as the TFJob operator writes it, cluster files,
// worker ranks, and one test per validation error, each checking that the message names the
// culprit and the offending value.
#include "cluster/cluster_spec.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "base/error.h"
#include "support/temp_dir.h"

namespace dtrain {

// Readable failures: "worker:1" rather than the bytes of a TaskId.
void PrintTo(const TaskId& task, std::ostream* os) { *os << task.to_string(); }
void PrintTo(const HostPort& address, std::ostream* os) { *os << address.to_string(); }

namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;
using testing::write_bytes;

// The message of the UsageError that fn throws, which must be one line.
template <typename Fn>
std::string usage_error(Fn&& fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    std::string message = e.what();
    EXPECT_THAT(message, Not(HasSubstr("\n"))) << "an error message is one line";
    return message;
  }
  ADD_FAILURE() << "expected a UsageError";
  return "";
}

// The TensorFlow tutorial's command lines: one ps and three workers on one machine.
constexpr std::string_view kTutorialPs = "localhost:9001";
constexpr std::string_view kTutorialWorkers = "localhost:9002,localhost:9003,localhost:9004";

// What Kubeflow's TFJob operator sets in worker 1's pod for deploy/k8s/tfjob.yaml: pods are named
// <job>-<replica type, lower case>-<index>, each behind a Service on port 2222.
constexpr std::string_view kTfJobWorker1Config = R"({
  "cluster": {
    "ps": ["dtrain-mnist-ps-0.default.svc:2222"],
    "worker": ["dtrain-mnist-worker-0.default.svc:2222", "dtrain-mnist-worker-1.default.svc:2222"]
  },
  "task": {"type": "worker", "index": 1},
  "environment": "cloud"
})";

// TF_CONFIG for a pod of a TFJob with Chief, PS, Worker and Evaluator replicas. The operator
// leaves the evaluator out of the cluster: in TensorFlow it is not part of the training cluster.
std::string full_tf_job_config(std::string_view type, int index) {
  return fmt::format(R"({{
  "cluster": {{
    "chief": ["job-chief-0.default.svc:2222"],
    "ps": ["job-ps-0.default.svc:2222", "job-ps-1.default.svc:2222"],
    "worker": ["job-worker-0.default.svc:2222", "job-worker-1.default.svc:2222"]
  }},
  "task": {{"type": "{}", "index": {}}},
  "environment": "cloud"
}})",
                     type, index);
}

ClusterSpec chief_ps_worker_evaluator() {
  return ClusterSpec({{"chief", {{"c", 1}}},
                      {"ps", {{"p", 1}}},
                      {"worker", {{"w0", 1}, {"w1", 1}}},
                      {"evaluator", {{"e", 1}}}});
}

// ---- Host lists.

TEST(ClusterHostListTest, AcceptsHostnamesIpv4AndBracketedIpv6) {
  EXPECT_THAT(
      parse_host_list("--worker_hosts", "localhost:9001,10.0.0.7:2222,[::1]:9003,w-1.ns.svc:80"),
      ElementsAre(HostPort{"localhost", 9001}, HostPort{"10.0.0.7", 2222}, HostPort{"::1", 9003},
                  HostPort{"w-1.ns.svc", 80}));
}

TEST(ClusterHostListTest, EmptyTextIsAnEmptyList) {
  EXPECT_TRUE(parse_host_list("--ps_hosts", "").empty());
}

TEST(ClusterHostListTest, PortOutOfRangeNamesFlagAndEntry) {
  EXPECT_THAT(usage_error([] { parse_host_list("--ps_hosts", "localhost:99999"); }),
              AllOf(HasSubstr("--ps_hosts"), HasSubstr("'localhost:99999'"),
                    HasSubstr("not a valid port (1-65535)")));
  EXPECT_THAT(usage_error([] { parse_host_list("--ps_hosts", "localhost:0"); }),
              HasSubstr("'localhost:0' is not a valid port"));
}

TEST(ClusterHostListTest, NonNumericPortNamesFlagAndEntry) {
  EXPECT_THAT(usage_error([] { parse_host_list("--worker_hosts", "a:1,localhost:http"); }),
              AllOf(HasSubstr("--worker_hosts"), HasSubstr("'localhost:http'"),
                    HasSubstr("not a valid port")));
}

TEST(ClusterHostListTest, MissingPortNamesFlagAndEntry) {
  EXPECT_THAT(usage_error([] { parse_host_list("--worker_hosts", "localhost:9002,localhost"); }),
              AllOf(HasSubstr("--worker_hosts"), HasSubstr("'localhost'"), HasSubstr("no port")));
  EXPECT_THAT(usage_error([] { parse_host_list("--worker_hosts", "localhost:"); }),
              AllOf(HasSubstr("'localhost:'"), HasSubstr("no port")));
}

TEST(ClusterHostListTest, MissingHostNamesFlagAndEntry) {
  EXPECT_THAT(usage_error([] { parse_host_list("--ps_hosts", ":9001"); }),
              AllOf(HasSubstr("--ps_hosts"), HasSubstr("':9001'"), HasSubstr("no host")));
}

TEST(ClusterHostListTest, EmptyEntryNamesFlagAndList) {
  EXPECT_THAT(usage_error([] { parse_host_list("--worker_hosts", "a:1,,b:2"); }),
              AllOf(HasSubstr("--worker_hosts"), HasSubstr("entry 2 of 'a:1,,b:2' is empty")));
  EXPECT_THAT(usage_error([] { parse_host_list("--worker_hosts", "a:1,"); }),
              HasSubstr("entry 2 of 'a:1,' is empty"));
}

TEST(ClusterHostListTest, SpaceNamesFlagAndList) {
  EXPECT_THAT(usage_error([] { parse_host_list("--worker_hosts", "a:1, b:2"); }),
              AllOf(HasSubstr("--worker_hosts"), HasSubstr("'a:1, b:2'"), HasSubstr("space")));
}

TEST(ClusterHostListTest, UnbracketedIpv6NamesEntryAndSaysHowToWriteIt) {
  EXPECT_THAT(usage_error([] { parse_host_list("--ps_hosts", "::1:9001"); }),
              AllOf(HasSubstr("--ps_hosts"), HasSubstr("'::1:9001'"), HasSubstr("[::1]:9001")));
}

TEST(ClusterHostListTest, MalformedIpAddressesNameTheEntry) {
  EXPECT_THAT(usage_error([] { parse_host_list("--ps_hosts", "[::1:9001"); }),
              AllOf(HasSubstr("'[::1:9001'"), HasSubstr("without ']'")));
  EXPECT_THAT(usage_error([] { parse_host_list("--ps_hosts", "[zz::1]:9001"); }),
              AllOf(HasSubstr("'[zz::1]:9001'"), HasSubstr("IPv6")));
  EXPECT_THAT(usage_error([] { parse_host_list("--ps_hosts", "10.0.0.300:9001"); }),
              AllOf(HasSubstr("'10.0.0.300:9001'"), HasSubstr("IPv4")));
  EXPECT_THAT(usage_error([] { parse_host_list("--ps_hosts", "bad/host:9001"); }),
              AllOf(HasSubstr("'bad/host:9001'"), HasSubstr("host name")));
}

// ---- The tutorial flags.

TEST(ClusterFlagsTest, TutorialCommandLinesParse) {
  ClusterConfig ps = cluster_from_flags(kTutorialPs, kTutorialWorkers, "ps", 0);
  EXPECT_THAT(ps.cluster.jobs(), ElementsAre("ps", "worker"));
  EXPECT_THAT(ps.cluster.tasks("ps"), ElementsAre(HostPort{"localhost", 9001}));
  EXPECT_EQ(ps.cluster.num_tasks("worker"), 3);
  EXPECT_EQ(ps.task, (TaskId{"ps", 0}));

  ClusterConfig worker2 = cluster_from_flags(kTutorialPs, kTutorialWorkers, "worker", 2);
  EXPECT_EQ(worker2.task, (TaskId{"worker", 2}));
  EXPECT_EQ(worker2.cluster.address(worker2.task), (HostPort{"localhost", 9004}));
  EXPECT_EQ(worker2.cluster.to_string(),
            "ps=[localhost:9001] worker=[localhost:9002,localhost:9003,localhost:9004]");
}

TEST(ClusterFlagsTest, WorkerOnlyClusterNeedsNoPsHosts) {
  ClusterConfig config = cluster_from_flags("", "localhost:9002,localhost:9003", "worker", 1);
  EXPECT_FALSE(config.cluster.has_job("ps"));
  EXPECT_THAT(config.cluster.jobs(), ElementsAre("worker"));
  EXPECT_EQ(worker_rank(config.cluster, config.task), 1);
}

TEST(ClusterFlagsTest, EmptyWorkerHostsIsRejected) {
  EXPECT_THAT(usage_error([] { cluster_from_flags(kTutorialPs, "", "ps", 0); }),
              AllOf(HasSubstr("--worker_hosts"), HasSubstr("is empty")));
}

TEST(ClusterFlagsTest, TaskIndexOutOfRangeSaysValidRange) {
  EXPECT_THAT(
      usage_error([] { cluster_from_flags(kTutorialPs, kTutorialWorkers, "worker", 3); }),
      AllOf(HasSubstr("--task_index: 3"), HasSubstr("'worker'"), HasSubstr("(valid: 0-2)")));
  EXPECT_THAT(usage_error([] { cluster_from_flags(kTutorialPs, kTutorialWorkers, "ps", -1); }),
              AllOf(HasSubstr("--task_index: -1"), HasSubstr("(valid: 0)")));
}

TEST(ClusterFlagsTest, UnknownJobNameListsKnownJobs) {
  EXPECT_THAT(usage_error([] { cluster_from_flags(kTutorialPs, kTutorialWorkers, "wroker", 0); }),
              AllOf(HasSubstr("--job_name"), HasSubstr("'wroker'"),
                    HasSubstr("chief, evaluator, ps, worker")));
  EXPECT_THAT(usage_error([] { cluster_from_flags(kTutorialPs, kTutorialWorkers, "", 0); }),
              AllOf(HasSubstr("--job_name"), HasSubstr("empty")));
}

TEST(ClusterFlagsTest, JobNameOfAJobNotInTheClusterIsRejected) {
  EXPECT_THAT(usage_error([] { cluster_from_flags("", kTutorialWorkers, "ps", 0); }),
              AllOf(HasSubstr("--job_name"), HasSubstr("'ps' is not a job of this cluster"),
                    HasSubstr("(jobs: worker)")));
}

TEST(ClusterFlagsTest, DuplicateAddressNamesBothTasks) {
  EXPECT_THAT(
      usage_error([] { cluster_from_flags("localhost:9002", kTutorialWorkers, "worker", 0); }),
      AllOf(HasSubstr("--ps_hosts/--worker_hosts"), HasSubstr("'localhost:9002'"),
            HasSubstr("ps:0 and worker:0")));
  EXPECT_THAT(usage_error([] { cluster_from_flags("", "a:1,b:2,A:1", "worker", 0); }),
              AllOf(HasSubstr("--worker_hosts"), HasSubstr("worker:0 and worker:2")));
}

// ---- TF_CONFIG.

TEST(ClusterTfConfigTest, TfJobWithEveryReplicaTypeParsesWithTaskAndChief) {
  ClusterConfig config = cluster_from_tf_config(full_tf_job_config("worker", 1));
  EXPECT_THAT(config.cluster.jobs(), ElementsAre("chief", "ps", "worker"));
  EXPECT_EQ(config.task, (TaskId{"worker", 1}));
  EXPECT_EQ(config.cluster.address(config.task), (HostPort{"job-worker-1.default.svc", 2222}));
  EXPECT_EQ(chief_task(config.cluster), (TaskId{"chief", 0}));
  EXPECT_FALSE(is_chief(config.cluster, config.task));
  EXPECT_EQ(worker_rank(config.cluster, config.task), 2);
}

TEST(ClusterTfConfigTest, EvaluatorPodParsesThoughTheClusterListsNoEvaluator) {
  ClusterConfig config = cluster_from_tf_config(full_tf_job_config("evaluator", 0));
  EXPECT_EQ(config.task, (TaskId{"evaluator", 0}));
  EXPECT_FALSE(config.cluster.has_task(config.task));
  EXPECT_EQ(worker_rank(config.cluster, config.task), -1);
  EXPECT_FALSE(is_chief(config.cluster, config.task));
}

TEST(ClusterTfConfigTest, ExtraTopLevelKeysAreIgnored) {
  ClusterConfig config = cluster_from_tf_config(
      R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": 0, "trial": "7"},
          "environment": "cloud", "rpc_layer": "grpc"})");
  EXPECT_EQ(config.task, (TaskId{"worker", 0}));
  EXPECT_TRUE(is_chief(config.cluster, config.task));
}

TEST(ClusterTfConfigTest, RoundTripsThroughToTfConfig) {
  ClusterConfig config;
  config.cluster = ClusterSpec({{"ps", {{"::1", 9001}}}, {"worker", {{"localhost", 9002}}}});
  config.task = TaskId{"ps", 0};
  ClusterConfig again = cluster_from_tf_config(to_tf_config(config));
  EXPECT_EQ(again.cluster, config.cluster);
  EXPECT_EQ(again.task, config.task);
}

// The TF_CONFIG above is what the operator derives from deploy/k8s/tfjob.yaml: the manifest's
// name and replica counts must match it.
TEST(ClusterTfConfigTest, TfConfigOfTheDeployManifestParsesAndMatchesIt) {
  ClusterConfig config = cluster_from_tf_config(kTfJobWorker1Config);
  EXPECT_EQ(config.task, (TaskId{"worker", 1}));
  EXPECT_EQ(config.cluster.address(config.task),
            (HostPort{"dtrain-mnist-worker-1.default.svc", 2222}));
  EXPECT_EQ(chief_task(config.cluster), (TaskId{"worker", 0}));

  std::ifstream in(std::string(DTRAIN_SOURCE_DIR) + "/deploy/k8s/tfjob.yaml");
  ASSERT_TRUE(in) << "cannot open deploy/k8s/tfjob.yaml";
  std::string metadata_name;
  std::string replica_type;  // the tfReplicaSpecs entry the following lines belong to
  std::map<std::string, int> replicas;
  bool in_metadata = false;
  for (std::string line; std::getline(in, line);) {
    std::string trimmed = line.substr(std::min(line.find_first_not_of(' '), line.size()));
    if (trimmed.empty() || trimmed.front() == '#') continue;
    if (line == "metadata:") in_metadata = true;
    if (in_metadata && metadata_name.empty() && trimmed.starts_with("name: ")) {
      metadata_name = trimmed.substr(6);
    }
    if (trimmed == "PS:" || trimmed == "Worker:" || trimmed == "Chief:" ||
        trimmed == "Evaluator:") {
      replica_type = trimmed.substr(0, trimmed.size() - 1);
    }
    if (!replica_type.empty() && trimmed.starts_with("replicas: ")) {
      replicas[replica_type] = std::stoi(trimmed.substr(10));
    }
  }
  EXPECT_EQ(metadata_name, "dtrain-mnist");
  EXPECT_THAT(replicas, ElementsAre(std::pair<const std::string, int>{"PS", 1},
                                    std::pair<const std::string, int>{"Worker", 2}));
  EXPECT_EQ(config.cluster.num_tasks("ps"), replicas["PS"]);
  EXPECT_EQ(config.cluster.num_tasks("worker"), replicas["Worker"]);
  EXPECT_EQ(config.cluster.tasks("ps")[0].host, metadata_name + "-ps-0.default.svc");
}

TEST(ClusterTfConfigTest, MalformedJsonNamesTfConfigAndPosition) {
  EXPECT_THAT(usage_error([] { cluster_from_tf_config(R"({"cluster": {"worker": ["w:1"]},)"); }),
              AllOf(HasSubstr("TF_CONFIG: not valid JSON"), HasSubstr("line 1, column")));
  EXPECT_THAT(usage_error([] { cluster_from_tf_config("  "); }),
              AllOf(HasSubstr("TF_CONFIG"), HasSubstr("empty")));
  EXPECT_THAT(usage_error([] { cluster_from_tf_config("[1]"); }),
              AllOf(HasSubstr("TF_CONFIG"), HasSubstr("must be a JSON object")));
}

// Found by fuzz/cluster_spec_fuzzer: nlohmann's parser reports a number too large for a double as
// an out_of_range, not a parse_error, and it escaped as a non-usage error.
TEST(ClusterTfConfigTest, NumberTooLargeForADoubleIsAUsageErrorNamingTheSource) {
  EXPECT_THAT(usage_error([] { cluster_from_tf_config(R"({"cluster": {"worker": 1e999}})"); }),
              AllOf(HasSubstr("TF_CONFIG: not valid JSON"), HasSubstr("number overflow"),
                    Not(HasSubstr("json.exception"))));
  EXPECT_THAT(
      usage_error([] { cluster_spec_from_json(R"({"task": {"index": -1e400}})", "c.json"); }),
      AllOf(HasSubstr("c.json: not valid JSON"), HasSubstr("number overflow")));
}

TEST(ClusterTfConfigTest, MalformedHostPortNamesTheField) {
  EXPECT_THAT(
      usage_error([] {
        cluster_from_tf_config(
            R"({"cluster": {"worker": ["w:1", "w:70000"]}, "task": {"type": "worker", "index": 0}})");
      }),
      AllOf(HasSubstr("TF_CONFIG: cluster.worker[1]"), HasSubstr("'w:70000'"),
            HasSubstr("not a valid port")));
  EXPECT_THAT(usage_error([] {
                cluster_from_tf_config(
                    R"({"cluster": {"worker": "w:1"}, "task": {"type": "worker", "index": 0}})");
              }),
              AllOf(HasSubstr("TF_CONFIG: cluster.worker"), HasSubstr("must be a list")));
}

TEST(ClusterTfConfigTest, TaskIsRequiredWithTypeAndIntegerIndex) {
  EXPECT_THAT(usage_error([] { cluster_from_tf_config(R"({"cluster": {"worker": ["w:1"]}})"); }),
              AllOf(HasSubstr("TF_CONFIG"), HasSubstr("no \"task\"")));
  EXPECT_THAT(usage_error([] {
                cluster_from_tf_config(R"({"cluster": {"worker": ["w:1"]}, "task": {"index": 0}})");
              }),
              HasSubstr("TF_CONFIG: task.type is missing"));
  EXPECT_THAT(
      usage_error([] {
        cluster_from_tf_config(
            R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": "0"}})");
      }),
      AllOf(HasSubstr("TF_CONFIG: task.index must be an integer"), HasSubstr("\"0\"")));
}

TEST(ClusterTfConfigTest, TaskIndexOutOfRangeSaysValidRange) {
  EXPECT_THAT(
      usage_error([] {
        cluster_from_tf_config(
            R"({"cluster": {"worker": ["w0:1", "w1:1"]}, "task": {"type": "worker", "index": 2}})");
      }),
      AllOf(HasSubstr("TF_CONFIG: task.index: 2"), HasSubstr("(valid: 0-1)")));
}

TEST(ClusterTfConfigTest, UnknownJobInClusterIsRejected) {
  EXPECT_THAT(
      usage_error([] {
        cluster_from_tf_config(
            R"({"cluster": {"master": ["m:1"], "worker": ["w:1"]}, "task": {"type": "worker", "index": 0}})");
      }),
      AllOf(HasSubstr("TF_CONFIG: cluster"), HasSubstr("'master' is not a known job"),
            HasSubstr("Chief")));
}

TEST(ClusterTfConfigTest, UnknownTaskTypeIsRejected) {
  EXPECT_THAT(usage_error([] {
                cluster_from_tf_config(
                    R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "trainer", "index": 0}})");
              }),
              AllOf(HasSubstr("TF_CONFIG: task.type"), HasSubstr("'trainer' is not a known job")));
}

TEST(ClusterTfConfigTest, TaskOfAJobNotInTheClusterIsRejected) {
  EXPECT_THAT(
      usage_error([] {
        cluster_from_tf_config(
            R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "chief", "index": 0}})");
      }),
      AllOf(HasSubstr("TF_CONFIG: task.type"), HasSubstr("'chief' is not a job of this cluster")));
}

TEST(ClusterTfConfigTest, ClusterWithoutWorkerOrChiefIsRejected) {
  EXPECT_THAT(
      usage_error([] {
        cluster_from_tf_config(
            R"({"cluster": {"ps": ["p:1"], "worker": []}, "task": {"type": "ps", "index": 0}})");
      }),
      AllOf(HasSubstr("TF_CONFIG: cluster"), HasSubstr("no worker and no chief")));
}

TEST(ClusterTfConfigTest, MoreThanOneChiefIsRejected) {
  EXPECT_THAT(
      usage_error([] {
        cluster_from_tf_config(
            R"({"cluster": {"chief": ["c0:1", "c1:1"]}, "task": {"type": "chief", "index": 0}})");
      }),
      AllOf(HasSubstr("TF_CONFIG: cluster.chief"), HasSubstr("c0:1, c1:1"),
            HasSubstr("at most one chief")));
}

TEST(ClusterTfConfigTest, DuplicateAddressNamesBothFields) {
  EXPECT_THAT(
      usage_error([] {
        cluster_from_tf_config(
            R"({"cluster": {"ps": ["h:2222"], "worker": ["w:1", "h:2222"]}, "task": {"type": "ps", "index": 0}})");
      }),
      AllOf(HasSubstr("TF_CONFIG"), HasSubstr("'h:2222'"),
            HasSubstr("cluster.ps[0] and cluster.worker[1]")));
}

// ---- Cluster files.

TEST(ClusterFileTest, FileWithTaskParses) {
  TempDir dir;
  write_bytes(dir / "cluster.json", std::string(kTfJobWorker1Config));
  ClusterConfig config = cluster_from_file(dir / "cluster.json");
  EXPECT_EQ(config.task, (TaskId{"worker", 1}));
  EXPECT_EQ(config.cluster.num_tasks("worker"), 2);
}

TEST(ClusterFileTest, TaskFromFlagsTakesPrecedenceOverTheFile) {
  TempDir dir;
  write_bytes(dir / "cluster.json", std::string(kTfJobWorker1Config));
  ClusterConfig config = cluster_from_file(dir / "cluster.json", TaskId{"ps", 0});
  EXPECT_EQ(config.task, (TaskId{"ps", 0}));
  EXPECT_THAT(usage_error([&] {
                cluster_from_file(dir / "cluster.json", TaskId{"worker", 5});
              }),
              AllOf(HasSubstr("--task_index: 5"), HasSubstr("(valid: 0-1)")));
}

TEST(ClusterFileTest, FileWithoutTaskNeedsOneFromFlags) {
  TempDir dir;
  write_bytes(dir / "cluster.json", R"({"cluster": {"worker": ["a:1", "b:1"]}})");
  EXPECT_EQ(cluster_from_file(dir / "cluster.json", TaskId{"worker", 1}).task,
            (TaskId{"worker", 1}));
  EXPECT_THAT(usage_error([&] { cluster_from_file(dir / "cluster.json"); }),
              AllOf(HasSubstr((dir / "cluster.json").string()), HasSubstr("no \"task\""),
                    HasSubstr("--job_name")));
}

TEST(ClusterFileTest, ErrorsNameTheFile) {
  TempDir dir;
  std::string path = (dir / "cluster.json").string();
  write_bytes(path,
              R"({"cluster": {"worker": ["a:1", "b"]}, "task": {"type": "worker", "index": 0}})");
  EXPECT_THAT(
      usage_error([&] { cluster_from_file(path); }),
      AllOf(HasSubstr(path + ": cluster.worker[1]"), HasSubstr("'b'"), HasSubstr("no port")));
  write_bytes(path, "{\n  \"cluster\": \n");
  EXPECT_THAT(usage_error([&] { cluster_from_file(path); }),
              AllOf(HasSubstr(path + ": not valid JSON"), HasSubstr("line 3")));
}

TEST(ClusterFileTest, MissingFileNamesThePath) {
  TempDir dir;
  std::string path = (dir / "nope.json").string();
  EXPECT_THAT(usage_error([&] { cluster_from_file(path); }),
              AllOf(HasSubstr(path), HasSubstr("cannot read")));
}

TEST(ClusterFileTest, ClusterSpecFromJsonIgnoresTheTask) {
  ClusterSpec cluster = cluster_spec_from_json(
      R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "nonsense", "index": 9}})", "spec.json");
  EXPECT_EQ(cluster.num_tasks("worker"), 1);
  EXPECT_THAT(usage_error([] { cluster_spec_from_json(R"({"cluster": {}})", "spec.json"); }),
              AllOf(HasSubstr("spec.json: cluster"), HasSubstr("no worker")));
}

// ---- Roles.

TEST(ClusterRolesTest, TrainingWorkersAreChiefThenWorkersInIndexOrder) {
  ClusterSpec cluster = chief_ps_worker_evaluator();
  EXPECT_THAT(training_workers(cluster),
              ElementsAre(TaskId{"chief", 0}, TaskId{"worker", 0}, TaskId{"worker", 1}));
  EXPECT_EQ(worker_rank(cluster, {"chief", 0}), 0);
  EXPECT_EQ(worker_rank(cluster, {"worker", 1}), 2);
}

TEST(ClusterRolesTest, PsAndEvaluatorHaveNoWorkerRank) {
  ClusterSpec cluster = chief_ps_worker_evaluator();
  EXPECT_EQ(worker_rank(cluster, {"ps", 0}), -1);
  EXPECT_EQ(worker_rank(cluster, {"evaluator", 0}), -1);
  EXPECT_FALSE(is_chief(cluster, {"evaluator", 0}));
}

TEST(ClusterRolesTest, ChiefIsWorkerZeroWithoutAChiefJob) {
  ClusterConfig config = cluster_from_flags(kTutorialPs, kTutorialWorkers, "worker", 0);
  EXPECT_EQ(chief_task(config.cluster), (TaskId{"worker", 0}));
  EXPECT_TRUE(is_chief(config.cluster, config.task));
  EXPECT_FALSE(is_chief(config.cluster, {"worker", 1}));
}

TEST(ClusterRolesTest, ChiefAloneIsAOneWorkerCluster) {
  ClusterConfig config = cluster_from_tf_config(
      R"({"cluster": {"chief": ["c:1"]}, "task": {"type": "chief", "index": 0}})");
  EXPECT_THAT(training_workers(config.cluster), ElementsAre(TaskId{"chief", 0}));
  EXPECT_TRUE(is_chief(config.cluster, config.task));
}

TEST(ClusterRolesTest, AddressOfAMissingTaskNamesIt) {
  ClusterSpec cluster = chief_ps_worker_evaluator();
  try {
    cluster.address({"worker", 2});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("worker:2"));
  }
}

TEST(ClusterRolesTest, ValidateNamesTheSourceForConfigsBuiltInCode) {
  ClusterConfig config{ClusterSpec({{"worker", {{"a", 1}, {"a", 1}}}}), TaskId{"worker", 0}};
  EXPECT_THAT(usage_error([&] { validate_cluster_config(config, "launcher"); }),
              AllOf(HasSubstr("launcher"), HasSubstr("cluster.worker[0] and cluster.worker[1]")));
}

}  // namespace
}  // namespace dtrain
