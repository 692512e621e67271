"""AH (RFC 4302) in the daemon, checked on the wire against scapy's AH
(issue 17: phalanx-esp implemented AH, phalanxd refused it).

    hostA -- gwA ==== wan0 (IP protocol 51, tunnel mode, HMAC-SHA-256-128) ==== gwB -- hostB

Static AH SAs both ways (`protocol = "ah"`, `encryption = "null"`,
`integrity = "sha256"`, `encap = "none"`), IPv4 outer:
(a) pings of both inner families and a UDP datagram cross both ways; on
    the WAN every tunnel packet is IP protocol 51 with our SPIs, and scapy's
    SecurityAssociation(AH) with the configured key verifies every ICV and
    returns the inner packets (the pings, the datagram's payload);
(b) AH packets built by scapy (its own ICV over the outer header) and sent
    to gwA from gwB's side are accepted and delivered to hostA; the same
    packet with one inner byte changed is dropped and counted as
    `auth_failed`, on the SA too; without the tampering the same check
    finds nothing to count (the check can fail).

Run: PHX_SKIP_BUILD=1 python3 -m pytest -s tests/netns/test_ah.py
"""

import os
import time

import phxnet
from test_traffic import udp_exchange

MARK = "phalanx-ah-check"
ALG = "null-sha256"


def start_ah_pair(topo):
    """The pair of phxnet's configurations with its SAs turned into AH."""
    sas = phxnet.gateway_configs(ALG, "none", topo.run_dir, seed="ah")
    for side in "AB":
        path = os.path.join(topo.run_dir, "gw{}.toml".format(side))
        with open(path) as f:
            text = f.read()
        assert text.count('encryption = "null"') == 2, text
        with open(path, "w") as f:
            f.write(text.replace('encryption = "null"', 'protocol = "ah"\nencryption = "null"'))
    gws = [topo.start_gateway(side, os.path.join(topo.run_dir, "gw{}.toml".format(side))) for side in "AB"]
    assert topo.wait_ping("hostA", phxnet.HOSTB_V4, 10), "no ping through the AH tunnel"
    return sas, gws


def ah_sa(sa):
    """scapy's SecurityAssociation for one of our AH SAs (tunnel mode)."""
    from scapy.layers.inet import IP
    from scapy.layers.ipsec import AH, SecurityAssociation
    return SecurityAssociation(AH, spi=sa["spi"], auth_algo="SHA2-256-128",
                               auth_key=bytes.fromhex(sa["integrity_key"]),
                               tunnel_header=IP(src=sa["src"], dst=sa["dst"]))


def test_ah_on_the_wire_verified_by_scapy(topo):
    """(a) of the module doc."""
    from scapy.all import AH, ICMP, IP, IPv6, UDP, Raw, rdpcap

    sas, gws = start_ah_pair(topo)
    pcap = os.path.join(topo.run_dir, "wan.pcapng")
    with phxnet.Capture(topo, "gwA", "wan0", pcap):
        assert topo.ping("hostA", phxnet.HOSTB_V4, count=3), "IPv4 ping"
        assert topo.ping("hostA", phxnet.HOSTB_V6, count=3), "IPv6 ping"
        assert topo.ping("hostB", phxnet.HOSTA_V4, count=3), "IPv4 ping back"
        assert udp_exchange(topo, "hostA", "hostB", phxnet.HOSTB_V4, "0.0.0.0", MARK) == MARK
    by_spi = {sa["spi"]: ah_sa(sa) for sa in sas}
    tunnel = [f[IP] for f in rdpcap(pcap) if IP in f and f[IP].src in (phxnet.GWA_WAN_V4, phxnet.GWB_WAN_V4)
              and f[IP].dst in (phxnet.GWA_WAN_V4, phxnet.GWB_WAN_V4)]
    assert tunnel, "nothing between the gateways on the WAN"
    assert all(p.proto == 51 for p in tunnel), "not AH: {}".format({p.proto for p in tunnel})
    inner = []
    for p in tunnel:
        assert AH in p and p[AH].spi in by_spi, p.summary()
        assert p.id != 0, "Identification 0 (the kernel would rewrite it)"
        nh = p[AH].nh
        payload = bytes(by_spi[p[AH].spi].decrypt(IP(bytes(p))))  # raises on a bad ICV
        assert nh in (4, 41), "next header {} in tunnel mode".format(nh)
        inner.append((p[AH].spi, IP(payload) if nh == 4 else IPv6(payload)))
    ab = [q for spi, q in inner if spi == sas[0]["spi"]]
    ba = [q for spi, q in inner if spi == sas[1]["spi"]]
    assert len([q for q in ab if IP in q and ICMP in q and q[ICMP].type == 8]) >= 3
    assert len([q for q in ab if IPv6 in q and q[IPv6].nh == 58]) >= 3
    assert len([q for q in ba if IP in q and ICMP in q and q[ICMP].type == 8]) >= 3
    udp = [q for q in ab if UDP in q and q[UDP].dport == 9999]
    assert udp and bytes(udp[0][Raw].load) == MARK.encode()
    sa_out = [s for s in gws[0].ctl("sas") if s["direction"] == "out"][0]
    assert sa_out["drops"] == 0, sa_out
    print("  {} AH packets on the WAN, every ICV verified by scapy".format(len(tunnel)))


# Sends the hex frames given on the command line from gwB's WAN port.
SEND = r"""
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("wan0", 0))
for frame in sys.argv[1:]:
    s.send(bytes.fromhex(frame))
"""


def _frames(topo, packets):
    """Ethernet frames from gwB's WAN port to gwA's, one per IP packet."""
    mac = {ns: topo.run(ns, ["cat", "/sys/class/net/wan0/address"]).stdout.strip() for ns in ("gwA", "gwB")}
    head = bytes.fromhex(mac["gwA"].replace(":", "") + mac["gwB"].replace(":", "")) + b"\x08\x00"
    return [(head + p).hex() for p in packets]


def test_scapy_ah_accepted_and_tampering_counted(topo):
    """(b) of the module doc."""
    from scapy.all import ICMP, IP, raw

    sas, gws = start_ah_pair(topo)
    gwa = gws[0]
    b_to_a = ah_sa(sas[1])
    b_to_a.seq_num = 1000  # ahead of what gwB sent: fresh numbers
    echo = IP(src=phxnet.HOSTB_V4, dst=phxnet.HOSTA_V4, ttl=63) / ICMP(type=0, id=0x4242, seq=7) / (b"scapy" * 4)
    good = raw(b_to_a.encrypt(echo))
    tampered = bytearray(raw(b_to_a.encrypt(echo)))
    tampered[-1] ^= 1
    again = raw(b_to_a.encrypt(echo))

    def send_and_count(packets):
        before = gwa.counters()
        with phxnet.Capture(topo, "hostA", "eth0", os.path.join(topo.run_dir, "lan.pcapng")) as cap:
            topo.run("gwB", ["/usr/bin/python3", "-c", SEND] + _frames(topo, packets))
            time.sleep(0.5)
        after = gwa.counters()
        return cap, {k: after.get(k, 0) - before.get(k, 0) for k in ("auth_failed",)}

    from scapy.all import rdpcap
    cap, d = send_and_count([good])
    got = [f for f in rdpcap(cap.path) if ICMP in f and f[ICMP].id == 0x4242]
    assert got and d["auth_failed"] == 0, (len(got), d)
    # The negative control passes through the same counting: nothing.
    _, d = send_and_count([again])
    assert d["auth_failed"] == 0, d
    cap, d = send_and_count([bytes(tampered)])
    assert d["auth_failed"] == 1, d
    in_sa = [s for s in gwa.ctl("sas") if s["direction"] == "in"][0]
    reasons = {r["name"]: r["count"] for r in in_sa["drop_reasons"]}
    assert reasons.get("auth_failed") == 1, in_sa
    print("  scapy's AH accepted; the tampered copy counted as auth_failed on the SA")
