// compare: a compiled dump against an eager one, each compiled kernel with the eager kernel whose
// value it stands for (docs/analysis.md, "Compiled against eager").
#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graphdump/internal/compare_parts.h"

namespace graphdump::analysis::compare_internal {
namespace {

// Operators that only view, regroup, copy or cast data: a fused kernel stands for the value of
// its last operator that computes. (Eager rounds inside its own operators where Inductor casts.)
bool Passive(std::string_view op) {
  static const std::set<std::string, std::less<>> kPassive = {
      "view",     "reshape",   "_reshape_alias", "_unsafe_view", "permute",   "transpose",
      "t",        "expand",    "squeeze",        "unsqueeze",    "split",     "split_with_sizes",
      "getitem",  "select",    "slice",          "as_strided",   "alias",     "unbind",
      "clone",    "contiguous", "convert_element_type", "_to_copy", "copy",   "detach"};
  return kPassive.count(op) > 0;
}

std::string Basename(std::string_view file) {
  const size_t slash = file.rfind('/');
  return std::string(slash == std::string_view::npos ? file : file.substr(slash + 1));
}

// "Default/_orig_mod-Net/up-Linear/linear-op3" -> "Default/up-Linear": the scope, without the
// module torch.compile wraps (OptimizedModule's _orig_mod).
std::string ScopeOf(const std::string& full_name) {
  static const std::regex kWrapper("(^|/)_orig_mod-[^/]*(?=/|$)");
  const size_t slash = full_name.rfind('/');
  if (slash == std::string::npos) return "";
  return std::regex_replace(full_name.substr(0, slash), kWrapper, "$1");
}

bool Backward(const std::string& full_name) { return full_name.rfind("Gradients/", 0) == 0; }

// "add_" -> "add" (in place), lower-cased.
std::string BareOp(std::string op) {
  op = Lower(std::move(op));
  if (!op.empty() && op.back() == '_') op.pop_back();
  return op;
}

// One side's kernel of the iteration, with what pairing asks of it.
struct Item {
  const GraphEntry* graph = nullptr;
  const KernelEntry* kernel = nullptr;
  const CompiledKernelInfo* compiled = nullptr;  // null: not a kernel Inductor generated
  std::string line;                              // "script.py:7"; the standing-for op's
  std::string op;                                // the standing-for op ("sub"), or the op type
  std::string scope;
  bool backward = false;
  bool used = false;
  // Paired by standing-for: the outputs that are compared (this side's, the partner's).
  const TensorEntry* value = nullptr;
  const TensorEntry* partner_value = nullptr;
  // A compiled kernel's every paired output (value among them) -> the eager value it holds.
  std::map<const TensorEntry*, const TensorEntry*> partners;
};

class Elements {
 public:
  // The tensor's element count from its statistic row, else its .npy header; -1 if unknown.
  int64_t Of(const TensorEntry& t) {
    auto [it, fresh] = cache_.try_emplace(&t, -1);
    if (!fresh) return it->second;
    if (t.stats) {
      int64_t n = 1;
      for (int64_t d : t.stats->shape) n *= d;
      it->second = n;
    } else if (!t.path.empty()) {
      auto npy = OpenTensor(t);
      if (npy.ok()) it->second = (*npy)->NumElements();
    }
    return it->second;
  }

 private:
  std::map<const TensorEntry*, int64_t> cache_;
};

const TensorEntry* FirstOutput(const KernelEntry& k) {
  for (const TensorEntry& t : k.tensors)
    if (!t.is_input) return &t;
  return nullptr;
}

// The last output of `k` with `n` elements; null when none.
const TensorEntry* LastOutputOf(const KernelEntry& k, int64_t n, Elements* elements) {
  const TensorEntry* found = nullptr;
  for (const TensorEntry& t : k.tensors)
    if (!t.is_input && elements->Of(t) == n) found = &t;
  return found;
}

// A statistic row's identity (dtype, element count, every cell): an input equal to an earlier
// output, maybe viewed in another shape ((16, 128) written, read as (2, 8, 128)).
std::string RowKey(const TensorEntry& t) {
  if (!t.stats) return "";
  int64_t n = 1;
  for (int64_t d : t.stats->shape) n *= d;
  std::string key = std::string(t.stats->dtype) + "|" + std::to_string(n);
  t.stats->values.ForEach([&](std::string_view title, std::string_view cell) {
    if (title == "Timestamp") return;
    key += "|" + std::string(cell);
  });
  return key;
}

// The same dtype, or two floating ones (a bfloat16 compiled run against a float32 eager one).
bool ComparableDTypes(const std::string& a, const std::string& b) {
  auto floating = [](const std::string& d) {
    const std::string l = Lower(d);
    return l.find("float") != std::string::npos || l == "half";
  };
  return Lower(a) == Lower(b) || (floating(a) && floating(b));
}

// Do two tensors have one shape, size-1 dimensions aside ((1, 32) and (32))? True when a
// statistic row gives neither's shape (element counts then decide).
bool SameShape(const TensorEntry& a, const TensorEntry& b) {
  if (!a.stats || !b.stats) return true;
  auto squeezed = [](const RowShape& shape) {
    std::vector<int64_t> out;
    for (int64_t d : shape)
      if (d != 1) out.push_back(d);
    return out;
  };
  return squeezed(a.stats->shape) == squeezed(b.stats->shape);
}

// Is one shape the other, or a reshape of it that keeps the last dimension ((2, 8, 32) and
// (16, 32); not (128, 32) and (32, 128))?
bool Reshaped(const RowShape& a, const RowShape& b) {
  if (a == b) return true;
  return !a.empty() && !b.empty() && a.size() != b.size() && a[a.size() - 1] == b[b.size() - 1];
}

// The last output of compiled kernel `c` of `u`'s shape (SameShape) and element count; null
// when none.
const TensorEntry* OutputLike(const KernelEntry& c, const TensorEntry& u, Elements* elements) {
  const TensorEntry* found = nullptr;
  for (const TensorEntry& t : c.tensors)
    if (!t.is_input && elements->Of(t) == elements->Of(u) && SameShape(t, u)) found = &t;
  return found;
}

// The operator each output slot of a kernel writing several buffers holds
// (CompiledKernelInfo::output_ops), an empty op where unknown; empty for other kernels.
std::vector<FusedOp> OutputOps(const std::string& text) {
  std::vector<FusedOp> out;
  size_t at = 0;
  while (!text.empty() && at <= text.size()) {
    size_t end = text.find("; ", at);
    if (end == std::string::npos) end = text.size();
    std::vector<FusedOp> op = ParseFusedOps(text.substr(at, end - at));
    out.push_back(op.size() == 1 && !op[0].line.empty() ? op[0] : FusedOp{});
    at = end + 2;
  }
  return out;
}

// Output `slot` of `k`; null when it has none.
const TensorEntry* OutputAt(const KernelEntry& k, uint32_t slot) {
  for (const TensorEntry& t : k.tensors)
    if (!t.is_input && t.slot == slot) return &t;
  return nullptr;
}

// Inductor's names of the compiled graph's own inputs (parameters, inputs, incoming gradients).
bool GraphInputName(const std::string& name) {
  static const std::regex kInput("(arg|primals|tangents)[0-9_]*");
  return std::regex_match(name, kInput);
}

Item Describe(const GraphEntry& g, const KernelEntry& k) {
  Item item;
  item.graph = &g;
  item.kernel = &k;
  item.scope = ScopeOf(k.full_name);
  item.backward = Backward(k.full_name);
  item.op = BareOp(k.op_type);
  auto c = g.compiled_kernels.find(k.full_name);
  if (c != g.compiled_kernels.end()) {
    item.compiled = &c->second;
    std::vector<FusedOp> ops = ParseFusedOps(c->second.fused_ops);
    auto last = std::find_if(ops.rbegin(), ops.rend(), [](const FusedOp& o) { return !Passive(o.op); });
    if (last == ops.rend() && !ops.empty()) last = ops.rbegin();
    if (last != ops.rend()) {
      item.op = last->op;
      item.line = last->line;
    }
  } else {
    const auto trace = g.SharedSourceTrace(k.full_name, k.order);
    if (trace) {
      const std::string line = SourceLineOf(*trace);
      const size_t colon = line.rfind(':');
      if (colon != std::string::npos) item.line = Basename(line.substr(0, colon)) + line.substr(colon);
    }
  }
  return item;
}

// The iteration's kernels of every graph of `rank`, in the order they ran.
std::vector<Item> ItemsOf(const RankEntry& rank, int64_t iteration) {
  std::vector<Item> items;
  for (const GraphEntry& g : rank.graphs) {
    for (const IterationEntry& it : g.iterations) {
      if (it.iteration != iteration) continue;
      for (const KernelEntry& k : it.kernels) items.push_back(Describe(g, k));
    }
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& x, const Item& y) {
    return x.kernel->first_timestamp < y.kernel->first_timestamp;
  });
  // An autograd node whose forward operator ran inside another kernel (AddmmBackward0 of a
  // linear) has no line of its own: it takes the line of the backward node before it in its
  // module (ViewBackward0 of that linear's output).
  std::map<std::string, std::string> last_line;  // backward scope -> line
  for (Item& item : items) {
    if (!item.backward || item.compiled || item.kernel->is_parameter) continue;
    if (item.line.empty()) {
      auto found = last_line.find(item.scope);
      if (found != last_line.end()) item.line = found->second;
    } else {
      last_line[item.scope] = item.line;
    }
  }
  return items;
}

// Does eager kernel `e` lie in compiled kernel `c`'s scope (c's is its operators' common one)?
bool InScope(const Item& c, const Item& e) {
  return e.scope == c.scope || e.scope.rfind(c.scope + "/", 0) == 0;
}

// The tensor pairs (compiled, eager) of a standing-for pair: the inputs whose producer is a
// paired compiled kernel (with that pair's eager value) or a graph input (with the eager
// kernel's input of its size and dtype), then the value it stands for.
std::vector<CompiledPair::Tensors> TensorPairs(
    const Item& c, const Item& e, const std::map<std::string, const Item*>& by_name,
    const std::map<std::string, const Item*>& by_row, Elements* elements) {
  std::vector<CompiledPair::Tensors> out;
  std::set<const TensorEntry*> taken;
  for (const TensorEntry& t : c.kernel->tensors) {
    if (!t.is_input) continue;
    const std::string name =
        t.slot < c.compiled->input_names.size() ? c.compiled->input_names[t.slot] : "";
    const Item* producer = nullptr;
    if (auto p = by_name.find(name); p != by_name.end()) producer = p->second;
    if (!producer && !name.empty() && GraphInputName(name)) {
      for (const TensorEntry& u : e.kernel->tensors) {
        // Of the same shape where both rows give it, or a reshape of it that keeps the last
        // dimension (a backward graph's incoming gradient (2, 8, 32) read as (16, 32)): addmm
        // reads a Linear's weight transposed.
        const bool shapes_differ = u.stats && t.stats && !Reshaped(u.stats->shape, t.stats->shape);
        if (!u.is_input || taken.count(&u) || elements->Of(u) != elements->Of(t) ||
            shapes_differ || !ComparableDTypes(u.dtype_name, t.dtype_name)) {
          continue;
        }
        taken.insert(&u);
        out.push_back({&t, &u, true, t.slot});
        break;
      }
      continue;
    }
    if (!producer) {
      auto p = by_row.find(RowKey(t));
      if (p != by_row.end() && !RowKey(t).empty()) producer = p->second;
    }
    if (!producer) continue;
    // A producer writing several buffers: the eager value of the one read (its statistic row,
    // else its size when only one of its paired outputs has it).
    const TensorEntry* partner = producer->partner_value;
    if (producer->partners.size() > 1) {
      partner = nullptr;
      int sized = 0;
      for (const auto& [mine, theirs] : producer->partners) {
        if (!RowKey(t).empty() && RowKey(*mine) == RowKey(t)) {
          partner = theirs;
          sized = 1;
          break;
        }
        if (elements->Of(*mine) == elements->Of(t) && sized++ == 0) partner = theirs;
      }
      if (sized != 1) partner = nullptr;
    }
    if (partner && elements->Of(*partner) == elements->Of(t)) {
      out.push_back({&t, partner, true, t.slot});
    }
  }
  for (const auto& [mine, theirs] : c.partners) out.push_back({mine, theirs, false, mine->slot});
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) {
    return x.is_input != y.is_input ? x.is_input : !x.is_input && x.slot < y.slot;
  });
  return out;
}

// The kernels of one side as PairKernels takes them, named without the compiled module's
// wrapper (Parameter._orig_mod_up_weight, Default/_orig_mod-Net/...).
std::vector<KernelEntry> Unwrapped(const std::vector<Item*>& items) {
  static const std::regex kWrapper("_orig_mod[-_.]|(^|/)_orig_mod-[^/]*/");
  std::vector<KernelEntry> out;
  for (const Item* i : items) {
    KernelEntry k = *i->kernel;
    k.op_name = std::regex_replace(k.op_name, kWrapper, "$1");
    k.full_name = std::regex_replace(k.full_name, kWrapper, "$1");
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace

std::vector<FusedOp> ParseFusedOps(const std::string& text) {
  std::vector<FusedOp> ops;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find("; ", at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    at = end + 2;
    FusedOp op;
    std::string target = item;
    const size_t paren = item.find(" (");
    if (paren != std::string::npos && item.back() == ')') {
      target = item.substr(0, paren);
      op.line = item.substr(paren + 2, item.size() - paren - 3);
    }
    // "aten.sub.Tensor" -> "sub"; "prims.convert_element_type.default" -> "convert_element_type"
    const size_t dot = target.find('.');
    if (dot != std::string::npos) {
      const size_t next = target.find('.', dot + 1);
      target = target.substr(dot + 1, next == std::string::npos ? next : next - dot - 1);
    }
    op.op = BareOp(target);
    if (!op.op.empty()) ops.push_back(std::move(op));
  }
  return ops;
}

bool IsCompiled(const RankEntry& rank) {
  for (const GraphEntry& g : rank.graphs)
    if (!g.compiled_kernels.empty()) return true;
  return false;
}

CompiledPairing PairCompiled(const RankEntry& a, const RankEntry& b,
                             std::optional<int64_t> iteration) {
  const bool compiled_is_a = IsCompiled(a);
  const RankEntry& compiled = compiled_is_a ? a : b;
  const RankEntry& eager = compiled_is_a ? b : a;
  std::set<int64_t> iterations;
  for (const GraphEntry& g : compiled.graphs)
    for (const IterationEntry& it : g.iterations)
      if (!iteration || it.iteration == *iteration) iterations.insert(it.iteration);
  CompiledPairing out;
  Elements elements;
  for (const int64_t i : iterations) {
    std::vector<Item> cs = ItemsOf(compiled, i), es = ItemsOf(eager, i);
    // A's kernel's position in the order A's kernels ran, over every graph.
    const std::vector<Item>& items_a = compiled_is_a ? cs : es;
    auto ran = [&](const Item& x) { return static_cast<int64_t>(&x - items_a.data()); };
    std::map<std::string, std::vector<size_t>> eager_by_line;
    for (size_t j = 0; j < es.size(); ++j)
      if (!es[j].line.empty() && !es[j].kernel->is_parameter) eager_by_line[es[j].line].push_back(j);
    // Each compiled kernel's name and outputs' rows, once it ran (its readers come after).
    std::map<const GraphEntry*, std::map<std::string, const Item*>> by_name, by_row;
    std::set<std::pair<bool, std::string>> fused_lines;  // (backward, line) of any fused op
    std::set<const TensorEntry*> taken_outputs;  // eager outputs a compiled kernel stands for
    for (Item& c : cs) {
      if (!c.compiled) continue;
      for (const FusedOp& op : ParseFusedOps(c.compiled->fused_ops))
        fused_lines.insert({c.backward, op.line});
      // The eager kernel of c's line and scope with an output of c's outputs' size: of the same
      // operator, else of c's very scope, else below it; the first such one.
      // A backward kernel of eager's is an autograd node whose outputs are several gradients
      // (AddmmBackward0: the bias's, the input's, the weight's), each computed by a kernel of
      // its own in the compiled backward: there, any output not yet taken of c's shape.
      Item* best = nullptr;
      const TensorEntry* best_value = nullptr;
      int best_rank = 3;
      for (size_t j : eager_by_line[c.line]) {
        Item& e = es[j];
        if ((e.used && !c.backward) || e.backward != c.backward || !InScope(c, e)) continue;
        const TensorEntry* value = nullptr;
        if (!c.backward) {
          value = FirstOutput(*e.kernel);
          if (value && !LastOutputOf(*c.kernel, elements.Of(*value), &elements)) value = nullptr;
        } else {
          for (const TensorEntry& u : e.kernel->tensors) {
            if (!u.is_input && !taken_outputs.count(&u) && OutputLike(*c.kernel, u, &elements)) {
              value = &u;
              break;
            }
          }
        }
        if (!value) continue;
        const int rank = e.op == c.op ? 0 : e.scope == c.scope ? 1 : 2;
        if (rank < best_rank) {
          best = &e;
          best_value = value;
          best_rank = rank;
        }
      }
      const std::vector<FusedOp> outputs = OutputOps(c.compiled->output_ops);
      if (best) {
        best->used = c.used = true;
        taken_outputs.insert(best_value);
        best->value = best_value;
        c.partner_value = best->value;
        c.value = c.backward ? OutputLike(*c.kernel, *best_value, &elements)
                             : LastOutputOf(*c.kernel, elements.Of(*best->value), &elements);
        // Of a kernel writing several buffers, the one holding the standing-for operator.
        for (uint32_t s = 0; s < outputs.size(); ++s) {
          const TensorEntry* t = OutputAt(*c.kernel, s);
          if (t && outputs[s].op == c.op && outputs[s].line == c.line &&
              elements.Of(*t) == elements.Of(*best_value) &&
              (!c.backward || SameShape(*t, *best_value))) {
            c.value = t;
            break;
          }
        }
        c.partners[c.value] = best_value;
      }
      // Each other buffer it writes, with the eager kernel whose value it holds: of its
      // operator's line and c's scope, an output of its size not yet taken, of that operator
      // where one is.
      for (uint32_t s = 0; s < outputs.size(); ++s) {
        const TensorEntry* t = OutputAt(*c.kernel, s);
        if (!t || t == c.value || outputs[s].line.empty()) continue;
        Item* found = nullptr;
        const TensorEntry* found_value = nullptr;
        int found_rank = 3;
        for (size_t j : eager_by_line[outputs[s].line]) {
          Item& e = es[j];
          if ((e.used && !c.backward) || e.backward != c.backward || !InScope(c, e)) continue;
          const TensorEntry* value = nullptr;
          for (const TensorEntry& u : e.kernel->tensors) {
            if (!u.is_input && !taken_outputs.count(&u) && elements.Of(u) == elements.Of(*t) &&
                (!c.backward || SameShape(u, *t))) {
              value = &u;
              break;
            }
            if (!u.is_input && !c.backward) break;  // a forward kernel's value: its first output
          }
          const int rank = !value ? 3 : e.op == outputs[s].op ? 0 : e.scope == c.scope ? 1 : 2;
          if (rank < found_rank) {
            found = &e;
            found_value = value;
            found_rank = rank;
          }
        }
        if (!found) continue;
        found->used = c.used = true;
        taken_outputs.insert(found_value);
        found->value = found_value;
        c.partners[t] = found_value;
        if (!best) {  // the kernel pairs with the eager kernel of its first paired output
          best = found;
          c.value = t;
          c.partner_value = found_value;
        }
      }
      if (best) {
        CompiledPair p;
        p.a = compiled_is_a ? c.kernel : best->kernel;
        p.b = compiled_is_a ? best->kernel : c.kernel;
        p.graph_a = compiled_is_a ? c.graph : best->graph;
        p.graph_b = compiled_is_a ? best->graph : c.graph;
        p.iteration = i;
        p.ran = ran(compiled_is_a ? c : *best);
        p.pairing = Pairing::kStandsFor;
        p.fused_ops = c.compiled->fused_ops;
        p.tensors = TensorPairs(c, *best, by_name[c.graph], by_row[c.graph], &elements);
        if (!compiled_is_a)
          for (CompiledPair::Tensors& t : p.tensors) std::swap(t.a, t.b);
        out.pairs.push_back(std::move(p));
      }
      by_name[c.graph][c.kernel->full_name] = &c;
      for (const TensorEntry& t : c.kernel->tensors)
        if (!t.is_input && !RowKey(t).empty()) by_row[c.graph][RowKey(t)] = &c;
    }
    // What ran eagerly on the compiled side (graph 0, parameters) pairs as plain compare does.
    std::vector<Item*> rest_c, rest_e;
    for (Item& c : cs)
      if (!c.compiled) rest_c.push_back(&c);
    for (Item& e : es)
      if (!e.used) rest_e.push_back(&e);
    const std::vector<KernelEntry> kc = Unwrapped(rest_c), ke = Unwrapped(rest_e);
    std::vector<const KernelEntry*> only_c, only_e;
    const auto& ka = compiled_is_a ? kc : ke;
    const auto& kb = compiled_is_a ? ke : kc;
    const auto& ra = compiled_is_a ? rest_c : rest_e;
    const auto& rb = compiled_is_a ? rest_e : rest_c;
    for (const KernelPair& kp : PairKernels(ka, kb, &only_c, &only_e)) {
      Item& x = *ra[kp.a - ka.data()];
      Item& y = *rb[kp.b - kb.data()];
      x.used = y.used = true;
      CompiledPair p;
      p.a = x.kernel;
      p.b = y.kernel;
      p.graph_a = x.graph;
      p.graph_b = y.graph;
      p.iteration = i;
      p.ran = ran(x);
      p.pairing = kp.pairing;
      out.pairs.push_back(std::move(p));
    }
    auto unpaired = [&](const Item& item, bool side_a) {
      UnpairedKernel u{side_a ? 'A' : 'B', side_a ? a.rank : b.rank, item.graph->graph_id, i,
                       item.kernel->call, item.kernel->full_name, ""};
      if (!item.compiled && fused_lines.count({item.backward, item.line}) &&
          !item.kernel->is_parameter) {
        u.why = "intermediate";
      }
      out.unpaired.push_back(std::move(u));
    };
    for (const Item& c : cs)
      if (!c.used) unpaired(c, compiled_is_a);
    for (const Item& e : es)
      if (!e.used) unpaired(e, !compiled_is_a);
  }
  return out;
}

}  // namespace graphdump::analysis::compare_internal
