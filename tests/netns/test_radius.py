"""End-Users authenticated by RADIUS (issue 18): phalanxd relays EAP to
FreeRADIUS 3.2 (RFC 3579 pass-through) and accounts their sessions to it
(RFC 2866); strongSwan 5.9.8 is the End-User client.

    alice: charon in gwA ==\\                      /-- radius1 10.2.0.2 (hostB)
                            WAN 192.0.2.2 gwB ----
    bob: charon in hostA ==/  (phalanxd, RADIUS    \\-- radius2 10.2.0.3 (hostB)
                               client from 10.2.0.1)

    End-User              gwB (phalanxd)                 FreeRADIUS
    IKE_AUTH {IDi, no AUTH} -->
                <-- {IDr, CERT, AUTH, EAP-Request/Identity}
    EAP-Response/Identity -->  Access-Request {User-Name, EAP-Message,
                                               Message-Authenticator} -->
                               <-- Access-Challenge {EAP-Message, State}
                <-- EAP-Request/MSCHAPv2 (or TLS)
    ... rounds ...             <-- Access-Accept {EAP-Success, MS-MPPE-*-Key,
                                                  [Framed-IP-Address]}
                <-- EAP-Success
    IKE_AUTH {AUTH(MSK)} -->
                <-- {AUTH(MSK), CP(CFG_REPLY), SA, TS}
                               Accounting-Request Start / Interim / Stop -->

(a) EAP-MSCHAPv2 through RADIUS, failover and accounting: alice (right
    password) gets the Framed-IP-Address radius1 gives her and reaches
    hostB; radius1 records Start, then Interim-Updates with her traffic;
    bob (wrong password) is refused by Access-Reject; radius1 is stopped,
    bob (right password now) is served by radius2 after phalanxd gives up
    on radius1 (retransmits, then failover), and gets a pool address; when
    alice leaves, her Stop (octets, packets, User-Request) goes to radius2;
    with both servers down alice's next attempt fails with EAP-Failure,
    counted (radius_no_server), and bob keeps his tunnel.
(b) EAP-TLS through RADIUS: the End-User's certificate is checked by
    FreeRADIUS, phalanxd sees only EAP messages and the MSK.
"""

import re

import ikegw
import phxnet
import pki
import radius
import swan
from test_road_warrior import POOL, cert_gateway_conn

SECRET = "radius shared secret"
FRAMED = "10.3.1.7"
GWB_LAN = "10.2.0.1"
RADIUS2 = "10.2.0.3"
GWA_CLEAR_V4 = "10.1.0.1"


def radius_section(servers, interim="3s"):
    """[radius] for `servers` (addresses), short timers for the test."""
    lines = ["[radius]", 'nas_identifier = "gwB"', 'timeout = "1s"', "retransmits = 1",
             'dead_time = "60s"', 'interim_interval = "{}"'.format(interim),
             'source = "{}"'.format(GWB_LAN), ""]
    for address in servers:
        lines += ["[[radius.server]]", 'address = "{}"'.format(address),
                  'secret = "{}"'.format(SECRET), ""]
    return "\n".join(lines)


def radius_gateway(topo, paths, servers):
    """phalanxd on gwB: its certificate, EAP through `servers`, the pool."""
    conn = cert_gateway_conn(paths, "eap-radius")
    conn.radius = radius_section(servers)
    gw = ikegw.PhalanxIke(topo, "gwB", conn)
    ikegw.start_all(gw)
    topo.run("gwB", ["ip", "route", "replace", phxnet.SITEA[0], "via", phxnet.GWA_WAN_V4])
    for prefix in (POOL, "10.3.1.0/24"):
        topo.run("gwB", ["ip", "route", "replace", prefix, "dev", phxnet.TUN])
    return gw


def end_user(topo, ns, identity, local_addr, paths, password=None, cert=None):
    """A strongSwan End-User: EAP-MSCHAPv2 with `password`, or EAP-TLS
    with `cert` (paths of a certificate and key whose name is `identity`)."""
    conn = ikegw.site_conn("gwA", True, esp_proposals=["aes128gcm16-noesn"])
    conn.name = "home"
    conn.ca = paths["ca"]
    conn.remote_id = pki.identity("gwB", "fqdn")
    if cert:
        conn.auth = "eap-tls"
        conn.cert, conn.key = cert
    else:
        conn.auth = "eap-mschapv2"
        conn.psk = password
    conn.local_addr = local_addr
    conn.local_id = identity
    conn.vips = ["0.0.0.0"]
    conn.children[0].local_ts = ["dynamic"]
    conn.children[0].remote_ts = [phxnet.SITEB[0]]
    charon = swan.Charon(topo, ns, name="charon-" + re.sub(r"[^a-z0-9]", "", identity.split("@")[0]))
    charon.configure(conn, install_virtual_ip=True)
    charon.start()
    charon.load()
    return charon


def server(topo, name, address, **kw):
    srv = radius.FreeRadius(topo, "hostB", name, address, SECRET, [GWB_LAN],
                            {"alice@example.com": "alice-password", "bob@example.com": "bob-password"},
                            **kw)
    return srv.start()


def counters(gw):
    return ikegw.flatten_counters(gw.gateway.ctl("counters"))


def ping_from(topo, ns, dest, count=3):
    return topo.run(ns, ["ping", "-c", str(count), "-i", "0.2", "-W", "2", dest], check=False).returncode == 0


def records(srv, status, user):
    return [r for r in srv.accounting_records()
            if r.get("Acct-Status-Type") == status and r.get("User-Name") == user]


def test_eap_mschapv2_through_radius_with_failover_and_accounting(topo):
    """(a) of the module doc."""
    paths = pki.build(topo.run_dir, "ecdsa-p256")
    topo.run("hostB", ["ip", "addr", "add", RADIUS2 + "/24", "dev", "eth0"])
    r1 = server(topo, "radius1", phxnet.HOSTB_V4, framed_ips={"alice@example.com": FRAMED})
    r2 = server(topo, "radius2", RADIUS2)
    gw = radius_gateway(topo, paths, [phxnet.HOSTB_V4, RADIUS2])

    alice = end_user(topo, "gwA", "alice@example.com", phxnet.GWA_WAN_V4, paths, password="alice-password")
    alice.initiate("net")
    sas = alice.list_sas()
    assert sas and sas[0].get("local-vips") == [FRAMED], (sas, gw.log()[-3000:])
    assert "EAP method EAP_MSCHAPV2 succeeded" in alice.log(), alice.log()[-3000:]
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4, count=5), "alice cannot reach hostB"
    assert r1.replies_sent("Access-Accept") == 1, r1.log()[-3000:]
    assert r1.requests_seen("Access-Request") >= 3, "identity, MSCHAPv2 response, success ack"
    clients = {c["identity"]: c for c in gw.gateway.ctl("clients")}
    assert clients["alice@example.com"]["virtual_ips"] == [FRAMED], clients
    # Start at once; an Interim-Update with her pings within the interval.
    assert ikegw.wait_for(lambda: records(r1, "Start", "alice@example.com"), 5), r1.accounting_records()
    start = records(r1, "Start", "alice@example.com")[0]
    assert start["Framed-IP-Address"] == FRAMED, start
    assert start["NAS-Identifier"] == "gwB", start
    assert start["Calling-Station-Id"].startswith(phxnet.GWA_WAN_V4), start
    assert ikegw.wait_for(lambda: records(r1, "Interim-Update", "alice@example.com"), 8), r1.accounting_records()
    interim = records(r1, "Interim-Update", "alice@example.com")[-1]
    assert interim["Acct-Session-Id"] == start["Acct-Session-Id"], (start, interim)
    assert int(interim["Acct-Input-Packets"]) >= 5 and int(interim["Acct-Output-Packets"]) >= 5, interim
    assert int(interim["Acct-Input-Octets"]) >= 5 * 84, interim

    # A wrong password: Access-Reject, EAP-Failure, counted; alice unharmed.
    topo.run("hostA", ["ip", "route", "replace", phxnet.GWB_WAN_V4, "via", GWA_CLEAR_V4])
    bob = end_user(topo, "hostA", "bob@example.com", phxnet.HOSTA_V4, paths, password="not-bob-password")
    assert bob.initiate("net", check=False, timeout=10).returncode != 0, "a wrong password got through"
    assert ikegw.wait_for(lambda: ikegw.counter(counters(gw), "eap_failed") == 1, 5), counters(gw)
    assert r1.replies_sent("Access-Reject") == 1, r1.log()[-3000:]
    bob.stop()

    # radius1 dies: bob's first Access-Request goes unanswered (sent
    # twice), radius1 is held dead and radius2 serves him.
    r1.stop()
    requests_before = r1.requests_seen("Access-Request")
    bob = end_user(topo, "hostA", "bob@example.com", phxnet.HOSTA_V4, paths, password="bob-password")
    bob.initiate("net", timeout=20)
    vip = bob.list_sas()[0].get("local-vips", [])
    assert len(vip) == 1 and re.fullmatch(r"10\.3\.0\.\d+", vip[0]), (vip, gw.log()[-3000:])
    assert ping_from(topo, "hostA", phxnet.HOSTB_V4), "bob cannot reach hostB"
    assert r2.replies_sent("Access-Accept") == 1, r2.log()[-3000:]
    assert r1.requests_seen("Access-Request") == requests_before
    n = counters(gw)
    assert ikegw.counter(n, "radius_server_timeouts") >= 1, n
    assert ikegw.counter(n, "radius_failovers") >= 1, n
    assert ikegw.counter(n, "radius_retransmits") >= 1, n
    assert ikegw.counter(n, "radius_answers_invalid") == 0, n
    assert ikegw.counter(n, "eap_succeeded") == 2, n

    # alice leaves: her Stop goes to radius2 (radius1 is dead), with her
    # totals and why.
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4, count=5)
    alice.terminate("home")
    assert ikegw.wait_for(lambda: records(r2, "Stop", "alice@example.com"), 8), r2.accounting_records()
    stop = records(r2, "Stop", "alice@example.com")[0]
    assert stop["Acct-Session-Id"] == start["Acct-Session-Id"], (start, stop)
    assert stop["Acct-Terminate-Cause"] == "User-Request", stop
    assert int(stop["Acct-Input-Packets"]) >= 10, stop
    assert int(stop["Acct-Output-Packets"]) >= 10, stop
    assert int(stop["Acct-Input-Octets"]) >= int(interim["Acct-Input-Octets"]), (interim, stop)
    assert ping_from(topo, "hostA", phxnet.HOSTB_V4), "bob lost his tunnel when alice left"

    # Both servers down: alice's attempt fails cleanly (EAP-Failure), is
    # counted, and bob keeps his tunnel.
    r2.stop()
    alice.load()
    assert alice.initiate("net", check=False, timeout=15).returncode != 0, "authenticated without RADIUS"
    assert ikegw.wait_for(lambda: "no RADIUS server answered" in gw.log(), 10), gw.log()[-3000:]
    assert ikegw.counter(counters(gw), "radius_no_server") >= 1, counters(gw)
    assert ping_from(topo, "hostA", phxnet.HOSTB_V4), "bob lost his tunnel when RADIUS went away"
    assert gw.alive(), gw.log()[-3000:]


def test_eap_tls_through_radius(topo):
    """(b) of the module doc."""
    paths = pki.build(topo.run_dir, "ecdsa-p256")
    r1 = server(topo, "radius1", phxnet.HOSTB_V4, tls=radius.TlsFiles(paths["ca"], *paths["gwB"]))
    gw = radius_gateway(topo, paths, [phxnet.HOSTB_V4])
    identity = pki.identity("gwA", "fqdn")
    alice = end_user(topo, "gwA", identity, phxnet.GWA_WAN_V4, paths, cert=paths["gwA"])
    alice.initiate("net", timeout=20)
    assert "EAP method EAP_TLS succeeded" in alice.log(), alice.log()[-3000:]
    assert r1.tls_versions(), r1.log()[-3000:]
    vip = alice.list_sas()[0].get("local-vips", [])
    assert len(vip) == 1 and re.fullmatch(r"10\.3\.0\.\d+", vip[0]), vip
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4), "alice cannot reach hostB"
    clients = {c["identity"]: c for c in gw.gateway.ctl("clients")}
    assert identity in clients, clients
    n = counters(gw)
    assert ikegw.counter(n, "radius_accepts") == 1, n
    # EAP-TLS takes several round trips of fragments (RFC 5216 §2.1.5).
    assert ikegw.counter(n, "radius_challenges") >= 3, n
