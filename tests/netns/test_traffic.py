"""Traffic through two phalanxd gateways: hostA -> hostB and back, IPv4 and
IPv6 inner packets, every algorithm with ESP in UDP, and plain ESP (raw
socket, IP protocol 50) for AES-GCM and AES-CBC + HMAC."""

import os
import time

import pytest

import phxnet

UDP_ALGS = ["aes128gcm16", "aes256gcm16", "chacha20poly1305", "aes128-sha256", "aes256-sha512",
            "null-sha256", "aes128gmac"]
PLAIN_ESP_ALGS = ["aes128gcm16", "aes128-sha256"]


def start_pair(topo, alg, encap, seed="traffic"):
    sas = phxnet.gateway_configs(alg, encap, topo.run_dir, seed=seed + alg)
    gws = [topo.start_gateway(side, os.path.join(topo.run_dir, "gw{}.toml".format(side))) for side in "AB"]
    return sas, gws


def policy_hits(gw):
    """{policy name: hits} from `phalanxctl --json policies`."""
    policies = gw.ctl("policies")
    assert all(p.get("hits") is not None for p in policies), "gw{} counts no hits: {}".format(gw.side, policies)
    return {p["name"]: p["hits"] for p in policies}


def check_both_ways(topo, gws):
    assert topo.wait_ping("hostA", phxnet.HOSTB_V4, 10), "first IPv4 ping hostA -> hostB not answered"
    hits_before = {g.side: policy_hits(g) for g in gws}
    for src, dst in (("hostA", phxnet.HOSTB_V4), ("hostA", phxnet.HOSTB_V6),
                     ("hostB", phxnet.HOSTA_V4), ("hostB", phxnet.HOSTA_V6)):
        assert topo.ping(src, dst, count=5), "ping {} -> {} lost packets".format(src, dst)
    # A UDP datagram with a known payload, each way, IPv4 and IPv6.
    for src, dst, bind in (("hostA", phxnet.HOSTB_V4, "0.0.0.0"), ("hostB", phxnet.HOSTA_V6, "::")):
        rx = "hostB" if src == "hostA" else "hostA"
        payload = "phalanx-{}-to-{}".format(src, rx)
        got = udp_exchange(topo, src, rx, dst, bind, payload)
        assert got == payload, "UDP {} -> {}: got {!r}".format(src, rx, got)
    for g in gws:
        assert g.alive(), "phalanxd on gw{} exited".format(g.side)
        sas = g.sas()
        for name, sa in sas.items():
            assert sa["packets"] >= 10, "SA {} on gw{} counted {} packets".format(name, g.side, sa["packets"])
    # Each gateway's policies decided its 5 echo requests and 5 replies per
    # family: the hit counters grew by at least that (workers publish
    # every 100 ms, so allow them a moment).
    time.sleep(0.3)
    for g in gws:
        after = policy_hits(g)
        for name in ("to-remote-v4", "to-remote-v6"):
            grown = after[name] - hits_before[g.side][name]
            assert grown >= 10, "policy {} on gw{}: hits grew by {} ({} -> {})".format(
                name, g.side, grown, hits_before[g.side][name], after[name])
        # Worker load: both views present, in range, and the average is
        # not zero after this traffic.
        workers = g.ctl("counters")["workers"]
        assert workers, "no worker loads on gw{}".format(g.side)
        for w in workers:
            assert 0.0 <= w["busy_1s"] <= 1.0 and 0.0 <= w["busy_avg"] <= 1.0, w
            assert w["busy_seconds"] >= 0.0, w
        assert any(w["busy_avg"] > 0.0 for w in workers), workers


RECV = r"""
import socket, sys
fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9999))
s.settimeout(8)
print(s.recv(2000).decode(), flush=True)
"""

SEND = r"""
import socket, sys, time
fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
for _ in range(3):
    s.sendto(sys.argv[2].encode(), (sys.argv[1], 9999))
    time.sleep(0.2)
"""


def udp_exchange(topo, src, rx, dst, bind, payload):
    """Sends `payload` from `src` to dst:9999, returns what `rx` received."""
    receiver = topo.popen("udp-recv-" + rx, rx, ["/usr/bin/python3", "-c", RECV, bind])
    # Wait until the receiver's socket is bound.
    for _ in range(50):
        ss = topo.run(rx, ["ss", "-lun"], check=False).stdout
        if ":9999 " in ss:
            break
        time.sleep(0.1)
    topo.run(src, ["/usr/bin/python3", "-c", SEND, dst, payload], timeout=10)
    receiver.wait(timeout=12)
    return topo.log_of("udp-recv-" + rx).strip()


@pytest.mark.parametrize("alg", UDP_ALGS)
def test_udp_encap(topo, alg):
    _, gws = start_pair(topo, alg, "udp")
    check_both_ways(topo, gws)
    for g in gws:
        for sa in g.sas().values():
            assert sa["encap"] == phxnet.NATT_PORT, sa


@pytest.mark.parametrize("alg", PLAIN_ESP_ALGS)
def test_plain_esp(topo, alg):
    _, gws = start_pair(topo, alg, "none")
    check_both_ways(topo, gws)
    for g in gws:
        for sa in g.sas().values():
            assert sa["encap"] is None, sa


def test_traffic_stops_without_peer(topo):
    """Negative control: with gwB's phalanxd stopped nothing gets through,
    so the passing tests above really depend on both gateways."""
    _, gws = start_pair(topo, "aes128gcm16", "udp")
    assert topo.wait_ping("hostA", phxnet.HOSTB_V4, 10)
    topo.stop(gws[1].name)
    assert not topo.ping("hostA", phxnet.HOSTB_V4, count=2)
    assert gws[0].alive()
