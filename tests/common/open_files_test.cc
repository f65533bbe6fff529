#include "fastpath/common/open_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <sstream>
#include <string>

#include "fakes/manual_clock.h"
#include "fastpath/common/log.h"

namespace fastpath {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;

class AcceptFailuresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = log::CurrentOptions();
    log::SetOutputForTesting(&out_);
  }
  void TearDown() override {
    log::SetOutputForTesting(nullptr);
    log::Configure(saved_);
  }
  // What was logged since the last call.
  std::string Logged() {
    std::string lines = out_.str();
    out_.str("");
    return lines;
  }

  std::ostringstream out_;
  log::Options saved_;
  testing::ManualClock clock_;
  AcceptFailures failures_{"HTTP", &clock_};
};

TEST_F(AcceptFailuresTest, ARunOfFailuresIsLoggedWhenItStartsAndWhenItEnds) {
  EXPECT_EQ(failures_.Failed(EMFILE, "Too many open files"), AcceptFailures::kRetryAfter);
  const std::string started = Logged();
  EXPECT_THAT(started, HasSubstr("warn"));
  EXPECT_THAT(started, HasSubstr("HTTP cannot accept connections: Too many open files ("));
  EXPECT_THAT(started, HasSubstr("files open, the limit is"));
  EXPECT_THAT(started, HasSubstr("trying again every 100 ms"));

  // The tries that follow wait as long, and say nothing.
  for (int i = 0; i < 8; ++i) {
    clock_.Advance(AcceptFailures::kRetryAfter);
    EXPECT_EQ(failures_.Failed(ENFILE, "Too many open files in system"),
              AcceptFailures::kRetryAfter);
  }
  EXPECT_THAT(Logged(), IsEmpty());

  clock_.Advance(std::chrono::milliseconds(100));
  failures_.Accepted();
  EXPECT_THAT(Logged(), HasSubstr("info  fastpath: HTTP accepts connections again, after 9 failed "
                                  "accepts over 0.9 s"));
  failures_.Accepted();
  EXPECT_THAT(Logged(), IsEmpty());

  // A later run is counted from its own start.
  failures_.Failed(ENOBUFS, "No buffer space available");
  EXPECT_THAT(Logged(), HasSubstr("HTTP cannot accept connections: No buffer space available"));
  failures_.Accepted();
  EXPECT_THAT(Logged(), HasSubstr("after 1 failed accepts over 0.0 s"));
}

TEST_F(AcceptFailuresTest, ALongRunIsRemindedOfOnceAMinute) {
  failures_.Failed(EMFILE, "Too many open files");
  Logged();
  for (int i = 0; i < 600; ++i) {  // a minute of tries, 100 ms apart
    clock_.Advance(AcceptFailures::kRetryAfter);
    failures_.Failed(EMFILE, "Too many open files");
  }
  EXPECT_THAT(Logged(), HasSubstr("HTTP still cannot accept connections: Too many open files ("));
  clock_.Advance(std::chrono::seconds(30));
  failures_.Failed(EMFILE, "Too many open files");
  EXPECT_THAT(Logged(), IsEmpty());
  clock_.Advance(std::chrono::seconds(31));
  failures_.Failed(EMFILE, "Too many open files");
  EXPECT_THAT(Logged(), HasSubstr("603 failed accepts over 121.0 s"));
}

TEST_F(AcceptFailuresTest, AFailureOfTheOneConnectionIsTriedAgainAtOnceAndNotLogged) {
  for (int error : {ECONNABORTED, EPROTO, EHOSTUNREACH, ENETUNREACH, EINTR}) {
    EXPECT_EQ(failures_.Failed(error, "the connection's"), std::chrono::milliseconds(0)) << error;
  }
  failures_.Accepted();
  EXPECT_THAT(Logged(), IsEmpty());
}

TEST(OpenFilesTest, DescribesTheDescriptorsAndTheLimit) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  ASSERT_NE(limit.rlim_cur, RLIM_INFINITY);
  EXPECT_THAT(DescribeOpenFiles(),
              MatchesRegex("[0-9]+ files open, the limit is " + std::to_string(limit.rlim_cur)));
}

TEST(OpenFilesTest, TheSoftLimitIsRaisedToTheHardLimit) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max == RLIM_INFINITY || saved.rlim_max < 256) {
    GTEST_SKIP() << "needs a finite hard limit of at least 256 open files";
  }
  rlimit lowered = saved;
  lowered.rlim_cur = 200;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  const std::string line = RaiseOpenFileLimit();
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_EQ(now.rlim_cur, saved.rlim_max);
  EXPECT_EQ(line, "open files: the limit was raised from 200 to " + std::to_string(saved.rlim_max) +
                      " (the hard limit)");
  // At the hard limit already, nothing to raise.
  lowered.rlim_cur = saved.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  EXPECT_EQ(RaiseOpenFileLimit(), "open files: the limit is " + std::to_string(saved.rlim_max) +
                                      " (the hard limit is " + std::to_string(saved.rlim_max) +
                                      ")");
  setrlimit(RLIMIT_NOFILE, &saved);
}

}  // namespace
}  // namespace fastpath
