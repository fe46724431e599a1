// The TOML subset: what it reads, and every error it gives (file:line and what is wrong).
#include "policy/toml_subset.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace spillway::policy {
namespace {

TEST(TomlSubset, ReadsTablesArraysAndValues) {
  const char* text =
      "# comment\n"
      "top = 'lit\\eral'  # trailing comment\n"
      "\n"
      "[first]\n"
      "s = \"a\\\"b\\\\c\\n\\t\"\n"
      "n = -1_000\n"
      "b = true\n"
      "list = [\n"
      "  \"x\", # one\n"
      "  \"y\",\n"
      "]\n"
      "[[item]]\n"
      "k = 1\n"
      "[[item]]\r\n"
      "k = +2\r\n";
  absl::StatusOr<TomlDocument> doc = ParseToml(text, "t.toml");
  ASSERT_TRUE(doc.ok()) << doc.status();
  ASSERT_EQ(doc->tables.size(), 4u);
  EXPECT_EQ(doc->tables[0].entries[0].second.string, "lit\\eral");
  const TomlTable& first = doc->tables[1];
  EXPECT_EQ(first.name, "first");
  EXPECT_EQ(first.line, 4);
  EXPECT_EQ(first.entries[0].second.string, "a\"b\\c\n\t");
  EXPECT_EQ(first.entries[1].second.integer, -1000);
  EXPECT_TRUE(first.entries[2].second.boolean);
  ASSERT_EQ(first.entries[3].second.array.size(), 2u);
  EXPECT_EQ(first.entries[3].second.array[1].string, "y");
  EXPECT_EQ(first.entries[3].second.line, 8);
  EXPECT_TRUE(doc->tables[2].array_element);
  EXPECT_EQ(doc->tables[3].entries[0].second.integer, 2);
  EXPECT_EQ(doc->tables[3].line, 14);
}

TEST(TomlSubset, QuoteRoundTrips) {
  const std::string s = "a\"b\\c\nd\te";
  absl::StatusOr<TomlDocument> doc = ParseToml("k = " + TomlQuote(s) + "\n", "q");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(doc->tables[0].entries[0].second.string, s);
}

struct BadCase {
  const char* text;
  const char* message;
};

TEST(TomlSubset, EveryErrorNamesFileLineAndProblem) {
  const BadCase cases[] = {
      {"[a\n", "f.toml:1: expected ']' after the table name"},
      {"[[a]\n", "f.toml:1: expected ']]' after the table name"},
      {"[a]\n[a]\n", "f.toml:2: table [a] appears twice"},
      {"\nk 1\n", "f.toml:2: expected '=' after key 'k'"},
      {"k = 1\nk = 2\n", "f.toml:2: key 'k' appears twice"},
      {"k = 1 2\n", "f.toml:1: unexpected '2' after the value (one key or table per line)"},
      {"\"k\" = 1\n", "f.toml:1: quoted keys are not supported (use a bare key)"},
      {"= 1\n", "f.toml:1: expected a key"},
      {"[]\n", "f.toml:1: expected a table name"},
      {"a.b = 1\n", "f.toml:1: dotted key 'a.' is not supported"},
      {"k =\n", "f.toml:1: expected a value"},
      {"k = {a = 1}\n", "f.toml:1: inline tables are not supported"},
      {"k = -\n", "f.toml:1: '-' is not a value"},
      {"k = 1.5\n", "f.toml:1: '1.5': floats are not supported here"},
      {"k = abc\n", "f.toml:1: 'abc' is not a value (strings need quotes)"},
      {"k = 99999999999999999999\n", "f.toml:1: '99999999999999999999' is too large"},
      {"k = 9223372036854775808\n", "f.toml:1: '9223372036854775808' is too large"},
      {"k = 1_\n", "f.toml:1: '1_' is not a value (strings need quotes)"},
      {"k = \"\"\"x\"\"\"\n", "f.toml:1: multi-line strings are not supported"},
      {"k = \"abc\n", "f.toml:1: unterminated string"},
      {"k = \"a\x01\"\n", "f.toml:1: control character in a string"},
      {"k = \"\\q\"\n", "f.toml:1: unsupported escape '\\q' in a string"},
      {"k = [1,\n", "f.toml:2: unterminated array"},
      {"k = [[1]]\n", "f.toml:1: nested arrays are not supported"},
      {"k = [1, \"a\"]\n", "f.toml:1: mixed types in an array"},
      {"k = [1 2]\n", "f.toml:1: expected ',' or ']' in an array"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<TomlDocument> doc = ParseToml(c.text, "f.toml");
    ASSERT_FALSE(doc.ok()) << c.text;
    EXPECT_EQ(std::string(doc.status().message()), c.message) << c.text;
  }
}

// Refused at the second '[', before any recursion: deep nesting cannot exhaust the stack.
TEST(TomlSubset, DeeplyNestedArrayIsRefusedWithoutRecursing) {
  constexpr size_t kDepth = 1'000'000;
  const std::string text = "k = " + std::string(kDepth, '[') + std::string(kDepth, ']') + "\n";
  absl::StatusOr<TomlDocument> doc = ParseToml(text, "f.toml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(std::string(doc.status().message()), "f.toml:1: nested arrays are not supported");
  const std::string open = "k = [\n" + std::string(kDepth, '[') + "\n";  // never closed
  doc = ParseToml(open, "f.toml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(std::string(doc.status().message()), "f.toml:2: nested arrays are not supported");
}

TEST(TomlSubset, MinimumIntegerIsAccepted) {
  absl::StatusOr<TomlDocument> doc = ParseToml("k = -9223372036854775808\n", "f");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(doc->tables[0].entries[0].second.integer, INT64_MIN);
}

}  // namespace
}  // namespace spillway::policy
