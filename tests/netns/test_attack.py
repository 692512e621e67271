"""Crafted ESP-in-UDP packets sent at gwA from gwB's namespace (phalanxd runs
only on gwA). Good packets come from scapy's SecurityAssociation (an
implementation no one here wrote); the bad ones are derived from them or
sealed by hand with python3-cryptography / hmac so that exactly one thing is
wrong. Each good packet must come out on the clear side (a UDP receiver in
hostA), each bad one must be dropped and counted under its reason in
`phalanxctl --json counters`, and phalanxd must keep running."""

import hashlib
import hmac
import os
import struct
import time

import phxnet

ATTACK_SEED = "attack"
NULL_SPI = 0x3001
PORT = 9999

RECV = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 9999))
s.settimeout(float(sys.argv[1]))  # idle time after which it stops
try:
    while True:
        print(s.recv(2000).decode(errors="replace"), flush=True)
except socket.timeout:
    pass
"""

# Reads hex IPv4 packets, one per line, and sends each through a raw
# IPPROTO_RAW socket (the kernel sends the header as given), 0.3 s apart.
SEND = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for line in sys.stdin:
    pkt = bytes.fromhex(line.strip())
    dst = socket.inet_ntoa(pkt[16:20])
    s.sendto(pkt, (dst, 0))
    time.sleep(0.3)
"""


def null_sa_toml(key):
    """An extra inbound NULL + HMAC-SHA-256-128 SA (RFC 2410 + RFC 4868)."""
    return """[[sa]]
name = "null-in"
direction = "in"
spi = 0x{spi:x}
encryption = "null"
integrity = "sha256"
integrity_key = "{key}"
mode = "tunnel"
local = "{gwa}"
remote = "{gwb}"
encap = "udp"
replay_window = 64
selectors = [ {{ src = "10.2.0.0/24", dst = "10.1.0.0/24" }} ]

""".format(spi=NULL_SPI, key=key.hex(), gwa=phxnet.GWA_WAN_V4, gwb=phxnet.GWB_WAN_V4)


def inner_packet(payload):
    from scapy.all import IP, UDP, raw
    return raw(IP(src=phxnet.HOSTB_V4, dst=phxnet.HOSTA_V4, ttl=64) / UDP(sport=40000, dport=PORT) / payload)


def outer(esp_bytes):
    """IPv4 + UDP(4500 -> 4500) around an ESP packet (RFC 3948 §2.1, checksum 0)."""
    from scapy.all import IP, UDP, Raw, raw
    return raw(IP(src=phxnet.GWB_WAN_V4, dst=phxnet.GWA_WAN_V4, ttl=64)
               / UDP(sport=phxnet.NATT_PORT, dport=phxnet.NATT_PORT, chksum=0) / Raw(esp_bytes))


def scapy_good(sa_row, seq, payload):
    """scapy's ESP-in-UDP packet for the b-to-a SA."""
    import phalanx_vectors as pv
    from scapy.all import ICMP, IP, raw
    encr, integ = phxnet.SCAPY_IDS[sa_row["alg"]]
    vec = dict(spi=sa_row["spi"], seq=seq, esn=False, integ=integ, integ_key=sa_row["integrity_key"],
               protocol="esp", encr=encr, encr_key=sa_row["key"], mode="tunnel",
               udp_encap={"sport": phxnet.NATT_PORT, "dport": phxnet.NATT_PORT},
               tunnel_src=sa_row["src"], tunnel_dst=sa_row["dst"], inner=raw(IP() / ICMP()).hex())
    sa = pv.make_sa(vec)
    pkt = sa.encrypt(IP(inner_packet(payload)), seq_num=seq, iv=os.urandom(8))
    return raw(pv.fix_nat_t(pkt))


def gcm_sealed(sa_row, seq, plaintext):
    """RFC 4106 by hand: nonce = salt || IV, AAD = SPI || seq, 16-byte ICV."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    key = bytes.fromhex(sa_row["key"])
    iv = os.urandom(8)
    head = struct.pack("!LL", sa_row["spi"], seq)
    sealed = AESGCM(key[:-4]).encrypt(key[-4:] + iv, plaintext, head)
    return outer(head + iv + sealed)


def null_hmac_sealed(key, seq, plaintext):
    """NULL encryption + HMAC-SHA-256-128 by hand (RFC 4868 §2.1: 16-byte ICV)."""
    body = struct.pack("!LL", NULL_SPI, seq) + plaintext
    return outer(body + hmac.new(key, body, hashlib.sha256).digest()[:16])


def trailer(inner, bad=False):
    """inner || padding || pad length || next header 4 (IPv4, tunnel mode),
    4-byte aligned (RFC 4303 §2.4); with `bad`, the last padding byte is not
    the monotonic 1, 2, 3, ... that §2.4 requires."""
    n = (-(len(inner) + 2)) % 4
    if bad and n < 2:
        n += 4
    pad = bytearray(range(1, n + 1))
    if bad:
        pad[-1] ^= 0x40
    return inner + bytes(pad) + bytes([n, 4])


def wait_counters(gw, base, expected, seconds=5):
    """Polls counters until every expected delta is reached; returns deltas."""
    deadline = time.monotonic() + seconds
    while True:
        now = gw.counters()
        deltas = {k: now.get(k, 0) - base.get(k, 0) for k in now}
        if all(deltas.get(k, 0) >= v for k, v in expected.items()) or time.monotonic() > deadline:
            return deltas
        time.sleep(0.2)


def test_crafted_packets(topo):
    sas = phxnet.sa_table("aes128gcm16", "udp", ATTACK_SEED)
    null_key = phxnet.derive(ATTACK_SEED, "null", 32)
    config = os.path.join(topo.run_dir, "gwA.toml")
    with open(config, "w") as f:
        f.write(phxnet.gateway_config("A", sas, topo.run_dir, extra_sas=null_sa_toml(null_key)))
    gw = topo.start_gateway("A", config)
    b_to_a = sas[1]
    receiver = topo.popen("recv-hostA", "hostA", ["/usr/bin/python3", "-c", RECV, "5"])
    for _ in range(50):
        if ":9999 " in topo.run("hostA", ["ss", "-lun"], check=False).stdout:
            break
        time.sleep(0.1)

    good1 = scapy_good(b_to_a, 1, b"good-1")
    bad_icv = bytearray(scapy_good(b_to_a, 2, b"bad-icv"))
    bad_icv[-1] ^= 0x01
    unknown = bytearray(scapy_good(b_to_a, 3, b"unknown-spi"))
    unknown[28:32] = struct.pack("!L", 0xDEAD0001)  # IPv4 20 + UDP 8, then the SPI
    truncated = outer(struct.pack("!LL", b_to_a["spi"], 4) + os.urandom(10))
    bad_pad_gcm = gcm_sealed(b_to_a, 5, trailer(inner_packet(b"bad-pad-gcm"), bad=True))
    bad_pad_null = null_hmac_sealed(null_key, 1, trailer(inner_packet(b"bad-pad-null"), bad=True))
    good_null = null_hmac_sealed(null_key, 2, trailer(inner_packet(b"good-null")))
    good2 = scapy_good(b_to_a, 6, b"good-2")
    sequence = [good1, good1, bytes(bad_icv), bytes(unknown), truncated, bad_pad_gcm, bad_pad_null, good_null,
                good2]

    base = gw.counters()
    sender = "".join(p.hex() + "\n" for p in sequence)
    topo.run("gwB", ["/usr/bin/python3", "-c", SEND], input=sender, timeout=30)
    expected = {"replayed": 1, "auth_failed": 1, "unknown_spi": 1, "truncated": 1, "bad_padding": 2}
    deltas = wait_counters(gw, base, expected)
    receiver.wait(timeout=20)
    received = topo.log_of("recv-hostA").split()

    assert gw.alive(), "phalanxd died:\n" + topo.log_of(gw.name)[-3000:]
    assert received.count("good-1") == 1, "good packet not delivered exactly once: {}".format(received)
    assert "good-2" in received and "good-null" in received, received
    assert not set(received) - {"good-1", "good-2", "good-null"}, "a bad packet got through: {}".format(received)
    for reason, count in expected.items():
        assert deltas.get(reason) == count, "{}: delta {} (want {}); all deltas: {}".format(
            reason, deltas.get(reason), count, {k: v for k, v in deltas.items() if v})
    other_drops = {k: v for k, v in deltas.items() if v and not k.startswith("daemon.") and k not in expected}
    assert not other_drops, "unexpected drop reasons: {}".format(other_drops)
    # The SA still works after the attack and counted the good packets.
    assert gw.sas()[b_to_a["name"]]["packets"] >= 2
