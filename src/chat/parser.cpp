// Tokens → syntax tree, by recursive descent. Node fields per kind:
//   Text: literal            Output: a = expression
//   If: a = test, body, alt (an elif is an If alone in alt)
//   For: targets (flag: a tuple), a = iterable, b = `if` filter or null, body, alt (else)
//   Set: a = target (Ident, Tuple of Idents, Member), b = value or null (block set: body)
//   Macro: name, kw = parameters (default or null), body
//   Literal: literal         List/Tuple: items        Dict: items = key, value, key, value...
//   Ident: name              Member: a = object, b = index (flag) or name = attribute
//   Slice: a = object, items = start, stop, step (each may be null)
//   Call: a = callee, items = positional, kw = keyword
//   Filter: a = operand, name, items/kw = arguments (flag: written with parentheses)
//   Test: a = operand, name, items = arguments, flag = negated
//   Unary: name = op, a      Binary: name = op, a, b
//   Ternary: a = condition, b = value if true, c = value if false (null: undefined)
// Expression precedence, loosest first: ternary, or, and, not, comparisons and in/not in,
// + - ~, * / // %, **, is-tests, |filters, unary + -, member/subscript/call, primary.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "chat/ast.h"

namespace wgrt::chat {

Template::Template() = default;
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

namespace {

// Tests that take one argument, written after the name (`x is sameas false`).
const std::set<std::string, std::less<>> kTestsWithArg = {"equalto", "eq", "sameas"};
const std::set<std::string, std::less<>> kUnsupported = {
    "call", "filter", "include", "extends", "block", "import", "from", "raw", "with", "autoescape", "do",
};

NodePtr node(NodeKind k, SourcePos p) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  n->pos = p;
  return n;
}

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::Text: return "text";
    case Tok::Comment: return "a comment";
    case Tok::OpenStmt: return "'{%'";
    case Tok::CloseStmt: return "'%}'";
    case Tok::OpenExpr: return "'{{'";
    case Tok::CloseExpr: return "'}}'";
    case Tok::Ident: return "a name";
    case Tok::Int:
    case Tok::Float: return "a number";
    case Tok::String: return "a string";
    case Tok::Op: return "an operator";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::LBrace: return "'{'";
    case Tok::RBrace: return "'}'";
    case Tok::Comma: return "','";
    case Tok::Dot: return "'.'";
    case Tok::Colon: return "':'";
    case Tok::Pipe: return "'|'";
    case Tok::Assign: return "'='";
    case Tok::End: return "the end of the template";
  }
  return "?";
}

// Deeper nesting than this is not a chat template. Chained operators (a + b + c, x.y.z,
// x | f | g) nest in the tree too and count alike: the bound keeps parsing, rendering and
// freeing the tree (all recursive) far from the stack's end.
constexpr int kMaxNesting = 1024;

struct Parser {
  const std::vector<Token>& t;
  const std::string& name;
  size_t i = 0;
  int depth = 0;

  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth > kMaxNesting) p.fail(p.peek(), fmt::format("nested more than {} deep", kMaxNesting));
    }
    ~Nest() { --p.depth; }
  };
  // One more link of a chain in the current function; the depth returns when it does.
  struct Chain {
    Parser& p;
    int saved;
    explicit Chain(Parser& parser) : p(parser), saved(parser.depth) {}
    void link() {
      if (++p.depth > kMaxNesting) p.fail(p.peek(), fmt::format("an expression chained or nested more than {} deep", kMaxNesting));
    }
    ~Chain() { p.depth = saved; }
  };

  const Token& peek(size_t k = 0) const { return t[std::min(i + k, t.size() - 1)]; }
  bool is(Tok type) const { return peek().type == type; }
  bool is_ident(std::string_view w, size_t k = 0) const { return peek(k).type == Tok::Ident && peek(k).text == w; }
  bool is_op(std::string_view op) const { return peek().type == Tok::Op && peek().text == op; }
  [[noreturn]] void fail(const Token& at, const std::string& what) const {
    throw TemplateError(where(name, at.pos) + what);
  }
  std::string describe(const Token& k) const {
    if (k.type == Tok::Ident || k.type == Tok::Op || k.type == Tok::Int || k.type == Tok::Float)
      return fmt::format("'{}'", k.text);
    return tok_name(k.type);
  }
  const Token& expect(Tok type, const char* context) {
    if (!is(type)) fail(peek(), fmt::format("expected {} {}, found {}", tok_name(type), context, describe(peek())));
    return t[i++];
  }
  void expect_ident(std::string_view w, const char* context) {
    if (!is_ident(w)) fail(peek(), fmt::format("expected '{}' {}, found {}", w, context, describe(peek())));
    ++i;
  }
  // At "{% word".
  bool at_stmt(std::initializer_list<std::string_view> words) const {
    if (peek().type != Tok::OpenStmt || peek(1).type != Tok::Ident) return false;
    return std::find(words.begin(), words.end(), peek(1).text) != words.end();
  }

  // Parses statements until one of `ends` (not consumed); end of input there is an unclosed block.
  std::vector<NodePtr> block(std::initializer_list<std::string_view> ends, const Token& opener, const char* what) {
    std::vector<NodePtr> body;
    while (!at_stmt(ends)) {
      if (at_stmt({"endif", "endfor", "endset", "endmacro", "elif", "else"}))
        fail(peek(1), fmt::format("'{}' inside the '{}' block opened at line {} (hint: close it with {{% {} %}} first)",
                                  peek(1).text, what, opener.pos.line, *ends.begin()));
      if (is(Tok::End))
        fail(opener, fmt::format("unclosed '{}' block (hint: add {{% {} %}})", what, *ends.begin()));
      if (NodePtr n = any()) body.push_back(std::move(n));
    }
    return body;
  }
  // At "{% endX %}", which at_stmt has checked.
  void close_block(const char* end) {
    i += 2;
    expect(Tok::CloseStmt, fmt::format("after '{}'", end).c_str());
  }

  NodePtr any() {
    const Token& k = peek();
    switch (k.type) {
      case Tok::Comment: ++i; return nullptr;
      case Tok::Text: {
        auto n = node(NodeKind::Text, k.pos);
        n->literal = make_string(k.text);
        ++i;
        return n;
      }
      case Tok::OpenExpr: {
        ++i;
        auto n = node(NodeKind::Output, k.pos);
        n->a = expression();
        expect(Tok::CloseExpr, "to close '{{'");
        return n;
      }
      case Tok::OpenStmt: return statement();
      default: fail(k, fmt::format("unexpected {}", describe(k)));
    }
  }

  NodePtr statement() {
    Nest nest(*this);
    const Token& open = t[i++];
    const Token& word = peek();
    if (word.type != Tok::Ident) fail(word, fmt::format("expected a statement name after '{{%', found {}", describe(word)));
    const std::string& w = word.text;
    ++i;
    if (w == "if") return if_rest(open);
    if (w == "for") return for_rest(open);
    if (w == "set") return set_rest(open);
    if (w == "macro") return macro_rest(open);
    if (w == "break" || w == "continue") {
      expect(Tok::CloseStmt, fmt::format("after '{}'", w).c_str());
      return node(w == "break" ? NodeKind::Break : NodeKind::Continue, open.pos);
    }
    if (w == "generation" || w == "endgeneration") {  // training markers: no output
      expect(Tok::CloseStmt, fmt::format("after '{}'", w).c_str());
      return nullptr;
    }
    if (kUnsupported.count(w))
      fail(word, fmt::format("the '{}' statement is outside the Jinja subset wgrt supports", w));
    if (w == "elif" || w == "else" || w.starts_with("end"))
      fail(word, fmt::format("'{}' without an open block it could close", w));
    fail(word, fmt::format("unknown statement '{}'", w));
  }

  NodePtr if_rest(const Token& open) {
    Nest nest(*this);  // an elif is an if inside the else
    auto n = node(NodeKind::If, open.pos);
    n->a = expression();
    expect(Tok::CloseStmt, "after the 'if' condition");
    n->body = block({"endif", "elif", "else"}, open, "if");
    if (at_stmt({"elif"})) {
      const Token& elif = t[i];
      i += 2;
      n->alt.push_back(if_rest(elif));  // consumes the shared endif
      return n;
    }
    if (at_stmt({"else"})) {
      i += 2;
      expect(Tok::CloseStmt, "after 'else'");
      n->alt = block({"endif"}, open, "if");
    }
    close_block("endif");
    return n;
  }

  NodePtr for_rest(const Token& open) {
    auto n = node(NodeKind::For, open.pos);
    do {
      const Token& v = expect(Tok::Ident, "as the loop variable");
      n->targets.push_back(v.text);
      if (!is(Tok::Comma)) break;
      ++i;
      n->flag = true;
    } while (true);
    expect_ident("in", "after the loop variable");
    n->a = or_expr();  // `if` here filters the loop, it does not start a ternary
    if (is_ident("if")) {
      ++i;
      n->b = or_expr();
    }
    expect(Tok::CloseStmt, "after the 'for' header");
    n->body = block({"endfor", "else"}, open, "for");
    if (at_stmt({"else"})) {
      i += 2;
      expect(Tok::CloseStmt, "after 'else'");
      n->alt = block({"endfor"}, open, "for");
    }
    close_block("endfor");
    return n;
  }

  NodePtr set_rest(const Token& open) {
    auto n = node(NodeKind::Set, open.pos);
    n->a = expression_sequence();
    NodeKind tk = n->a->kind;
    bool ok = tk == NodeKind::Ident || (tk == NodeKind::Member && !n->a->flag);
    if (tk == NodeKind::Tuple)
      ok = std::all_of(n->a->items.begin(), n->a->items.end(), [](const NodePtr& x) { return x->kind == NodeKind::Ident; });
    if (!ok) fail(open, "'set' assigns to a name, names separated by commas, or namespace.attribute");
    if (is(Tok::Assign)) {
      ++i;
      n->b = expression_sequence();
      expect(Tok::CloseStmt, "after the 'set' value");
      return n;
    }
    expect(Tok::CloseStmt, "after 'set NAME' (or give '= value')");
    n->body = block({"endset"}, open, "set");
    close_block("endset");
    return n;
  }

  NodePtr macro_rest(const Token& open) {
    auto n = node(NodeKind::Macro, open.pos);
    n->name = expect(Tok::Ident, "as the macro name").text;
    expect(Tok::LParen, "after the macro name");
    while (!is(Tok::RParen)) {
      std::string param = expect(Tok::Ident, "as a macro parameter").text;
      NodePtr def;
      if (is(Tok::Assign)) {
        ++i;
        def = expression();
      }
      n->kw.emplace_back(param, std::move(def));
      if (!is(Tok::Comma)) break;
      ++i;
    }
    expect(Tok::RParen, "to close the macro parameters");
    expect(Tok::CloseStmt, "after the macro header");
    n->body = block({"endmacro"}, open, "macro");
    close_block("endmacro");
    return n;
  }

  // a, b, c → a Tuple; a → a.
  NodePtr expression_sequence() {
    SourcePos p = peek().pos;
    NodePtr first = expression();
    if (!is(Tok::Comma)) return first;
    auto tup = node(NodeKind::Tuple, p);
    tup->items.push_back(std::move(first));
    while (is(Tok::Comma)) {
      ++i;
      if (is(Tok::RParen) || is(Tok::Assign) || is(Tok::CloseStmt)) break;
      tup->items.push_back(expression());
    }
    return tup;
  }

  NodePtr expression() {
    Nest nest(*this);
    NodePtr a = or_expr();
    if (!is_ident("if")) return a;
    const Token& k = t[i++];
    auto n = node(NodeKind::Ternary, k.pos);
    n->a = or_expr();
    n->b = std::move(a);
    if (is_ident("else")) {
      ++i;
      n->c = expression();
    }
    return n;
  }

  NodePtr binary(std::string op, SourcePos p, NodePtr a, NodePtr b) {
    auto n = node(NodeKind::Binary, p);
    n->name = std::move(op);
    n->a = std::move(a);
    n->b = std::move(b);
    return n;
  }

  NodePtr or_expr() {
    Chain chain(*this);
    NodePtr a = and_expr();
    while (is_ident("or")) {
      chain.link();
      SourcePos p = t[i++].pos;
      a = binary("or", p, std::move(a), and_expr());
    }
    return a;
  }
  NodePtr and_expr() {
    Chain chain(*this);
    NodePtr a = not_expr();
    while (is_ident("and")) {
      chain.link();
      SourcePos p = t[i++].pos;
      a = binary("and", p, std::move(a), not_expr());
    }
    return a;
  }
  NodePtr not_expr() {
    Nest nest(*this);
    if (!is_ident("not")) return comparison();
    auto n = node(NodeKind::Unary, t[i++].pos);
    n->name = "not";
    n->a = not_expr();
    return n;
  }
  NodePtr comparison() {
    Chain chain(*this);
    NodePtr a = additive();
    while (true) {
      chain.link();
      SourcePos p = peek().pos;
      std::string op;
      if (is_ident("not") && is_ident("in", 1)) {
        i += 2;
        op = "not in";
      } else if (is_ident("in")) {
        ++i;
        op = "in";
      } else if (is(Tok::Op) && (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">="))) {
        op = t[i++].text;
      } else {
        return a;
      }
      a = binary(op, p, std::move(a), additive());
    }
  }
  NodePtr additive() {
    Chain chain(*this);
    NodePtr a = multiplicative();
    while (is_op("+") || is_op("-") || is_op("~")) {
      chain.link();
      const Token& k = t[i++];
      a = binary(k.text, k.pos, std::move(a), multiplicative());
    }
    return a;
  }
  NodePtr multiplicative() {
    Chain chain(*this);
    NodePtr a = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.link();
      const Token& k = t[i++];
      a = binary(k.text, k.pos, std::move(a), power());
    }
    return a;
  }
  NodePtr power() {
    Chain chain(*this);
    NodePtr a = test();
    while (is_op("**")) {
      chain.link();
      const Token& k = t[i++];
      a = binary(k.text, k.pos, std::move(a), test());
    }
    return a;
  }
  NodePtr test() {
    Chain chain(*this);
    NodePtr a = filter();
    while (is_ident("is")) {
      chain.link();
      auto n = node(NodeKind::Test, t[i++].pos);
      if (is_ident("not")) {
        ++i;
        n->flag = true;
      }
      const Token& k = expect(Tok::Ident, "as the test name after 'is'");
      // none/true/false are also the literal names; the test of that name is meant.
      std::string tname = k.text == "None" ? "none" : k.text == "True" ? "true" : k.text == "False" ? "false" : k.text;
      n->name = tname;
      if (is(Tok::LParen)) {
        call_args(*n);
      } else if (kTestsWithArg.count(tname)) {
        n->items.push_back(unary());
      }
      n->a = std::move(a);
      a = std::move(n);
    }
    return a;
  }
  NodePtr filter() {
    Chain chain(*this);
    NodePtr a = unary();
    while (is(Tok::Pipe)) {
      chain.link();
      ++i;
      const Token& k = expect(Tok::Ident, "as the filter name after '|'");
      auto n = node(NodeKind::Filter, k.pos);
      n->name = k.text;
      if (is(Tok::LParen)) {
        n->flag = true;
        call_args(*n);
      }
      n->a = std::move(a);
      a = std::move(n);
    }
    return a;
  }
  NodePtr unary() {
    Nest nest(*this);
    if (is_op("-") || is_op("+")) {
      const Token& k = t[i++];
      auto n = node(NodeKind::Unary, k.pos);
      n->name = k.text;
      n->a = unary();
      return n;
    }
    return postfix(primary());
  }

  // ( args ) into n.items / n.kw.
  void call_args(Node& n) {
    expect(Tok::LParen, "");
    while (!is(Tok::RParen)) {
      if (is(Tok::Ident) && peek(1).type == Tok::Assign) {
        std::string key = t[i].text;
        i += 2;
        n.kw.emplace_back(key, expression());
      } else {
        if (!n.kw.empty()) fail(peek(), "a positional argument after keyword arguments");
        n.items.push_back(expression());
      }
      if (!is(Tok::Comma)) break;
      ++i;
    }
    expect(Tok::RParen, "to close the argument list");
  }

  NodePtr postfix(NodePtr a) {
    Chain chain(*this);
    while (true) {
      chain.link();
      if (is(Tok::Dot)) {
        const Token& dot = t[i++];
        auto n = node(NodeKind::Member, dot.pos);
        const Token& k = peek();
        if (k.type != Tok::Ident && k.type != Tok::Int) fail(k, fmt::format("expected an attribute name after '.', found {}", describe(k)));
        ++i;
        if (k.type == Tok::Int) {
          n->flag = true;
          n->b = node(NodeKind::Literal, k.pos);
          try {
            n->b->literal = make_int(std::stoll(k.text));
          } catch (const std::out_of_range&) {
            fail(k, fmt::format("the index {} is out of range", k.text));
          }
        } else {
          n->name = k.text;
        }
        n->a = std::move(a);
        a = std::move(n);
      } else if (is(Tok::LBracket)) {
        const Token& br = t[i++];
        a = subscript(std::move(a), br);
      } else if (is(Tok::LParen)) {
        auto n = node(NodeKind::Call, peek().pos);
        call_args(*n);
        n->a = std::move(a);
        a = std::move(n);
      } else {
        return a;
      }
    }
  }

  NodePtr subscript(NodePtr obj, const Token& br) {
    std::vector<NodePtr> parts;
    bool is_slice = false;
    parts.emplace_back();
    while (!is(Tok::RBracket)) {
      if (is(Tok::Colon)) {
        ++i;
        is_slice = true;
        if (parts.size() == 3) fail(peek(), "a slice takes at most start:stop:step");
        parts.emplace_back();
        continue;
      }
      if (parts.back()) fail(peek(), fmt::format("expected ']' or ':' in a subscript, found {}", describe(peek())));
      if (is(Tok::End)) break;
      parts.back() = expression();
    }
    expect(Tok::RBracket, "to close '['");
    if (!is_slice) {
      if (!parts[0]) fail(br, "an empty subscript '[]'");
      auto n = node(NodeKind::Member, br.pos);
      n->flag = true;
      n->a = std::move(obj);
      n->b = std::move(parts[0]);
      return n;
    }
    auto n = node(NodeKind::Slice, br.pos);
    n->a = std::move(obj);
    parts.resize(3);
    n->items = std::move(parts);
    return n;
  }

  NodePtr primary() {
    const Token& k = peek();
    switch (k.type) {
      case Tok::Int:
      case Tok::Float: {
        ++i;
        auto n = node(NodeKind::Literal, k.pos);
        try {
          n->literal = k.type == Tok::Int ? make_int(std::stoll(k.text)) : make_float(std::stod(k.text));
        } catch (const std::out_of_range&) {
          fail(k, fmt::format("the number {} is out of range", k.text));
        }
        return n;
      }
      case Tok::String: {
        std::string s;
        while (is(Tok::String)) s += t[i++].text;  // adjacent literals concatenate
        auto n = node(NodeKind::Literal, k.pos);
        n->literal = make_string(std::move(s));
        return n;
      }
      case Tok::Ident: {
        ++i;
        auto n = node(NodeKind::Ident, k.pos);
        n->name = k.text;
        return n;
      }
      case Tok::LParen: {
        ++i;
        NodePtr e = expression_sequence();
        expect(Tok::RParen, "to close '('");
        return e;
      }
      case Tok::LBracket: {
        ++i;
        auto n = node(NodeKind::List, k.pos);
        while (!is(Tok::RBracket)) {
          n->items.push_back(expression());
          if (!is(Tok::Comma)) break;
          ++i;
        }
        expect(Tok::RBracket, "to close the list");
        return n;
      }
      case Tok::LBrace: {
        ++i;
        auto n = node(NodeKind::Dict, k.pos);
        while (!is(Tok::RBrace)) {
          n->items.push_back(expression());
          expect(Tok::Colon, "between a key and its value");
          n->items.push_back(expression());
          if (!is(Tok::Comma)) break;
          ++i;
        }
        expect(Tok::RBrace, "to close the dict");
        return n;
      }
      default: fail(k, fmt::format("expected an expression, found {}", describe(k)));
    }
  }
};

}  // namespace

Template parse_template(std::string_view source, const std::string& name) {
  std::vector<Token> tokens = lex(source, name);
  Parser p{tokens, name};
  Template out;
  out.name = name;
  while (!p.is(Tok::End)) {
    if (p.at_stmt({"endif", "endfor", "endset", "endmacro", "elif", "else"}))
      p.fail(p.peek(1), fmt::format("'{}' without an open block it could close", p.peek(1).text));
    if (NodePtr n = p.any()) out.body.push_back(std::move(n));
  }
  return out;
}

}  // namespace wgrt::chat
