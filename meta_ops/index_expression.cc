// Parser, type checker, canonical printer, simplifier, evaluator and range analysis of the index-expression
// language (see index_expression.h for the language and its semantics).
// Must not produce or accept C++ source text: the only output besides the AST is its canonical form.
#include "meta_ops/index_expression.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <utility>

namespace metajit {
namespace {

constexpr int64_t kSmallest = std::numeric_limits<int64_t>::min();
constexpr int64_t kLargest = std::numeric_limits<int64_t>::max();
constexpr uint64_t kSmallestMagnitude = uint64_t{1} << 63;  // |INT64_MIN|
constexpr int kMaximumNesting = 200;                          // parser recursion (parentheses, unary chains)
constexpr int kMaximumDepth = 1000;                           // AST depth (long operator chains)

// ------------------------------------------------------------------ wrapping arithmetic (never undefined)
int64_t wrapping_add(int64_t left, int64_t right) {
  return static_cast<int64_t>(static_cast<uint64_t>(left) + static_cast<uint64_t>(right));
}
int64_t wrapping_subtract(int64_t left, int64_t right) {
  return static_cast<int64_t>(static_cast<uint64_t>(left) - static_cast<uint64_t>(right));
}
int64_t wrapping_multiply(int64_t left, int64_t right) {
  return static_cast<int64_t>(static_cast<uint64_t>(left) * static_cast<uint64_t>(right));
}
int64_t wrapping_negate(int64_t value) { return static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(value)); }

// ------------------------------------------------------------------ operator table
enum class Arity : uint8_t { None, Unary, Binary };
struct OperatorInfo {
  const char* symbol;
  Arity arity;
  IndexType operand_type;  // Equal / NotEqual: any type, both the same
  IndexType result_type;
  bool function_style;  // min(a, b), abs(a)
};

OperatorInfo operator_info(IndexOperator op) {
  using T = IndexType;
  switch (op) {
    case IndexOperator::None: return {"", Arity::None, T::Integer, T::Integer, false};
    case IndexOperator::Negate: return {"-", Arity::Unary, T::Integer, T::Integer, false};
    case IndexOperator::Not: return {"!", Arity::Unary, T::Boolean, T::Boolean, false};
    case IndexOperator::Abs: return {"abs", Arity::Unary, T::Integer, T::Integer, true};
    case IndexOperator::Add: return {"+", Arity::Binary, T::Integer, T::Integer, false};
    case IndexOperator::Subtract: return {"-", Arity::Binary, T::Integer, T::Integer, false};
    case IndexOperator::Multiply: return {"*", Arity::Binary, T::Integer, T::Integer, false};
    case IndexOperator::FloorDivide: return {"/", Arity::Binary, T::Integer, T::Integer, false};
    case IndexOperator::FloorModulo: return {"%", Arity::Binary, T::Integer, T::Integer, false};
    case IndexOperator::Minimum: return {"min", Arity::Binary, T::Integer, T::Integer, true};
    case IndexOperator::Maximum: return {"max", Arity::Binary, T::Integer, T::Integer, true};
    case IndexOperator::Less: return {"<", Arity::Binary, T::Integer, T::Boolean, false};
    case IndexOperator::LessEqual: return {"<=", Arity::Binary, T::Integer, T::Boolean, false};
    case IndexOperator::Greater: return {">", Arity::Binary, T::Integer, T::Boolean, false};
    case IndexOperator::GreaterEqual: return {">=", Arity::Binary, T::Integer, T::Boolean, false};
    case IndexOperator::Equal: return {"==", Arity::Binary, T::Integer, T::Boolean, false};
    case IndexOperator::NotEqual: return {"!=", Arity::Binary, T::Integer, T::Boolean, false};
    case IndexOperator::LogicalAnd: return {"&&", Arity::Binary, T::Boolean, T::Boolean, false};
    case IndexOperator::LogicalOr: return {"||", Arity::Binary, T::Boolean, T::Boolean, false};
  }
  return {"?", Arity::None, T::Integer, T::Integer, false};
}

bool is_equality(IndexOperator op) { return op == IndexOperator::Equal || op == IndexOperator::NotEqual; }
bool is_comparison(IndexOperator op) {
  return op == IndexOperator::Less || op == IndexOperator::LessEqual || op == IndexOperator::Greater ||
         op == IndexOperator::GreaterEqual || is_equality(op);
}

// Integer semantics of every operator (booleans as 0/1). Logical operators here are the eager versions, only
// valid on already-evaluated operands.
int64_t apply_unary(IndexOperator op, int64_t value) {
  switch (op) {
    case IndexOperator::Negate: return wrapping_negate(value);
    case IndexOperator::Not: return value == 0 ? 1 : 0;
    case IndexOperator::Abs: return value < 0 ? wrapping_negate(value) : value;
    default: throw std::invalid_argument("index expression: not a unary operator");
  }
}

int64_t apply_binary(IndexOperator op, int64_t left, int64_t right) {
  switch (op) {
    case IndexOperator::Add: return wrapping_add(left, right);
    case IndexOperator::Subtract: return wrapping_subtract(left, right);
    case IndexOperator::Multiply: return wrapping_multiply(left, right);
    case IndexOperator::FloorDivide: return index_floor_divide(left, right);
    case IndexOperator::FloorModulo: return index_floor_modulo(left, right);
    case IndexOperator::Minimum: return std::min(left, right);
    case IndexOperator::Maximum: return std::max(left, right);
    case IndexOperator::Less: return left < right;
    case IndexOperator::LessEqual: return left <= right;
    case IndexOperator::Greater: return left > right;
    case IndexOperator::GreaterEqual: return left >= right;
    case IndexOperator::Equal: return left == right;
    case IndexOperator::NotEqual: return left != right;
    case IndexOperator::LogicalAnd: return (left != 0 && right != 0) ? 1 : 0;
    case IndexOperator::LogicalOr: return (left != 0 || right != 0) ? 1 : 0;
    default: throw std::invalid_argument("index expression: not a binary operator");
  }
}

std::string type_article(IndexType type) { return type == IndexType::Integer ? "an integer" : "a boolean"; }

IndexExpression new_node(IndexNodeKind kind, IndexOperator op, IndexType type, int64_t value,
                         std::vector<IndexExpression> operands) {
  auto node = std::make_shared<IndexNode>();
  node->kind = kind;
  node->op = op;
  node->type = type;
  node->value = value;
  node->operands = std::move(operands);
  return node;
}

void require_operand(const IndexExpression& operand, const char* constructor) {
  if (!operand) throw std::invalid_argument(std::string(constructor) + ": an operand is null");
}

// ------------------------------------------------------------------ canonical text
void append_canonical(const IndexNode& node, std::string& out) {
  switch (node.kind) {
    case IndexNodeKind::Integer:
      if (node.type == IndexType::Boolean) {
        out += node.value != 0 ? "true" : "false";
      } else if (node.value < 0) {
        out += "(" + std::to_string(node.value) + ")";
      } else {
        out += std::to_string(node.value);
      }
      return;
    case IndexNodeKind::LoopIndex: out += "i" + std::to_string(node.value); return;
    case IndexNodeKind::InputShape: out += "xshape" + std::to_string(node.value); return;
    case IndexNodeKind::OutputShape: out += "yshape" + std::to_string(node.value); return;
    case IndexNodeKind::ExtraRead:
      out += "@e" + std::to_string(node.value) + "(";
      for (size_t index = 0; index < node.operands.size(); ++index) {
        if (index > 0) out += ", ";
        append_canonical(*node.operands[index], out);
      }
      out += ")";
      return;
    case IndexNodeKind::Unary: {
      const OperatorInfo info = operator_info(node.op);
      if (node.op == IndexOperator::Negate) {
        // "-5" parses as the literal -5, which prints "(-5)" like the negation does; only "-0" differs: the
        // literal 0 prints "0", so a negation whose operand prints "0" prints "0" too (round trip stays stable).
        std::string operand;
        append_canonical(*node.operands[0], operand);
        out += operand == "0" ? operand : "(-" + operand + ")";
        return;
      }
      if (info.function_style) {
        out += std::string(info.symbol) + "(";
        append_canonical(*node.operands[0], out);
        out += ")";
      } else {
        out += std::string("(") + info.symbol;
        append_canonical(*node.operands[0], out);
        out += ")";
      }
      return;
    }
    case IndexNodeKind::Binary: {
      const OperatorInfo info = operator_info(node.op);
      if (info.function_style) {
        out += std::string(info.symbol) + "(";
        append_canonical(*node.operands[0], out);
        out += ", ";
        append_canonical(*node.operands[1], out);
        out += ")";
      } else {
        out += "(";
        append_canonical(*node.operands[0], out);
        out += std::string(" ") + info.symbol + " ";
        append_canonical(*node.operands[1], out);
        out += ")";
      }
      return;
    }
    case IndexNodeKind::Ternary:
      out += "(";
      append_canonical(*node.operands[0], out);
      out += " ? ";
      append_canonical(*node.operands[1], out);
      out += " : ";
      append_canonical(*node.operands[2], out);
      out += ")";
      return;
  }
}

// ------------------------------------------------------------------ lexer
enum class TokenKind : uint8_t { Number, Name, Extra, Symbol, End };
struct Token {
  TokenKind kind;
  std::string text;
  size_t column;           // 1-based
  uint64_t magnitude = 0;  // Number: value (saturated above 2^63); Extra: input number (saturated)
  bool too_large = false;  // Number beyond 2^63
};

bool is_name_start(char character) { return std::isalpha(static_cast<unsigned char>(character)) || character == '_'; }
bool is_name_character(char character) {
  return std::isalnum(static_cast<unsigned char>(character)) || character == '_';
}
bool is_digit(char character) { return character >= '0' && character <= '9'; }

// Parses "<digits>" with no leading zero (other than "0" itself); saturates large values at INT32_MAX + 1 so a
// name like i99999999999 is still reported as beyond the rank.
bool parse_name_number(const std::string& digits, int64_t* number) {
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return false;
  int64_t value = 0;
  for (char character : digits) {
    if (!is_digit(character)) return false;
    value = std::min<int64_t>(value * 10 + (character - '0'), int64_t{1} << 31);
  }
  *number = value;
  return true;
}

std::string quote_character(char character) {
  if (std::isprint(static_cast<unsigned char>(character))) return std::string("'") + character + "'";
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "'\\x%02x'", static_cast<unsigned char>(character));
  return buffer;
}

std::string describe_token(const Token& token) {
  if (token.kind == TokenKind::End) return "the end of the expression";
  return "'" + token.text + "'";
}

std::string name_range(const std::string& prefix, int count) {
  if (count <= 0) return "";
  if (count == 1) return prefix + "0";
  return prefix + "0.." + prefix + std::to_string(count - 1);
}

std::string plural(int64_t count, const std::string& singular, const std::string& plural_form) {
  return std::to_string(count) + " " + (count == 1 ? singular : plural_form);
}

// ------------------------------------------------------------------ parser
class Parser {
 public:
  Parser(const std::string& text, const IndexContext& context) : text_(text), context_(context) {}

  IndexExpression parse(IndexType expected_type) {
    tokenize();
    if (tokens_.front().kind == TokenKind::End) fail(1, "the expression is empty");
    Parsed result = parse_ternary();
    const Token& rest = peek();
    if (rest.kind != TokenKind::End) {
      if (rest.text == ")") fail(rest.column, "unbalanced parentheses: unexpected ')'");
      fail(rest.column, "unexpected " + describe_token(rest) + " after a complete expression");
    }
    if (result.node->type != expected_type) {
      if (expected_type == IndexType::Integer) {
        fail(result.column, "non-integer result",
             "this is a boolean (true/false) expression, but an integer index is required here");
      }
      fail(result.column, "non-boolean result",
           "expected a boolean condition (like i0 < xshape0), got an integer expression");
    }
    return result.node;
  }

 private:
  struct Parsed {
    IndexExpression node;
    size_t column;  // where the sub-expression starts, for error messages
    int depth;
  };

  class NestingGuard {
   public:
    NestingGuard(Parser& parser, size_t column) : parser_(parser) {
      if (++parser_.nesting_ > kMaximumNesting) {
        parser_.fail(column, "the expression is nested too deeply (more than " + std::to_string(kMaximumNesting) +
                                 " levels)");
      }
    }
    ~NestingGuard() { --parser_.nesting_; }

   private:
    Parser& parser_;
  };

  // Message: `invalid index expression "TEXT": PROBLEM at column N[; DETAIL]`, then the text and a caret line.
  [[noreturn]] void fail(size_t column, const std::string& problem, const std::string& detail = "") const {
    std::string caret;
    for (size_t index = 0; index + 1 < column && index < text_.size(); ++index) {
      caret += text_[index] == '\t' ? '\t' : ' ';
    }
    if (column > text_.size() + 1) column = text_.size() + 1;
    throw std::invalid_argument("invalid index expression \"" + text_ + "\": " + problem + " at column " +
                                std::to_string(column) + (detail.empty() ? "" : "; " + detail) + "\n  " + text_ +
                                "\n  " + caret + "^");
  }

  // ---- tokens
  void tokenize() {
    size_t position = 0;
    const size_t size = text_.size();
    while (position < size) {
      const char character = text_[position];
      const size_t column = position + 1;
      if (std::isspace(static_cast<unsigned char>(character))) {
        ++position;
        continue;
      }
      if (is_digit(character) || (character == '.' && position + 1 < size && is_digit(text_[position + 1]))) {
        position = lex_number(position);
        continue;
      }
      if (is_name_start(character)) {
        size_t end = position;
        while (end < size && is_name_character(text_[end])) ++end;
        tokens_.push_back({TokenKind::Name, text_.substr(position, end - position), column});
        position = end;
        continue;
      }
      if (character == '@') {
        size_t end = position + 1;
        while (end < size && is_name_character(text_[end])) ++end;
        const std::string word = text_.substr(position, end - position);
        int64_t number = 0;
        if (word.size() < 3 || word[1] != 'e' || !parse_name_number(word.substr(2), &number)) {
          fail(column, "invalid extra input reference '" + word + "'",
               "extra inputs are read as @e0(...), @e1(...), ...");
        }
        Token token{TokenKind::Extra, word, column};
        token.magnitude = static_cast<uint64_t>(number);
        tokens_.push_back(token);
        position = end;
        continue;
      }
      static const char* const kTwoCharacterSymbols[] = {"<=", ">=", "==", "!=", "&&", "||"};
      bool matched = false;
      for (const char* symbol : kTwoCharacterSymbols) {
        if (text_.compare(position, 2, symbol) == 0) {
          tokens_.push_back({TokenKind::Symbol, symbol, column});
          position += 2;
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (std::string("+-*/%(),?:<>!").find(character) != std::string::npos) {
        tokens_.push_back({TokenKind::Symbol, std::string(1, character), column});
        ++position;
        continue;
      }
      if (character == '&') fail(column, "'&' is not an operator", "did you mean '&&'?");
      if (character == '|') fail(column, "'|' is not an operator", "did you mean '||'?");
      if (character == '=') fail(column, "'=' is not an operator", "did you mean '=='?");
      fail(column, "unexpected character " + quote_character(character));
    }
    tokens_.push_back({TokenKind::End, "", size + 1});
  }

  size_t lex_number(size_t position) {
    const size_t size = text_.size();
    size_t end = position;
    while (end < size && (is_name_character(text_[end]) || text_[end] == '.')) {
      // exponent sign: 1e-3
      const bool exponent = text_[end] == 'e' || text_[end] == 'E';
      if (exponent && end + 1 < size && (text_[end + 1] == '-' || text_[end + 1] == '+')) {
        ++end;
      }
      ++end;
    }
    const std::string word = text_.substr(position, end - position);
    const size_t column = position + 1;
    bool all_digits = true;
    for (char character : word) all_digits = all_digits && is_digit(character);
    if (!all_digits) {
      bool fractional = word.find('.') != std::string::npos;
      for (char character : word) fractional = fractional || character == 'e' || character == 'E';
      if (fractional) {
        fail(column, "non-integer literal '" + word + "'", "index expressions use integers only");
      }
      fail(column, "invalid integer literal '" + word + "'", "only decimal integers are allowed");
    }
    Token token{TokenKind::Number, word, column};
    for (char character : word) {
      const uint64_t digit = static_cast<uint64_t>(character - '0');
      if (token.magnitude > (kSmallestMagnitude - digit) / 10) {
        token.too_large = true;
        break;
      }
      token.magnitude = token.magnitude * 10 + digit;
    }
    tokens_.push_back(token);
    return end;
  }

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(cursor_ + ahead, tokens_.size() - 1)]; }
  Token take() {
    Token token = peek();
    if (cursor_ < tokens_.size() - 1) ++cursor_;
    return token;
  }
  bool is_symbol(const char* symbol, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Symbol && peek(ahead).text == symbol;
  }

  // ---- type checks with positions
  void require_type(const Parsed& operand, IndexType type, const std::string& role) const {
    if (operand.node->type == type) return;
    const std::string problem = "expected " + type_article(type) + ", got " + type_article(operand.node->type) +
                                " expression as " + role;
    std::string detail;
    if (type == IndexType::Integer && operand.node->kind == IndexNodeKind::Binary && is_comparison(operand.node->op)) {
      detail = "a comparison gives a boolean, never an integer; comparisons do not chain: write a < b && b < c";
    }
    fail(operand.column, problem, detail);
  }

  int checked_depth(int depth, size_t column) const {
    if (depth > kMaximumDepth) {
      fail(column, "the expression is nested too deeply (more than " + std::to_string(kMaximumDepth) + " levels)");
    }
    return depth;
  }

  Parsed combine(IndexOperator op, const Parsed& left, const Parsed& right) {
    const OperatorInfo info = operator_info(op);
    const std::string name = std::string("'") + info.symbol + "'";
    if (is_equality(op)) {
      if (left.node->type != right.node->type) {
        fail(left.column, "cannot compare " + type_article(left.node->type) + " with " +
                              type_article(right.node->type) + " expression using " + name);
      }
    } else {
      require_type(left, info.operand_type, "the left operand of " + name);
      require_type(right, info.operand_type, "the right operand of " + name);
    }
    const int depth = checked_depth(std::max(left.depth, right.depth) + 1, left.column);
    return {make_binary(op, left.node, right.node), left.column, depth};
  }

  // ---- grammar, loosest first
  Parsed parse_ternary() {
    NestingGuard guard(*this, peek().column);
    Parsed condition = parse_binary_level(0);
    if (!is_symbol("?")) return condition;
    take();
    Parsed if_true = parse_ternary();
    if (!is_symbol(":")) {
      fail(peek().column, "expected ':' of the '?:' whose condition starts at column " +
                              std::to_string(condition.column) + ", found " + describe_token(peek()));
    }
    take();
    Parsed if_false = parse_ternary();
    require_type(condition, IndexType::Boolean, "the condition of '?:'");
    if (if_true.node->type != if_false.node->type) {
      fail(if_true.column, "the branches of '?:' must have the same type, got " + type_article(if_true.node->type) +
                               " and " + type_article(if_false.node->type) + " expression");
    }
    const int depth =
        checked_depth(std::max({condition.depth, if_true.depth, if_false.depth}) + 1, condition.column);
    return {make_ternary(condition.node, if_true.node, if_false.node), condition.column, depth};
  }

  // Binary precedence levels, loosest first; every level is left-associative.
  static const std::vector<std::vector<std::pair<const char*, IndexOperator>>>& levels() {
    static const std::vector<std::vector<std::pair<const char*, IndexOperator>>> table = {
        {{"||", IndexOperator::LogicalOr}},
        {{"&&", IndexOperator::LogicalAnd}},
        {{"==", IndexOperator::Equal}, {"!=", IndexOperator::NotEqual}},
        {{"<", IndexOperator::Less},
         {"<=", IndexOperator::LessEqual},
         {">", IndexOperator::Greater},
         {">=", IndexOperator::GreaterEqual}},
        {{"+", IndexOperator::Add}, {"-", IndexOperator::Subtract}},
        {{"*", IndexOperator::Multiply}, {"/", IndexOperator::FloorDivide}, {"%", IndexOperator::FloorModulo}},
    };
    return table;
  }

  Parsed parse_binary_level(size_t level) {
    if (level == levels().size()) return parse_unary();
    Parsed left = parse_binary_level(level + 1);
    for (;;) {
      IndexOperator op = IndexOperator::None;
      if (peek().kind == TokenKind::Symbol) {
        for (const auto& [symbol, candidate] : levels()[level]) {
          if (peek().text == symbol) op = candidate;
        }
      }
      if (op == IndexOperator::None) return left;
      take();
      Parsed right = parse_binary_level(level + 1);
      left = combine(op, left, right);
    }
  }

  Parsed parse_unary() {
    const Token& token = peek();
    if (token.kind == TokenKind::Symbol && (token.text == "-" || token.text == "+" || token.text == "!")) {
      NestingGuard guard(*this, token.column);
      const Token sign = take();
      if (sign.text == "-" && peek().kind == TokenKind::Number) {  // "-5" is the literal -5
        const Token number = take();
        if (number.too_large) fail(number.column, "integer literal '-" + number.text + "' does not fit in 64 bits");
        return {make_integer(wrapping_negate(static_cast<int64_t>(number.magnitude))), sign.column, 1};
      }
      Parsed operand = parse_unary();
      if (sign.text == "!") {
        require_type(operand, IndexType::Boolean, "the operand of '!'");
        return {make_unary(IndexOperator::Not, operand.node), sign.column,
                checked_depth(operand.depth + 1, sign.column)};
      }
      require_type(operand, IndexType::Integer, "the operand of unary '" + sign.text + "'");
      if (sign.text == "+") return {operand.node, sign.column, operand.depth};
      return {make_unary(IndexOperator::Negate, operand.node), sign.column,
              checked_depth(operand.depth + 1, sign.column)};
    }
    return parse_primary();
  }

  // '(' already consumed by the caller; reads "a, b, ...)".
  std::vector<Parsed> parse_arguments(const std::string& callee, size_t open_column) {
    std::vector<Parsed> arguments;
    if (is_symbol(")")) {
      take();
      return arguments;
    }
    for (;;) {
      arguments.push_back(parse_ternary());
      if (is_symbol(",")) {
        take();
        continue;
      }
      if (is_symbol(")")) {
        take();
        return arguments;
      }
      if (peek().kind == TokenKind::End) {
        fail(open_column, "unbalanced parentheses: the '(' of " + callee + " is never closed");
      }
      fail(peek().column, "expected ',' or ')' in the arguments of " + callee + ", found " + describe_token(peek()));
    }
  }

  std::string allowed_names() const {
    std::vector<std::string> groups;
    if (context_.loop_rank > 0) groups.push_back(name_range("i", context_.loop_rank) + " (loop indices)");
    if (context_.x_rank > 0) groups.push_back(name_range("xshape", context_.x_rank) + " (input shape)");
    if (context_.y_rank > 0) groups.push_back(name_range("yshape", context_.y_rank) + " (output shape)");
    const int extras = static_cast<int>(context_.extra_ranks.size());
    if (extras > 0) groups.push_back(name_range("@e", extras) + "(...) (extra inputs)");
    groups.push_back("true, false");
    groups.push_back("min(a, b), max(a, b), abs(a)");
    std::string joined;
    for (size_t index = 0; index < groups.size(); ++index) joined += (index > 0 ? ", " : "") + groups[index];
    return joined;
  }

  Parsed parse_primary() {
    const Token token = take();
    switch (token.kind) {
      case TokenKind::End: fail(token.column, "expected an operand", "the expression ends there");
      case TokenKind::Number:
        if (token.too_large || token.magnitude > static_cast<uint64_t>(kLargest)) {
          fail(token.column, "integer literal '" + token.text + "' does not fit in 64 bits");
        }
        return {make_integer(static_cast<int64_t>(token.magnitude)), token.column, 1};
      case TokenKind::Extra: return parse_extra_read(token);
      case TokenKind::Name: return parse_name(token);
      case TokenKind::Symbol:
        if (token.text == "(") {
          Parsed inner = parse_ternary();
          if (!is_symbol(")")) {
            if (peek().kind == TokenKind::End) {
              fail(token.column, "unbalanced parentheses: this '(' is never closed");
            }
            fail(peek().column, "expected ')' to close the '(' at column " + std::to_string(token.column) +
                                    ", found " + describe_token(peek()));
          }
          take();
          inner.column = token.column;
          return inner;
        }
        if (token.text == ")") fail(token.column, "expected an operand, found ')'", "unbalanced parentheses?");
        fail(token.column, "expected an operand, found " + describe_token(token));
    }
    fail(token.column, "expected an operand");
  }

  Parsed parse_extra_read(const Token& token) {
    const int64_t extra = static_cast<int64_t>(token.magnitude);
    const int64_t extras = static_cast<int64_t>(context_.extra_ranks.size());
    if (extra >= extras) {
      if (extras == 0) {
        fail(token.column, "extra input " + token.text + " does not exist", "this op has no extra inputs");
      }
      fail(token.column, "extra input " + token.text + " does not exist",
           "this op has " + plural(extras, "extra input", "extra inputs") + " (" + name_range("@e", extras) + ")");
    }
    if (!is_symbol("(")) {
      fail(peek().column, "extra input " + token.text + " must be read with indices",
           "write " + token.text + "(i0, ...)");
    }
    const size_t open_column = take().column;
    std::vector<Parsed> arguments = parse_arguments(token.text, open_column);
    const int rank = context_.extra_ranks[extra];
    if (static_cast<int>(arguments.size()) != rank) {
      fail(token.column, "extra input " + token.text + " has rank " + std::to_string(rank) + " but is read with " +
                             plural(static_cast<int64_t>(arguments.size()), "index", "indices"));
    }
    std::vector<IndexExpression> indices;
    int depth = 0;
    for (size_t index = 0; index < arguments.size(); ++index) {
      require_type(arguments[index], IndexType::Integer,
                   "index " + std::to_string(index) + " of " + token.text + " (indices are integers)");
      indices.push_back(arguments[index].node);
      depth = std::max(depth, arguments[index].depth);
    }
    const bool boolean = !context_.extra_is_boolean.empty() && context_.extra_is_boolean[extra];
    return {make_extra_read(static_cast<int>(extra), std::move(indices),
                            boolean ? IndexType::Boolean : IndexType::Integer),
            token.column, checked_depth(depth + 1, token.column)};
  }

  Parsed parse_name(const Token& token) {
    const std::string& name = token.text;
    if (name == "true" || name == "false") return {make_boolean(name == "true"), token.column, 1};
    if (name == "min" || name == "max" || name == "abs") {
      const int wanted = name == "abs" ? 1 : 2;
      const std::string usage = name == "abs" ? "abs(a)" : name + "(a, b)";
      if (!is_symbol("(")) fail(token.column, "'" + name + "' is a function", "write " + usage);
      const size_t open_column = take().column;
      std::vector<Parsed> arguments = parse_arguments(name, open_column);
      if (static_cast<int>(arguments.size()) != wanted) {
        fail(token.column, name + " takes " + plural(wanted, "argument", "arguments") + ", got " +
                               std::to_string(arguments.size()), "write " + usage);
      }
      for (size_t index = 0; index < arguments.size(); ++index) {
        require_type(arguments[index], IndexType::Integer, "argument " + std::to_string(index + 1) + " of " + name);
      }
      if (wanted == 1) {
        return {make_unary(IndexOperator::Abs, arguments[0].node), token.column,
                checked_depth(arguments[0].depth + 1, token.column)};
      }
      const IndexOperator op = name == "min" ? IndexOperator::Minimum : IndexOperator::Maximum;
      return {make_binary(op, arguments[0].node, arguments[1].node), token.column,
              checked_depth(std::max(arguments[0].depth, arguments[1].depth) + 1, token.column)};
    }
    struct Family {
      const char* prefix;
      int rank;
      const char* owner;
      IndexNodeKind kind;
    };
    const Family families[] = {{"xshape", context_.x_rank, "input x", IndexNodeKind::InputShape},
                               {"yshape", context_.y_rank, "output y", IndexNodeKind::OutputShape},
                               {"i", context_.loop_rank, "loop", IndexNodeKind::LoopIndex}};
    for (const Family& family : families) {
      const std::string prefix = family.prefix;
      int64_t number = 0;
      if (name.compare(0, prefix.size(), prefix) != 0 || !parse_name_number(name.substr(prefix.size()), &number)) {
        continue;
      }
      if (number >= family.rank) {
        const std::string what = family.kind == IndexNodeKind::LoopIndex ? "index " + name : name;
        const std::string allowed = family.rank > 0 ? "allowed: " + name_range(prefix, family.rank)
                                                    : "there are no " + prefix + "K names here";
        fail(token.column, what + " is beyond the rank " + std::to_string(family.rank) + " of the " + family.owner,
             allowed);
      }
      return {new_node(family.kind, IndexOperator::None, IndexType::Integer, number, {}), token.column, 1};
    }
    if (is_symbol("(")) {
      fail(token.column, "unknown function '" + name + "'", "the functions are min(a, b), max(a, b), abs(a)");
    }
    fail(token.column, "unknown name '" + name + "'", "allowed names are " + allowed_names());
  }

  const std::string& text_;
  const IndexContext& context_;
  std::vector<Token> tokens_;
  size_t cursor_ = 0;
  int nesting_ = 0;
};

void validate_context(const IndexContext& context) {
  if (context.loop_rank < 0 || context.x_rank < 0 || context.y_rank < 0) {
    throw std::invalid_argument("invalid IndexContext: ranks must not be negative (loop_rank " +
                                std::to_string(context.loop_rank) + ", x_rank " + std::to_string(context.x_rank) +
                                ", y_rank " + std::to_string(context.y_rank) + ")");
  }
  for (size_t index = 0; index < context.extra_ranks.size(); ++index) {
    if (context.extra_ranks[index] < 0) {
      throw std::invalid_argument("invalid IndexContext: extra input @e" + std::to_string(index) +
                                  " has negative rank " + std::to_string(context.extra_ranks[index]));
    }
  }
  if (!context.extra_is_boolean.empty() && context.extra_is_boolean.size() != context.extra_ranks.size()) {
    throw std::invalid_argument("invalid IndexContext: extra_is_boolean has " +
                                std::to_string(context.extra_is_boolean.size()) + " entries but there are " +
                                std::to_string(context.extra_ranks.size()) + " extra inputs");
  }
}

// ------------------------------------------------------------------ evaluation
int64_t evaluate_node(const IndexNode& node, const IndexEnvironment& environment) {
  auto lookup = [](const std::vector<int64_t>& values, int64_t which, const char* name) {
    if (which < 0 || static_cast<size_t>(which) >= values.size()) {
      throw std::invalid_argument(std::string("evaluate_index_expression: ") + name + std::to_string(which) +
                                  " has no value (" + std::to_string(values.size()) + " given)");
    }
    return values[which];
  };
  switch (node.kind) {
    case IndexNodeKind::Integer: return node.value;
    case IndexNodeKind::LoopIndex: return lookup(environment.loop_indices, node.value, "i");
    case IndexNodeKind::InputShape: return lookup(environment.x_shape, node.value, "xshape");
    case IndexNodeKind::OutputShape: return lookup(environment.y_shape, node.value, "yshape");
    case IndexNodeKind::ExtraRead: {
      if (!environment.read_extra) {
        throw std::invalid_argument("evaluate_index_expression: @e" + std::to_string(node.value) +
                                    " is read but the environment has no read_extra callback");
      }
      std::vector<int64_t> indices;
      indices.reserve(node.operands.size());
      for (const IndexExpression& operand : node.operands) indices.push_back(evaluate_node(*operand, environment));
      const int64_t value = environment.read_extra(static_cast<int>(node.value), indices);
      return node.type == IndexType::Boolean ? (value != 0 ? 1 : 0) : value;
    }
    case IndexNodeKind::Unary: return apply_unary(node.op, evaluate_node(*node.operands[0], environment));
    case IndexNodeKind::Binary: {
      const int64_t left = evaluate_node(*node.operands[0], environment);
      if (node.op == IndexOperator::LogicalAnd && left == 0) return 0;
      if (node.op == IndexOperator::LogicalOr && left != 0) return 1;
      return apply_binary(node.op, left, evaluate_node(*node.operands[1], environment));
    }
    case IndexNodeKind::Ternary:
      return evaluate_node(*node.operands[0], environment) != 0 ? evaluate_node(*node.operands[1], environment)
                                                                : evaluate_node(*node.operands[2], environment);
  }
  throw std::invalid_argument("evaluate_index_expression: corrupt node");
}

// ------------------------------------------------------------------ simplification
bool is_constant(const IndexExpression& expression) { return expression->kind == IndexNodeKind::Integer; }
bool is_integer_constant(const IndexExpression& expression, int64_t value) {
  return is_constant(expression) && expression->type == IndexType::Integer && expression->value == value;
}
IndexExpression make_constant(int64_t value, IndexType type) {
  return type == IndexType::Boolean ? make_boolean(value != 0) : make_integer(value);
}

// Splits e into base + offset for e = base + c or base - c (c a constant); otherwise (e, 0).
std::pair<IndexExpression, int64_t> split_offset(const IndexExpression& expression) {
  if (expression->kind == IndexNodeKind::Binary && is_constant(expression->operands[1])) {
    if (expression->op == IndexOperator::Add) return {expression->operands[0], expression->operands[1]->value};
    if (expression->op == IndexOperator::Subtract) {
      return {expression->operands[0], wrapping_negate(expression->operands[1]->value)};
    }
  }
  return {expression, 0};
}

// base + offset, with the offset written as a subtraction when negative. `base` is not a constant.
IndexExpression with_offset(const IndexExpression& expression, int64_t offset) {
  auto [base, existing] = split_offset(expression);
  const int64_t total = wrapping_add(existing, offset);
  if (total == 0) return base;
  if (total > 0 || total == kSmallest) return make_binary(IndexOperator::Add, base, make_integer(total));
  return make_binary(IndexOperator::Subtract, base, make_integer(-total));
}

IndexOperator negated_comparison(IndexOperator op) {
  switch (op) {
    case IndexOperator::Less: return IndexOperator::GreaterEqual;
    case IndexOperator::LessEqual: return IndexOperator::Greater;
    case IndexOperator::Greater: return IndexOperator::LessEqual;
    case IndexOperator::GreaterEqual: return IndexOperator::Less;
    case IndexOperator::Equal: return IndexOperator::NotEqual;
    case IndexOperator::NotEqual: return IndexOperator::Equal;
    default: return IndexOperator::None;
  }
}

IndexExpression simplify_unary(IndexOperator op, const IndexExpression& operand) {
  if (is_constant(operand)) return make_constant(apply_unary(op, operand->value), operand->type);
  const bool operand_is_unary = operand->kind == IndexNodeKind::Unary;
  switch (op) {
    case IndexOperator::Negate:
      if (operand_is_unary && operand->op == IndexOperator::Negate) return operand->operands[0];
      break;
    case IndexOperator::Not:
      if (operand_is_unary && operand->op == IndexOperator::Not) return operand->operands[0];
      if (operand->kind == IndexNodeKind::Binary && negated_comparison(operand->op) != IndexOperator::None &&
          operand->operands[0]->type == IndexType::Integer) {
        return make_binary(negated_comparison(operand->op), operand->operands[0], operand->operands[1]);
      }
      if (operand->kind == IndexNodeKind::Binary && is_equality(operand->op)) {  // boolean == / !=
        return make_binary(negated_comparison(operand->op), operand->operands[0], operand->operands[1]);
      }
      break;
    case IndexOperator::Abs:
      if (operand_is_unary && operand->op == IndexOperator::Abs) return operand;
      if (operand_is_unary && operand->op == IndexOperator::Negate) {
        return simplify_unary(IndexOperator::Abs, operand->operands[0]);
      }
      break;
    default: break;
  }
  return make_unary(op, operand);
}

IndexExpression simplify_binary(IndexOperator op, IndexExpression left, IndexExpression right) {
  const IndexType result_type = operator_info(op).result_type;
  if (is_constant(left) && is_constant(right)) {
    return make_constant(apply_binary(op, left->value, right->value), result_type);
  }
  const bool same = same_index_expression(left, right);
  switch (op) {
    case IndexOperator::LogicalAnd:
      if (is_constant(left)) return left->value != 0 ? right : left;
      if (is_constant(right)) return right->value != 0 ? left : right;
      if (same) return left;
      break;
    case IndexOperator::LogicalOr:
      if (is_constant(left)) return left->value != 0 ? left : right;
      if (is_constant(right)) return right->value != 0 ? right : left;
      if (same) return left;
      break;
    case IndexOperator::Add:
      if (is_constant(left)) std::swap(left, right);
      if (is_constant(right)) return with_offset(left, right->value);
      break;
    case IndexOperator::Subtract:
      if (is_constant(right)) return with_offset(left, wrapping_negate(right->value));
      if (same) return make_integer(0);
      if (is_integer_constant(left, 0)) return simplify_unary(IndexOperator::Negate, right);
      break;
    case IndexOperator::Multiply:
      if (is_constant(left)) std::swap(left, right);
      if (is_constant(right)) {
        int64_t factor = right->value;
        IndexExpression base = left;
        if (base->kind == IndexNodeKind::Binary && base->op == IndexOperator::Multiply &&
            is_constant(base->operands[1])) {
          factor = wrapping_multiply(factor, base->operands[1]->value);
          base = base->operands[0];
        }
        if (factor == 0) return make_integer(0);
        if (factor == 1) return base;
        return make_binary(IndexOperator::Multiply, base, make_integer(factor));
      }
      break;
    case IndexOperator::FloorDivide:
      if (is_integer_constant(right, 0) || is_integer_constant(left, 0)) return make_integer(0);
      if (is_integer_constant(right, 1)) return left;
      if (is_constant(right) && right->value > 0 && left->kind == IndexNodeKind::Binary &&
          left->op == IndexOperator::FloorDivide && is_constant(left->operands[1]) && left->operands[1]->value > 0) {
        int64_t divisor = 0;
        if (!__builtin_mul_overflow(left->operands[1]->value, right->value, &divisor)) {
          return make_binary(IndexOperator::FloorDivide, left->operands[0], make_integer(divisor));
        }
      }
      break;
    case IndexOperator::FloorModulo:
      if (is_integer_constant(right, 0) || is_integer_constant(right, 1) || is_integer_constant(right, -1) ||
          is_integer_constant(left, 0)) {
        return make_integer(0);
      }
      break;
    case IndexOperator::Minimum:
    case IndexOperator::Maximum:
      if (same) return left;
      break;
    case IndexOperator::Less:
    case IndexOperator::Greater:
    case IndexOperator::NotEqual:
      if (same) return make_boolean(false);
      break;
    case IndexOperator::LessEqual:
    case IndexOperator::GreaterEqual:
    case IndexOperator::Equal:
      if (same) return make_boolean(true);
      break;
    default: break;
  }
  return make_binary(op, left, right);
}

IndexExpression simplify_node(const IndexExpression& expression) {
  const IndexNode& node = *expression;
  std::vector<IndexExpression> operands;
  operands.reserve(node.operands.size());
  bool changed = false;
  for (const IndexExpression& operand : node.operands) {
    operands.push_back(simplify_node(operand));
    changed = changed || operands.back() != operand;
  }
  switch (node.kind) {
    case IndexNodeKind::Unary: {
      IndexExpression result = simplify_unary(node.op, operands[0]);
      if (!changed && same_index_expression(result, expression)) return expression;
      return result;
    }
    case IndexNodeKind::Binary: {
      IndexExpression result = simplify_binary(node.op, operands[0], operands[1]);
      if (!changed && same_index_expression(result, expression)) return expression;
      return result;
    }
    case IndexNodeKind::Ternary: {
      const IndexExpression& condition = operands[0];
      if (is_constant(condition)) return condition->value != 0 ? operands[1] : operands[2];
      if (same_index_expression(operands[1], operands[2])) return operands[1];
      if (is_constant(operands[1]) && is_constant(operands[2]) && operands[1]->type == IndexType::Boolean) {
        if (operands[1]->value != 0 && operands[2]->value == 0) return condition;
        if (operands[1]->value == 0 && operands[2]->value != 0) return simplify_unary(IndexOperator::Not, condition);
      }
      if (!changed) return expression;
      return make_ternary(operands[0], operands[1], operands[2]);
    }
    case IndexNodeKind::ExtraRead:
      if (!changed) return expression;
      return make_extra_read(static_cast<int>(node.value), std::move(operands), node.type);
    default: return expression;
  }
}

// ------------------------------------------------------------------ range analysis
constexpr IndexRange kFullRange{kSmallest, kLargest};

bool is_full(const IndexRange& range) { return range.low == kSmallest && range.high == kLargest; }

// Accumulates the hull of included values; `overflowed` turns the result into the full range.
struct Hull {
  int64_t low = kLargest, high = kSmallest;
  bool any = false, overflowed = false;
  void include(int64_t value) {
    low = any ? std::min(low, value) : value;
    high = any ? std::max(high, value) : value;
    any = true;
  }
  IndexRange result() const {
    if (overflowed) return kFullRange;
    if (!any) return {0, 0};
    return {low, high};
  }
};

IndexRange bound_floor_divide(const IndexRange& dividend, const IndexRange& divisor) {
  Hull hull;
  if (divisor.low <= 0 && divisor.high >= 0) hull.include(0);  // a zero divisor yields 0
  // Within one sign of the divisor, floor(a / b) is monotone in a and in b, so the corners bound it.
  auto corners = [&](int64_t divisor_low, int64_t divisor_high) {
    for (int64_t a : {dividend.low, dividend.high}) {
      for (int64_t b : {divisor_low, divisor_high}) {
        if (a == kSmallest && b == -1) hull.overflowed = true;  // wraps
        hull.include(index_floor_divide(a, b));
      }
    }
  };
  if (divisor.high >= 1) corners(std::max<int64_t>(divisor.low, 1), divisor.high);
  if (divisor.low <= -1) corners(divisor.low, std::min<int64_t>(divisor.high, -1));
  return hull.result();
}

IndexRange bound_floor_modulo(const IndexRange& dividend, const IndexRange& divisor) {
  Hull hull;
  if (divisor.low <= 0 && divisor.high >= 0) hull.include(0);
  if (divisor.high >= 1) {  // positive divisors b: result in [0, b-1], and in [0, a] when a >= 0
    const int64_t positive_low = std::max<int64_t>(divisor.low, 1);
    if (dividend.low >= 0 && dividend.high < positive_low) {  // a < b always: a % b == a
      hull.include(dividend.low);
      hull.include(dividend.high);
    } else {
      hull.include(0);
      hull.include(dividend.low >= 0 ? std::min(dividend.high, divisor.high - 1) : divisor.high - 1);
    }
  }
  if (divisor.low <= -1) {  // negative divisors b: result in [b+1, 0], and in [a, 0] when a <= 0
    const int64_t negative_high = std::min<int64_t>(divisor.high, -1);
    if (dividend.high <= 0 && dividend.low > negative_high) {  // b < a <= 0 always: a % b == a
      hull.include(dividend.low);
      hull.include(dividend.high);
    } else {
      hull.include(0);
      hull.include(dividend.high <= 0 ? std::max(dividend.low, divisor.low + 1) : divisor.low + 1);
    }
  }
  return hull.result();
}

IndexRange boolean_range(bool can_be_false, bool can_be_true) {
  return {can_be_false ? 0 : 1, can_be_true ? 1 : 0};
}

IndexRange bound_comparison(IndexOperator op, const IndexRange& left, const IndexRange& right) {
  switch (op) {
    case IndexOperator::Less:  // always true when left.high < right.low; always false when left.low >= right.high
      return boolean_range(!(left.high < right.low), !(left.low >= right.high));
    case IndexOperator::LessEqual: return boolean_range(!(left.high <= right.low), !(left.low > right.high));
    case IndexOperator::Greater: return boolean_range(!(left.low > right.high), !(left.high <= right.low));
    case IndexOperator::GreaterEqual: return boolean_range(!(left.low >= right.high), !(left.high < right.low));
    case IndexOperator::Equal:
    case IndexOperator::NotEqual: {
      const bool always_equal = left.low == left.high && right.low == right.high && left.low == right.low;
      const bool never_equal = left.high < right.low || right.high < left.low;
      return op == IndexOperator::Equal ? boolean_range(!always_equal, !never_equal)
                                        : boolean_range(!never_equal, !always_equal);
    }
    default: return {0, 1};
  }
}

struct BoundInputs {
  const std::vector<int64_t>& loop_extents;
  const std::vector<int64_t>& x_shape;
  const std::vector<int64_t>& y_shape;
};

IndexRange bound_node(const IndexNode& node, const BoundInputs& inputs) {
  auto shape_range = [](const std::vector<int64_t>& shape, int64_t which) -> IndexRange {
    if (which < 0 || static_cast<size_t>(which) >= shape.size() || shape[which] < 0) return {0, kLargest};
    return {shape[which], shape[which]};
  };
  switch (node.kind) {
    case IndexNodeKind::Integer: return {node.value, node.value};
    case IndexNodeKind::LoopIndex:
      if (node.value < 0 || static_cast<size_t>(node.value) >= inputs.loop_extents.size()) return {0, kLargest};
      return {0, std::max<int64_t>(inputs.loop_extents[node.value] - 1, 0)};
    case IndexNodeKind::InputShape: return shape_range(inputs.x_shape, node.value);
    case IndexNodeKind::OutputShape: return shape_range(inputs.y_shape, node.value);
    case IndexNodeKind::ExtraRead: return node.type == IndexType::Boolean ? IndexRange{0, 1} : kFullRange;
    case IndexNodeKind::Unary: {
      const IndexRange operand = bound_node(*node.operands[0], inputs);
      switch (node.op) {
        case IndexOperator::Not: return {1 - operand.high, 1 - operand.low};
        case IndexOperator::Negate:
          if (operand.low == kSmallest) return kFullRange;
          return {-operand.high, -operand.low};
        case IndexOperator::Abs:
          if (operand.low == kSmallest) return kFullRange;
          if (operand.low >= 0) return operand;
          if (operand.high <= 0) return {-operand.high, -operand.low};
          return {0, std::max(-operand.low, operand.high)};
        default: return kFullRange;
      }
    }
    case IndexNodeKind::Binary: {
      const IndexRange left = bound_node(*node.operands[0], inputs);
      const IndexRange right = bound_node(*node.operands[1], inputs);
      switch (node.op) {
        case IndexOperator::LogicalAnd: return {left.low & right.low, left.high & right.high};
        case IndexOperator::LogicalOr: return {left.low | right.low, left.high | right.high};
        case IndexOperator::Add: {
          IndexRange sum;
          if (__builtin_add_overflow(left.low, right.low, &sum.low) ||
              __builtin_add_overflow(left.high, right.high, &sum.high)) {
            return kFullRange;
          }
          return sum;
        }
        case IndexOperator::Subtract: {
          IndexRange difference;
          if (__builtin_sub_overflow(left.low, right.high, &difference.low) ||
              __builtin_sub_overflow(left.high, right.low, &difference.high)) {
            return kFullRange;
          }
          return difference;
        }
        case IndexOperator::Multiply: {
          if (is_full(left) || is_full(right)) return kFullRange;
          Hull hull;
          for (int64_t a : {left.low, left.high}) {
            for (int64_t b : {right.low, right.high}) {
              int64_t product = 0;
              if (__builtin_mul_overflow(a, b, &product)) return kFullRange;
              hull.include(product);
            }
          }
          return hull.result();
        }
        case IndexOperator::FloorDivide: return bound_floor_divide(left, right);
        case IndexOperator::FloorModulo: return bound_floor_modulo(left, right);
        case IndexOperator::Minimum: return {std::min(left.low, right.low), std::min(left.high, right.high)};
        case IndexOperator::Maximum: return {std::max(left.low, right.low), std::max(left.high, right.high)};
        default: return bound_comparison(node.op, left, right);
      }
    }
    case IndexNodeKind::Ternary: {
      const IndexRange condition = bound_node(*node.operands[0], inputs);
      if (condition.low >= 1) return bound_node(*node.operands[1], inputs);
      if (condition.high <= 0) return bound_node(*node.operands[2], inputs);
      const IndexRange if_true = bound_node(*node.operands[1], inputs);
      const IndexRange if_false = bound_node(*node.operands[2], inputs);
      return {std::min(if_true.low, if_false.low), std::max(if_true.high, if_false.high)};
    }
  }
  return kFullRange;
}

}  // namespace

// ================================================================== public functions
const char* index_operator_symbol(IndexOperator op) { return operator_info(op).symbol; }
const char* index_type_name(IndexType type) { return type == IndexType::Integer ? "integer" : "boolean"; }

int64_t index_floor_divide(int64_t dividend, int64_t divisor) {
  if (divisor == 0) return 0;
  if (divisor == -1) return wrapping_negate(dividend);  // INT64_MIN / -1 wraps
  int64_t quotient = dividend / divisor;
  if (dividend % divisor != 0 && ((dividend < 0) != (divisor < 0))) --quotient;
  return quotient;
}

int64_t index_floor_modulo(int64_t dividend, int64_t divisor) {
  if (divisor == 0 || divisor == -1) return 0;
  int64_t remainder = dividend % divisor;
  if (remainder != 0 && ((remainder < 0) != (divisor < 0))) remainder += divisor;
  return remainder;
}

IndexExpression parse_index_expression(const std::string& text, const IndexContext& context,
                                       IndexType expected_type) {
  validate_context(context);
  return Parser(text, context).parse(expected_type);
}

std::string to_canonical_string(const IndexExpression& expression) {
  if (!expression) throw std::invalid_argument("to_canonical_string: null index expression");
  std::string out;
  append_canonical(*expression, out);
  return out;
}

IndexExpression swap_input_output_shapes(const IndexExpression& expression) {
  if (expression->kind == IndexNodeKind::InputShape) return make_output_shape(int(expression->value));
  if (expression->kind == IndexNodeKind::OutputShape) return make_input_shape(int(expression->value));
  if (expression->operands.empty()) return expression;
  std::vector<IndexExpression> operands;
  for (const IndexExpression& operand : expression->operands) operands.push_back(swap_input_output_shapes(operand));
  return new_node(expression->kind, expression->op, expression->type, expression->value, std::move(operands));
}

IndexExpression make_integer(int64_t value) {
  return new_node(IndexNodeKind::Integer, IndexOperator::None, IndexType::Integer, value, {});
}

IndexExpression make_boolean(bool value) {
  return new_node(IndexNodeKind::Integer, IndexOperator::None, IndexType::Boolean, value ? 1 : 0, {});
}

IndexExpression make_loop_index(int which) {
  if (which < 0) throw std::invalid_argument("make_loop_index: negative loop index " + std::to_string(which));
  return new_node(IndexNodeKind::LoopIndex, IndexOperator::None, IndexType::Integer, which, {});
}

IndexExpression make_input_shape(int dimension) {
  if (dimension < 0) throw std::invalid_argument("make_input_shape: negative dimension " + std::to_string(dimension));
  return new_node(IndexNodeKind::InputShape, IndexOperator::None, IndexType::Integer, dimension, {});
}

IndexExpression make_output_shape(int dimension) {
  if (dimension < 0) throw std::invalid_argument("make_output_shape: negative dimension " + std::to_string(dimension));
  return new_node(IndexNodeKind::OutputShape, IndexOperator::None, IndexType::Integer, dimension, {});
}

IndexExpression make_extra_read(int extra, std::vector<IndexExpression> indices, IndexType type) {
  if (extra < 0) throw std::invalid_argument("make_extra_read: negative extra input number " + std::to_string(extra));
  for (const IndexExpression& index : indices) {
    require_operand(index, "make_extra_read");
    if (index->type != IndexType::Integer) {
      throw std::invalid_argument("make_extra_read: indices of @e" + std::to_string(extra) + " must be integers");
    }
  }
  return new_node(IndexNodeKind::ExtraRead, IndexOperator::None, type, extra, std::move(indices));
}

IndexExpression make_unary(IndexOperator op, IndexExpression operand) {
  require_operand(operand, "make_unary");
  const OperatorInfo info = operator_info(op);
  if (info.arity != Arity::Unary) {
    throw std::invalid_argument(std::string("make_unary: '") + info.symbol + "' is not a unary operator");
  }
  if (operand->type != info.operand_type) {
    throw std::invalid_argument(std::string("make_unary: '") + info.symbol + "' needs " +
                                type_article(info.operand_type) + " operand, got " + type_article(operand->type));
  }
  return new_node(IndexNodeKind::Unary, op, info.result_type, 0, {std::move(operand)});
}

IndexExpression make_binary(IndexOperator op, IndexExpression left, IndexExpression right) {
  require_operand(left, "make_binary");
  require_operand(right, "make_binary");
  const OperatorInfo info = operator_info(op);
  if (info.arity != Arity::Binary) {
    throw std::invalid_argument(std::string("make_binary: '") + info.symbol + "' is not a binary operator");
  }
  if (is_equality(op)) {
    if (left->type != right->type) {
      throw std::invalid_argument(std::string("make_binary: '") + info.symbol + "' compares " +
                                  type_article(left->type) + " with " + type_article(right->type));
    }
  } else if (left->type != info.operand_type || right->type != info.operand_type) {
    throw std::invalid_argument(std::string("make_binary: '") + info.symbol + "' needs " +
                                type_article(info.operand_type) + " operands, got " + index_type_name(left->type) +
                                " and " + index_type_name(right->type));
  }
  return new_node(IndexNodeKind::Binary, op, info.result_type, 0, {std::move(left), std::move(right)});
}

IndexExpression make_ternary(IndexExpression condition, IndexExpression if_true, IndexExpression if_false) {
  require_operand(condition, "make_ternary");
  require_operand(if_true, "make_ternary");
  require_operand(if_false, "make_ternary");
  if (condition->type != IndexType::Boolean) {
    throw std::invalid_argument("make_ternary: the condition must be a boolean, got an integer");
  }
  if (if_true->type != if_false->type) {
    throw std::invalid_argument("make_ternary: the branches must have the same type");
  }
  const IndexType type = if_true->type;
  return new_node(IndexNodeKind::Ternary, IndexOperator::None, type, 0,
                  {std::move(condition), std::move(if_true), std::move(if_false)});
}

IndexExpression simplify(const IndexExpression& expression) {
  if (!expression) throw std::invalid_argument("simplify: null index expression");
  return simplify_node(expression);
}

bool same_index_expression(const IndexExpression& left, const IndexExpression& right) {
  if (left == right) return true;
  if (!left || !right) return false;
  if (left->kind != right->kind || left->op != right->op || left->type != right->type ||
      left->value != right->value || left->operands.size() != right->operands.size()) {
    return false;
  }
  for (size_t index = 0; index < left->operands.size(); ++index) {
    if (!same_index_expression(left->operands[index], right->operands[index])) return false;
  }
  return true;
}

int64_t evaluate_index_expression(const IndexExpression& expression, const IndexEnvironment& environment) {
  if (!expression) throw std::invalid_argument("evaluate_index_expression: null index expression");
  return evaluate_node(*expression, environment);
}

IndexRange bound_index_expression(const IndexExpression& expression, const std::vector<int64_t>& loop_extents,
                                  const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape) {
  if (!expression) throw std::invalid_argument("bound_index_expression: null index expression");
  return bound_node(*expression, BoundInputs{loop_extents, x_shape, y_shape});
}

bool is_loop_index(const IndexExpression& expression, int* which) {
  if (!expression) return false;
  const IndexExpression simplified = simplify(expression);
  if (simplified->kind != IndexNodeKind::LoopIndex) return false;
  if (which) *which = static_cast<int>(simplified->value);
  return true;
}

}  // namespace metajit
