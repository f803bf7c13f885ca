// Validation of simulation.variation. Factors are bounded so that a typo (80 for 0.8) is
// refused, not simulated as a GPU eighty times faster, nor one a hundred times slower than any
// GPU or link that still takes part in a job; the factors that apply to one GPU multiply, and
// their product is bounded as one factor is.
#include "io/validate_variation.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "stepsim/error.hpp"

namespace stepsim::io {
namespace {

constexpr double kMinFactor = 0.01;
constexpr double kMaxFactor = 10.0;

class VariationChecker {
 public:
  explicit VariationChecker(const Scenario& s) : s_(s) {}

  template <class... A>
  void require(bool ok, const std::string& where, fmt::format_string<A...> message, A&&... args) const {
    if (!ok)
      throw InputError(s_.source, "/simulation/variation" + where, fmt::format(message, std::forward<A>(args)...));
  }

  void factor(double f, const std::string& where) const {
    require(std::isfinite(f) && f >= kMinFactor && f <= kMaxFactor, where, "must be a factor from {} to {}, got {}",
            kMinFactor, kMaxFactor, f);
  }

  // The product of the factors of the entries `what` names, which all apply to `whom`.
  void product(double p, const std::string& what, const std::string& whom, const std::string& where) const {
    require(p >= kMinFactor && p <= kMaxFactor, where,
            "{} apply to {} and multiply to {:.3g}: a product of factors must be from {} to {}, as one factor must",
            what, whom, p, kMinFactor, kMaxFactor);
  }

  void rank(int r, const std::string& where) const {
    require(r >= 0 && r < s_.parallel.gpus(), where, "must be a rank from 0 to {} (the job has {} GPUs), got {}",
            s_.parallel.gpus() - 1, s_.parallel.gpus(), r);
  }

  void node(int n, const std::string& where) const {
    require(n >= 0 && n < s_.cluster.nodes, where, "must be a node from 0 to {} (the job has {} nodes), got {}",
            s_.cluster.nodes - 1, s_.cluster.nodes, n);
  }

 private:
  const Scenario& s_;
};

std::string at(const char* list, std::size_t i, const char* key) { return fmt::format("/{}/{}/{}", list, i, key); }

// "0 and 2", "0, 1 and 2".
std::string entries_text(const std::vector<std::size_t>& entries) {
  std::string text = std::to_string(entries.front());
  for (std::size_t k = 1; k < entries.size(); ++k)
    text += (k + 1 == entries.size() ? " and " : ", ") + std::to_string(entries[k]);
  return text;
}

// "gpu_speed entry 2", "node_speed entries 0 and 1".
std::string named(const char* list, const std::vector<std::size_t>& entries) {
  return fmt::format("{} {} {}", list, entries.size() == 1 ? "entry" : "entries", entries_text(entries));
}

// The entries of `list` for which `applies(i)` holds, and the product of their factors.
template <class Entry, class Applies>
std::vector<std::size_t> applying(const std::vector<Entry>& list, Applies applies, double& product) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!applies(i)) continue;
    out.push_back(i);
    product *= list[i].factor;
  }
  return out;
}

// A GPU's compute runs at the product of its gpu_speed entries and its node's node_speed
// entries (parallelism/variation.cpp, speed_factor): bounded for each GPU an entry names, and
// for the other GPUs of each node an entry names. Named at the last entry of the product.
void check_speed_products(const VariationSpec& v, int per_node, const VariationChecker& c) {
  for (const NodeSpeed& n : v.node_speed) {
    double p = 1;
    const auto nodes = applying(
        v.node_speed, [&](std::size_t k) { return v.node_speed[k].node == n.node; }, p);
    c.product(p, named("node_speed", nodes), fmt::format("node {}'s GPUs", n.node),
              at("node_speed", nodes.back(), "factor"));
  }
  for (const GpuSpeed& g : v.gpu_speed) {
    double p = 1;
    const auto ranks = applying(
        v.gpu_speed, [&](std::size_t k) { return v.gpu_speed[k].rank == g.rank; }, p);
    const auto nodes = applying(
        v.node_speed, [&](std::size_t k) { return v.node_speed[k].node == g.rank / per_node; }, p);
    c.product(p, named("gpu_speed", ranks) + (nodes.empty() ? "" : " and " + named("node_speed", nodes)),
              fmt::format("rank {}", g.rank), at("gpu_speed", ranks.back(), "factor"));
  }
}

// A GPU's link of one kind carries the product of the link entries of that kind for the GPU
// and for its node (parallelism/variation.cpp, link_factor): bounded as the speeds are, for
// each GPU an entry names and for the other GPUs of each node an entry names.
void check_link_products(const std::vector<LinkFactor>& links, int per_node, const VariationChecker& c) {
  for (const LinkFactor& l : links) {
    const int node = l.rank ? *l.rank / per_node : *l.node;
    const auto applies = [&](std::size_t k) {
      const LinkFactor& o = links[k];
      return o.link == l.link && (o.node == node || (l.rank && o.rank == l.rank));
    };
    double p = 1;
    const auto entries = applying(links, applies, p);
    c.product(p, named("links", entries),
              fmt::format("{} {}'s {} link{}", l.rank ? "rank" : "node", l.rank ? *l.rank : node,
                          l.link == LinkKind::nic ? "nic" : "nvlink", l.rank ? "" : "s"),
              at("links", entries.back(), "factor"));
  }
}

// Entries for one node add up (link_factor fails their sum): entries up to `last` must leave
// the node a NIC.
void check_node_failures(const std::vector<FailedNics>& failed, std::size_t last, int nics, const VariationChecker& c) {
  const int node = failed[last].node;
  std::vector<std::size_t> entries;
  long long count = 0;
  for (std::size_t i = 0; i <= last; ++i) {
    if (failed[i].node != node) continue;
    entries.push_back(i);
    count += failed[i].count;
  }
  c.require(count < nics, at("failed_nics", last, "count"),
            "entries {} fail {} NICs of node {}, which has {} (with none left the job cannot run)",
            entries_text(entries), count, node, nics);
}

void check_lists(const VariationSpec& v, const Scenario& s, const VariationChecker& c) {
  for (std::size_t i = 0; i < v.gpu_speed.size(); ++i) {
    c.rank(v.gpu_speed[i].rank, at("gpu_speed", i, "rank"));
    c.factor(v.gpu_speed[i].factor, at("gpu_speed", i, "factor"));
  }
  for (std::size_t i = 0; i < v.node_speed.size(); ++i) {
    c.node(v.node_speed[i].node, at("node_speed", i, "node"));
    c.factor(v.node_speed[i].factor, at("node_speed", i, "factor"));
  }
  for (std::size_t i = 0; i < v.links.size(); ++i) {
    const LinkFactor& l = v.links[i];
    c.require(l.rank || l.node, fmt::format("/links/{}", i),
              "needs \"rank\" (one GPU's link) or \"node\" (every GPU's link of a node)");
    c.require(!(l.rank && l.node), fmt::format("/links/{}", i),
              "needs either \"rank\" (one GPU's link) or \"node\" (every GPU's link of a node), not both");
    if (l.rank) c.rank(*l.rank, at("links", i, "rank"));
    if (l.node) c.node(*l.node, at("links", i, "node"));
    c.factor(l.factor, at("links", i, "factor"));
  }
  check_speed_products(v, s.cluster.gpus_per_node, c);
  check_link_products(v.links, s.cluster.gpus_per_node, c);
  const int nics = s.cluster.inter_node.nics_per_node;
  for (std::size_t i = 0; i < v.failed_nics.size(); ++i) {
    c.node(v.failed_nics[i].node, at("failed_nics", i, "node"));
    c.require(v.failed_nics[i].count >= 1 && v.failed_nics[i].count < nics, at("failed_nics", i, "count"),
              "must be from 1 to {} (the node has {} NICs; with none left the job cannot run), got {}", nics - 1, nics,
              v.failed_nics[i].count);
    check_node_failures(v.failed_nics, i, nics, c);
  }
}

// A uniform draw of standard deviation sigma spans 1 ± √3·sigma, which must stay positive. A
// normal draw has no bound: the engine keeps a kernel at 0.05 of its time or more, which
// lifts the mean above 1 as sigma grows (E[max(0.05, 1 + sigma·z)] − 1 = sigma·(φ(c) + c·Φ(c)),
// c = −0.95/sigma: 6e-5 at sigma 0.3, 0.55 % at 0.5, 8 % at 1), so a normal stops at 0.3 and a
// wider jitter is the lognormal's, which is positive and of mean 1 at any sigma.
void check_jitter(const JitterSpec& j, RankMode mode, const VariationChecker& c) {
  const double most = j.distribution == JitterKind::uniform  ? 1.0 / std::sqrt(3.0)
                      : j.distribution == JitterKind::normal ? 0.3
                                                             : 1.0;
  c.require(std::isfinite(j.sigma) && j.sigma >= 0 && j.sigma <= most, "/jitter/sigma",
            "must be a relative standard deviation from 0 to {:.3g}{}, got {}", most,
            j.distribution == JitterKind::normal ? " (a wider normal would draw kernels of no time or less: "
                                                   "use the lognormal for a wider jitter)"
                                                 : "",
            j.sigma);
  if (j.distribution == JitterKind::none) {
    c.require(j.sigma == 0, "/jitter/sigma", "needs a jitter distribution (normal, lognormal or uniform)");
    c.require(j.seed == JitterSpec{}.seed, "/jitter/seed",
              "needs a jitter distribution (normal, lognormal or uniform)");
    return;
  }
  c.require(j.sigma > 0, "/jitter/sigma", "must be above 0 for a {} jitter",
            j.distribution == JitterKind::normal      ? "normal"
            : j.distribution == JitterKind::lognormal ? "lognormal"
                                                      : "uniform");
  c.require(j.seed >= 0, "/jitter/seed", "must be 0 or more, got {}", j.seed);
  c.require(mode == RankMode::all || j.seed == JitterSpec{}.seed, "/jitter/seed",
            "draws kernels only with simulation.ranks \"all\": representative mode adds the expected wait for the "
            "slowest member of each collective, which needs no seed");
}

// The first list that names single GPUs or nodes, for the refusal in representative mode.
const char* singling_key(const VariationSpec& v) {
  if (!v.gpu_speed.empty()) return "/gpu_speed";
  if (!v.node_speed.empty()) return "/node_speed";
  if (!v.links.empty()) return "/links";
  return "/failed_nics";
}

}  // namespace

void check_variation(const Scenario& s) {
  const VariationSpec& v = s.simulation.variation;
  const VariationChecker c(s);
  check_lists(v, s, c);
  check_jitter(v.jitter, s.simulation.ranks, c);
  c.require(std::isfinite(v.background_traffic) && v.background_traffic >= 0 && v.background_traffic < 1,
            "/background_traffic", "must be a fraction from 0 to below 1 of the network bandwidth, got {}",
            v.background_traffic);
  if (s.simulation.ranks == RankMode::all || !v.singles_out_gpus()) return;
  c.require(false, singling_key(v),
            "singles out GPUs or nodes, which representative mode (one simulated rank per pipeline stage) cannot "
            "show: use simulation.ranks \"all\"");
}

}  // namespace stepsim::io
