"""Path MTU through the tunnel (RFC 4301 §8.2.1, RFC 4459): a WAN that
carries less than the TUN MTU is no black hole.

    hostA --- gwA ==== wan0 (MTU 1280 or 1000) ==== wan0 gwB --- hostB
              TUN phx0 MTU 1400                        TUN phx0 MTU 1400

The ESP packet of a 1400-octet inner packet is about 1460 octets: it does
not fit. gwA's workers learn the WAN's MTU from the kernel's route (IP_MTU)
and then, per inner packet:

* DF set (TCP, `ping -M do`): ICMP Fragmentation Needed to hostA with the
  inner MTU that fits (1218 over a 1280 WAN with ESP in UDP and AES-GCM);
  hostA's kernel caches it, TCP shrinks its segments and a bulk transfer
  completes, both ways, IPv4 and IPv6 inner;
* IPv6: Packet Too Big with 1280 (the WAN carries less than 1280 inside, so
  packets of up to 1280 go as fragmented ESP packets, RFC 8200 §5);
* IPv4 without DF: fragmented before encryption (`fragment = "inner"`, the
  default) or sent as a fragmented ESP packet (`fragment = "outer"`): a
  1400-octet UDP datagram arrives whole at hostB.

Every packet not sent is counted (`path_mtu_exceeded`, on the SA too). The
same for plain ESP. The throughput ratio against a TUN MTU that fits is
measured by bench/pmtu.sh (tests assert behaviour, not timings).
"""

import os
import re
import time

import pytest

import phxnet

PORT = 9998
BULK = 4 * 1024 * 1024

# TCP sink in hostB: prints the byte count of each connection.
SINK = r"""
import socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
s.settimeout(60)
print("ready", flush=True)
c, _ = s.accept()
c.settimeout(30)
n = 0
while True:
    d = c.recv(65536)
    if not d:
        break
    n += len(d)
print("got", n, flush=True)
"""

# TCP source in hostA: sends argv[3] bytes, prints the seconds it took.
SOURCE = r"""
import socket, sys, time
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
left, block, t0 = int(sys.argv[3]), b"x" * 65536, time.monotonic()
while left > 0:
    left -= s.send(block[:min(left, len(block))])
s.shutdown(socket.SHUT_WR)
s.recv(1)
print("sent", time.monotonic() - t0, flush=True)
"""

# UDP receiver in hostB: prints the length of each datagram until idle.
UDP_SINK = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.settimeout(3)
print("ready", flush=True)
try:
    while True:
        print(len(s.recv(65536)), flush=True)
except socket.timeout:
    pass
"""

# UDP sender in hostA: argv[3] datagrams of argv[2] octets, DF clear.
UDP_SOURCE = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 10, 0)  # IP_MTU_DISCOVER = IP_PMTUDISC_DONT
for i in range(int(sys.argv[3])):
    s.sendto(bytes([i % 256]) * int(sys.argv[2]), (sys.argv[1], 9997))
    time.sleep(0.02)
"""


def start(topo, encap="udp", wan_mtu=1280, fragment=None):
    """The pair with AES-GCM over `encap`, both WAN veths at `wan_mtu`,
    and `fragment` in [protected] if given."""
    for gw in ("gwA", "gwB"):
        topo.run(gw, ["ip", "link", "set", "wan0", "mtu", str(wan_mtu)])
    sas = phxnet.gateway_configs("aes128gcm16", encap, topo.run_dir, seed="pmtu")
    paths = [os.path.join(topo.run_dir, "gw{}.toml".format(s)) for s in "AB"]
    if fragment:
        for path in paths:
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(text.replace("raw_esp = true\n", 'raw_esp = true\nfragment = "{}"\n'.format(fragment), 1))
    gws = [topo.start_gateway(s, p) for s, p in zip("AB", paths)]
    assert topo.wait_ping("hostA", phxnet.HOSTB_V4, 10), "tunnel does not carry a small ping"
    # The workers ask the kernel for the route MTU at their first
    # publication (100 ms); give them that.
    time.sleep(0.5)
    return sas, gws


def bulk_tcp(topo, src, dst_ns, dst, nbytes=BULK):
    """Sends nbytes over TCP from `src` to dst; returns the bytes the sink
    got and the sender's seconds."""
    name = "sink-{}-{}".format(dst_ns, len(topo.procs))
    sink = topo.popen(name, dst_ns, ["/usr/bin/python3", "-c", SINK, dst, str(PORT)])
    for _ in range(50):
        if "ready" in topo.log_of(name):
            break
        time.sleep(0.1)
    out = topo.run(src, ["/usr/bin/python3", "-c", SOURCE, dst, str(PORT), str(nbytes)], timeout=60, check=False)
    sink.wait(timeout=40)
    got = re.search(r"got (\d+)", topo.log_of(name))
    sent = re.search(r"sent ([0-9.]+)", out.stdout)
    assert sent, "TCP sender {} -> {} failed: {}{}".format(src, dst, out.stdout, out.stderr[-2000:])
    return int(got.group(1)) if got else 0, float(sent.group(1))


def counters_delta(before, after, *names):
    return {n: after.get(n, 0) - before.get(n, 0) for n in names}


@pytest.mark.parametrize("encap", ["udp", "none"])
def test_bulk_tcp_through_a_small_wan(topo, encap):
    """DF traffic both ways, IPv4 and IPv6 inner: the senders are told,
    shrink their segments and the transfers complete."""
    _, (gwa, gwb) = start(topo, encap)
    before = gwa.counters()
    for src, dst_ns, dst in (("hostA", "hostB", phxnet.HOSTB_V4), ("hostB", "hostA", phxnet.HOSTA_V4),
                             ("hostA", "hostB", phxnet.HOSTB_V6), ("hostB", "hostA", phxnet.HOSTA_V6)):
        got, secs = bulk_tcp(topo, src, dst_ns, dst)
        print("  {} -> {}: {} bytes in {:.2f} s ({:.0f} Mbit/s)".format(src, dst, got, secs, got * 8 / secs / 1e6))
        assert got == BULK, "{} -> {} over a 1280 WAN: {} of {} bytes".format(src, dst, got, BULK)
    after = gwa.counters()
    d = counters_delta(before, after, "daemon.icmp_too_big_sent", "path_mtu_exceeded",
                       "daemon.icmp_send_failed", "send_failed")
    print("  gwA:", d)
    assert d["daemon.icmp_too_big_sent"] > 0, d
    assert d["path_mtu_exceeded"] >= d["daemon.icmp_too_big_sent"], d
    assert d["daemon.icmp_send_failed"] == 0, d
    # The drops show on the SA too.
    out_sa = [s for s in gwa.ctl("sas") if s["direction"] == "out"][0]
    reasons = {r["name"]: r["count"] for r in out_sa["drop_reasons"]}
    assert reasons.get("path_mtu_exceeded", 0) > 0, out_sa
    assert out_sa["drops"] == sum(reasons.values()), out_sa


def test_hosts_receive_the_icmp_with_the_inner_mtu(topo):
    """hostA learns 1218 for IPv4 (1280 - 20 - 8 - 8 - 8 - 16, aligned,
    less the 2-octet trailer) and 1280 for IPv6."""
    start(topo, "udp")
    proc = topo.run("hostA", ["ping", "-n", "-c", "2", "-i", "0.3", "-W", "1", "-M", "do", "-s", "1372",
                              phxnet.HOSTB_V4], check=False)
    route = topo.run("hostA", ["ip", "route", "get", phxnet.HOSTB_V4]).stdout
    print("  ping:", proc.stdout.strip().splitlines()[-2:], "route:", route.strip())
    assert "mtu 1218" in route, route
    topo.run("hostA", ["ping", "-6", "-n", "-c", "2", "-i", "0.3", "-W", "1", "-s", "1352", phxnet.HOSTB_V6],
             check=False)
    route6 = topo.run("hostA", ["ip", "-6", "route", "get", phxnet.HOSTB_V6]).stdout
    assert "mtu 1280" in route6, route6
    # Now hostA fragments itself: full-size pings get through.
    assert topo.ping("hostA", phxnet.HOSTB_V6, count=3), "IPv6 1400-octet pings lost after the PTB"


@pytest.mark.parametrize("fragment,wan_mtu", [("inner", 1280), ("outer", 1280), ("inner", 1000)])
def test_df_clear_udp_arrives_whole(topo, fragment, wan_mtu):
    """1400-octet UDP datagrams without DF arrive whole at hostB."""
    _, (gwa, _) = start(topo, "udp", wan_mtu=wan_mtu, fragment=fragment)
    before = gwa.counters()
    rx = topo.popen("udp-sink", "hostB", ["/usr/bin/python3", "-c", UDP_SINK, "9997"])
    for _ in range(50):
        if "ready" in topo.log_of("udp-sink"):
            break
        time.sleep(0.1)
    topo.run("hostA", ["/usr/bin/python3", "-c", UDP_SOURCE, phxnet.HOSTB_V4, "1372", "20"], timeout=20)
    rx.wait(timeout=15)
    lengths = [int(x) for x in topo.log_of("udp-sink").split()[1:]]
    after = gwa.counters()
    d = counters_delta(before, after, "daemon.inner_fragmented", "daemon.outer_fragmented", "path_mtu_exceeded")
    print("  fragment={} wan {}: received {} datagrams, gwA {}".format(fragment, wan_mtu, len(lengths), d))
    assert lengths == [1372] * 20, lengths
    key = "daemon.{}_fragmented".format(fragment)
    assert d[key] == 20, d
    assert d["path_mtu_exceeded"] == 0, d


def test_bulk_tcp_against_strongswan(topo):
    """gwA (phalanxd, IKE initiator) against strongSwan on gwB (charon with
    kernel-libipsec, ESP in UDP) over the 1280 WAN: what phalanxd sends
    completes in both families. The other direction is strongSwan's own
    path-MTU handling (kernel-libipsec), not tested here."""
    import ikegw
    for gw in ("gwA", "gwB"):
        topo.run(gw, ["ip", "link", "set", "wan0", "mtu", "1280"])
    dut = ikegw.make_gateway("phalanx", topo, "gwA",
                             ikegw.site_conn("gwA", True, esp_proposals=["aes128gcm16-esn-noesn"]))
    ref = ikegw.SwanIke(topo, "gwB", ikegw.site_conn("gwB", False, esp_proposals=["aes128gcm16-noesn"]))
    try:
        ikegw.start_all(ref, dut)
    except ikegw.DaemonMissing as e:
        pytest.fail(str(e), pytrace=False)
    dut.initiate()
    assert ikegw.wait_for(lambda: ikegw.established(dut) and ikegw.established(ref), 20), dut.view()
    assert topo.wait_ping("hostA", phxnet.HOSTB_V4, 20), "no ping through the Phalanx-strongSwan tunnel"
    before = dut.counters()
    for dst_ns, dst in (("hostB", phxnet.HOSTB_V4), ("hostB", phxnet.HOSTB_V6)):
        got, secs = bulk_tcp(topo, "hostA", dst_ns, dst)
        print("  hostA -> {} via strongSwan: {} bytes in {:.2f} s".format(dst, got, secs))
        assert got == BULK, "hostA -> {} through Phalanx to strongSwan: {} of {} bytes".format(dst, got, BULK)
    after = dut.counters()
    sent = ikegw.counter(after, "icmp_too_big_sent") - ikegw.counter(before, "icmp_too_big_sent")
    print("  gwA sent {} ICMP too-big".format(sent))
    assert sent > 0
