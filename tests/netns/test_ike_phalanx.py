"""Phalanx <-> Phalanx over IKEv2: phalanxd on both gateways, the tunnel
negotiated by IKE (PSK, AES-GCM, X25519) instead of static keys.

    hostA 10.1.0.2 -- gwA 192.0.2.1 === WAN === 192.0.2.2 gwB -- hostB 10.2.0.2
                      phalanxd (site-b)          phalanxd (site-a)

    gwA (initiator)                              gwB (responder)
      IKE_SA_INIT  { SA, KE, Ni }          :500 -->
                                                <-- { SA, KE, Nr }
      IKE_AUTH { IDi, AUTH, SA, TSi, TSr } :4500 (force_encap: UDP encapsulation) -->
                                                <-- { IDr, AUTH, SA, TSi, TSr }
      ... ESP in UDP, IPv4 and IPv6 both ways ...
      INFORMATIONAL { D } (terminate)           -->   <-- { }

Checks: `phalanxctl initiate --wait` returns when the SAs are up; both
sides show one ESTABLISHED IKE SA with the same SPIs and one INSTALLED
Child SA whose inbound SPI is the other side's outbound one; pings pass
both ways over IPv4 and IPv6; a reload with an unchanged file keeps every
SPI and the traffic; terminate removes every SA on both sides (nothing in
`phalanxctl ike` or `phalanxctl sas`) and traffic stops; with
start_action = "trap" the first ping brings the tunnel up by itself.

AH (issue 17): a child with `ah_proposals` and no UDP encapsulation is
negotiated as AH (SA payload Protocol ID 2, integrity only); pings cross
both ways over IPv4 and IPv6; on the WAN every tunnel packet is IP
protocol 51 (scapy parses its AH header: one of the negotiated SPIs, a
16-byte ICV, next header IPv4/IPv6); a Child SA rekey (REKEY_SA and Delete
of protocol AH) leaves one AH pair with new SPIs and the traffic flowing.
"""

import os
import signal
import time

import ikegw
import phxnet


def pair(topo, start_action="none"):
    """gwA initiates (start_action as given), gwB responds; both phalanxd."""
    a = ikegw.site_conn("gwA", True, esp_proposals=["aes128gcm16-esn-noesn"])
    b = ikegw.site_conn("gwB", False, esp_proposals=["aes128gcm16-esn-noesn"])
    a.name, b.name = "site-b", "site-a"
    gw_a, gw_b = ikegw.PhalanxIke(topo, "gwA", a), ikegw.PhalanxIke(topo, "gwB", b)
    if start_action != "none":
        # ikegw renders start_action = "none"; this test owns the trap case.
        render = ikegw.render_phalanx_toml

        def rendered(conn, side, run_dir, **kw):
            text = render(conn, side, run_dir, **kw)
            if conn is a:
                text = text.replace('start_action = "none"', 'start_action = "{}"'.format(start_action))
            return text

        ikegw.render_phalanx_toml = rendered
        try:
            ikegw.start_all(gw_b, gw_a)
        finally:
            ikegw.render_phalanx_toml = render
    else:
        ikegw.start_all(gw_b, gw_a)
    return gw_a, gw_b


def raw_ike(gw):
    """`phalanxctl ike --json` as the daemon sends it."""
    return gw.gateway.ctl("ike")


def one_sa(gw):
    """The single established IKE SA of `gw` with its single child."""
    sas = [sa for sa in raw_ike(gw) if sa["state"] == "ESTABLISHED"]
    assert len(sas) == 1, "{}: {}".format(gw.gw, raw_ike(gw))
    installed = [c for c in sas[0]["children"] if c["state"] == "INSTALLED"]
    assert len(installed) == 1, "{}: {}".format(gw.gw, sas[0])
    return sas[0], installed[0]


def check_agree(gw_a, gw_b):
    """Both sides show the same IKE SA and mirrored Child SPIs; returns
    (IKE SPIs, child SPIs of gwA)."""
    sa_a, child_a = one_sa(gw_a)
    sa_b, child_b = one_sa(gw_b)
    assert (sa_a["spi_i"], sa_a["spi_r"]) == (sa_b["spi_i"], sa_b["spi_r"]), (sa_a, sa_b)
    assert sa_a["initiator"] and not sa_b["initiator"]
    assert (child_a["spi_in"], child_a["spi_out"]) == (child_b["spi_out"], child_b["spi_in"]), (child_a, child_b)
    for sa, child in ((sa_a, child_a), (sa_b, child_b)):
        assert ikegw.phalanx_algs(sa["algorithms"]) == {"aes128gcm16", "prfsha256", "x25519"}, sa
        assert ikegw.phalanx_algs(child["algorithms"]) == {"aes128gcm16"}, child
        assert child["encap"], "force_encap: ESP in UDP"
    assert child_a["local_ts"] == list(phxnet.SITEA) and child_a["remote_ts"] == list(phxnet.SITEB), child_a
    return (sa_a["spi_i"], sa_a["spi_r"]), (child_a["spi_in"], child_a["spi_out"])


def check_pings(topo):
    assert topo.wait_ping("hostA", phxnet.HOSTB_V4, 10), "no IPv4 ping hostA -> hostB"
    for src, dst in (("hostA", phxnet.HOSTB_V4), ("hostA", phxnet.HOSTB_V6),
                     ("hostB", phxnet.HOSTA_V4), ("hostB", phxnet.HOSTA_V6)):
        assert topo.ping(src, dst, count=3, interval=0.1), "ping {} -> {} lost packets".format(src, dst)


def ike_sas_in_sas(gw):
    """The SAs IKE installed, as `phalanxctl sas` lists them."""
    return [s for s in gw.gateway.ctl("sas") if s["name"].startswith(gw.conn.name + "/")]


def test_initiate_ping_reload_terminate(topo):
    gw_a, gw_b = pair(topo)
    out = gw_a.gateway.ctl("initiate", gw_a.conn.name, "--wait", "20")
    assert out["outcome"] == "established", out
    spis = check_agree(gw_a, gw_b)
    for gw in (gw_a, gw_b):
        assert len(ike_sas_in_sas(gw)) == 2, gw.gateway.ctl("sas")
    check_pings(topo)
    child = one_sa(gw_a)[1]
    assert child["packets_out"] > 0 and child["packets_in"] > 0, child

    # Reload with an unchanged file: SIGHUP on gwA, phalanxctl on gwB.
    gw_a.gateway.proc.send_signal(signal.SIGHUP)
    summary = gw_b.gateway.ctl("reload")
    assert summary["changed"] == [] and summary["removed"] == [], summary
    time.sleep(1)
    assert "reload refused" not in gw_a.log()
    assert check_agree(gw_a, gw_b) == spis, "a reload with the same file changed the SAs"
    assert topo.ping("hostA", phxnet.HOSTB_V4, count=3, interval=0.1)
    counters = ikegw.flatten_counters(gw_a.gateway.ctl("counters"))
    assert ikegw.counter(counters, "ike_sas_established") == 1, counters

    # Terminate from the initiator: nothing left on either side.
    out = gw_a.gateway.ctl("terminate", gw_a.conn.name)
    assert out["outcome"] == "terminating", out
    for gw in (gw_a, gw_b):
        gone = ikegw.wait_for(lambda: not raw_ike(gw) and not ike_sas_in_sas(gw), 10)
        assert gone, "{} still has SAs: {} {}".format(gw.gw, raw_ike(gw), gw.gateway.ctl("sas"))
    assert not topo.ping("hostA", phxnet.HOSTB_V4, count=1), "traffic passes after terminate"
    for gw in (gw_a, gw_b):
        assert gw.alive(), gw.log()[-3000:]


def test_trap_brings_the_tunnel_up_on_the_first_packet(topo):
    gw_a, gw_b = pair(topo, start_action="trap")
    assert not raw_ike(gw_a), "nothing before traffic"
    # The first packets are dropped (no SA yet) and acquire one.
    assert topo.wait_ping("hostA", phxnet.HOSTB_V4, 15), "the trap did not bring the tunnel up"
    check_agree(gw_a, gw_b)
    check_pings(topo)
    counters = ikegw.flatten_counters(gw_a.gateway.ctl("counters"))
    assert counters.get("daemon.trap_acquires", 0) >= 1, counters
    assert counters.get("daemon.no_outbound_sa", 0) >= 1, counters


def test_ah_child_negotiated_rekeyed_and_on_the_wire(topo):
    """AH of the module doc."""
    from scapy.all import AH, IP, rdpcap

    conns = []
    for gw, initiator in (("gwA", True), ("gwB", False)):
        conn = ikegw.site_conn(gw, initiator)
        conn.force_encap = False
        conn.children[0].ah_proposals = ["sha256-x25519-esn"]
        conn.children[0].rekey_time = "20s"
        conn.children[0].rekey_jitter = "2s"
        conns.append(conn)
    conns[0].name, conns[1].name = "site-b", "site-a"
    gw_a, gw_b = ikegw.PhalanxIke(topo, "gwA", conns[0]), ikegw.PhalanxIke(topo, "gwB", conns[1])
    ikegw.start_all(gw_b, gw_a)
    out = gw_a.gateway.ctl("initiate", gw_a.conn.name, "--wait", "20")
    assert out["outcome"] == "established", out
    _, child_a = one_sa(gw_a)
    _, child_b = one_sa(gw_b)
    for child in (child_a, child_b):
        assert child["algorithms"] == "AH/HMAC_SHA2_256_128", child
        assert not child["encap"], child
    assert (child_a["spi_in"], child_a["spi_out"]) == (child_b["spi_out"], child_b["spi_in"])
    first = {child_a["spi_in"], child_a["spi_out"]}

    pcap = os.path.join(topo.run_dir, "wan-ah.pcapng")
    with phxnet.Capture(topo, "gwA", "wan0", pcap):
        check_pings(topo)
    gateways = (phxnet.GWA_WAN_V4, phxnet.GWB_WAN_V4)
    tunnel = [f[IP] for f in rdpcap(pcap) if IP in f and f[IP].src in gateways and f[IP].dst in gateways
              and f[IP].proto != 17]
    assert len(tunnel) >= 24, "{} tunnel packets for 12 echoes and their replies".format(len(tunnel))
    for p in tunnel:
        assert p.proto == 51 and AH in p, p.summary()
        assert p[AH].spi in first, "{:#x} not among {}".format(p[AH].spi, first)
        assert p[AH].payloadlen == 5 and len(p[AH].icv) == 16, p[AH].show(dump=True)
        assert p[AH].nh in (4, 41), p.summary()

    # The child rekeys by itself (rekey_time 20 s less up to 2 s); both
    # sides settle on the new pair (the responder installs its outbound SA
    # when the old one is deleted).
    def rekeyed():
        try:
            _, now_a = one_sa(gw_a)
            one_sa(gw_b)
        except AssertionError:
            return False
        return {now_a["spi_in"], now_a["spi_out"]}.isdisjoint(first)
    assert ikegw.wait_for(rekeyed, 35), (raw_ike(gw_a), raw_ike(gw_b))
    _, child_a = one_sa(gw_a)
    _, child_b = one_sa(gw_b)
    assert (child_a["spi_in"], child_a["spi_out"]) == (child_b["spi_out"], child_b["spi_in"])
    assert child_a["algorithms"] == "AH/HMAC_SHA2_256_128", child_a
    check_pings(topo)
    for gw in (gw_a, gw_b):
        counters = ikegw.flatten_counters(gw.gateway.ctl("counters"))
        assert ikegw.counter(counters, "child_sas_rekeyed") >= 1, counters
        assert ikegw.counter(counters, "child_sas_failed") == 0, counters
        assert gw.alive(), gw.log()[-3000:]


def test_unknown_connection_and_wait_failure(topo):
    gw_a, gw_b = pair(topo)
    proc = gw_a.gateway.ctl_raw("initiate", "nope")
    assert proc.returncode == 1 and "nope" in proc.stderr, proc
    # gwB is stopped: the wait ends with the reason (peer unreachable) or
    # at the deadline, never hangs.
    gw_b.stop()
    started = time.monotonic()
    proc = gw_a.gateway.ctl_raw("initiate", gw_a.conn.name, "--wait", "3", timeout=30)
    assert proc.returncode == 1, proc
    assert time.monotonic() - started < 15
    assert gw_a.alive()


def test_hybrid_child_sa_stays_hybrid_across_rekeys(topo):
    """IKE_FOLLOWUP_KE (RFC 9370 §2.2.4) between two phalanxd: an IKE SA of
    X25519 + ML-KEM-768 (IKE_INTERMEDIATE) whose Child SA uses the same
    pair with PFS. The Child SA rekeys by itself twice (rekey_time 7 s)
    and the IKE SA once (rekey_time 15 s); after each, `phalanxctl ike`
    still shows CURVE25519 and ML_KEM_768 for the current Child SA on both
    sides, traffic passes, and nothing failed."""
    conns = []
    for gw, initiator in (("gwA", True), ("gwB", False)):
        conn = ikegw.site_conn(gw, initiator, proposals=["aes256gcm16-prfsha384-x25519-ke1_mlkem768"],
                               esp_proposals=["aes256gcm16-x25519-ke1_mlkem768"])
        conn.rekey_time = "15s"
        conn.rekey_jitter = "1s"
        conn.children[0].rekey_time = "7s"
        conn.children[0].rekey_jitter = "1s"
        conns.append(conn)
    conns[0].name, conns[1].name = "site-b", "site-a"
    gw_a, gw_b = ikegw.PhalanxIke(topo, "gwA", conns[0]), ikegw.PhalanxIke(topo, "gwB", conns[1])
    ikegw.start_all(gw_b, gw_a)
    out = gw_a.gateway.ctl("initiate", gw_a.conn.name, "--wait", "20")
    assert out["outcome"] == "established", out
    first_ike = one_sa(gw_a)[0]
    seen = set()

    def current_children():
        """Each side's one installed Child SA, or None mid-rekey."""
        try:
            return [one_sa(gw)[1] for gw in (gw_a, gw_b)]
        except AssertionError:
            return None

    def check_hybrid(children):
        for gw, child in zip((gw_a, gw_b), children):
            assert child["key_exchanges"] == ["CURVE25519", "ML_KEM_768"], (gw.gw, child)
        seen.add(children[0]["spi_in"])

    check_hybrid(current_children())
    check_pings(topo)
    deadline = time.monotonic() + 45
    def ike_rekeyed():
        sas = [sa for sa in raw_ike(gw_a) if sa["state"] == "ESTABLISHED"]
        return bool(sas) and sas[0]["spi_i"] != first_ike["spi_i"]

    while (len(seen) < 3 or not ike_rekeyed()) and time.monotonic() < deadline:
        time.sleep(1.0)
        children = current_children()
        if children is not None:
            check_hybrid(children)
    assert len(seen) >= 3, "two Child SA rekeys expected: {}".format(raw_ike(gw_a))
    assert one_sa(gw_a)[0]["spi_i"] != first_ike["spi_i"], "the IKE SA rekeyed too"
    check_pings(topo)
    for gw in (gw_a, gw_b):
        counters = ikegw.flatten_counters(gw.gateway.ctl("counters"))
        assert ikegw.counter(counters, "followup_ke_exchanges", scope="ike") >= 2, counters
        assert ikegw.counter(counters, "child_sas_failed", scope="ike") == 0, counters
        assert ikegw.counter(counters, "followup_ke_failed", scope="ike") == 0, counters
        assert gw.alive(), gw.log()[-3000:]
