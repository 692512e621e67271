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


def check_both_ways(topo, gws):
    assert topo.wait_ping("hostA", phxnet.HOSTB_V4, 10), "first IPv4 ping hostA -> hostB not answered"
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
