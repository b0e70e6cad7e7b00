// Slurm host lists: one test per rule of the syntax and per error, each error checked for the
// source, the text at fault and what is wrong; then the parser side by side with the real
// `scontrol show hostnames` on valid, invalid and deliberately refused lists.
#include "cluster/slurm_hostlist.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <stdexcept>

#include "base/error.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessResult;
using testing::run_command;
using testing::TempDir;
using testing::write_bytes;

constexpr std::string_view kSource = "SLURM_JOB_NODELIST";

std::vector<std::string> expand(std::string_view list) {
  return expand_slurm_hostlist(list, kSource);
}

// The message of the UsageError that expanding list throws, which must be one line.
std::string usage_error(std::string_view list) {
  try {
    expand(list);
  } catch (const UsageError& e) {
    std::string message = e.what();
    EXPECT_THAT(message, Not(HasSubstr("\n"))) << "an error message is one line";
    return message;
  }
  ADD_FAILURE() << "expected a UsageError for \"" << list << "\"";
  return "";
}

// --- What a list expands to -------------------------------------------------------------------

TEST(SlurmHostlist, EntriesExpandInOrder) {
  EXPECT_THAT(expand("node[01-03,7],gpu-[1-2],a"),
              ElementsAre("node01", "node02", "node03", "node7", "gpu-1", "gpu-2", "a"));
}

TEST(SlurmHostlist, NameWithoutBracketsIsOneHost) {
  EXPECT_THAT(expand("login-1.cluster.example"), ElementsAre("login-1.cluster.example"));
}

TEST(SlurmHostlist, RangeIncludesBothBounds) {
  EXPECT_THAT(expand("n[1-3]"), ElementsAre("n1", "n2", "n3"));
  EXPECT_THAT(expand("n[5-5]"), ElementsAre("n5"));
  EXPECT_THAT(expand("n[5]"), ElementsAre("n5"));
}

TEST(SlurmHostlist, PaddingFollowsTheLowBoundAsWritten) {
  EXPECT_THAT(expand("n[098-101]"), ElementsAre("n098", "n099", "n100", "n101"));
  EXPECT_THAT(expand("node[01-03,7]"), ElementsAre("node01", "node02", "node03", "node7"));
  EXPECT_THAT(expand("n[1-03]"), ElementsAre("n1", "n2", "n3"));
  EXPECT_THAT(expand("n[01-1]"), ElementsAre("n01"));
  EXPECT_THAT(expand("n[000]"), ElementsAre("n000"));
}

TEST(SlurmHostlist, BracketsNeedNoTextBeforeThem) {
  EXPECT_THAT(expand("[1-2]"), ElementsAre("1", "2"));
}

TEST(SlurmHostlist, TwoGroupsExpandWithTheFirstOutermost) {
  EXPECT_THAT(expand("rack[1-2]-node[1-2]"),
              ElementsAre("rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"));
  EXPECT_THAT(expand("n[1]-[2]"), ElementsAre("n1-2"));
}

// Slurm expands the last group innermost and recurses over the text before it, so with three or
// more groups the second-to-last is outermost: not a plain left-to-right odometer.
TEST(SlurmHostlist, MoreGroupsNestAsSlurmRecursesLastGroupFastest) {
  EXPECT_THAT(expand("a[1-2]b[3-4]c[5-6]"), ElementsAre("a1b3c5", "a1b3c6", "a2b3c5", "a2b3c6",
                                                        "a1b4c5", "a1b4c6", "a2b4c5", "a2b4c6"));
  EXPECT_THAT(expand("[1-2][3-4][5-6][7-8]"),
              ElementsAre("1357", "1358", "2357", "2358", "1457", "1458", "2457", "2458", "1367",
                          "1368", "2367", "2368", "1467", "1468", "2467", "2468"));
}

TEST(SlurmHostlist, CommaInsideBracketsSeparatesRangesNotEntries) {
  EXPECT_THAT(expand("rack[1-2]-node[1,3]"),
              ElementsAre("rack1-node1", "rack1-node3", "rack2-node1", "rack2-node3"));
}

TEST(SlurmHostlist, DuplicatesAreKeptInOrder) {
  EXPECT_THAT(expand("a,a"), ElementsAre("a", "a"));
  EXPECT_THAT(expand("n[1-3,2]"), ElementsAre("n1", "n2", "n3", "n2"));
  EXPECT_THAT(expand("n[1-2],n1"), ElementsAre("n1", "n2", "n1"));
}

TEST(SlurmHostlist, SpacesTabsAndNewlinesSeparateEntriesAsCommasDo) {
  EXPECT_THAT(expand("a b\tc\nd, e"), ElementsAre("a", "b", "c", "d", "e"));
  EXPECT_THAT(expand("n[1-2] x"), ElementsAre("n1", "n2", "x"));
}

TEST(SlurmHostlist, LeadingTrailingAndRepeatedSeparatorsAreIgnored) {
  EXPECT_THAT(expand(",a,,b, "), ElementsAre("a", "b"));
}

TEST(SlurmHostlist, ExpandsExactlyTheMaximumNumberOfHosts) {
  const std::vector<std::string> hosts = expand("n[1-65536]");
  ASSERT_EQ(hosts.size(), kMaxSlurmHosts);
  EXPECT_EQ(hosts.front(), "n1");
  EXPECT_EQ(hosts.back(), "n65536");
}

TEST(SlurmHostlist, BoundsOfNineteenDigitsAreAccepted) {
  EXPECT_THAT(expand("n[9999999999999999998-9999999999999999999]"),
              ElementsAre("n9999999999999999998", "n9999999999999999999"));
}

// --- What it refuses --------------------------------------------------------------------------

TEST(SlurmHostlist, ErrorNamesTheSourceTheTextAndTheFault) {
  EXPECT_EQ(usage_error("node[3-1]"),
            R"(SLURM_JOB_NODELIST "node[3-1]": range 3-1 runs backwards)");
}

TEST(SlurmHostlist, ErrorNamesTheEntryAtFault) {
  EXPECT_THAT(usage_error("a,n[10-9],b"),
              AllOf(HasSubstr(R"("n[10-9]")"), HasSubstr("range 10-9 runs backwards")));
}

TEST(SlurmHostlist, ListWithNoHostsIsRefused) {
  for (const std::string_view list : {"", ",", " ,\t"}) {
    EXPECT_THAT(usage_error(list), AllOf(HasSubstr("SLURM_JOB_NODELIST"), HasSubstr("no hosts")))
        << "\"" << list << "\"";
  }
}

TEST(SlurmHostlist, EmptyBracketsAreRefused) {
  EXPECT_THAT(usage_error("n[]"), AllOf(HasSubstr(R"("n[]")"), HasSubstr("empty brackets")));
}

TEST(SlurmHostlist, EmptyRangeBetweenCommasIsRefused) {
  for (const std::string_view list : {"n[1,]", "n[,1]", "n[1,,2]"}) {
    EXPECT_THAT(usage_error(list),
                AllOf(HasSubstr(fmt::format("\"{}\"", list)), HasSubstr("empty range")));
  }
}

TEST(SlurmHostlist, RangeWithoutABoundIsRefused) {
  EXPECT_THAT(usage_error("n[-2]"), HasSubstr(R"(range "-2" lacks a bound)"));
  EXPECT_THAT(usage_error("n[1-]"), HasSubstr(R"(range "1-" lacks a bound)"));
}

// scontrol reads bounds with strtoul: it would take "+1" and " 1" (padding them to two digits) and
// ignore "a" in "1a-2". Bounds are digits alone here.
TEST(SlurmHostlist, NonNumericBoundsAreRefused) {
  EXPECT_THAT(usage_error("n[a-b]"), AllOf(HasSubstr(R"("n[a-b]")"),
                                           HasSubstr(R"(bound "a" that is not a decimal number)")));
  for (const std::string_view list : {"n[1-2a]", "n[0x1]", "n[1e2]", "n[+1]", "n[ 1]", "n[1, 2]",
                                      "n[1a-2]", "n[1--2]", "n[1-2-3]"}) {
    EXPECT_THAT(usage_error(list), HasSubstr("not a decimal number")) << list;
  }
}

TEST(SlurmHostlist, BackwardsRangeIsRefused) {
  EXPECT_THAT(usage_error("n[1,10-9]"), HasSubstr("range 10-9 runs backwards"));
}

TEST(SlurmHostlist, UnbalancedBracketsAreRefused) {
  EXPECT_THAT(usage_error("n[1-2"), AllOf(HasSubstr(R"("n[1-2")"), HasSubstr("without a ']'")));
  EXPECT_THAT(usage_error("n[1-2,b"), HasSubstr("without a ']'"));
  EXPECT_THAT(usage_error("a]b"), AllOf(HasSubstr(R"("a]b")"), HasSubstr("without a '['")));
  EXPECT_THAT(usage_error("a[1]]"), HasSubstr("without a '['"));
}

TEST(SlurmHostlist, NestedBracketsAreRefused) {
  EXPECT_THAT(usage_error("n[[1]]"),
              AllOf(HasSubstr(R"("n[[1]]")"), HasSubstr("brackets inside brackets")));
  EXPECT_THAT(usage_error("a[[1]"), HasSubstr("brackets inside brackets"));
}

TEST(SlurmHostlist, TextAfterTheLastGroupIsRefused) {
  EXPECT_THAT(usage_error("gpu-[1-2]x"),
              AllOf(HasSubstr(R"("gpu-[1-2]x")"), HasSubstr(R"(text "x" after the last ']')")));
  EXPECT_THAT(usage_error("a[1-2]b,c[3]"), HasSubstr(R"(text "b" after the last ']')"));
}

TEST(SlurmHostlist, BoundOfTwentyDigitsIsRefused) {
  EXPECT_THAT(usage_error("n[12345678901234567890]"),
              AllOf(HasSubstr(R"("n[12345678901234567890]")"), HasSubstr("more than 19 digits")));
  EXPECT_THAT(usage_error("n[1-99999999999999999999]"), HasSubstr("more than 19 digits"));
}

TEST(SlurmHostlist, RangeOfTooManyHostsIsRefusedBeforeExpanding) {
  EXPECT_THAT(usage_error("n[0-999999999]"),
              AllOf(HasSubstr(R"("n[0-999999999]")"),
                    HasSubstr("range 0-999999999 names 1000000000 hosts, more than the 65536")));
  EXPECT_THAT(usage_error("n[1-65537]"), HasSubstr("names 65537 hosts"));
}

TEST(SlurmHostlist, ListOfTooManyHostsInAllIsRefusedBeforeExpanding) {
  EXPECT_THAT(usage_error("n[1-65536],m1"), HasSubstr("expands to more than 65536 hosts"));
  EXPECT_THAT(usage_error("[0-300][0-300]"), HasSubstr("expands to more than 65536 hosts"));
  EXPECT_THAT(usage_error("[0-65535][0-65535][0-65535][0-65535][0-65535]"),
              HasSubstr("expands to more than 65536 hosts"));
}

TEST(SlurmHostlist, HostNameOfMoreThanTheMaximumLengthIsRefused) {
  EXPECT_THAT(expand(std::string(255, 'x')), ElementsAre(std::string(255, 'x')));
  EXPECT_THAT(expand(std::string(252, 'x') + "[1-999]").back(), std::string(252, 'x') + "999");
  EXPECT_THAT(usage_error(std::string(256, 'x')),
              HasSubstr("makes host names of 256 characters, more than the 255 allowed"));
  // The widest value counts, not the low bound: 252 + "1000".
  EXPECT_THAT(usage_error(std::string(252, 'x') + "[1-1000]"),
              HasSubstr("makes host names of 256 characters"));
}

TEST(SlurmHostlist, ErrorQuotesOddBytesEscapedAndLongTextCut) {
  EXPECT_THAT(usage_error("n[1,\n2]"), AllOf(HasSubstr(R"("n[1,\x0a2]")"), Not(HasSubstr("\n"))));
  // Built in place rather than with operator+ on a temporary, which GCC 12 at -O3 misreads as a
  // write past a short string's buffer (-Warray-bounds).
  std::string long_text(500, 'a');
  long_text += ']';
  std::string cut(100, 'a');
  cut += "\"...";
  EXPECT_THAT(usage_error(long_text), HasSubstr(cut));
}

// --- Side by side with Slurm ------------------------------------------------------------------

// What Slurm's own tools need to start without a cluster: `scontrol show hostnames` reads the
// config and then works offline, no slurmctld needed.
constexpr std::string_view kSlurmConf =
    "ClusterName=t\nSlurmctldHost=localhost\nNodeName=localhost CPUs=2 State=UNKNOWN\n"
    "PartitionName=p Nodes=localhost Default=YES\n";

enum class Verdict {
  kSame,      // both give the same hosts, or both refuse
  kStricter,  // scontrol accepts it by accident of its C parsing; we refuse on purpose
};

struct ScontrolCase {
  std::string_view list;
  Verdict verdict = Verdict::kSame;
};

constexpr ScontrolCase kScontrolCases[] = {
    // Accepted by both, with the same hosts in the same order.
    {"node[01-03,7],gpu-[1-2],a"},
    {"rack[1-2]-node[1-2]"},
    {"rack[1-2]-node[1,3]"},
    {"a[1-2]b[3-4]c[5-6]"},
    {"[1-2][3-4][5-6][7-8]"},
    {"n[098-101]"},
    {"n[1-03],n[01-1]"},
    {"n[9-10],n[09-10]"},
    {"n[1]-[2]"},
    {"[1-2]"},
    {"a,a,n[1-3,2],n[1-2],n1"},
    {",a,,b, "},
    {"a b\tc\nd, e"},
    {"n[1-2] x"},
    {"n[9999999999999999998-9999999999999999999]"},
    {"n[1-65536]"},
    // Refused by both ("Invalid hostlist").
    {"node[3-1]"},
    {"gpu-[1-2]x"},
    {"a[1-2]b,c[3]"},
    {"x[1-2]y[3]z"},
    {"n[]"},
    {"n[1,]"},
    {"n[,1]"},
    {"n[a-b]"},
    {"n[1-2a]"},
    {"n[-2]"},
    {"n[1--2]"},
    {"n[1-2-3]"},
    {"n[1-65537]"},
    {"n[0-999999999]"},
    {"n[[1]]"},
    {"a[1]]"},
    // Accepted by scontrol, refused here: no hosts, brackets in host names, strtoul's leniency,
    // a 20-digit bound, more than 65536 hosts in all.
    {"", Verdict::kStricter},
    {",", Verdict::kStricter},
    {"n[1-2", Verdict::kStricter},
    {"a]b", Verdict::kStricter},
    {"a[[1]", Verdict::kStricter},
    {"n[ 1]", Verdict::kStricter},
    {"n[+1]", Verdict::kStricter},
    {"n[1a-2]", Verdict::kStricter},
    {"n[1-]", Verdict::kStricter},
    {"n[12345678901234567890]", Verdict::kStricter},
    {"n[0-65535],m[0-1]", Verdict::kStricter},
    {"[0-300][0-300]", Verdict::kStricter},
};

struct SlurmAnswer {
  bool valid = false;
  std::vector<std::string> hosts;  // when valid
};

// scontrol exits 0 either way: an invalid list is only a line on stderr.
SlurmAnswer answer_from(const ProcessResult& result) {
  if (result.err.find("Invalid hostlist") != std::string::npos) return {};
  SlurmAnswer answer;
  answer.valid = true;
  std::istringstream lines(result.out);
  for (std::string line; std::getline(lines, line);) answer.hosts.push_back(line);
  return answer;
}

std::optional<std::vector<std::string>> ours(std::string_view list) {
  try {
    return expand(list);
  } catch (const UsageError&) {
    return std::nullopt;
  }
}

TEST(SlurmHostlist, ExpandsAsScontrolShowHostnamesDoes) {
  TempDir dir;
  write_bytes(dir / "slurm.conf", std::string(kSlurmConf));
  const std::vector<std::string> env = {"SLURM_CONF=" + (dir / "slurm.conf").string()};
  ProcessResult version;
  try {
    version = run_command({"scontrol", "--version"}, env);
  } catch (const std::runtime_error& e) {
    GTEST_SKIP() << "scontrol is not on PATH (Debian package slurm-client): " << e.what();
  }
  ASSERT_EQ(version.exit_code, 0) << "scontrol cannot start with a local config: " << version.err;
  SCOPED_TRACE(version.out);  // the semantics are Slurm 22.05's; say which one disagreed

  for (const ScontrolCase& c : kScontrolCases) {
    const std::string list(c.list);
    SCOPED_TRACE(fmt::format("list \"{}\"", list));
    const ProcessResult result = run_command({"scontrol", "show", "hostnames", list}, env);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const SlurmAnswer slurm = answer_from(result);
    const std::optional<std::vector<std::string>> mine = ours(c.list);
    if (c.verdict == Verdict::kStricter) {
      EXPECT_TRUE(slurm.valid) << "scontrol now refuses it too: make it a kSame case";
      EXPECT_FALSE(mine.has_value()) << "expected a UsageError";
    } else if (!slurm.valid) {
      EXPECT_FALSE(mine.has_value()) << "scontrol refuses it (" << result.err << ")";
    } else {
      ASSERT_TRUE(mine.has_value()) << "scontrol accepts it";
      EXPECT_EQ(*mine, slurm.hosts);
    }
  }
}

}  // namespace
}  // namespace dtrain
