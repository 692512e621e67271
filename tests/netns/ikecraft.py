#!/usr/bin/env python3
"""Hand-made IKEv2 datagrams for the robustness tests (RFC 7296 §3), and a
small CLI that runs inside a namespace to send them.

Building: `ike_sa_init` (a well-formed IKE_SA_INIT request offering
AES-GCM-16-128 / PRF-HMAC-SHA2-256 / Curve25519), `header`, `payload`,
`with_marker` (the four-zero-octet non-ESP marker of port 4500, RFC 3948
§2.2 / RFC 7296 §2.23). Parsing: `parse` (header + payload chain, notify
types), tolerant of anything (it never raises on bad input).

CLI (run with `ip netns exec NS /usr/bin/python3 ikecraft.py ...`):

    ikecraft.py flood DST COUNT RATE SRC_PREFIX16 IFACE OUT.json
        COUNT IKE_SA_INIT requests at RATE per second from spoofed sources
        SRC_PREFIX16.x.y (raw socket, IP_HDRINCL) to DST:500, each with its
        own SPI; sniffs IFACE (AF_PACKET) for the answers and writes counts
        by kind (cookie, sa, other notify) to OUT.json.
    ikecraft.py send DST PORT IN.json OUT.json
        sends each hex datagram of IN.json from an ephemeral UDP port to
        DST:PORT and collects what comes back within a second (hex).
"""

import json
import os
import socket
import struct
import sys
import threading
import time

# Payload types (RFC 7296 §3.2), exchange types (§3.1), notify types (§3.10.1).
SA, KE, NONCE, NOTIFY, SK = 33, 34, 40, 41, 46
IKE_SA_INIT, IKE_AUTH = 34, 35
UNSUPPORTED_CRITICAL_PAYLOAD, INVALID_IKE_SPI, INVALID_MAJOR_VERSION = 1, 4, 5
INVALID_SYNTAX, NO_PROPOSAL_CHOSEN, INVALID_KE_PAYLOAD, COOKIE = 7, 14, 17, 16390
FLAG_INITIATOR, FLAG_RESPONSE = 0x08, 0x20
NON_ESP_MARKER = b"\0\0\0\0"


def header(spi_i, spi_r, next_payload, exchange, flags, msg_id, length, version=0x20):
    """The 28-octet IKE header (RFC 7296 §3.1)."""
    return struct.pack("!8s8sBBBBII", spi_i, spi_r, next_payload, version, exchange, flags, msg_id, length)


def payload(next_payload, body, critical=False):
    """A generic payload header + body (RFC 7296 §3.2)."""
    return struct.pack("!BBH", next_payload, 0x80 if critical else 0, 4 + len(body)) + body


def _transform(last, ttype, tid, attrs=b""):
    body = struct.pack("!BxH", ttype, tid) + attrs
    return struct.pack("!BxH", 0 if last else 3, 4 + len(body)) + body


def sa_body():
    """One IKE proposal: ENCR_AES_GCM_16 (20) with 128-bit keys,
    PRF_HMAC_SHA2_256 (5), Curve25519 (31) (RFC 7296 §3.3)."""
    transforms = (_transform(False, 1, 20, struct.pack("!HH", 0x800E, 128)) + _transform(False, 2, 5)
                  + _transform(True, 4, 31))
    prop = struct.pack("!BBBB", 1, 1, 0, 3) + transforms
    return struct.pack("!BxH", 0, 4 + len(prop)) + prop


def ike_sa_init(spi_i, ke=None, nonce=None, extra=None, version=0x20, cookie=None):
    """An IKE_SA_INIT request. extra: (payload type, body, critical)
    appended after the nonce (e.g. an unknown critical payload)."""
    ke = ke if ke is not None else os.urandom(32)
    nonce = nonce if nonce is not None else os.urandom(32)
    chain = []
    if cookie is not None:
        chain.append((NOTIFY, struct.pack("!BBH", 0, 0, COOKIE) + cookie, False))
    chain += [(SA, sa_body(), False), (KE, struct.pack("!HH", 31, 0) + ke, False), (NONCE, nonce, False)]
    if extra:
        chain.append(extra)
    body = b""
    for i, (_, data, critical) in enumerate(chain):
        nxt = chain[i + 1][0] if i + 1 < len(chain) else 0
        body += payload(nxt, data, critical)
    return header(spi_i, b"\0" * 8, chain[0][0], IKE_SA_INIT, FLAG_INITIATOR, 0, 28 + len(body), version) + body


def encrypted_request(spi_i, spi_r, exchange, msg_id, initiator=True, sk_len=80):
    """A request with an SK payload of random octets (it cannot verify)."""
    sk = payload(0, os.urandom(sk_len))
    flags = FLAG_INITIATOR if initiator else 0
    return header(spi_i, spi_r, SK, exchange, flags, msg_id, 28 + len(sk)) + sk


def with_marker(msg):
    return NON_ESP_MARKER + msg


def parse(data):
    """dict(spi_i, spi_r, exchange, flags, msg_id, length, payloads=[types],
    notifies=[types]) or None when `data` is not even an IKE header."""
    if len(data) < 28:
        return None
    spi_i, spi_r, nxt, version, exchange, flags, msg_id, length = struct.unpack("!8s8sBBBBII", data[:28])
    out = {"spi_i": spi_i.hex(), "spi_r": spi_r.hex(), "exchange": exchange, "flags": flags, "msg_id": msg_id,
           "version": version, "length": length, "payloads": [], "notifies": []}
    pos = 28
    while nxt and pos + 4 <= len(data):
        ptype = nxt
        nxt, _, plen = struct.unpack("!BBH", data[pos:pos + 4])
        if plen < 4:
            break
        out["payloads"].append(ptype)
        if ptype == NOTIFY and plen >= 8:
            out["notifies"].append(struct.unpack("!H", data[pos + 6:pos + 8])[0])
        pos += plen
    return out


# ------------------------------------------------------------------ flood
def _ipv4_udp(src, dst, sport, dport, body):
    """IPv4 + UDP header (UDP checksum 0: none, RFC 768; the kernel fills
    the IP checksum and ID of an IP_HDRINCL raw socket)."""
    udp = struct.pack("!HHHH", sport, dport, 8 + len(body), 0) + body
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    return ip + udp


class Sniffer(threading.Thread):
    """Counts IKE responses from dst:500 on `iface` by kind."""

    def __init__(self, iface, dst):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
        self.sock.bind((iface, 0))
        self.sock.settimeout(0.2)
        self.dst = socket.inet_aton(dst)
        self.counts = {"cookie": 0, "sa": 0, "other": 0}
        self.notifies = {}
        self.spis = set()
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                pkt = self.sock.recv(4096)
            except socket.timeout:
                continue
            if len(pkt) < 28 or pkt[9] != 17 or pkt[12:16] != self.dst:
                continue
            ihl = (pkt[0] & 0xF) * 4
            sport = struct.unpack("!H", pkt[ihl:ihl + 2])[0]
            if sport != 500:
                continue
            msg = parse(pkt[ihl + 8:])
            if not msg or not msg["flags"] & FLAG_RESPONSE or msg["exchange"] != IKE_SA_INIT:
                continue
            self.spis.add(msg["spi_i"])
            if COOKIE in msg["notifies"]:
                self.counts["cookie"] += 1
            elif SA in msg["payloads"]:
                self.counts["sa"] += 1
            else:
                self.counts["other"] += 1
                for n in msg["notifies"]:
                    self.notifies[n] = self.notifies.get(n, 0) + 1


def flood(dst, count, rate, prefix16, iface, out_path):
    sniffer = Sniffer(iface, dst)
    sniffer.start()
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    ke, nonce = os.urandom(32), os.urandom(32)
    start = time.monotonic()
    for i in range(count):
        due = start + i / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        n = i + 1
        src = "{}.{}.{}".format(prefix16, (n >> 8) & 0xFF, n & 0xFF)
        spi = struct.pack("!II", 0x0F100D00, n)
        raw.sendto(_ipv4_udp(src, dst, 500, 500, ike_sa_init(spi, ke=ke, nonce=nonce)), (dst, 0))
    sent_s = time.monotonic() - start
    time.sleep(2.0)
    sniffer.done.set()
    sniffer.join(2)
    result = dict(sniffer.counts, sent=count, seconds=round(sent_s, 2), answered=len(sniffer.spis),
                  other_notifies=sniffer.notifies)
    with open(out_path, "w") as f:
        json.dump(result, f)


def send(dst, port, in_path, out_path):
    with open(in_path) as f:
        datagrams = [bytes.fromhex(h) for h in json.load(f)]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 0))
    s.settimeout(0.2)
    answers = []
    for d in datagrams:
        s.sendto(d, (dst, port))
        got = []
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                got.append(s.recv(4096).hex())
            except socket.timeout:
                pass
        answers.append(got)
    with open(out_path, "w") as f:
        json.dump(answers, f)


def main(argv):
    if len(argv) >= 2 and argv[1] == "flood" and len(argv) == 8:
        flood(argv[2], int(argv[3]), float(argv[4]), argv[5], argv[6], argv[7])
        return 0
    if len(argv) >= 2 and argv[1] == "send" and len(argv) == 6:
        send(argv[2], int(argv[3]), argv[4], argv[5])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
