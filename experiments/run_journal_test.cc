#include "experiments/run_journal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "framework/core/file_util.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class RunJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/run_journal_test_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    RemoveTree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { RemoveTree(dir_); }
  std::string path() const { return dir_ + "/" + RunJournal::kFileName; }

  std::string dir_;
};

RunRecord Record(const std::string& method, double temperature, const std::string& id) {
  RunRecord r{.method = method, .task = "code, \"quoted\"", .prompt_id = id, .temperature = temperature};
  r.greedy_match = method == "baseline" ? -1 : 1;
  r.generation.tokens = {5, 0, 2147483647};
  // Timings that only a bit-exact round trip keeps.
  r.generation.steps = {{.tree_nodes = 15, .longest_path = 4, .accepted = 3, .draft_seconds = 0.1 + 0.2,
                         .verify_seconds = 1e-300, .other_seconds = 1.0 / 3},
                        {.tree_nodes = 0, .longest_path = 0, .accepted = 0}};
  r.generation.prefill_seconds = 2.0 / 7;
  r.generation.decode_seconds = 12345.678901234567;
  r.generation.target_forwards = {{16, 3}, {1, 1}};
  r.generation.draft_forwards = {{1, 9}};
  r.generation.draft_forwards_by_model = {{{1, 4}}, {}, {{1, 5}}};
  r.generation.draft_graph_runs = {{"heads|[1]Long;[1,256]Float", 7}, {"a \"quoted\" work", 1}};
  r.generation.engine_form = "step by step: a\nnewline";
  return r;
}

void ExpectSame(const RunRecord& a, const RunRecord& b) {
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.prompt_id, b.prompt_id);
  EXPECT_EQ(a.temperature, b.temperature);
  EXPECT_EQ(a.greedy_match, b.greedy_match);
  EXPECT_EQ(a.generation.tokens, b.generation.tokens);
  ASSERT_EQ(a.generation.steps.size(), b.generation.steps.size());
  for (size_t i = 0; i < a.generation.steps.size(); ++i) {
    const StepStats &x = a.generation.steps[i], &y = b.generation.steps[i];
    EXPECT_EQ(x.tree_nodes, y.tree_nodes);
    EXPECT_EQ(x.longest_path, y.longest_path);
    EXPECT_EQ(x.accepted, y.accepted);
    EXPECT_EQ(x.draft_seconds, y.draft_seconds);  // bit for bit
    EXPECT_EQ(x.verify_seconds, y.verify_seconds);
    EXPECT_EQ(x.other_seconds, y.other_seconds);
  }
  EXPECT_EQ(a.generation.prefill_seconds, b.generation.prefill_seconds);
  EXPECT_EQ(a.generation.decode_seconds, b.generation.decode_seconds);
  EXPECT_EQ(a.generation.target_forwards, b.generation.target_forwards);
  EXPECT_EQ(a.generation.draft_forwards, b.generation.draft_forwards);
  EXPECT_EQ(a.generation.draft_forwards_by_model, b.generation.draft_forwards_by_model);
  EXPECT_EQ(a.generation.draft_graph_runs, b.generation.draft_graph_runs);
  EXPECT_EQ(a.generation.engine_form, b.generation.engine_form);
}

TEST_F(RunJournalTest, FinishedGenerationsReadBackExactly) {
  const RunRecord base = Record("baseline", 0, "p1"), chain = Record("chain", 0, "p1");
  const RunRecord other = Record("baseline", 0.7, "p\"2");
  {
    auto journal = RunJournal::Open(dir_, /*resume=*/false);
    ASSERT_TRUE(journal.ok()) << journal.status();
    for (const RunRecord* r : {&base, &chain, &other}) ASSERT_TRUE(journal->Append(*r).ok());
  }
  auto resumed = RunJournal::Open(dir_, /*resume=*/true);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->finished_generations(), 3);
  EXPECT_EQ(resumed->Find(0.7, "p1", "baseline"), nullptr);
  EXPECT_EQ(resumed->Find(0, "p1", "tree"), nullptr);
  ASSERT_NE(resumed->Find(0, "p1", "baseline"), nullptr);
  ExpectSame(*resumed->Find(0, "p1", "baseline"), base);
  ASSERT_NE(resumed->Find(0, "p1", "chain"), nullptr);
  ExpectSame(*resumed->Find(0, "p1", "chain"), chain);
  ASSERT_NE(resumed->Find(0.7, "p\"2", "baseline"), nullptr);
  ExpectSame(*resumed->Find(0.7, "p\"2", "baseline"), other);

  // Without resume the journal starts over.
  auto fresh = RunJournal::Open(dir_, /*resume=*/false);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->finished_generations(), 0);
  EXPECT_EQ(fs::file_size(path()), 0u);
}

TEST_F(RunJournalTest, ATornLastLineIsCutOffAndTheJournalGoesOn) {
  {
    auto journal = RunJournal::Open(dir_, false);
    ASSERT_TRUE(journal.ok());
    ASSERT_TRUE(journal->Append(Record("baseline", 1, "a")).ok());
    ASSERT_TRUE(journal->Append(Record("baseline", 1, "b")).ok());
  }
  // The kill came in the middle of the second line.
  const auto whole = fs::file_size(path());
  fs::resize_file(path(), whole - 40);
  {
    auto journal = RunJournal::Open(dir_, true);
    ASSERT_TRUE(journal.ok()) << journal.status();
    EXPECT_EQ(journal->finished_generations(), 1);
    EXPECT_EQ(journal->Find(1, "b", "baseline"), nullptr);
    ASSERT_TRUE(journal->Append(Record("baseline", 1, "b")).ok());
  }
  auto again = RunJournal::Open(dir_, true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->finished_generations(), 2);
  EXPECT_EQ(fs::file_size(path()), whole);
}

TEST_F(RunJournalTest, ADamagedLineBeforeTheLastIsAnErrorNamingIt) {
  {
    auto journal = RunJournal::Open(dir_, false);
    ASSERT_TRUE(journal.ok());
    ASSERT_TRUE(journal->Append(Record("baseline", 1, "a")).ok());
  }
  std::string text;
  {
    std::ifstream in(path());
    std::getline(in, text);
  }
  std::ofstream(path()) << "{\"temperature\": 1, \"prompt_id\": 7, \"record\": {}}\n" << text << "\n";
  auto journal = RunJournal::Open(dir_, true);
  ASSERT_FALSE(journal.ok());
  EXPECT_THAT(std::string(journal.status().message()), HasSubstr("journal.jsonl:1: key 'prompt_id'"));
  std::ofstream(path()) << "not json\n" << text << "\n";
  journal = RunJournal::Open(dir_, true);
  ASSERT_FALSE(journal.ok());
  EXPECT_THAT(std::string(journal.status().message()), HasSubstr("journal.jsonl:1:"));
  EXPECT_THAT(std::string(journal.status().message()), HasSubstr("--overwrite"));
}

}  // namespace
}  // namespace speclab
