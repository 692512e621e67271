"""Independent verification on the wire: a capture of the WAN link (taken
in gwA's namespace) is decrypted by tshark (esp_sa UAT with the SA keys) or,
for the algorithms tshark 4.0 lacks (ChaCha20-Poly1305, AES-GMAC), by scapy;
the inner ICMP echo requests/replies and UDP datagrams are found with the
expected addresses and payloads, every ICV verified."""

import os

import pytest

import phxnet
from test_traffic import start_pair, udp_exchange

TSHARK_CASES = [("aes128gcm16", "udp"), ("aes256gcm16", "udp"), ("aes128-sha256", "udp"),
                ("aes256-sha512", "udp"), ("null-sha256", "udp"), ("aes128gcm16", "none"),
                ("aes128-sha256", "none")]
SCAPY_CASES = [("chacha20poly1305", "udp"), ("aes128gmac", "udp")]
MARK = "phalanx-wire-check"


def make_traffic(topo, pcap):
    with phxnet.Capture(topo, "gwA", "wan0", pcap):
        assert topo.ping("hostA", phxnet.HOSTB_V4, count=3), "IPv4 ping"
        assert topo.ping("hostA", phxnet.HOSTB_V6, count=3), "IPv6 ping"
        assert udp_exchange(topo, "hostA", "hostB", phxnet.HOSTB_V4, "0.0.0.0", MARK) == MARK


def first_wait(topo):
    assert topo.wait_ping("hostA", phxnet.HOSTB_V4, 10), "no traffic through the tunnel"


@pytest.mark.parametrize("alg,encap", TSHARK_CASES, ids=["{}-{}".format(a, e) for a, e in TSHARK_CASES])
def test_tshark_decrypts_capture(topo, alg, encap):
    sas, _ = start_pair(topo, alg, encap, seed="wire")
    first_wait(topo)
    pcap = os.path.join(topo.run_dir, "wan.pcapng")
    make_traffic(topo, pcap)
    rows = phxnet.tshark_decrypt(pcap, sas)
    spi_ab = "0x{:08x}".format(sas[0]["spi"])
    spi_ba = "0x{:08x}".format(sas[1]["spi"])
    assert rows, "no ESP packets in the capture"
    for r in rows:
        assert r["esp.spi"][0] in (spi_ab, spi_ba), r
        if encap == "udp":
            assert r["udp.dstport"][:1] == [str(phxnet.NATT_PORT)], r
        else:
            assert r["udp.dstport"] in ([], ["9999"]), r  # no outer UDP header
        # tshark verified the ICV of every packet (all these suites have one).
        assert r["esp.icv_good"] == ["1"], r
    # IPv4 inner: echo requests A->B and replies B->A, outer then inner address.
    req4 = [r for r in rows if r["esp.spi"] == [spi_ab] and r["icmp.type"] == ["8"]]
    rep4 = [r for r in rows if r["esp.spi"] == [spi_ba] and r["icmp.type"] == ["0"]]
    assert len(req4) >= 3 and len(rep4) >= 3, "IPv4 echo not decrypted: {}".format(rows[:4])
    for r in req4:
        assert r["ip.src"] == [phxnet.GWA_WAN_V4, phxnet.HOSTA_V4], r
        assert r["ip.dst"] == [phxnet.GWB_WAN_V4, phxnet.HOSTB_V4], r
    # IPv6 inner (over the IPv4 WAN).
    req6 = [r for r in rows if r["esp.spi"] == [spi_ab] and r["icmpv6.type"] == ["128"]]
    assert len(req6) >= 3, "IPv6 echo not decrypted"
    for r in req6:
        assert r["ipv6.src"] == [phxnet.HOSTA_V6] and r["ipv6.dst"] == [phxnet.HOSTB_V6], r
    # The UDP payload, byte for byte.
    udp = [r for r in rows if r["esp.spi"] == [spi_ab] and MARK.encode().hex() in r["data.data"]]
    assert udp, "UDP payload not found in the decrypted packets"
    assert udp[0]["udp.dstport"][-1] == "9999"


def test_tshark_wrong_key_finds_nothing(topo):
    """Negative control: with a wrong key tshark decrypts nothing, so the
    test above can fail."""
    sas, _ = start_pair(topo, "aes128gcm16", "udp", seed="wire")
    first_wait(topo)
    pcap = os.path.join(topo.run_dir, "wan.pcapng")
    make_traffic(topo, pcap)
    for sa in sas:
        sa["key"] = "00" * 20
    rows = phxnet.tshark_decrypt(pcap, sas)
    assert rows
    assert not [r for r in rows if r["icmp.type"] or MARK.encode().hex() in r["data.data"]]


@pytest.mark.parametrize("alg,encap", SCAPY_CASES, ids=["{}-{}".format(a, e) for a, e in SCAPY_CASES])
def test_scapy_decrypts_capture(topo, alg, encap):
    from scapy.all import ICMP, IP, IPv6, UDP, Raw

    sas, _ = start_pair(topo, alg, encap, seed="wire")
    first_wait(topo)
    pcap = os.path.join(topo.run_dir, "wan.pcapng")
    make_traffic(topo, pcap)
    packets = phxnet.scapy_decrypt(pcap, sas)
    assert len(packets) >= 12, "only {} ESP packets decrypted".format(len(packets))
    ab = [p for spi, _, p in packets if spi == sas[0]["spi"]]
    req4 = [p for p in ab if IP in p and ICMP in p and p[ICMP].type == 8]
    assert len(req4) >= 3
    assert all((p[IP].src, p[IP].dst) == (phxnet.HOSTA_V4, phxnet.HOSTB_V4) for p in req4)
    req6 = [p for p in ab if IPv6 in p and p[IPv6].nh == 58]
    assert len(req6) >= 3 and all(p[IPv6].dst == phxnet.HOSTB_V6 for p in req6)
    udp = [p for p in ab if UDP in p and p[UDP].dport == 9999]
    assert udp and bytes(udp[0][Raw].load) == MARK.encode()
