// The template engine's tokens and syntax tree (internal to src/chat).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja.h"

namespace wgrt::chat {

enum class Tok {
  Text, Comment, OpenStmt, CloseStmt, OpenExpr, CloseExpr, Ident, Int, Float, String, Op,
  LParen, RParen, LBracket, RBracket, LBrace, RBrace, Comma, Dot, Colon, Pipe, Assign, End,
};

struct Token {
  Tok type = Tok::End;
  std::string text;  // Text/Comment/String: the content; Ident/Op/numbers: as written
  SourcePos pos;
};

// Whitespace rules applied while lexing: trim_blocks, lstrip_blocks, {%- -%}.
std::vector<Token> lex(std::string_view source, const std::string& name);

// Bytes of the JavaScript whitespace character at s[i] (0: none), used by trim and the lexer.
size_t js_space_at(std::string_view s, size_t i);
size_t js_space_before(std::string_view s, size_t end);  // the one ending at s[end - 1]
std::string js_trim(std::string_view s, bool left, bool right);

enum class NodeKind {
  // statements
  Text, Output, If, For, Set, Macro, Break, Continue,
  // expressions
  Literal, List, Tuple, Dict, Ident, Member, Slice, Call, Filter, Test, Unary, Binary, Ternary,
};

struct Node {
  NodeKind kind = NodeKind::Text;
  SourcePos pos;
  std::string name;  // identifier, operator, filter/test/macro name, attribute
  Value literal;     // Text and Literal
  NodePtr a, b, c;   // operands (see parser.cpp for each kind)
  std::vector<NodePtr> items;                          // list/tuple/dict items, positional args
  std::vector<std::pair<std::string, NodePtr>> kw;     // keyword args, macro parameters
  std::vector<NodePtr> body, alt;                      // statement bodies (else / elif branch)
  std::vector<std::string> targets;                    // for-loop variables
  bool flag = false;  // Member: computed; Test: negated; Filter/Call: written with (); For: tuple target
};

// "NAME:LINE:COL: " for messages.
std::string where(const std::string& name, SourcePos p);

}  // namespace wgrt::chat
