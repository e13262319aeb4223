#include "rules.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>
#include <tuple>

#include "poise/rendezvous.h"

namespace poise_sim {
namespace {

// The lesson's ring size and virtual points per subject.
constexpr uint32_t kRingSize = 1u << 20;
constexpr uint32_t kVirtualPoints = 128;
// The lesson spreads a subject's virtual points at ring_hash(no * 7919 + k).
constexpr uint64_t kVirtualStride = 7919;

Distribution Empty(const std::vector<Subject>& subjects, uint64_t load,
                   bool maps_keys) {
  Distribution d;
  d.share.assign(subjects.size(), 0);
  if (maps_keys) d.owner.reserve(load);
  return d;
}

void Place(Distribution& d, const std::vector<Subject>& subjects,
           size_t index) {
  ++d.share[index];
  d.owner.push_back(subjects[index].no);
}

// True when subject a is strictly less loaded than subject b relative to
// capacity: share_a / cap_a < share_b / cap_b, by cross-multiplication so the
// comparison is exact. The lesson compares Python floats instead; the two
// agree here because distinct fractions p/q, r/s with q, s <= 100 differ by at
// least 1/(q*s), far more than a double's rounding error at these magnitudes,
// and equal fractions round to the same double.
bool LessLoaded(uint64_t share_a, uint32_t cap_a, uint64_t share_b,
                uint32_t cap_b) {
  return static_cast<unsigned __int128>(share_a) * cap_b <
         static_cast<unsigned __int128>(share_b) * cap_a;
}

// The lesson's `min(subs, key=(share/capacity, no))`.
size_t LeastLoaded(const std::vector<Subject>& subjects,
                   const std::vector<uint64_t>& share) {
  size_t best = 0;
  for (size_t i = 1; i < subjects.size(); ++i) {
    const Subject& s = subjects[i];
    const Subject& b = subjects[best];
    const bool less = LessLoaded(share[i], s.capacity, share[best], b.capacity);
    // Equal ratios: the lower-numbered subject wins (TM11).
    const bool tie_won =
        !less && !LessLoaded(share[best], b.capacity, share[i], s.capacity) &&
        s.no < b.no;
    if (less || tie_won) best = i;
  }
  return best;
}

// One virtual point of the lesson's ring.
struct RingPoint {
  uint32_t point;
  uint32_t no;   // the subject's number: Python sorts (point, no) tuples
  size_t index;  // the subject's position in the list, for its share
};

class Ring final {
 public:
  explicit Ring(const std::vector<Subject>& subjects) {
    points_.reserve(subjects.size() * kVirtualPoints);
    for (size_t i = 0; i < subjects.size(); ++i) {
      for (uint32_t k = 0; k < kVirtualPoints; ++k) {
        const uint64_t x = uint64_t{subjects[i].no} * kVirtualStride + k;
        points_.push_back({RingHash(x), subjects[i].no, i});
      }
    }
    std::sort(points_.begin(), points_.end(),
              [](const RingPoint& a, const RingPoint& b) {
                return std::tie(a.point, a.no) < std::tie(b.point, b.no);
              });
  }

  size_t size() const { return points_.size(); }
  const RingPoint& at(size_t position) const {
    return points_[position % points_.size()];
  }

  // `bisect.bisect_left(points, ring_hash(job)) % len(ring)`: the first point
  // at or after the job's hash, wrapping past the top of the ring.
  size_t Locate(uint64_t job) const {
    const uint32_t h = RingHash(job);
    const auto it = std::lower_bound(
        points_.begin(), points_.end(), h,
        [](const RingPoint& p, uint32_t value) { return p.point < value; });
    return static_cast<size_t>(it - points_.begin()) % points_.size();
  }

 private:
  std::vector<RingPoint> points_;
};

// The candidate list poise::core sees. Candidates borrow their identities, so
// the strings live here and the object is neither copied nor moved.
class CandidateList final {
 public:
  explicit CandidateList(const std::vector<Subject>& subjects) {
    identities_.reserve(subjects.size());
    for (const Subject& s : subjects) identities_.push_back(s.Identity());
    candidates_.reserve(subjects.size());
    for (size_t i = 0; i < subjects.size(); ++i) {
      candidates_.push_back({identities_[i], subjects[i].capacity, true});
    }
  }
  CandidateList(const CandidateList&) = delete;
  CandidateList& operator=(const CandidateList&) = delete;

  const std::vector<poise::Candidate>& candidates() const {
    return candidates_;
  }

 private:
  std::vector<std::string> identities_;
  std::vector<poise::Candidate> candidates_;
};

// The core never throws; for the simulator a failed pick is a bug in the
// input (e.g. no subjects), so it ends the run with the core's reason.
template <typename T>
const T& ValueOrThrow(const poise::Result<T>& result) {
  if (!result.ok()) {
    throw std::runtime_error(std::string("poise::core refused a decision: ") +
                             poise::ToString(result.error()));
  }
  return result.value();
}

// ceil(factor * (placed + 1) / (100 * n)) in integers: brpc's per-server cap
// with the average taken over all n subjects.
uint64_t RingCap(uint32_t factor_percent, uint64_t placed, size_t n) {
  const uint64_t numerator = uint64_t{factor_percent} * (placed + 1);
  const uint64_t denominator = 100 * uint64_t{n};
  return (numerator + denominator - 1) / denominator;
}

}  // namespace

uint32_t RingHash(uint64_t x) {
  // Python masks every product to 32 bits; unsigned 64-bit wraparound keeps
  // the low 32 bits identical, so masking afterwards gives the same value.
  x = (x * 2654435761u) & 0xFFFFFFFFu;
  x ^= x >> 16;
  x = (x * 2246822507u) & 0xFFFFFFFFu;
  x ^= x >> 13;
  return static_cast<uint32_t>(x % kRingSize);
}

Distribution RoundRobin(const std::vector<Subject>& subjects, uint64_t load) {
  Distribution d = Empty(subjects, load, true);
  for (uint64_t i = 0; i < load; ++i) {
    Place(d, subjects, static_cast<size_t>(i % subjects.size()));
  }
  return d;
}

Distribution Proportional(const std::vector<Subject>& subjects, uint64_t load) {
  // Shares are floored and the remainder is never placed (TM10): that
  // remainder is the "undistributed" column.
  Distribution d = Empty(subjects, load, false);
  const uint64_t total = TotalCapacity(subjects);
  for (size_t i = 0; i < subjects.size(); ++i) {
    d.share[i] = load * subjects[i].capacity / total;
  }
  return d;
}

Distribution LeastConnections(const std::vector<Subject>& subjects,
                              uint64_t load) {
  Distribution d = Empty(subjects, load, true);
  for (uint64_t a = 1; a <= load; ++a) {
    Place(d, subjects, LeastLoaded(subjects, d.share));
  }
  return d;
}

Distribution ConsistentHashing(const std::vector<Subject>& subjects,
                               uint64_t load) {
  Distribution d = Empty(subjects, load, true);
  const Ring ring(subjects);
  for (uint64_t a = 1; a <= load; ++a) {
    Place(d, subjects, ring.at(ring.Locate(a)).index);
  }
  return d;
}

Distribution WeightedRendezvousRule(const std::vector<Subject>& subjects,
                                    uint64_t load) {
  Distribution d = Empty(subjects, load, true);
  const CandidateList list(subjects);
  for (uint64_t a = 1; a <= load; ++a) {
    const std::string key = std::to_string(a);
    Place(
        d, subjects,
        ValueOrThrow(poise::WeightedRendezvous::Pick(key, list.candidates())));
  }
  return d;
}

Distribution BoundedRendezvousRule(const std::vector<Subject>& subjects,
                                   uint64_t load, uint32_t factor_percent) {
  const auto policy = poise::BoundedLoadRendezvous::Create(factor_percent);
  if (!policy) {
    throw std::invalid_argument("balance factor below 100: " +
                                std::to_string(factor_percent));
  }
  Distribution d = Empty(subjects, load, true);
  const CandidateList list(subjects);
  poise::DecisionScratch scratch;
  // The load the core samples is what has been placed so far: jobs never
  // finish in this simulation.
  const auto placed = [&d](size_t i) { return d.share[i]; };
  for (uint64_t a = 1; a <= load; ++a) {
    const std::string key = std::to_string(a);
    const poise::Decision decision =
        ValueOrThrow(policy->Decide(key, list.candidates(), placed, scratch));
    Place(d, subjects, decision.selection);
  }
  return d;
}

Distribution BoundedRing(const std::vector<Subject>& subjects, uint64_t load,
                         uint32_t factor_percent) {
  Distribution d = Empty(subjects, load, true);
  const Ring ring(subjects);
  for (uint64_t placed = 0; placed < load; ++placed) {
    const uint64_t cap = RingCap(factor_percent, placed, subjects.size());
    const size_t home = ring.Locate(placed + 1);
    // Every subject full cannot happen (n caps sum to at least
    // factor * (placed + 1) / 100 > placed), but brpc falls back to the
    // first-seen subject, and so does this.
    size_t chosen = ring.at(home).index;
    for (size_t step = 0; step < ring.size(); ++step) {
      const size_t index = ring.at(home + step).index;
      if (d.share[index] < cap) {
        chosen = index;
        break;
      }
    }
    Place(d, subjects, chosen);
  }
  return d;
}

std::vector<Rule> AllRules(const std::vector<uint32_t>& factors_percent) {
  std::vector<Rule> rules = {
      {"round-robin", RoundRobin, true},
      {"proportional", Proportional, false},
      {"least-connections", LeastConnections, true},
      {"consistent-hashing", ConsistentHashing, true},
      {"weighted-rendezvous", WeightedRendezvousRule, true},
  };
  for (uint32_t f : factors_percent) {
    rules.push_back({"bounded-rendezvous-" + std::to_string(f),
                     [f](const std::vector<Subject>& s, uint64_t load) {
                       return BoundedRendezvousRule(s, load, f);
                     },
                     true});
  }
  rules.push_back({"brpc-bounded-ring-" + std::to_string(kBrpcFactorPercent),
                   [](const std::vector<Subject>& s, uint64_t load) {
                     return BoundedRing(s, load, kBrpcFactorPercent);
                   },
                   true});
  return rules;
}

uint64_t MovedKeys(const Distribution& before, const Distribution& after) {
  uint64_t moved = 0;
  const size_t n = std::min(before.owner.size(), after.owner.size());
  for (size_t i = 0; i < n; ++i) moved += before.owner[i] != after.owner[i];
  return moved;
}

}  // namespace poise_sim
