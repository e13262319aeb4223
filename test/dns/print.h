// Readable gtest output for poise::dns values (found by argument-dependent
// lookup, so these live in poise::dns).
#ifndef POISE_TEST_DNS_PRINT_H_
#define POISE_TEST_DNS_PRINT_H_

#include <ostream>

#include "src/dns/lookup.h"

namespace poise::dns {

inline void PrintTo(Outcome outcome, std::ostream* out) {
  *out << OutcomeName(outcome);
}

inline void PrintTo(const SrvRecord& record, std::ostream* out) {
  *out << "{" << record.target << ":" << record.port
       << " priority=" << record.priority << " weight=" << record.weight << "}";
}

inline void PrintTo(const Address& address, std::ostream* out) {
  *out << (address.family == IpFamily::kIpv4 ? "A " : "AAAA ") << address.ip;
}

}  // namespace poise::dns

#endif  // POISE_TEST_DNS_PRINT_H_
