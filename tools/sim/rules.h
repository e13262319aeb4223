// The distribution rules the simulator compares.
//
// Every rule is a plain function from (subjects, load) to a Distribution: how
// many units each subject received and, for rules that route by job, which
// subject every job went to. Jobs are numbered 1..load, placed in order and
// never finish, so "load" on a subject is the number of units already placed
// on it.
#ifndef POISE_TOOLS_SIM_RULES_H_
#define POISE_TOOLS_SIM_RULES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "subjects.h"

namespace poise_sim {

struct Distribution {
  // share[i]: units placed on subjects[i] (same order as the subject list).
  std::vector<uint64_t> share;
  // owner[a - 1]: the number (Subject::no) of the subject that took job a.
  // Empty for rules without a key mapping (proportional). Subject numbers,
  // not list positions, so a rerun on a shorter list can be compared.
  std::vector<uint32_t> owner;
};

// The lesson's four rules, exactly as its Python program defines them.
Distribution RoundRobin(const std::vector<Subject>& subjects, uint64_t load);
Distribution Proportional(const std::vector<Subject>& subjects, uint64_t load);
Distribution LeastConnections(const std::vector<Subject>& subjects,
                              uint64_t load);
Distribution ConsistentHashing(const std::vector<Subject>& subjects,
                               uint64_t load);

// The project's rules, through poise::core: weight = capacity, identity =
// Subject::Identity(), key = the job number in decimal.
Distribution WeightedRendezvousRule(const std::vector<Subject>& subjects,
                                    uint64_t load);
Distribution BoundedRendezvousRule(const std::vector<Subject>& subjects,
                                   uint64_t load, uint32_t factor_percent);

// brpc's c_murmurhash_bl variant on the lesson's ring: every subject is
// capped at ceil(factor * (placed + 1) / (100 * n)) and a job whose ring
// subject is full walks clockwise to the next point whose subject has room.
Distribution BoundedRing(const std::vector<Subject>& subjects, uint64_t load,
                         uint32_t factor_percent);

// The lesson's ring hash (a 32-bit multiply-xorshift), reduced to [0, 2^20).
uint32_t RingHash(uint64_t x);

struct Rule {
  std::string name;
  std::function<Distribution(const std::vector<Subject>&, uint64_t)> run;
  // Whether the rule routes individual jobs (and so belongs in the "moved
  // when removed" table).
  bool maps_keys = true;
};

// The brpc variant's factor: brpc's default chash_bounded_load_factor, 1.25.
inline constexpr uint32_t kBrpcFactorPercent = 125;

// The lesson's four rules, weighted-rendezvous, one bounded-rendezvous-F per
// factor, then brpc-bounded-ring-125, in the order the tables print them.
std::vector<Rule> AllRules(const std::vector<uint32_t>& factors_percent);

// How many jobs changed subject between two runs at the same load.
uint64_t MovedKeys(const Distribution& before, const Distribution& after);

}  // namespace poise_sim

#endif  // POISE_TOOLS_SIM_RULES_H_
