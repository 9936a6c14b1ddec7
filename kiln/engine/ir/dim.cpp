#include <kiln/engine/ir/dim.h>

#include <atomic>
#include <vector>

namespace kiln::engine::ir {

// Canonical form: a linear combination `constant + sum(coefficient * atom)` where an atom is a
// symbol or an opaque product/quotient. Linear forms make `seq + 1 - 1 == seq` hold.
struct Dim::Node {
  int64_t constant = 0;
  std::map<std::string, int64_t> terms;  // atom key → coefficient
  // Atoms that are not plain symbols: key → (op, left, right).
  struct Atom {
    char op;  // '*' or '/'
    Dim left, right;
  };
  std::map<std::string, Atom> atoms;
};

namespace {

std::shared_ptr<Dim::Node> make_node() { return std::make_shared<Dim::Node>(); }

}  // namespace

Dim::Dim(int64_t value) {
  auto node = make_node();
  node->constant = value;
  node_ = node;
}

Dim Dim::symbol(const std::string& name) {
  static std::atomic<int> anonymous{0};
  auto node = make_node();
  node->terms[name.empty() ? "?" + std::to_string(anonymous++) : name] = 1;
  return Dim(std::shared_ptr<const Node>(node));
}

bool Dim::is_static() const { return node_->terms.empty(); }
int64_t Dim::value() const { return node_->constant; }
int64_t Dim::constant() const { return node_->constant; }

std::vector<Dim::Term> Dim::terms() const {
  std::vector<Term> out;
  for (const auto& [key, coefficient] : node_->terms) {
    Term term;
    term.coefficient = coefficient;
    term.key = key;
    auto atom = node_->atoms.find(key);
    if (atom != node_->atoms.end()) {
      term.op = atom->second.op;
      term.left = atom->second.left;
      term.right = atom->second.right;
    }
    out.push_back(std::move(term));
  }
  return out;
}

std::string Dim::to_string() const {
  std::string out;
  for (const auto& [key, coefficient] : node_->terms) {
    std::string atom = key[0] == '?' ? "?" : key;
    auto it = node_->atoms.find(key);
    if (it != node_->atoms.end()) {
      atom = "(" + it->second.left.to_string() + " " + it->second.op + " " +
             it->second.right.to_string() + ")";
    }
    int64_t c = coefficient;
    if (out.empty()) {
      out = c == 1 ? atom : c == -1 ? "-" + atom : std::to_string(c) + "*" + atom;
    } else {
      out += c < 0 ? " - " : " + ";
      int64_t m = c < 0 ? -c : c;
      out += m == 1 ? atom : std::to_string(m) + "*" + atom;
    }
  }
  if (out.empty()) return std::to_string(node_->constant);
  if (node_->constant > 0) out += " + " + std::to_string(node_->constant);
  if (node_->constant < 0) out += " - " + std::to_string(-node_->constant);
  if (out.size() > 2 && out.front() == '(' && out.back() == ')' && node_->terms.size() == 1 &&
      node_->constant == 0 && node_->terms.begin()->second == 1) {
    out = out.substr(1, out.size() - 2);
  }
  return out;
}

runtime::Result<int64_t> Dim::evaluate(const std::map<std::string, int64_t>& bindings) const {
  int64_t total = node_->constant;
  for (const auto& [key, coefficient] : node_->terms) {
    int64_t value;
    auto atom = node_->atoms.find(key);
    if (atom != node_->atoms.end()) {
      KILN_ASSIGN_OR_RETURN(int64_t l, atom->second.left.evaluate(bindings));
      KILN_ASSIGN_OR_RETURN(int64_t r, atom->second.right.evaluate(bindings));
      if (atom->second.op == '*') {
        value = l * r;
      } else {
        if (r == 0) {
          return runtime::Status(runtime::Error::InvalidArgument,
                                 "evaluate dim '" + to_string() + "': division by zero");
        }
        value = l / r - ((l % r != 0) && ((l < 0) != (r < 0)) ? 1 : 0);
      }
    } else {
      auto it = bindings.find(key);
      if (it == bindings.end()) {
        return runtime::Status(runtime::Error::InvalidArgument,
                               "evaluate dim '" + to_string() + "': symbol '" +
                                   (key[0] == '?' ? "?" : key) + "' has no value");
      }
      value = it->second;
    }
    total += coefficient * value;
  }
  return total;
}

Dim operator+(const Dim& a, const Dim& b) {
  auto node = std::make_shared<Dim::Node>(*a.node_);
  node->constant += b.node_->constant;
  for (const auto& [key, c] : b.node_->terms) {
    if ((node->terms[key] += c) == 0) node->terms.erase(key);
  }
  for (const auto& entry : b.node_->atoms) node->atoms.insert(entry);
  for (auto it = node->atoms.begin(); it != node->atoms.end();) {
    it = node->terms.count(it->first) ? std::next(it) : node->atoms.erase(it);
  }
  return Dim(std::shared_ptr<const Dim::Node>(node));
}

Dim operator-(const Dim& a, const Dim& b) { return a + b * Dim(-1); }

namespace {

Dim make_atom(char op, const Dim& a, const Dim& b) {
  auto node = std::make_shared<Dim::Node>();
  std::string key = "(" + a.to_string() + ")" + op + "(" + b.to_string() + ")";
  node->terms[key] = 1;
  node->atoms.emplace(key, Dim::Node::Atom{op, a, b});
  return Dim(std::shared_ptr<const Dim::Node>(node));
}

}  // namespace

Dim operator*(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return Dim(a.value() * b.value());
  const Dim& linear = a.is_static() ? b : a;
  const Dim& scalar = a.is_static() ? a : b;
  if (!scalar.is_static()) return make_atom('*', a, b);
  if (scalar.value() == 0) return Dim(0);
  auto node = std::make_shared<Dim::Node>(*linear.node_);
  node->constant *= scalar.value();
  for (auto& [key, c] : node->terms) c *= scalar.value();
  return Dim(std::shared_ptr<const Dim::Node>(node));
}

Dim operator/(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static() && b.value() != 0) {
    int64_t l = a.value(), r = b.value();
    return Dim(l / r - ((l % r != 0) && ((l < 0) != (r < 0)) ? 1 : 0));
  }
  if (b.is_static() && b.value() == 1) return a;
  return make_atom('/', a, b);
}

bool operator==(const Dim& a, const Dim& b) {
  if (a.node_ == b.node_) return true;
  return a.node_->constant == b.node_->constant && a.node_->terms == b.node_->terms;
}

}  // namespace kiln::engine::ir
