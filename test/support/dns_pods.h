// Backends named as a StatefulSet's pods behind a headless Service, for the
// DNS end-to-end tests: web-0.web.test, web-1.web.test, ... on their own
// loopback addresses, the zone that names them, and a poise-dns target.
//
//   std::vector<Pod> pods = StartPods(3);
//   DnsmasqServer dns;
//   ASSERT_TRUE(dns.Start(ZoneOf(pods, /*srv=*/true)));
//   Client client(DnsTarget(dns, pods), ...);
#ifndef POISE_TEST_SUPPORT_DNS_PODS_H_
#define POISE_TEST_SUPPORT_DNS_PODS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "test/support/dns_server.h"
#include "test/support/e2e_harness.h"

namespace poise::test_support {

struct Pod {
  std::string name;  // "web-0.web.test"
  std::unique_ptr<example::Backend> backend;
  std::string identity() const {
    return absl::StrCat(name, ":", backend->port());
  }
};

// Pods web-0.. on 127.0.0.<first_ip>, 127.0.0.<first_ip + 1>, ...
// `credentials`: the pods' server credentials (null: insecure).
inline std::vector<Pod> StartPods(
    int n, int first_ip = 2,
    const std::shared_ptr<grpc::ServerCredentials>& credentials = nullptr) {
  std::vector<Pod> pods;
  for (int i = 0; i < n; ++i) {
    Pod pod{
        absl::StrCat("web-", i, ".web.test"),
        std::make_unique<example::Backend>(absl::StrCat("web-", i), kHeader)};
    pod.backend->set_credentials(credentials);
    const absl::Status started =
        pod.backend->StartOn(absl::StrCat("127.0.0.", first_ip + i));
    EXPECT_TRUE(started.ok()) << started;
    pods.push_back(std::move(pod));
  }
  return pods;
}

// An A record per pod, and with `srv` an SRV record of _grpc._tcp.web.test
// per pod at its port.
inline DnsZone ZoneOf(const std::vector<Pod>& pods, bool srv) {
  DnsZone zone;
  for (const Pod& pod : pods) {
    zone.Host(pod.name, pod.backend->ip());
    if (srv) {
      zone.Srv("_grpc._tcp.web.test", pod.name,
               static_cast<uint16_t>(pod.backend->port()));
    }
  }
  return zone;
}

// poise-dns://<dns>/web-0.web.test:P0,web-1.web.test:P1,...
inline std::string DnsTarget(const DnsmasqServer& dns,
                             const std::vector<Pod>& pods) {
  std::string target = absl::StrCat("poise-dns://", dns.authority(), "/");
  for (size_t i = 0; i < pods.size(); ++i) {
    absl::StrAppend(&target, i == 0 ? "" : ",", pods[i].identity());
  }
  return target;
}

}  // namespace poise::test_support

#endif  // POISE_TEST_SUPPORT_DNS_PODS_H_
