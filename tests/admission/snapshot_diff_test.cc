#include "fastpath/admission/snapshot_diff.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fastpath::admission {
namespace {

using ::testing::HasSubstr;
using Kind = SnapshotChange::Kind;

constexpr const char* kLastWeek = R"({
  "ort_version": "1.29.0",
  "driver": {"cuda_version": "13.0", "devices": [{"ordinal": 0, "name": "H100"}]},
  "libraries": [{"name": "cudnn", "version": "9.10.2"}, {"name": "nccl", "version": "2.27.5"}],
  "findings": []
})";

constexpr const char* kToday = R"({
  "ort_version": "1.29.0",
  "driver": {"cuda_version": "12.4", "devices": [{"ordinal": 0, "name": "H100"}]},
  "libraries": [{"name": "tensorrt", "version": "10.13.0"}, {"name": "cudnn", "version": "9.10.2"}],
  "findings": [{"class": "driver-too-old", "exit_code": 12}]
})";

TEST(SnapshotDiff, SameDocumentHasNoChanges) {
  auto changes = DiffSnapshots(kLastWeek, "a", kLastWeek, "b");
  ASSERT_TRUE(changes.ok());
  EXPECT_TRUE(changes->empty());
  EXPECT_EQ(RenderChanges(*changes, "a", "b"), "no differences between a and b\n");
}

TEST(SnapshotDiff, NamesEveryAddedRemovedAndChangedLeaf) {
  auto changes = DiffSnapshots(kLastWeek, "a", kToday, "b");
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  std::vector<std::string> lines;
  for (const SnapshotChange& c : *changes) {
    const char* kind = c.kind == Kind::kAdded ? "+" : c.kind == Kind::kRemoved ? "-" : "~";
    lines.push_back(std::string(kind) + c.path + " " + c.before + "|" + c.after);
  }
  // Libraries are matched by name, not by position: cudnn did not change.
  EXPECT_THAT(lines, ::testing::ElementsAre(
                         "~driver.cuda_version \"13.0\"|\"12.4\"",
                         "-libraries[nccl].name \"nccl\"|", "-libraries[nccl].version \"2.27.5\"|",
                         "-findings []|", "+libraries[tensorrt].name |\"tensorrt\"",
                         "+libraries[tensorrt].version |\"10.13.0\"",
                         "+findings[0].class |\"driver-too-old\"", "+findings[0].exit_code |12"));
  const std::string table = RenderChanges(*changes, "a", "b");
  EXPECT_THAT(table, HasSubstr("8 differences from a to b"));
  EXPECT_THAT(table, HasSubstr("changed  driver.cuda_version"));
  EXPECT_THAT(table, HasSubstr("\"13.0\" -> \"12.4\""));
  EXPECT_THAT(table, HasSubstr("(absent) -> \"10.13.0\""));
}

// Identical GPUs share a name: each is told apart by its turn among them. Keyed by name
// alone, they collapsed into one path: a file compared with itself showed differences, and
// a change on GPU 0 (MIG turned on) was hidden.
TEST(SnapshotDiff, ItemsSharingANameAreComparedOneByOne) {
  const std::string four = R"({"nvml": {"devices": [
    {"name": "A100", "index": 0, "mig": false}, {"name": "A100", "index": 1, "mig": false},
    {"name": "A100", "index": 2, "mig": false}]}})";
  auto same = DiffSnapshots(four, "a", four, "b");
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_TRUE(same->empty()) << RenderChanges(*same, "a", "b");
  std::string changed = four;
  changed.replace(changed.find("false"), 5, "true");
  auto diff = DiffSnapshots(four, "a", changed, "b");
  ASSERT_TRUE(diff.ok());
  ASSERT_EQ(diff->size(), 1u) << RenderChanges(*diff, "a", "b");
  EXPECT_EQ((*diff)[0].path, "nvml.devices[A100 #1].mig");
}

// A key given twice is refused, naming it: which of the two counts is anyone's guess (the
// file compared with itself showed a difference).
TEST(SnapshotDiff, AKeyGivenTwiceIsRefused) {
  auto changes =
      DiffSnapshots(R"({"driver": {"version": "1", "version": "2"}})", "dup.json", kToday, "b");
  ASSERT_FALSE(changes.ok());
  EXPECT_THAT(changes.status().message(),
              HasSubstr("dup.json: \"version\" appears twice in driver"));
}

TEST(SnapshotDiff, InvalidJsonNamesTheFile) {
  auto changes = DiffSnapshots("{", "old.json", kToday, "new.json");
  ASSERT_FALSE(changes.ok());
  EXPECT_THAT(changes.status().message(), HasSubstr("old.json is not valid JSON"));
  changes = DiffSnapshots(kToday, "old.json", "42", "new.json");
  EXPECT_THAT(changes.status().message(), HasSubstr("new.json is not a JSON object"));
  // An object that is no snapshot: {} listed every field "removed", as a changed node.
  changes = DiffSnapshots(kToday, "old.json", "{}", "empty.json");
  EXPECT_THAT(changes.status().message(), HasSubstr("empty.json has none of a snapshot's keys"));
  changes = DiffSnapshots(R"({"a": 1})", "a.json", R"({"a": 1})", "b.json");
  EXPECT_FALSE(changes.ok());
}

// A document nested a million deep is refused with a reason; parsed or walked recursively, it
// overflowed the stack (exit 139).
TEST(SnapshotDiff, ADeepDocumentIsRefusedNotACrash) {
  const std::string deep =
      "{\"runs\":" + std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}";
  auto changes = DiffSnapshots(deep, "deep.json", kToday, "new.json");
  ASSERT_FALSE(changes.ok());
  EXPECT_THAT(changes.status().message(),
              HasSubstr("deep.json is not valid JSON: nested deeper than 256 levels"));
}

}  // namespace
}  // namespace fastpath::admission
