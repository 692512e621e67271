"""ECN and DSCP across the tunnel: RFC 6040 normal mode and RFC 4301
§5.1.2.1, through real sockets.

    hostA --- gwA ==== wan0 (capture) ==== wan0 [nft: ip ecn set ce] gwB --- hostB
    sender:                                                                receiver:
    IP_TOS / IPV6_TCLASS                                      IP_RECVTOS / IPV6_RECVTCLASS

* Encapsulation: hostA sends UDP datagrams (IPv4 and IPv6 inner) with
  ECT(0), ECT(1), Not-ECT, DSCP EF and EF + ECT(0). In a capture of gwA's
  WAN veth every ESP packet's outer TOS equals the TOS of the datagram it
  carries, in order (phalanx-esp copies it; phalanxd must hand it to the
  socket, which otherwise writes 0). hostB receives each datagram with its
  TOS unchanged.
* Decapsulation: nftables in gwB's namespace marks every packet arriving on
  the WAN CE, as a congested router would. hostB receives the ECN-capable
  datagrams with CE (DSCP kept); the Not-ECT ones are dropped and counted
  as `ecn_not_ect` (RFC 6040 §4.2: the congestion signal cannot be passed
  on). That needs gwB's phalanxd to read the outer TOS from its socket.

Both with ESP in UDP (RFC 3948) and plain ESP over the raw socket."""

import os
import time

import pytest

import phxnet
from test_traffic import start_pair

PORT = 9999
ECT0, ECT1, CE, EF = 0x02, 0x01, 0x03, 0xB8

# Prints "PAYLOAD TOS" for every datagram (IPv4 or IPv6) until idle.
RECV = r"""
import select, socket, struct, sys
s4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s4.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
s4.bind(("0.0.0.0", 9999))
s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
s6.bind(("::", 9999))
print("ready", flush=True)
while True:
    ready, _, _ = select.select([s4, s6], [], [], float(sys.argv[1]))
    if not ready:
        break
    for s in ready:
        data, anc, _, _ = s.recvmsg(2000, 256)
        tos = -1
        for level, kind, value in anc:
            if (level, kind) == (socket.IPPROTO_IP, socket.IP_TOS):
                tos = value[0]
            elif (level, kind) == (socket.IPPROTO_IPV6, socket.IPV6_TCLASS):
                tos = struct.unpack("i", value[:4])[0]
        print(data.decode(), tos, flush=True)
"""

# argv: hostB v4, hostB v6, then "FAMILY:TOS:PAYLOAD" items, sent 0.1 s apart.
SEND = r"""
import socket, sys, time
for item in sys.argv[3:]:
    family, tos, payload = item.split(":", 2)
    if family == "4":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, int(tos))
        s.sendto(payload.encode(), (sys.argv[1], 9999))
    else:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, int(tos))
        s.sendto(payload.encode(), (sys.argv[2], 9999))
    s.close()
    time.sleep(0.1)
"""

TOS_SET = [ECT0, ECT1, 0, EF, EF | ECT0]


def datagrams(tag):
    """(family, tos, payload) for every TOS of TOS_SET, IPv4 then IPv6."""
    return [(fam, tos, "{}-v{}-tos{}".format(tag, fam, tos)) for fam in "46" for tos in TOS_SET]


def send_and_receive(topo, items):
    """Sends `items` from hostA; returns {payload: TOS} as hostB got them."""
    name = "ecn-recv-{}".format(items[0][2].split("-")[0])
    receiver = topo.popen(name, "hostB", ["/usr/bin/python3", "-c", RECV, "3"])
    deadline = time.monotonic() + 10
    while "ready" not in topo.log_of(name):
        assert time.monotonic() < deadline and receiver.poll() is None, topo.log_of(name)
        time.sleep(0.05)
    argv = [phxnet.HOSTB_V4, phxnet.HOSTB_V6] + ["{}:{}:{}".format(*item) for item in items]
    topo.run("hostA", ["/usr/bin/python3", "-c", SEND] + argv, timeout=30)
    receiver.wait(timeout=20)
    got = {}
    for line in topo.log_of(name).splitlines()[1:]:
        payload, tos = line.rsplit(" ", 1)
        got[payload] = int(tos)
    return got


def outer_tos(pcap):
    """The outer TOS of every ESP packet gwA sent to gwB, in capture order."""
    from scapy.all import IP, UDP, raw, rdpcap

    out = []
    for frame in rdpcap(pcap):
        if IP not in frame or (frame[IP].src, frame[IP].dst) != (phxnet.GWA_WAN_V4, phxnet.GWB_WAN_V4):
            continue
        ip = frame[IP]
        if UDP in ip and ip[UDP].dport == phxnet.NATT_PORT:
            payload = raw(ip[UDP].payload)
            if len(payload) < 8 or payload[:4] == b"\0\0\0\0":
                continue  # NAT-keepalive or IKE
        elif ip.proto != 50:
            continue
        out.append(ip.tos)
    return out


def started(topo, encap):
    sas, gws = start_pair(topo, "aes128gcm16", encap, seed="ecn")
    assert topo.wait_ping("hostA", phxnet.HOSTB_V4, 10), "no traffic through the tunnel"
    assert topo.wait_ping("hostA", phxnet.HOSTB_V6, 10), "no IPv6 traffic through the tunnel"
    return sas, gws


@pytest.mark.parametrize("encap", ["udp", "none"])
def test_outer_header_carries_inner_dscp_and_ecn(topo, encap):
    _, gws = started(topo, encap)
    items = datagrams("enc")
    pcap = os.path.join(topo.run_dir, "wan-ecn.pcapng")
    with phxnet.Capture(topo, "gwA", "wan0", pcap):
        got = send_and_receive(topo, items)
    outer = outer_tos(pcap)
    assert outer == [tos for _, tos, _ in items], (
        "outer TOS on gwA's WAN {} != inner TOS {}".format(outer, [tos for _, tos, _ in items]))
    for _, tos, payload in items:
        assert got.get(payload) == tos, "{}: hostB got TOS {} (all: {})".format(payload, got.get(payload), got)
    for g in gws:
        assert g.alive()


@pytest.mark.parametrize("encap", ["udp", "none"])
def test_ce_on_the_wan_reaches_the_inner_packet(topo, encap):
    _, (gwa, gwb) = started(topo, encap)
    # A congested router on the WAN: every arriving IPv4 packet marked CE.
    topo.run("gwB", ["nft", "add", "table", "ip", "phx_ecn"])
    topo.run("gwB", ["nft", "add", "chain", "ip", "phx_ecn", "pre",
                     "{ type filter hook prerouting priority mangle ; }"])
    topo.run("gwB", ["nft", "add", "rule", "ip", "phx_ecn", "pre", "iifname", "wan0",
                     "counter", "ip", "ecn", "set", "ce"])
    base = gwb.counters()
    items = datagrams("ce")
    got = send_and_receive(topo, items)
    deltas = {k: v - base.get(k, 0) for k, v in gwb.counters().items()}
    for _, tos, payload in items:
        if tos & CE:
            # RFC 6040 §4.2: ECT(0)/ECT(1) under a CE outer become CE; DSCP stays.
            assert got.get(payload) == tos | CE, "{}: hostB got TOS {} (all: {})".format(
                payload, got.get(payload), got)
        else:
            assert payload not in got, "{}: Not-ECT under CE was delivered".format(payload)
    not_ect = sum(1 for _, tos, _ in items if not tos & CE)
    assert deltas.get("ecn_not_ect") == not_ect, "ecn_not_ect delta {} (want {}); deltas {}".format(
        deltas.get("ecn_not_ect"), not_ect, {k: v for k, v in deltas.items() if v})
    rule = topo.run("gwB", ["nft", "list", "chain", "ip", "phx_ecn", "pre"]).stdout
    assert "packets 0 " not in rule, "the CE rule marked nothing: " + rule
    assert gwa.alive() and gwb.alive()
