"""The committed path-MTU vectors (ICMP frag-needed, ICMPv6 packet too
big, IPv4 fragments) are what scapy builds today: regenerated and compared
byte for byte. The Rust side checks Phalanx's builders against the same
file (crates/phalanx-wire/tests/scapy_icmp.rs)."""

import gen_icmp_vectors as gen


def test_committed_vectors_match_scapy():
    with open(gen.DEFAULT_OUT) as f:
        committed = f.read()
    fresh = gen.generate()
    assert committed == fresh, "regenerate with /usr/bin/python3 tests/interop/gen_icmp_vectors.py"
    assert committed.count("\n") == 19
