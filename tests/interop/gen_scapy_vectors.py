#!/usr/bin/python3
"""Generates the scapy ESP/AH interop vectors for Phalanx.

    /usr/bin/python3 tests/interop/gen_scapy_vectors.py [--out FILE]

Writes crates/phalanx-esp/tests/vectors/scapy.json (by default): every
combination of

  * ESP: AES-GCM-16 128/256, ChaCha20-Poly1305, AES-CBC 128/256 x
    HMAC-SHA-256-128 / 384-192 / 512-256, NULL + each HMAC, AES-GMAC 128/256;
    AH: each HMAC;
  * tunnel (v4-in-v4, v6-in-v6, v4-in-v6, v6-in-v4) and transport (v4, v6);
  * UDP encapsulation (RFC 3948) on/off for ESP;
  * ESN on/off,

each with fixed (seeded) keys, SPI, sequence number (incl. the 2^32
boundary and numbers above 2^32 with ESN) and IV (AEADs: the sequence
number, as Phalanx's IvSource::Sequence; CBC: seeded random bytes), and an
inner ICMP echo / UDP / TCP packet whose length makes the ESP padding run
through 0..15 bytes. scapy's SecurityAssociation encrypts; see
phalanx_vectors.py for the three places where scapy 2.5.0 needed help
(AES-GMAC, ESN in the ESP HMAC, NAT-T header). Every vector is decrypted
again by scapy before it is written.

The output is deterministic apart from header.date, which
test_scapy_esp.py ignores when it regenerates and compares.
"""

import argparse
import datetime
import json
import os
import random
import sys

import phalanx_vectors as pv

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_OUT = os.path.join(REPO, "crates", "phalanx-esp", "tests", "vectors", "scapy.json")

# (name, protocol, encr, encr_key_bits, integ)
SUITES = [
    ("aes_gcm16_128", "esp", pv.ENCR_AES_GCM_16, 128, pv.INTEG_NONE),
    ("aes_gcm16_256", "esp", pv.ENCR_AES_GCM_16, 256, pv.INTEG_NONE),
    ("chacha20_poly1305", "esp", pv.ENCR_CHACHA20_POLY1305, 256, pv.INTEG_NONE),
    ("aes_gmac_128", "esp", pv.ENCR_NULL_AUTH_AES_GMAC, 128, pv.INTEG_NONE),
    ("aes_gmac_256", "esp", pv.ENCR_NULL_AUTH_AES_GMAC, 256, pv.INTEG_NONE),
]
for _bits in (128, 256):
    for _integ, _hname in ((12, "sha256"), (13, "sha384"), (14, "sha512")):
        SUITES.append(("aes_cbc_{}_hmac_{}".format(_bits, _hname), "esp", pv.ENCR_AES_CBC, _bits, _integ))
for _integ, _hname in ((12, "sha256"), (13, "sha384"), (14, "sha512")):
    SUITES.append(("null_hmac_{}".format(_hname), "esp", pv.ENCR_NULL, 0, _integ))
for _integ, _hname in ((12, "sha256"), (13, "sha384"), (14, "sha512")):
    SUITES.append(("ah_hmac_{}".format(_hname), "ah", pv.ENCR_NULL, 0, _integ))

# (mode, label, inner IP version, outer IP version or None for transport)
MODES = [
    ("tunnel", "4in4", 4, 4),
    ("tunnel", "6in6", 6, 6),
    ("tunnel", "4in6", 4, 6),
    ("tunnel", "6in4", 6, 4),
    ("transport", "v4", 4, None),
    ("transport", "v6", 6, None),
]

# Sequence numbers, picked round-robin. Without ESN the last usable number
# is 2^32-1 (RFC 4303 §3.3.3); with ESN the vectors cross 2^32 (low half 0
# on the wire), go far above it and reach 2^64-1 (RFC 4303 App. A2).
SEQS = [1, 2, 0x1234, 0xFFFF, 0x10000, 0x7FFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF]
ESN_SEQS = [
    1,
    0xFFFFFFFF,
    0x1_0000_0000,
    0x1_0000_0001,
    0x2_0000_0005,
    0x1_0001_0000,
    0xDEADBEEF_00001234,
    0xFFFFFFFF_FFFFFFFF,
]
BASE_PAYLOAD_LENS = [0, 1, 13, 56, 64, 100, 222, 512, 1000]
TOS_VALUES = [0x00, 0xB8, 0x02, 0x03, 0x28, 0x10]

TUNNEL_ADDRS = {4: ("192.0.2.1", "198.51.100.2"), 6: ("2001:db8::1", "2001:db8:ffff::2")}
INNER_ADDRS = {4: ("10.1.0.{}", "10.2.0.{}"), 6: ("fd00:1::{:x}", "fd00:2::{:x}")}
HOST_ADDRS = {4: ("192.0.2.10", "198.51.100.20"), 6: ("2001:db8::10", "2001:db8:ffff::20")}


def ip_header(rng, version, transport, ext_headers, is_ah):
    """The inner IP header (with an option / extension header when asked)."""
    from scapy.all import IP, IPv6
    from scapy.layers.inet import IPOption_Router_Alert
    from scapy.layers.inet6 import IPv6ExtHdrHopByHop, RouterAlert, HBHOptUnknown

    if transport:
        src, dst = HOST_ADDRS[version]
    else:
        src, dst = (a.format(rng.randrange(1, 250)) for a in INNER_ADDRS[version])
    tos = rng.choice(TOS_VALUES)
    if version == 4:
        options = [IPOption_Router_Alert()] if ext_headers else []
        flags = "DF" if rng.random() < 0.5 else 0
        return IP(src=src, dst=dst, tos=tos, id=rng.randrange(65536), flags=flags,
                  ttl=rng.randrange(1, 256), options=options)
    hdr = IPv6(src=src, dst=dst, tc=tos, fl=rng.randrange(1 << 20), hlim=rng.randrange(1, 256))
    if ext_headers:
        opts = [RouterAlert()]
        if is_ah:
            # RFC 4727 experimental option 0x3E: its "may change en route"
            # bit is set, so AH computes the ICV with its data zeroed
            # (RFC 4302 §3.3.3.1.2.1).
            opts.append(HBHOptUnknown(otype=0x3E, optdata=bytes(rng.randbytes(4))))
        hdr = hdr / IPv6ExtHdrHopByHop(options=opts)
    return hdr


def upper_layer(rng, version, kind, payload):
    """An ICMP echo request, UDP or TCP segment carrying `payload`."""
    from scapy.all import ICMP, TCP, UDP
    from scapy.layers.inet6 import ICMPv6EchoRequest

    if kind == "icmp":
        ident, seq = rng.randrange(65536), rng.randrange(65536)
        if version == 4:
            return ICMP(type=8, id=ident, seq=seq) / payload
        return ICMPv6EchoRequest(id=ident, seq=seq, data=payload)
    if kind == "udp":
        return UDP(sport=rng.randrange(1024, 65536), dport=rng.choice([53, 123, 443, 5001])) / payload
    return TCP(sport=rng.randrange(1024, 65536), dport=rng.choice([22, 80, 443]), flags="PA",
               seq=rng.randrange(1 << 32), ack=rng.randrange(1 << 32), window=rng.randrange(65536)) / payload


def build_inner(rng, version, transport, ext_headers, is_ah, kind, base_len, pad_target):
    """The inner packet; for ESP sized so that RFC 4303 §2.4 padding to a
    16-byte block is `pad_target` bytes."""
    from scapy.all import raw

    hdr = ip_header(rng, version, transport, ext_headers, is_ah)
    payload = bytes(rng.randbytes(base_len))
    pkt = pv.parse_ip(raw(hdr / upper_layer(rng, version, kind, payload)))
    if pad_target is None:
        return pkt
    # ESP payload = whole packet (tunnel) or what follows the kept headers.
    kept = len(raw(hdr))  # IP header incl. options / hop-by-hop header
    data_len = len(raw(pkt)) - (kept if transport else 0)
    extra = -(data_len + 2 + pad_target) % 16
    payload += bytes(rng.randbytes(extra))
    pkt = pv.parse_ip(raw(hdr / upper_layer(rng, version, kind, payload)))
    data_len = len(raw(pkt)) - (kept if transport else 0)
    assert (data_len + 2 + pad_target) % 16 == 0, (data_len, pad_target)
    return pkt


def make_vector(index, suite_index, suite, mode, udp_encap, esn):
    """One vector dict, encrypted by scapy."""
    from scapy.all import raw

    sname, protocol, encr, bits, integ = suite
    mode_name, label, inner_v, outer_v = mode
    name = "{}-{}-{}-{}-{}-{}".format(protocol, sname, mode_name, label,
                                     "udp" if udp_encap else "raw", "esn" if esn else "noesn")
    rng = random.Random(name)
    seqs = ESN_SEQS if esn else SEQS
    # ESN alternates with index: count ESN and non-ESN vectors apart, and
    # start each suite elsewhere in the list, so every number is used.
    seq = seqs[(index // 2 + suite_index) % len(seqs)]
    transport = mode_name == "transport"
    ext_headers = transport and index % 3 == 1
    kind = ("icmp", "udp", "tcp")[index % 3]
    base_len = BASE_PAYLOAD_LENS[(index * 5 + len(sname)) % len(BASE_PAYLOAD_LENS)]
    pad_target = index % 16 if protocol == "esp" else None
    inner = build_inner(rng, inner_v, transport, ext_headers, protocol == "ah", kind, base_len, pad_target)
    if encr in pv.AEADS:
        iv = seq.to_bytes(8, "big")  # IvSource::Sequence (RFC 4106 §3.1)
    else:
        iv = bytes(rng.randbytes(pv.iv_len(encr)))
    v = {
        "name": name,
        "protocol": protocol,
        "mode": mode_name,
        "encr": encr,
        "encr_key_bits": bits,
        "integ": integ,
        "encr_key": rng.randbytes(pv.encr_key_len(encr, bits)).hex(),
        "integ_key": rng.randbytes(pv.integ_key_len(integ)).hex(),
        "spi": rng.randrange(0x100, 1 << 32),
        "seq": seq,
        "esn": esn,
        "iv": iv.hex() if protocol == "esp" else "",
        "tunnel_src": TUNNEL_ADDRS[outer_v][0] if outer_v else None,
        "tunnel_dst": TUNNEL_ADDRS[outer_v][1] if outer_v else None,
        "udp_encap": {"sport": rng.choice([4500, 62000]), "dport": 4500} if udp_encap else None,
        "inner": raw(inner).hex(),
    }
    v["outer"] = pv.encrypt(v).hex()
    return v, pad_target


def generate():
    """All vectors, each checked by decrypting it again with scapy."""
    pv.require_scapy()
    vectors = []
    pads = {}
    for suite_index, suite in enumerate(SUITES):
        index = 0
        for mode in MODES:
            for udp_encap in ((False, True) if suite[1] == "esp" else (False,)):
                for esn in (False, True):
                    v, pad = make_vector(index, suite_index, suite, mode, udp_encap, esn)
                    if pv.decrypt(v) != bytes.fromhex(v["inner"]):
                        raise AssertionError("scapy cannot decrypt its own vector " + v["name"])
                    pads.setdefault(suite[0], set()).add(pad)
                    vectors.append(v)
                    index += 1
    for sname, seen in pads.items():
        if sname.startswith("aes_cbc") and seen != set(range(16)):
            raise AssertionError("{} does not cover pad lengths 0..15: {}".format(sname, sorted(seen)))
    return vectors


def header(count):
    """The file header: where the vectors come from."""
    import cryptography

    return {
        "generator": "tests/interop/gen_scapy_vectors.py",
        "scapy_version": pv.SCAPY_VERSION,
        "cryptography_version": cryptography.__version__,
        "date": datetime.date.today().isoformat(),
        "count": count,
        "notes": "scapy SecurityAssociation output; AES-GMAC via python3-cryptography AESGCM "
                 "(RFC 4543); ESP HMAC with ESN includes Seq# High (RFC 4303 §2.2.1), which "
                 "scapy 2.5.0 omits; NAT-T UDP length/checksum fixed after scapy 2.5.0. "
                 "AEAD IV = sequence number; CBC IV seeded random.",
    }


def dump(doc):
    """JSON with one vector per line (small diffs, modest size)."""
    lines = ["{", ' "header": ' + json.dumps(doc["header"], indent=2).replace("\n", "\n ") + ",",
             ' "vectors": [']
    body = [json.dumps(v, separators=(", ", ": ")) for v in doc["vectors"]]
    lines.append(",\n".join("  " + b for b in body))
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="output JSON file")
    args = parser.parse_args(argv)
    try:
        vectors = generate()
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 2
    text = dump({"header": header(len(vectors)), "vectors": vectors})
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print("wrote {} vectors ({} bytes) to {}".format(len(vectors), len(text), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
