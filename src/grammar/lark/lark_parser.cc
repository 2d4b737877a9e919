// SPDX-License-Identifier: Apache-2.0
#include "grammar/lark/lark_parser.h"

#include <cctype>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "grammar/lark/lark_statements.h"
#include "grammar/regex/regex_parser.h"
#include "grammar/utf8.h"

namespace di::grammar {
namespace {

using lark::fail;
using lark::name_char;
using lark::split;
using lark::Statement;
using lark::terminal_name;

class Builder {
 public:
  Grammar build(std::string_view text, std::string_view start_name) {
    const std::vector<Statement> stmts = split(text);
    std::vector<std::pair<Statement, size_t>> defs;  // statement, offset of the body
    std::vector<Statement> ignores, overrides;
    for (const Statement& s : stmts) {
      if (auto m = lark::modifier(s)) {
        (m->override_ ? overrides : extends_).push_back(m->def);
        continue;
      }
      if (s.text[0] == '%')
        directive(s, ignores);
      else if (const size_t body = header(s); body != kTemplate)
        defs.emplace_back(s, body);
    }
    // %override: the new body replaces this grammar's definition or an imported common one; a
    // template's, by a template (its parameters may change, as in Lark).
    for (const Statement& o : overrides) {
      const std::string name = lark::defined_name(o);
      if (is_template_header(o)) {
        if (!templates_.erase(name))
          fail(o.line, "%override of template '" + name + "', which is not a defined template");
        header(o);
        continue;
      }
      if (!std::erase_if(defs,
                         [&](const auto& d) { return lark::defined_name(d.first) == name; }) &&
          !imported_.erase(name))
        fail(o.line, "%override of '" + name + "', which is not defined" +
                         (templates_.count(name) ? " as a rule (it is a template)" : ""));
      defined_.erase(name);
      defs.emplace_back(o, header(o));
    }
    // %extend of a template: more alternatives for every instance, with the same parameters
    // (Lark refuses others).
    std::erase_if(extends_, [&](const Statement& x) {
      if (!is_template_header(x)) return false;
      const std::string name = lark::defined_name(x);
      auto tpl = templates_.find(name);
      if (tpl == templates_.end())
        fail(x.line, "%extend of template '" + name + "', which is not a defined template");
      Template t = template_parts(x, name);
      if (t.params != tpl->second.params)
        fail(x.line, "%extend of template '" + name + "' with different parameters");
      tpl->second.extensions.push_back(std::move(t));
      return true;
    });
    if (!ignores.empty()) ignore_ = g_.add_rule("__ignore");
    for (auto& [s, body] : defs) define(s, body, /*common=*/false);
    if (ignore_ >= 0) {
      std::vector<ExprId> alts;
      for (const Statement& s : ignores) alts.push_back(parse_body(s, 0, true));
      g_.set_body(ignore_, g_.star(g_.alt(std::move(alts))));
    }
    resolve_common();
    for (const Statement& x : extends_)
      if (!defined_.count(lark::defined_name(x)))
        fail(x.line, "%extend of '" + lark::defined_name(x) + "', which is not defined");
    auto it = names_.find(std::string(start_name));
    if (it == names_.end() || !defined_.count(std::string(start_name)))
      fail(1, "no '" + std::string(start_name) + "' rule");
    for (const auto& [name, id] : names_)
      if (!defined_.count(name))
        fail(first_use_[name],
             "'" + name + "' is not defined" +
                 (lark::common_line(name).empty() ? std::string()
                                                  : " (add %import common." + name + ")"));
    RuleId root = it->second;
    if (ignore_ >= 0) {
      root = g_.add_rule("__start");
      g_.set_body(root, g_.seq({g_.ref(it->second), g_.ref(ignore_)}));
    }
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  // `[?!]name[.N]:` -> the name is declared; returns the offset of the body.
  size_t header(const Statement& s) {
    size_t i = 0;
    if (s.text[i] == '?' || s.text[i] == '!') ++i;
    const size_t b = i;
    while (i < s.text.size() && name_char(s.text[i])) ++i;
    if (i == b) fail(s.line, "expected a definition 'name: ...' or a %directive");
    const std::string name = s.text.substr(b, i - b);
    if (i < s.text.size() && s.text[i] == '{') return template_header(s, name);
    if (i < s.text.size() && s.text[i] == '.') {
      // A rule priority only ranks parses; a terminal priority steers Lark's lexer, which this
      // scannerless reading does not model (a terminal is just its language): neither changes
      // the language read here.
      ++i;
      if (i < s.text.size() && s.text[i] == '-') ++i;
      while (i < s.text.size() && std::isdigit(static_cast<unsigned char>(s.text[i]))) ++i;
    }
    while (i < s.text.size() && s.text[i] == ' ') ++i;
    if (i >= s.text.size() || s.text[i] != ':') fail(s.line, "expected ':' after '" + name + "'");
    if (defined_.count(name)) fail(s.line, "'" + name + "' is defined twice");
    defined_.insert(name);
    decl_line_[name] = s.line;
    ref(name, s.line);
    return i + 1;
  }

  void define(const Statement& s, size_t body, bool common) {
    const std::string name = lark::defined_name(s);
    common_ = common;
    std::vector<ExprId> alts{parse_body(s, body, terminal_name(name))};
    // %extend: more alternatives, the user's text (names in it are not common imports).
    common_ = false;
    for (const Statement& x : extends_)
      if (lark::defined_name(x) == name)
        alts.push_back(parse_body(x, x.text.find(':') + 1, terminal_name(name)));
    g_.set_body(names_.at(name), alts.size() == 1 ? alts[0] : g_.alt(std::move(alts)));
  }

  void directive(const Statement& s, std::vector<Statement>& ignores) {
    lark::directive(s, ignores, imported_,
                    [](const std::string& n) { return !lark::common_line(n).empty(); });
  }

  // Templates (`name{p1, p2}: body`, used as `name{arg1, arg2}`): each distinct argument list
  // is one instance rule whose body is the template's body with the parameters bound to the
  // arguments (as Lark expands them). Arguments are parsed where they are written; an argument
  // that is itself a parameter keeps its binding, so a template that calls itself with its own
  // parameters reuses its instance (recursion ends).
  struct Template {
    Statement stmt;
    size_t body = 0;
    std::vector<std::string> params;
    std::vector<Template> extensions;  // %extend: more alternatives, the same parameters
  };
  static constexpr size_t kTemplate = static_cast<size_t>(-1);

  static bool is_template_header(const Statement& s) {
    const std::string name = lark::defined_name(s);
    const size_t at = s.text.find(name) + name.size();
    return at < s.text.size() && s.text[at] == '{';
  }

  size_t template_header(const Statement& s, const std::string& name) {
    Template t = template_parts(s, name);
    if (templates_.count(name) || defined_.count(name))
      fail(s.line, "'" + name + "' is defined twice");
    templates_.emplace(name, std::move(t));
    return kTemplate;
  }

  // `name{p1, p2}: body`: the parameters and the offset of the body.
  static Template template_parts(const Statement& s, const std::string& name) {
    size_t i = s.text.find(name) + name.size();
    Template t{s, 0, {}, {}};
    std::string cur;
    for (++i; i < s.text.size() && s.text[i] != '}'; ++i) {
      if (s.text[i] == ',') {
        t.params.push_back(cur);
        cur.clear();
      } else if (name_char(s.text[i])) {
        cur += s.text[i];
      } else if (s.text[i] != ' ') {
        fail(s.line, "bad template parameter list of '" + name + "'");
      }
    }
    t.params.push_back(cur);
    for (const std::string& p : t.params)
      if (p.empty()) fail(s.line, "empty template parameter in '" + name + "'");
    if (i >= s.text.size()) fail(s.line, "missing '}' in template '" + name + "'");
    for (++i; i < s.text.size() && s.text[i] == ' ';) ++i;
    if (i >= s.text.size() || s.text[i] != ':')
      fail(s.line, "expected ':' after '" + name + "{..}'");
    t.body = i + 1;
    return t;
  }

  RuleId instantiate(const std::string& name) {
    auto tpl = templates_.find(name);
    if (tpl == templates_.end()) fail(line_, "'" + name + "' is not a template");
    ++pos_;  // '{'
    std::vector<RuleId> args;
    std::string key = name + "{";
    ++in_args_;
    for (;;) {
      skip();
      const size_t b = pos_;
      while (pos_ < text_->size() && name_char((*text_)[pos_])) ++pos_;
      const std::string word = text_->substr(b, pos_ - b);
      skip();
      const char next = pos_ < text_->size() ? (*text_)[pos_] : '\0';
      if (auto bound = bindings_.find(word);
          bound != bindings_.end() && (next == ',' || next == '}')) {
        args.push_back(bound->second);  // a parameter: its binding, not a new rule
        key += "#" + std::to_string(bound->second) + ",";
      } else {
        pos_ = b;
        const ExprId e = expansions();
        const RuleId r = g_.add_rule("__arg" + std::to_string(g_.rules().size()));
        g_.set_body(r, e);
        args.push_back(r);
        key += text_->substr(b, pos_ - b) + "@" + std::to_string(context_) + ",";
      }
      if (eat("}")) break;
      if (!eat(",")) fail(line_, "expected ',' or '}' in the arguments of '" + name + "'");
    }
    --in_args_;
    if (args.size() != tpl->second.params.size())
      fail(line_, "template '" + name + "' takes " + std::to_string(tpl->second.params.size()) +
                      " arguments, not " + std::to_string(args.size()));
    if (auto done = instances_.find(key); done != instances_.end()) return done->second;
    if (instances_.size() >= 256) fail(line_, "more than 256 template instances");
    const RuleId r = g_.add_rule(name + "{" + std::to_string(instances_.size()) + "}");
    instances_.emplace(key, r);
    // Parse the body in the template's own scope, then come back.
    auto saved = std::make_tuple(text_, pos_, line_, terminal_, bindings_, context_, in_args_);
    bindings_.clear();
    for (size_t i = 0; i < args.size(); ++i) bindings_[tpl->second.params[i]] = args[i];
    context_ = static_cast<int>(instances_.size());
    in_args_ = 0;
    std::vector<ExprId> alts{parse_body(tpl->second.stmt, tpl->second.body, terminal_name(name))};
    for (const Template& x : tpl->second.extensions)
      alts.push_back(parse_body(x.stmt, x.body, terminal_name(name)));
    g_.set_body(r, alts.size() == 1 ? alts[0] : g_.alt(std::move(alts)));
    std::tie(text_, pos_, line_, terminal_, bindings_, context_, in_args_) = saved;
    return r;
  }

  // Defines every imported name still undefined, and the common names those bodies use.
  void resolve_common() {
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& [name, id] : names_) {
        if (defined_.count(name) || !imported_.count(name)) continue;
        const Statement s{lark::common_line(name), 0};
        defined_.insert(name);
        define(s, name.size() + 1, /*common=*/true);
        changed = true;
        break;  // names_ may have grown
      }
    }
  }

  RuleId ref(const std::string& name, int line) {
    auto [it, fresh] = names_.emplace(name, -1);
    if (fresh) {
      it->second = g_.add_rule(name);
      first_use_[name] = line;
    }
    if (common_) imported_.insert(name);
    return it->second;
  }

  ExprId parse_body(const Statement& s, size_t at, bool terminal) {
    text_ = &s.text;
    pos_ = at;
    line_ = s.line;
    terminal_ = terminal;
    const ExprId e = expansions();
    skip();
    if (pos_ < text_->size()) fail(line_, "unexpected '" + text_->substr(pos_, 10) + "'");
    return e;
  }

  void skip() {
    while (pos_ < text_->size() && std::isspace(static_cast<unsigned char>((*text_)[pos_]))) ++pos_;
  }
  bool eat(std::string_view tok) {
    skip();
    if (text_->compare(pos_, tok.size(), tok) != 0) return false;
    pos_ += tok.size();
    return true;
  }

  ExprId expansions() {
    std::vector<ExprId> alts{expansion()};
    while (eat("|")) alts.push_back(expansion());
    return g_.alt(std::move(alts));
  }

  ExprId expansion() {
    std::vector<ExprId> items;
    for (;;) {
      skip();
      if (pos_ >= text_->size()) break;
      const char c = (*text_)[pos_];
      if (c == '|' || c == ')' || c == ']' || (in_args_ > 0 && (c == ',' || c == '}'))) break;
      if (eat("->")) {  // an alias names the tree node; the language is unchanged
        skip();
        while (pos_ < text_->size() && name_char((*text_)[pos_])) ++pos_;
        break;
      }
      items.push_back(postfix(atom()));
    }
    return g_.seq(std::move(items));
  }

  ExprId postfix(ExprId e) {
    for (;;) {
      if (eat("?")) {
        e = g_.opt(e);
      } else if (eat("*")) {
        e = g_.star(e);
      } else if (eat("+")) {
        e = g_.plus(e);
      } else if (eat("~")) {
        const int lo = number();
        const int hi = eat("..") ? number() : lo;
        if (hi < lo) fail(line_, "repetition ~ " + std::to_string(lo) + ".." + std::to_string(hi));
        e = g_.repeat(e, lo, hi);
      } else {
        return e;
      }
    }
  }

  int number() {
    skip();
    int n = 0;
    const size_t b = pos_;
    while (pos_ < text_->size() && std::isdigit(static_cast<unsigned char>((*text_)[pos_])) &&
           n < 100000)
      n = n * 10 + ((*text_)[pos_++] - '0');
    if (pos_ == b) fail(line_, "expected a number after '~'");
    return n;
  }

  // A terminal inside a rule may be preceded by ignored text.
  ExprId lexeme(ExprId e) { return ignore_ >= 0 && !terminal_ ? g_.seq({g_.ref(ignore_), e}) : e; }

  ExprId atom() {
    skip();
    const char c = (*text_)[pos_];
    if (c == '(' || c == '[') {
      ++pos_;
      if (++depth_ > 64) fail(line_, "groups nested deeper than 64");  // request input
      const ExprId e = expansions();
      --depth_;
      if (!eat(c == '(' ? ")" : "]"))
        fail(line_, std::string("missing '") + (c == '(' ? ")" : "]") + "'");
      return c == '[' ? g_.opt(e) : e;
    }
    if (c == '"') {
      const std::string a = string_literal();
      if (eat("..")) {
        skip();
        if (pos_ >= text_->size() || (*text_)[pos_] != '"')
          fail(line_, "expected a string after '..'");
        const std::string b = string_literal();
        uint32_t lo = 0, hi = 0;
        size_t i = 0, j = 0;
        if (!decode_utf8(a, i, lo) || i != a.size() || !decode_utf8(b, j, hi) || j != b.size() ||
            hi < lo)
          fail(line_, "a range \"a\"..\"z\" needs two single characters in order");
        CharClass cls;
        cls.add(lo, hi);
        return lexeme(utf8_class(g_, cls));
      }
      return lexeme(g_.literal(a));
    }
    if (c == '/') return lexeme(regex());
    if (name_char(c)) {
      const size_t b = pos_;
      while (pos_ < text_->size() && name_char((*text_)[pos_])) ++pos_;
      const std::string name = text_->substr(b, pos_ - b);
      if (pos_ < text_->size() && (*text_)[pos_] == '{') return g_.ref(instantiate(name));
      if (auto bound = bindings_.find(name); bound != bindings_.end()) return g_.ref(bound->second);
      if (templates_.count(name)) fail(line_, "template '" + name + "' used without arguments");
      if (terminal_ && !terminal_name(name))
        fail(line_, "terminal refers to rule '" + name + "' (terminals may use only terminals)");
      const ExprId e = g_.ref(ref(name, line_));
      return terminal_name(name) ? lexeme(e) : e;
    }
    fail(line_, std::string("unexpected '") + c + "'");
  }

  std::string string_literal() { return lark::string_literal(*text_, pos_, line_); }

  ExprId regex() {
    const std::string pattern = lark::regex_literal(*text_, pos_, line_);
    auto e = regex_to_expr(g_, pattern, RegexOptions{});
    if (!e) fail(line_, "regex /" + pattern + "/: " + e.status().message());
    return *e;
  }

  Grammar g_;
  std::map<std::string, RuleId> names_;
  std::set<std::string> defined_, imported_;
  std::map<std::string, int> first_use_, decl_line_;
  std::vector<Statement> extends_;  // %extend definitions, applied where their name is defined
  RuleId ignore_ = -1;
  const std::string* text_ = nullptr;
  size_t pos_ = 0;
  int line_ = 0;
  bool terminal_ = false, common_ = false;
  int depth_ = 0;
  std::map<std::string, Template> templates_;
  std::map<std::string, RuleId> instances_;  // by template and arguments
  std::map<std::string, RuleId> bindings_;   // parameter -> argument, inside an instance
  int context_ = 0, in_args_ = 0;
};

}  // namespace

Expected<Grammar> parse_lark(std::string_view text, std::string_view start) {
  try {
    return Builder().build(text, start);
  } catch (const lark::LarkError& e) {
    return invalid_argument(e.what());
  }
}

bool looks_like_lark(std::string_view text) {
  return text.find("::=") == std::string_view::npos;
}

}  // namespace di::grammar
