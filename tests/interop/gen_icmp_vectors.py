#!/usr/bin/python3
"""Generates the scapy vectors for Phalanx's path-MTU messages.

    /usr/bin/python3 tests/interop/gen_icmp_vectors.py [--out FILE]

Writes crates/phalanx-wire/tests/vectors/icmp.txt (by default), one vector
per line, fields separated by spaces, bytes in hex:

    frag_needed_v4    MTU ORIGINAL EXPECTED          ICMP(type=3, code=4, nexthopmtu=MTU)
    packet_too_big_v6 MTU SRC DST ORIGINAL EXPECTED  ICMPv6PacketTooBig(mtu=MTU) in IPv6(src, dst)
    fragment_v4       MTU ORIGINAL FRAG,FRAG,...     scapy's fragment(), data per fragment (MTU-20)&~7

EXPECTED is the ICMP message alone (what Phalanx hands to a raw ICMP
socket): scapy builds it with its checksum; the quote is as much of
ORIGINAL as RFC 1812 §4.3.2.3 (IPv4: 548 octets) and RFC 4443 §3.2 (IPv6:
1232 octets) allow. The originals are fixed, so the file is deterministic;
test_icmp_vectors.py regenerates it and compares.
"""

import argparse
import os

from scapy.all import ICMP, IP, IPv6, UDP, TCP, Raw, raw, fragment
from scapy.layers.inet6 import ICMPv6PacketTooBig

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_OUT = os.path.join(REPO, "crates", "phalanx-wire", "tests", "vectors", "icmp.txt")

QUOTE_V4 = 576 - 20 - 8
QUOTE_V6 = 1280 - 40 - 8


def body(n):
    return bytes((i * 7 + 3) & 0xff for i in range(n))


def originals_v4():
    yield raw(IP(src="10.1.0.2", dst="10.2.0.2", id=0x4242, flags="DF", ttl=63, tos=0x28)
              / TCP(sport=40000, dport=5201, seq=1, flags="A") / Raw(body(1360)))
    yield raw(IP(src="10.1.0.2", dst="10.2.0.2", id=7, ttl=64) / UDP(sport=1, dport=2) / Raw(body(3)))
    yield raw(IP(src="192.168.7.9", dst="10.2.0.99", id=0xffff, flags="DF") / UDP(sport=5, dport=6) / Raw(body(1472)))


def originals_v6():
    yield raw(IPv6(src="fd01::2", dst="fd02::2", hlim=63, tc=0x28)
              / TCP(sport=40000, dport=5201, seq=1, flags="A") / Raw(body(1380)))
    yield raw(IPv6(src="fd01::2", dst="fd02::2") / UDP(sport=1, dport=2) / Raw(body(11)))


def fragmentable():
    yield raw(IP(src="10.1.0.2", dst="10.2.0.2", id=0x1234, ttl=63, tos=0x28) / UDP(sport=7, dport=9) / Raw(body(1372)))
    yield raw(IP(src="10.1.0.2", dst="10.2.0.2", id=1) / UDP(sport=7, dport=9) / Raw(body(2900)))


def lines():
    for mtu in (1218, 1000, 576):
        for orig in originals_v4():
            msg = raw(ICMP(type=3, code=4, nexthopmtu=mtu) / Raw(orig[:QUOTE_V4]))
            yield "frag_needed_v4 {} {} {}".format(mtu, orig.hex(), msg.hex())
    src, dst = "fd01::1", "fd01::2"
    for mtu in (1280, 1400):
        for orig in originals_v6():
            pkt = IPv6(src=src, dst=dst) / ICMPv6PacketTooBig(mtu=mtu) / Raw(orig[:QUOTE_V6])
            msg = raw(pkt)[40:]
            yield "packet_too_big_v6 {} {} {} {} {}".format(mtu, src, dst, orig.hex(), msg.hex())
    for mtu in (1218, 1000, 576):
        for orig in fragmentable():
            frags = fragment(IP(orig), fragsize=(mtu - 20) & ~7)
            yield "fragment_v4 {} {} {}".format(mtu, orig.hex(), ",".join(raw(f).hex() for f in frags))


def generate():
    return "".join(line + "\n" for line in lines())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    with open(args.out, "w") as f:
        f.write(generate())
    print("wrote", args.out)


if __name__ == "__main__":
    main()
