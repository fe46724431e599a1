// A strict little JSON parser for the tests: validates a document (RFC 8259 grammar) and collects
// every event object's "ph" value, so export tests can check what kinds of events they got.
#ifndef SPILLWAY_TESTS_PROFILER_REPORT_JSON_CHECK_H_
#define SPILLWAY_TESTS_PROFILER_REPORT_JSON_CHECK_H_

#include <cctype>
#include <map>
#include <string>
#include <string_view>

namespace spillway::report::testing {

class JsonCheck {
 public:
  // True when `text` is one valid JSON value (with surrounding whitespace).
  bool Parse(std::string_view text) {
    text_ = text;
    at_ = 0;
    phases_.clear();
    if (!Value()) return false;
    Space();
    return at_ == text_.size();
  }
  // How many objects had "ph": <value>, by value.
  const std::map<std::string, int>& phases() const { return phases_; }
  size_t error_offset() const { return at_; }

 private:
  void Space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool Eat(char c) {
    Space();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  bool String(std::string* out) {
    if (!Eat('"')) return false;
    while (at_ < text_.size()) {
      const char c = text_[at_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') {
        if (at_ >= text_.size()) return false;
        const char e = text_[at_++];
        if (e == 'u') {
          for (int i = 0; i < 4; ++i) {
            if (at_ >= text_.size() || !std::isxdigit(static_cast<unsigned char>(text_[at_++]))) {
              return false;
            }
          }
        } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
          return false;
        }
        if (out) out->push_back('?');
      } else if (out) {
        out->push_back(c);
      }
    }
    return false;
  }
  bool Number() {
    Space();
    const size_t start = at_;
    if (at_ < text_.size() && text_[at_] == '-') ++at_;
    const auto digits = [&] {
      const size_t d = at_;
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) ++at_;
      return at_ > d;
    };
    if (!digits()) return false;
    const size_t first_digit = text_[start] == '-' ? start + 1 : start;
    if (text_[first_digit] == '0' && at_ - first_digit > 1) return false;  // no leading zeros
    if (at_ < text_.size() && text_[at_] == '.') {
      ++at_;
      if (!digits()) return false;
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      ++at_;
      if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
      if (!digits()) return false;
    }
    return true;
  }
  bool Literal(std::string_view word) {
    Space();
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }
  bool Object() {
    if (!Eat('{')) return false;
    if (Eat('}')) return true;
    do {
      std::string key;
      Space();
      if (!String(&key) || !Eat(':')) return false;
      Space();
      if (key == "ph" && at_ < text_.size() && text_[at_] == '"') {
        std::string value;
        if (!String(&value)) return false;
        ++phases_[value];
      } else if (!Value()) {
        return false;
      }
    } while (Eat(','));
    return Eat('}');
  }
  bool Array() {
    if (!Eat('[')) return false;
    if (Eat(']')) return true;
    do {
      if (!Value()) return false;
    } while (Eat(','));
    return Eat(']');
  }
  bool Value() {
    if (++depth_ > 64) return false;
    Space();
    bool ok = false;
    if (at_ < text_.size()) {
      switch (text_[at_]) {
        case '{':
          ok = Object();
          break;
        case '[':
          ok = Array();
          break;
        case '"':
          ok = String(nullptr);
          break;
        case 't':
          ok = Literal("true");
          break;
        case 'f':
          ok = Literal("false");
          break;
        case 'n':
          ok = Literal("null");
          break;
        default:
          ok = Number();
      }
    }
    --depth_;
    return ok;
  }

  std::string_view text_;
  size_t at_ = 0;
  int depth_ = 0;
  std::map<std::string, int> phases_;
};

}  // namespace spillway::report::testing

#endif  // SPILLWAY_TESTS_PROFILER_REPORT_JSON_CHECK_H_
