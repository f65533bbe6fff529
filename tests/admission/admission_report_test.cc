#include "fastpath/admission/admission_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

namespace fastpath::admission {
namespace {

TEST(AdmissionReport, Profiles) {
  EXPECT_EQ(*ParseProfile("production"), Profile::kProduction);
  EXPECT_EQ(*ParseProfile("dev"), Profile::kDev);
  EXPECT_THAT(ParseProfile("prod").status().message(),
              ::testing::HasSubstr("--profile must be production or dev, not 'prod'"));
}

TEST(AdmissionReport, JsonCarriesStatesFiguresAndSnapshot) {
  AdmissionReport report;
  report.policy = {Profile::kDev, true};
  report.ready = true;
  report.version_lock = "/etc/fastpath/lock.json";
  report.pinned = {"cudnn"};
  report.snapshot_json = R"({"ort_version": "1.29.0"})";
  ModelAdmission m;
  m.name = "resnet";
  m.version = "1";
  m.state = AdmissionState::kDegraded;
  m.reasons = {"self-test missed its budget: p95 2 ms > budget 1 ms"};
  SelfTestReport st;
  st.budget.p95_ms = 1.0;
  st.figures = SelfTestFigures{20, 4, 1.5, 2.0, 2.5, 2000};
  st.misses = {"p95 2 ms > budget 1 ms"};
  m.self_test = st;
  m.placement_json = "not json";  // a bad producer yields null, never a broken report
  report.models.push_back(m);

  rapidjson::Document doc;
  const std::string json = ReportToJson(report);
  ASSERT_FALSE(doc.Parse(json.c_str()).HasParseError()) << json;
  EXPECT_STREQ(doc["profile"].GetString(), "dev");
  EXPECT_TRUE(doc["allow_cpu_fallback"].GetBool());
  EXPECT_STREQ(doc["version_lock"]["file"].GetString(), "/etc/fastpath/lock.json");
  const auto& model = doc["models"][0];
  EXPECT_STREQ(model["state"].GetString(), "DEGRADED");
  EXPECT_FALSE(model["self_test"]["passed"].GetBool());
  EXPECT_DOUBLE_EQ(model["self_test"]["budget"]["p95_ms"].GetDouble(), 1.0);
  EXPECT_TRUE(model["self_test"]["budget"]["min_throughput"].IsNull());
  EXPECT_DOUBLE_EQ(model["self_test"]["measured"]["p95_ms"].GetDouble(), 2.0);
  EXPECT_TRUE(model["placement"].IsNull());
  EXPECT_STREQ(doc["capability_snapshot"]["ort_version"].GetString(), "1.29.0");
}

}  // namespace
}  // namespace fastpath::admission
