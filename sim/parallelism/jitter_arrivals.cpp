// The drift of real ranks under kernel jitter, communicator by communicator.
//
// A real rank's compute runs ahead of or behind the simulated rank's by its drift, the sum of
// its kernels' jitter: σ·d·z for a kernel of duration d (z of mean 0 and deviation 1). The
// members of a communicator differ by what they drew since their compute was last held
// together, of variance V = σ²·Σ d² over those kernels, and a collective starts when the last
// of its N members arrives: √V·E[max of N] after the simulated rank's work for it was ready
// (the drift through the last compute op it waits for: its data), or when the stream it is on
// frees, if that is later: E[max(lag, M)], M that last arrival.
//
// A collective holds its members together only where it holds their compute back: where a
// compute op starts when the collective ends, later than its stream (and the rest of what it
// waited for) would have let it. A member whose own work was ready by then starts there, the
// others at their own time: starts max(X, slack), X the member's drift and slack how much
// later than the rest the collective ended in the simulated rank's time. With a slack of many
// deviations every member starts together and the drift is gone; a collective that ended
// while the ranks were still busy (the final layer norm's backward waiting on an AllReduce
// that ended under the LM head's weight gradient) held nobody back, and the drift keeps
// growing. Between the two the lower part of the spread is cut and the last member keeps its
// lead over the others less what their mean gained: so each communicator keeps two figures,
// the members' spread (the variance of max(X, slack), for the next cut) and the lead of the
// last (as the variance of a normal spread whose largest of N leads its mean as far), which
// the waits are made of. Without a cut the two are one.
//
// The members of the rank's other communicators are not held together there. DP peers of a
// TP × DP job sit in different TP groups, and each starts at its own TP group's last arrival,
// the largest of that group's N drifts. Of the spread they drew independently since that TP
// group last met (V_tp), only the spread of those maxima is left, κ_N·V_tp, κ_N the variance
// of the largest of N draws (1 − 1/π at N = 2, 0.37 at N = 8); what they differed by before
// stays. So the other communicator's V becomes V − (1 − κ_N)·min(V, V_tp) (less of it where
// the cut held back only some members): the DP peers' spread keeps growing across TP
// synchronisations, by the spread of the TP groups' maxima. A communicator whose real members
// all lie in the group that met (a sharded group inside its data-parallel one) is cut with it.
//
// Each communicator's figures are kept as the points where they changed other than by kernels
// (the op that was held back), and the kernels' Σ d² and Σ d⁴ from the start of the op list
// (prefix sums): a collective on a stream that ran behind the compute reads the drift of its
// own data, not what the compute stream has drawn since.
#include "parallelism/jitter_arrivals.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include <boost/math/distributions/normal.hpp>

#include "parallelism/jitter_max.hpp"
#include "stepsim/error.hpp"

namespace stepsim::parallelism {
namespace {

using engine::OpIndex;

// Σ d² and Σ d⁴ of the compute kernels before each op of a list (copies are not kernels),
// in s² and s⁴; one past the last op: all of them.
struct KernelSums {
  std::vector<double> d2;
  std::vector<double> d4;
};

KernelSums kernel_sums(const engine::OpList& list) {
  KernelSums sums;
  sums.d2.reserve(list.ops.size() + 1);
  sums.d4.reserve(list.ops.size() + 1);
  double d2 = 0, d4 = 0;
  for (const engine::Op& op : list.ops) {
    sums.d2.push_back(d2);
    sums.d4.push_back(d4);
    if (op.kind != engine::OpKind::compute) continue;
    const double s2 = op.duration.seconds() * op.duration.seconds();
    d2 += s2;
    d4 += s2 * s2;
  }
  sums.d2.push_back(d2);
  sums.d4.push_back(d4);
  return sums;
}

bool contains(const RankGroup& g, long long rank) {
  if (rank < g.first) return false;
  const long long offset = rank - g.first;
  return offset % g.stride == 0 && offset / g.stride < g.size;
}

// Every real member of `inner` is one of `outer`'s.
bool inside(const RankGroup& inner, const RankGroup& outer) {
  if (!contains(outer, inner.first)) return false;
  if (inner.size <= 1) return true;
  return inner.stride % outer.stride == 0 && contains(outer, inner.at(inner.size - 1));
}

// A simulated rank's communicators of more than one real member.
struct RankComms {
  std::shared_ptr<const KernelSums> sums;
  std::vector<std::int32_t> groups;       // program group of each communicator
  std::vector<int> size;                  // its real members
  std::vector<std::vector<bool>> inside;  // inside[i][j]: communicator j's members all in i's group
  std::vector<std::int32_t> of_op;        // per op: its communicator (collective ops), else -1
  // Per collective op: its members arrive with the drift of the ops before this one: through
  // the last compute op it waits for (its data), or up to its place in the list if it waits
  // for none.
  std::vector<OpIndex> upto;
  int multiplicity = 1;  // the real ranks it stands for
};

// A communicator's figures where they changed other than by kernels, in s² (σ² is applied
// when a wait is asked for): the spread and the lead (see the top of the file), with the Σ d⁴
// of the kernels the lead stands for (its kurtosis).
struct SyncPoint {
  OpIndex at = 0;  // before this op's kernel
  double spread = 0;
  double lead = 0;
  double d4 = 0;
};

struct Drift {
  double spread = 0;
  double lead = 0;
  double d4 = 0;
};

// Beyond this many deviations below the mean no member's drift reaches.
constexpr double kFarTail = 8;

// The mean and the variance of max(X, slack), X normal of deviation `sd`.
struct Clipped {
  double mean = 0;
  double variance = 0;
};

Clipped clipped(double sd, double slack) {
  const boost::math::normal_distribution<double> normal;
  const double a = slack / sd;
  const double below = boost::math::cdf(normal, a);
  const double density = boost::math::pdf(normal, a);
  const double m1 = slack * below + sd * density;
  const double m2 = slack * slack * below + sd * sd * (1 - below) + slack * sd * density;
  return {m1, std::max(0.0, m2 - m1 * m1)};
}

class JitterArrivals final : public engine::ArrivalModel {
 public:
  JitterArrivals(std::vector<RankComms> ranks, JitterKind kind, double sigma)
      : ranks_(std::move(ranks)), kind_(kind), sigma_(sigma) {}

  std::unique_ptr<Run> start() const override;

  const std::vector<RankComms>& ranks() const { return ranks_; }
  JitterKind kind() const { return kind_; }
  double sigma() const { return sigma_; }

 private:
  std::vector<RankComms> ranks_;
  JitterKind kind_;
  double sigma_;
};

class ArrivalRun final : public engine::ArrivalModel::Run {
 public:
  explicit ArrivalRun(const JitterArrivals& model) : model_(model), maxima_(model.kind(), model.sigma()) {
    for (const RankComms& r : model.ranks()) points_.emplace_back(r.groups.size(), std::vector<SyncPoint>{SyncPoint{}});
  }

  Arrival arrival(std::size_t r, OpIndex o, Time lag) override {
    const RankComms& rank = model_.ranks()[r];
    const std::int32_t c = rank.of_op[o];
    const double lag_s = lag.seconds();
    if (c < 0) return {seconds(std::max(lag_s, 0.0)), seconds(std::max(lag_s, 0.0))};
    const auto m = static_cast<std::size_t>(c);
    const Drift d = drift(r, m, rank.upto[o]);
    const double mean = d.spread > 0 ? clipped(model_.sigma() * std::sqrt(d.spread), lag_s).mean : std::max(lag_s, 0.0);
    return {seconds(mean), seconds(last_above(d, rank.size[m], lag_s))};
  }

  // The real ranks the simulated one stands for end as far apart as the widest drift of its
  // communicators (those of a whole stage differ at least by that), and the step waits for
  // the last of them.
  Time finish(std::size_t r) override {
    const RankComms& rank = model_.ranks()[r];
    if (rank.multiplicity <= 1) return Time::zero();
    const auto end = static_cast<OpIndex>(rank.of_op.size());
    // With no communicator, drifting from the step's start.
    Drift widest{rank.sums->d2.back(), rank.sums->d2.back(), rank.sums->d4.back()};
    if (!rank.groups.empty()) widest = {};
    for (std::size_t c = 0; c < rank.groups.size(); ++c) {
      const Drift d = drift(r, c, end);
      if (d.lead > widest.lead) widest = d;
    }
    return seconds(last_above(widest, rank.multiplicity, -kInfinity));
  }

  void held_back(std::size_t r, OpIndex o, OpIndex collective, Time slack) override {
    const RankComms& rank = model_.ranks()[r];
    const std::int32_t met = rank.of_op[collective];
    if (met < 0) return;
    const auto m = static_cast<std::size_t>(met);
    const Drift was = drift(r, m, o);
    if (was.spread <= 0 || was.lead <= 0) return;
    const double sd = model_.sigma() * std::sqrt(was.spread);
    const double slack_s = slack.seconds();
    if (slack_s < -kFarTail * sd) return;  // ended long before the members were ready
    const int n = rank.size[m];
    const Clipped after = clipped(sd, slack_s);
    const double spread_kept = after.variance / (sd * sd);
    // The last member now leads the members' new mean by E[max(M, slack)] less that mean.
    const double lead = std::max(0.0, last_above(was, n, slack_s) - after.mean);
    const double lead_before = last_above(was, n, -kInfinity);
    const double lead_kept = std::min(1.0, (lead / lead_before) * (lead / lead_before));
    const double kappa = maxima_.variance_of(n, ExpectedMaxima::equal_kernels(was.lead, was.d4));
    for (std::size_t c = 0; c < rank.groups.size(); ++c) {
      const Drift d = drift(r, c, o);
      SyncPoint p{o, 0, 0, 0};
      if (rank.inside[m][c]) {
        p.spread = spread_kept * d.spread;
        p.lead = lead_kept * d.lead;
      } else {
        const double gone = (1 - kappa) * (1 - spread_kept);
        p.spread = d.spread - gone * std::min(d.spread, was.spread);
        p.lead = d.lead - gone * std::min(d.lead, was.lead);
      }
      // The same kernels, fewer of their draws: the sum keeps its shape (kurtosis).
      p.d4 = d.lead > 0 ? d.d4 * (p.lead / d.lead) * (p.lead / d.lead) : 0;
      std::vector<SyncPoint>& points = points_[r][c];
      const auto at = std::ranges::lower_bound(points, o, {}, &SyncPoint::at);
      if (at != points.end() && at->at == o) {
        *at = p;
      } else {
        points.insert(at, p);
      }
    }
  }

 private:
  static constexpr double kInfinity = std::numeric_limits<double>::infinity();

  static Time seconds(double s) { return Time::from_ps(std::llround(s * 1e12)); }

  // Communicator c's drift of rank r from the ops before `upto`.
  Drift drift(std::size_t r, std::size_t c, OpIndex upto) const {
    if (upto == 0) return {};
    const RankComms& rank = model_.ranks()[r];
    const std::vector<SyncPoint>& points = points_[r][c];
    const SyncPoint& p = *std::prev(std::ranges::lower_bound(points, upto, {}, &SyncPoint::at));
    const KernelSums& sums = *rank.sums;
    const double kernels = sums.d2[upto] - sums.d2[p.at];
    return {p.spread + kernels, p.lead + kernels, p.d4 + sums.d4[upto] - sums.d4[p.at]};
  }

  // E[max(M, level)] in seconds from the mean member, M the last of n members drifting as `d`
  // says: the scenario's distribution's expected maximum, raised where `level` (seconds) cuts
  // into it as a normal one's would be.
  double last_above(const Drift& d, int n, double level) {
    if (d.lead <= 0 || n <= 1) return std::max(level, 0.0);
    const double sd = model_.sigma() * std::sqrt(d.lead);
    return sd * (maxima_.of(n, ExpectedMaxima::equal_kernels(d.lead, d.d4)) + raised_by_.of(level / sd, n));
  }

  const JitterArrivals& model_;
  ExpectedMaxima maxima_;
  RaisedByLevel raised_by_;
  std::vector<std::vector<std::vector<SyncPoint>>> points_;  // per rank, per communicator, by op
};

std::unique_ptr<engine::ArrivalModel::Run> JitterArrivals::start() const { return std::make_unique<ArrivalRun>(*this); }

}  // namespace

std::shared_ptr<const engine::ArrivalModel> jitter_arrivals(const engine::Program& program,
                                                            const std::vector<RankGroup>& members, JitterKind kind,
                                                            double sigma) {
  STEPSIM_CHECK(members.size() == program.groups.size(), "the real members of each group are needed");
  std::map<const engine::OpList*, std::shared_ptr<const KernelSums>> sums;
  std::vector<RankComms> ranks;
  for (const engine::RankProgram& rank : program.ranks) {
    RankComms comms;
    auto& s = sums[rank.list.get()];
    if (!s) s = std::make_shared<const KernelSums>(kernel_sums(*rank.list));
    comms.sums = s;
    comms.multiplicity = rank.multiplicity;
    comms.of_op.assign(rank.ops().size(), -1);
    comms.upto.assign(rank.ops().size(), 0);
    for (OpIndex o = 0; o < rank.ops().size(); ++o) {
      const engine::Op& op = rank.ops()[o];
      if (op.kind != engine::OpKind::collective) continue;
      const std::int32_t g = rank.calls[static_cast<std::size_t>(op.call)].group;
      const int size = program.groups[static_cast<std::size_t>(g)].size;
      if (size <= 1) continue;
      auto it = std::ranges::find(comms.groups, g);
      if (it == comms.groups.end()) {
        comms.groups.push_back(g);
        comms.size.push_back(size);
        it = std::prev(comms.groups.end());
      }
      comms.of_op[o] = static_cast<std::int32_t>(it - comms.groups.begin());
      std::optional<OpIndex> data;
      for (const OpIndex w : rank.waits_of(o))
        if (rank.ops()[w].kind == engine::OpKind::compute) data = std::max(data.value_or(w), w);
      comms.upto[o] = data ? *data + 1 : o;
    }
    const std::size_t n = comms.groups.size();
    comms.inside.assign(n, std::vector<bool>(n, false));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j)
        comms.inside[i][j] = inside(members[static_cast<std::size_t>(comms.groups[j])],
                                    members[static_cast<std::size_t>(comms.groups[i])]);
    ranks.push_back(std::move(comms));
  }
  return std::make_shared<const JitterArrivals>(std::move(ranks), kind, sigma);
}

}  // namespace stepsim::parallelism
