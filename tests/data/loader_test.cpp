// DataLoader: seeded per-epoch order, rank sharding, prefetching, exact resume.
#include "data/loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/data/data_test_util.h"

namespace sprig::data {
namespace {

using testing::TempFile;

// Ten documents of 8 tokens; document d holds 100 d + 1 .. 100 d + 8, so with seq_len 8 and
// dflash packing row d is document d and its first token tells which row a batch row is.
std::string ten_documents() {
  std::string text;
  for (int d = 0; d < 10; ++d) {
    text += "{\"input_ids\": [";
    for (int i = 1; i <= 8; ++i) text += std::to_string(100 * d + i) + (i < 8 ? ", " : "]}\n");
  }
  return text;
}

class Loader : public ::testing::Test {
 protected:
  Loader() : file_(ten_documents()) {
    config_.train = config_.val = {file_.path()};
    config_.seq_len = 8;
    config_.packing = Packing::dflash;
    config_.micro_batch_size = 3;
    config_.seed = 5;
  }
  TempFile file_;
  DataConfig config_;
};

// Plan rows of a batch, read back from the first token of each row.
std::vector<int64_t> batch_rows(const Batch& b) {
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < b.rows(); ++r)
    rows.push_back((testing::row(b.input_ids, r)[0] - 1) / 100);
  return rows;
}

std::vector<std::vector<int64_t>> take(DataLoader& loader, int n) {
  std::vector<std::vector<int64_t>> batches;
  for (int i = 0; i < n; ++i) batches.push_back(batch_rows(loader.next()));
  return batches;
}

TEST_F(Loader, EpochsAreSeededShufflesInBatchesOfMicroBatchSize) {
  DataLoader loader(config_);
  EXPECT_EQ(loader.batches_per_epoch(), 4);
  const std::vector<int64_t> epoch0 = loader.epoch_rows(0), epoch1 = loader.epoch_rows(1);
  std::vector<int64_t> sorted = epoch0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_NE(epoch0, sorted);  // shuffled
  EXPECT_NE(epoch0, epoch1);  // a new order every epoch

  const std::vector<std::vector<int64_t>> batches = take(loader, 5);
  EXPECT_EQ(batches[0], std::vector<int64_t>(epoch0.begin(), epoch0.begin() + 3));
  EXPECT_EQ(batches[3], std::vector<int64_t>(epoch0.begin() + 9, epoch0.end()));  // last: 1 row
  EXPECT_EQ(batches[4], std::vector<int64_t>(epoch1.begin(), epoch1.begin() + 3));
  EXPECT_EQ(loader.state(), (LoaderState{1, 1}));

  DataLoader same_seed(config_);
  EXPECT_EQ(same_seed.epoch_rows(1), epoch1);
  config_.seed = 6;
  DataLoader other_seed(config_);
  EXPECT_NE(other_seed.epoch_rows(0), epoch0);
}

TEST_F(Loader, BatchesAreTheCollatedRows) {
  DataLoader loader(config_);
  const Batch b = loader.next();
  EXPECT_EQ(b.input_ids.shape(), (Shape{3, 8}));
  const int64_t first = loader.epoch_rows(0)[0];
  EXPECT_EQ(testing::row(b.input_ids, 0)[7], 100 * first + 8);
  EXPECT_EQ(testing::row(b.doc_remaining, 0), (std::vector<int64_t>{7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(b.seq_lens.to_vector<int64_t>(), (std::vector<int64_t>{8, 8, 8}));
  EXPECT_EQ(loader.summary(), "10 documents in 10 rows of 8 tokens, padding 0.00%");
}

TEST_F(Loader, RanksShareTheEpochLikeDistributedSampler) {
  for (int64_t world : {2, 3, 4}) {
    std::multiset<int64_t> all;
    std::vector<int64_t> first_of_rank;
    for (int64_t rank = 0; rank < world; ++rank) {
      DataLoader loader(config_, Split::train, rank, world);
      const std::vector<int64_t> rows = loader.epoch_rows(2);
      EXPECT_EQ(static_cast<int64_t>(rows.size()), (10 + world - 1) / world);
      all.insert(rows.begin(), rows.end());
      // Rank r takes every world-th row of the shared order, starting at r.
      DataLoader single(config_);
      const std::vector<int64_t> order = single.epoch_rows(2);
      for (size_t k = 0; k < rows.size(); ++k) EXPECT_EQ(rows[k], order[(rank + k * world) % 10]);
    }
    for (int64_t r = 0; r < 10; ++r) EXPECT_GE(all.count(r), 1u) << "row " << r << " unseen";
    // The padding that evens the ranks out repeats the first rows of the order, nothing else.
    EXPECT_EQ(static_cast<int64_t>(all.size()) - 10, (10 + world - 1) / world * world - 10);
  }
  EXPECT_THROW(DataLoader(config_, Split::train, 2, 2), std::invalid_argument);
}

TEST_F(Loader, RanksAreDisjointWhenRowsDivideEvenly) {
  std::set<int64_t> seen;
  for (int64_t rank = 0; rank < 5; ++rank) {
    DataLoader loader(config_, Split::train, rank, 5);
    for (const auto& batch : take(loader, loader.batches_per_epoch()))
      for (int64_t r : batch) EXPECT_TRUE(seen.insert(r).second) << "row " << r << " seen twice";
  }
  EXPECT_EQ(seen.size(), 10u);
}

TEST_F(Loader, RestoreResumesExactly) {
  DataLoader first(config_);
  take(first, 6);  // past the end of epoch 0
  const LoaderState state = first.state();
  EXPECT_EQ(state, (LoaderState{1, 2}));
  const std::vector<std::vector<int64_t>> expected = take(first, 5);

  DataLoader resumed(config_);
  take(resumed, 1);  // prefetched batches are discarded by restore
  resumed.restore(state);
  EXPECT_EQ(resumed.state(), state);
  EXPECT_EQ(take(resumed, 5), expected);

  first.restore(state);  // rewinding gives the same batches again
  EXPECT_EQ(take(first, 5), expected);
  EXPECT_THROW(first.restore({0, 4}), std::invalid_argument);
  EXPECT_THROW(first.restore({-1, 0}), std::invalid_argument);
}

TEST_F(Loader, ValidationSplitKeepsFileOrder) {
  DataLoader val(config_, Split::val);
  EXPECT_EQ(val.epoch_rows(3), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  config_.val.clear();
  EXPECT_THROW(DataLoader(config_, Split::val), std::invalid_argument);
}

TEST_F(Loader, BadDataStopsConstructionWithItsLocation) {
  TempFile bad("{\"input_ids\": [1, 2]}\n{\"input_ids\": [1, 2], \"loss_mask\": [1]}\n");
  config_.train = {bad.path()};
  try {
    DataLoader loader(config_);
    ADD_FAILURE() << "bad data was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              bad.path() + ":2: \"loss_mask\" has 1 entries but \"input_ids\" has 2");
  }
  config_.skip_bad_records = true;
  DataLoader loader(config_);
  EXPECT_EQ(loader.bad_records().count, 1);
  EXPECT_EQ(loader.plan().documents, 1);
}

TEST(LoaderRollouts, FoldedGroupsShareRowsAndKeepTheirTrees) {
  TempFile rollouts(
      "{\"prompt_ids\": [1, 2], \"completions\": [[3], [4, 5]]}\n"
      "{\"prompt_ids\": [6], \"completions\": [[7, 8, 9]]}\n"
      "{\"prompt_ids\": [], \"completions\": [[10, 11, 12], [13, 14, 15]]}\n");
  DataConfig config;
  config.train = {rollouts.path()};
  config.format = DataFormat::rollouts;
  config.packing = Packing::fold;
  config.seq_len = 10;
  config.micro_batch_size = 2;
  config.shuffle = false;
  DataLoader loader(config);
  const Batch b = loader.next();
  EXPECT_EQ(testing::row(b.input_ids, 0), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 0}));
  EXPECT_EQ(testing::row(b.position_ids, 1), (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 3, 4, 5, 6}));
  ASSERT_EQ(b.groups.size(), 3u);
  EXPECT_EQ(b.groups[1].row, 0);
  EXPECT_EQ(b.groups[1].offset, 5);
  EXPECT_EQ(b.groups[2].row, 1);
  EXPECT_EQ(b.groups[2].node_lengths, (std::vector<int64_t>{0, 3, 3}));
}

}  // namespace
}  // namespace sprig::data
