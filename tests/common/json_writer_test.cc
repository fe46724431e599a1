// Tests of JsonWriter: nesting, commas, escaping.
#include "common/json_writer.h"
#include "common/output_file.h"

#include "gtest/gtest.h"

namespace spillway {
namespace {

TEST(JsonWriter, WritesNestedDocuments) {
  JsonWriter json;
  json.BeginObject().Key("a").Int(-1).Key("b").BeginArray().Uint(2).Bool(true).EndArray();
  json.Key("c").BeginObject().Key("d").String("x\"y\n").EndObject().Key("e").Double(0.5);
  json.EndObject();
  EXPECT_EQ(json.str(), R"({"a":-1,"b":[2,true],"c":{"d":"x\"y\n"},"e":0.5})");
}

TEST(JsonWriter, EscapesControlCharacters) {
  std::string out;
  AppendJsonString(out, std::string_view("\x01", 1));
  EXPECT_EQ(out, "\"\\u0001\"");
}

TEST(WriteFileAtomically, ReportsTheBadPath) {
  const absl::Status status = WriteFileAtomically("/nonexistent-dir/x.json", "{}");
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("/nonexistent-dir/x.json"), absl::string_view::npos);
}

}  // namespace
}  // namespace spillway
