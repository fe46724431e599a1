// The strict TOML-subset parser (see toml_subset.h). One pass over the text with a cursor; every
// error names the file and the line it was found on.
#include "policy/toml_subset.h"

#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace spillway::policy {
namespace {

bool IsBareKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

class Parser {
 public:
  Parser(absl::string_view text, absl::string_view file) : text_(text), file_(file) {}

  absl::StatusOr<TomlDocument> Run() {
    TomlDocument doc;
    doc.tables.push_back(TomlTable{"", false, 1, {}});
    std::set<std::string> plain_tables;
    while (true) {
      SkipBlankAndComments();
      if (AtEnd()) break;
      if (Peek() == '[') {
        const int line = line_;
        Advance();
        const bool array = !AtEnd() && Peek() == '[';
        if (array) Advance();
        std::string name;
        if (absl::Status s = ReadKey(&name, "table name"); !s.ok()) return s;
        if (AtEnd() || Peek() != ']') return Error("expected ']' after the table name");
        Advance();
        if (array) {
          if (AtEnd() || Peek() != ']') return Error("expected ']]' after the table name");
          Advance();
        }
        if (absl::Status s = EndOfLine(); !s.ok()) return s;
        if (!array && !plain_tables.insert(name).second) {
          return ErrorAt(line, absl::StrCat("table [", name, "] appears twice"));
        }
        doc.tables.push_back(TomlTable{name, array, line, {}});
        continue;
      }
      const int line = line_;
      std::string key;
      if (absl::Status s = ReadKey(&key, "key"); !s.ok()) return s;
      SkipSpaces();
      if (AtEnd() || Peek() != '=')
        return Error(absl::StrCat("expected '=' after key '", key, "'"));
      Advance();
      SkipSpaces();
      TomlValue value;
      if (absl::Status s = ReadValue(&value); !s.ok()) return s;
      if (absl::Status s = EndOfLine(); !s.ok()) return s;
      TomlTable& table = doc.tables.back();
      for (const auto& [k, v] : table.entries) {
        if (k == key) return ErrorAt(line, absl::StrCat("key '", key, "' appears twice"));
      }
      table.entries.emplace_back(key, std::move(value));
    }
    return doc;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }
  void Advance() {
    if (text_[pos_] == '\n') ++line_;
    ++pos_;
  }
  absl::Status Error(absl::string_view what) const { return ErrorAt(line_, what); }
  absl::Status ErrorAt(int line, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line, ": ", what));
  }
  void SkipSpaces() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t')) Advance();
  }
  void SkipComment() {
    if (!AtEnd() && Peek() == '#') {
      while (!AtEnd() && Peek() != '\n') Advance();
    }
  }
  void SkipBlankAndComments() {
    while (!AtEnd()) {
      SkipSpaces();
      SkipComment();
      if (AtEnd()) return;
      if (Peek() == '\n') {
        Advance();
      } else if (Peek() == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') {
        Advance();
      } else {
        return;
      }
    }
  }
  absl::Status EndOfLine() {
    SkipSpaces();
    SkipComment();
    if (!AtEnd() && Peek() == '\r') Advance();
    if (AtEnd()) return absl::OkStatus();
    if (Peek() != '\n') {
      return Error(
          absl::StrFormat("unexpected '%c' after the value (one key or table per line)", Peek()));
    }
    Advance();
    return absl::OkStatus();
  }
  absl::Status ReadKey(std::string* key, absl::string_view what) {
    SkipSpaces();
    const size_t start = pos_;
    while (!AtEnd() && IsBareKeyChar(Peek())) Advance();
    *key = std::string(text_.substr(start, pos_ - start));
    if (key->empty()) {
      if (!AtEnd() && (Peek() == '"' || Peek() == '\'')) {
        return Error(absl::StrCat("quoted ", what, "s are not supported (use a bare ", what, ")"));
      }
      return Error(absl::StrCat("expected a ", what));
    }
    SkipSpaces();
    if (!AtEnd() && Peek() == '.') {
      return Error(absl::StrCat("dotted ", what, " '", *key, ".' is not supported"));
    }
    return absl::OkStatus();
  }
  absl::Status ReadValue(TomlValue* v) {
    v->line = line_;
    if (AtEnd() || Peek() == '\n' || Peek() == '#') return Error("expected a value");
    const char c = Peek();
    if (c == '"' || c == '\'') return ReadString(v);
    if (c == '[') return ReadArray(v);
    if (c == '{') return Error("inline tables are not supported");
    const size_t start = pos_;
    while (!AtEnd() && (IsBareKeyChar(Peek()) || Peek() == '+' || Peek() == '.' || Peek() == ':')) {
      Advance();
    }
    const absl::string_view word = text_.substr(start, pos_ - start);
    if (word == "true" || word == "false") {
      v->type = TomlValue::Type::kBool;
      v->boolean = word == "true";
      return absl::OkStatus();
    }
    return ParseInteger(word, v);
  }
  absl::Status ParseInteger(absl::string_view word, TomlValue* v) {
    v->type = TomlValue::Type::kInteger;
    size_t i = 0;
    bool negative = false;
    if (i < word.size() && (word[i] == '+' || word[i] == '-')) negative = word[i++] == '-';
    if (i == word.size()) return Error(absl::StrCat("'", word, "' is not a value"));
    uint64_t magnitude = 0;
    bool last_digit = false;
    for (; i < word.size(); ++i) {
      const char d = word[i];
      if (d == '_' && last_digit && i + 1 < word.size()) {
        last_digit = false;
        continue;
      }
      if (d < '0' || d > '9') {
        if (d == '.' || d == 'e' || d == 'E') {
          return Error(absl::StrCat("'", word, "': floats are not supported here"));
        }
        return Error(absl::StrCat("'", word, "' is not a value (strings need quotes)"));
      }
      if (magnitude > (uint64_t{1} << 63) / 10)
        return Error(absl::StrCat("'", word, "' is too large"));
      magnitude = magnitude * 10 + static_cast<uint64_t>(d - '0');
      last_digit = true;
    }
    if (!last_digit) return Error(absl::StrCat("'", word, "' is not a value"));
    if (magnitude > (uint64_t{1} << 63) - (negative ? 0 : 1)) {
      return Error(absl::StrCat("'", word, "' is too large"));
    }
    v->integer = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    return absl::OkStatus();
  }
  absl::Status ReadString(TomlValue* v) {
    v->type = TomlValue::Type::kString;
    const char quote = Peek();
    if (text_.substr(pos_, 3) == std::string(3, quote)) {
      return Error("multi-line strings are not supported");
    }
    Advance();
    while (true) {
      if (AtEnd() || Peek() == '\n') return Error("unterminated string");
      const char c = Peek();
      Advance();
      if (c == quote) return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
        return Error("control character in a string");
      }
      if (c != '\\' || quote == '\'') {
        v->string.push_back(c);
        continue;
      }
      if (AtEnd()) return Error("unterminated string");
      const char e = Peek();
      Advance();
      switch (e) {
        case '"':
          v->string.push_back('"');
          break;
        case '\\':
          v->string.push_back('\\');
          break;
        case 'n':
          v->string.push_back('\n');
          break;
        case 't':
          v->string.push_back('\t');
          break;
        default:
          return Error(absl::StrFormat("unsupported escape '\\%c' in a string", e));
      }
    }
  }
  absl::Status ReadArray(TomlValue* v) {
    v->type = TomlValue::Type::kArray;
    Advance();  // '['
    while (true) {
      SkipBlankAndComments();
      if (AtEnd()) return Error("unterminated array");
      if (Peek() == ']') {
        Advance();
        return absl::OkStatus();
      }
      // Refused before it is read: reading it would recurse once per '[' of the input.
      if (Peek() == '[') return Error("nested arrays are not supported");
      TomlValue element;
      if (absl::Status s = ReadValue(&element); !s.ok()) return s;
      if (!v->array.empty() && v->array.front().type != element.type) {
        return Error("mixed types in an array");
      }
      v->array.push_back(std::move(element));
      SkipBlankAndComments();
      if (AtEnd()) return Error("unterminated array");
      if (Peek() == ',') {
        Advance();
      } else if (Peek() != ']') {
        return Error("expected ',' or ']' in an array");
      }
    }
  }

  absl::string_view text_;
  absl::string_view file_;
  size_t pos_ = 0;
  int line_ = 1;
};

}  // namespace

absl::StatusOr<TomlDocument> ParseToml(std::string_view text, std::string_view file_name) {
  return Parser(absl::string_view(text.data(), text.size()),
                absl::string_view(file_name.data(), file_name.size()))
      .Run();
}

std::string TomlQuote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += ' ';  // other control characters cannot be written in the subset
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace spillway::policy
