// The GBNF parser's errors and the matcher's verdicts on whole strings.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/matcher.h"

using namespace wgrt::grammar;

namespace {

bool matches(const std::string& gbnf, const std::string& s) {
  Matcher m = make_matcher(std::make_shared<const Grammar>(parse_gbnf(gbnf)));
  return accept_bytes(m, s) && is_complete(m.state);
}

std::string error_of(const std::string& gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(GrammarGbnf, ErrorsNameLineColumnAndWhatWasExpected) {
  EXPECT_NE(error_of("root ::= \"a\"\nfoo ::= bar\n").find("line 2 column 9: rule 'bar' is used but never defined"),
            std::string::npos) << error_of("root ::= \"a\"\nfoo ::= bar\n");
  EXPECT_NE(error_of("root ::= \"abc").find("line 1 column 10: unterminated string literal"), std::string::npos);
  EXPECT_NE(error_of("root ::= [a-").find("unterminated character class"), std::string::npos);
  EXPECT_NE(error_of("root = \"a\"").find("expected '::='"), std::string::npos);
  EXPECT_NE(error_of("a ::= \"x\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x? root \"a\"\nx ::= \"y\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,2}").find("n < m"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{99999}").find("repetition count past"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\" ").find("expected ')'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\" @").find("unexpected '@'"), std::string::npos);
  std::string deep = "root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')');
  EXPECT_NE(error_of(deep).find("nested deeper"), std::string::npos);
  // Repetitions that would expand past the element budget are refused, not built.
  std::string wide = "root ::=";
  for (int i = 0; i < 25; ++i) wide += " \"a\"{10000}";
  EXPECT_NE(error_of(wide).find("expands past"), std::string::npos);
}

TEST(GrammarGbnf, MatchesWholeStrings) {
  const std::string g = R"(# a comment
root ::= greeting " " name ("!" | "?")?
greeting ::= "hello" | "hi"   # trailing comment
name ::= [A-Z] [a-z]*
)";
  EXPECT_TRUE(matches(g, "hello World"));
  EXPECT_TRUE(matches(g, "hi Bo!"));
  EXPECT_FALSE(matches(g, "hi bo"));
  EXPECT_FALSE(matches(g, "hello World!!"));
  EXPECT_FALSE(matches(g, "hello"));
  EXPECT_TRUE(matches("root ::= [^\"]+ \"\\\"\"", "ab c\""));
  EXPECT_FALSE(matches("root ::= [^\"]+ \"\\\"\"", "a\"b\""));
  EXPECT_TRUE(matches("root ::= \"a\"{2,3}", "aa"));
  EXPECT_TRUE(matches("root ::= \"a\"{2,3}", "aaa"));
  EXPECT_FALSE(matches("root ::= \"a\"{2,3}", "a"));
  EXPECT_FALSE(matches("root ::= \"a\"{2,3}", "aaaa"));
  EXPECT_TRUE(matches("root ::= \"ab\"{2,}", "ababab"));
  EXPECT_FALSE(matches("root ::= \"ab\"{2,}", "aba"));
  EXPECT_TRUE(matches("root ::= \"(\" root \")\" | \"\"", "((()))"));
  EXPECT_FALSE(matches("root ::= \"(\" root \")\" | \"\"", "(()"));
  // UTF-8: classes see code points, literals may hold them, escapes name them.
  EXPECT_TRUE(matches("root ::= [а-я]+", "привет"));
  EXPECT_FALSE(matches("root ::= [а-я]+", "privet"));
  EXPECT_TRUE(matches("root ::= \"€\" [\\u00e0-\\u00ff]", "€é"));
  EXPECT_TRUE(matches("root ::= .+", "x€"));
  EXPECT_FALSE(matches("root ::= [^a]", "\xE2\x82"));  // a code point still under way is not complete
  EXPECT_TRUE(matches("root ::= \"\\x41\\n\"", "A\n"));
}

TEST(GrammarGbnf, InvalidUtf8BytesAreRejected) {
  Matcher m = make_matcher(std::make_shared<const Grammar>(parse_gbnf("root ::= .*")));
  EXPECT_FALSE(accept_bytes(m, "\xFF"));
  EXPECT_FALSE(accept_bytes(m, "\x80"));
  EXPECT_FALSE(accept_bytes(m, "\xC3\x41"));
  EXPECT_TRUE(accept_bytes(m, "\xC3\xA9"));
  // Overlong forms, surrogates and code points past U+10FFFF die at the first byte that says so.
  EXPECT_FALSE(accept_bytes(m, "\xE0\x80"));
  EXPECT_FALSE(accept_bytes(m, "\xF0\x8F"));
  EXPECT_FALSE(accept_bytes(m, "\xED\xA0"));
  EXPECT_FALSE(accept_bytes(m, "\xF4\x90"));
  EXPECT_TRUE(accept_bytes(m, "\xF0\x9F\x98\x80"));
  // A lead byte cannot stand in for ASCII that a literal wants.
  Matcher abc = make_matcher(std::make_shared<const Grammar>(parse_gbnf("root ::= \"abc\"")));
  EXPECT_FALSE(accept_bytes(abc, "\xE0"));
  EXPECT_FALSE(accept_bytes(abc, "\xF0"));
  EXPECT_FALSE(accept_bytes(abc, "\xC3"));
}
