"""End-Users (issue 18): strongSwan 5.9.8 road-warrior clients against
phalanxd, which hands out virtual IPs from a pool (RFC 7296 §2.19).

    alice: charon in gwA (192.0.2.1) ===========\\
                                                 WAN  192.0.2.2 gwB (phalanxd) -- hostB 10.2.0.2
    bob:   charon in hostA (10.1.0.2, via gwA) ==/     pool rw4 = 10.3.0.0/24

    client                                       gwB (phalanxd, responder)
      IKE_SA_INIT { SA, KE, Ni }          -->
                                          <-- { SA, KE, Nr }
      IKE_AUTH { IDi, AUTH, CP(CFG_REQUEST), SA, TSi(0.0.0.0/0), TSr } -->
                                          <-- { IDr, AUTH, CP(CFG_REPLY: 10.3.0.n), SA,
                                                TSi(10.3.0.n/32), TSr(10.2.0.0/24) }

Both clients use PSK and no ESN (kernel-libipsec has none) (`vips = 0.0.0.0`; EAP comes with the EAP work) and
kernel-libipsec (ESP in UDP). Checks:
(a) both at once: each gets its own address out of the pool, which
    strongSwan installs and phalanxctl shows; a ping from each (source: its
    virtual IP) reaches hostB and the reply comes back through its own
    Child SA; gwB has one policy per client, and the pool is two leases
    online;
(b) alice disconnects and connects again: the same address; the lease is
    offline in between;
(c) a pool of one address: the second client gets an IKE SA but no Child SA
    (INTERNAL_ADDRESS_FAILURE, counted as virtual_ips_refused), the first
    keeps working;
(e) EAP-MSCHAPv2 (RFC 7296 §2.16): the gateway authenticates with an
    ECDSA certificate, the End-Users with EAP-MSCHAPv2 against phalanxd's
    `[[eap_secret]]`s; alice (right password) gets her address and reaches
    hostB, bob (wrong password) and carol (unknown) are refused with
    EAP-Failure, counted, and leave alice's tunnel alone.
(f) a dual-stack End-User (`vips = 0.0.0.0,::`) gets one address of each
    family from the IPv4 and the IPv6 pool and reaches hostB over both;
(g) MOBIKE (RFC 4555): a client with `mobike = yes` whose address changes
    (a new one added, the old one removed) sends UPDATE_SA_ADDRESSES; the
    gateway follows at once, the same IKE SA and Child SA carry on, pings
    pass from the new address;
(h) MOBIKE behind a masquerade under a 10 ms ping (test docstring): the
    gateway follows the UPDATE_SA_ADDRESSES to the translated address, no
    ping sent after the announcement is lost;
(i) an expired End-User certificate is refused; a gateway that signs takes
    End-Users who show a PSK (auth and remote_auth apart);
(j) EAP-TLS (RFC 5216, phalanxd's own, `remote_auth = "eap-tls"`): the
    gateway shows its certificate in IKE and in TLS, End-Users their
    certificates, which must lead to the gateway's `ca` and name their EAP
    identity (here the rfc822Name of the client's certificate); with TLS
    1.2 and with TLS 1.3 forced in strongSwan (`charon.tls.version_min/
    max`); strongSwan 5.9.8 does TLS 1.3 before RFC 9190, so that gateway
    has `eap_tls13 = "pre-rfc9190"`. Each gets its address and reaches
    hostB; `phalanxctl clients` says eap-tls; `eap_tls_succeeded` counts;
(k) a client whose certificate comes from a CA the gateway does not trust
    is refused with a TLS alert, logged and counted by reason
    (`eap_tls_untrusted_certificate`), and leaves a good client alone;

    client (strongSwan 5.9.8)              gwB (phalanxd)
      IKE_AUTH { IDi, CP, SA, TS }  -->
                              <-- { IDr, CERT, AUTH, EAP-Request/Identity }
      { EAP-Response/Identity }     -->
                              <-- { EAP-Request/TLS (Start) }
      { EAP-Response/TLS (ClientHello) } -->
                              <-- { EAP-Request/TLS (ServerHello ...), in fragments }
      ... acknowledgements, the client's certificate flight ...
                              <-- { EAP-Success }
      { AUTH(MSK) }                 -->
                              <-- { AUTH(MSK), CP(CFG_REPLY), SA, TS }

(l) MOBIKE's return-routability check (RFC 4555 §5.2): the data plane
    moves only once the new address answered the gateway's INFORMATIONAL
    with COOKIE2; while the gateway's requests cannot reach it, the
    outbound SA stays on the old address (test docstring);
(d) `phalanxctl clients` lists both with identity, address, outer address
    and traffic, `phalanxctl pools` the leases (online / offline as clients
    come and go), and `phalanxctl disconnect ADDRESS` deletes one client's
    IKE SA (strongSwan sees the Delete) and leaves the other.
"""

import os
import re
import time

import ikegw
import phxnet
import pki
import swan

POOL = "10.3.0.0/24"
GWA_CLEAR_V4 = "10.1.0.1"


def gateway(topo, pools=(("rw4", POOL),), dual_stack=False):
    """phalanxd on gwB: one responder connection for any client with PSK,
    the pool, and routes: the pool into the TUN, site A back over the WAN
    (bob's IKE comes from hostA through gwA)."""
    conn = ikegw.site_conn("gwB", False, esp_proposals=["aes128gcm16-noesn"])
    conn.name = "rw"
    conn.remote_addr = None
    conn.remote_id = None
    conn.pools = list(pools)
    conn.children[0].local_ts = list(phxnet.SITEB) if dual_stack else [phxnet.SITEB[0]]
    conn.children[0].remote_ts = ["0.0.0.0/0", "::/0"] if dual_stack else ["0.0.0.0/0"]
    return start_gateway(topo, conn)


def start_gateway(topo, conn):
    """Starts phalanxd on gwB for `conn` and routes: its pools into the TUN,
    site A back over the WAN (bob's IKE comes from hostA through gwA)."""
    gw = ikegw.PhalanxIke(topo, "gwB", conn)
    ikegw.start_all(gw)
    topo.run("gwB", ["ip", "route", "replace", phxnet.SITEA[0], "via", phxnet.GWA_WAN_V4])
    for _, addrs in conn.pools:
        topo.run("gwB", ["ip", "route", "replace", addrs, "dev", phxnet.TUN])
    return gw


def client(topo, ns, identity, local_addr, dual_stack=False, mobike=False, eap=None):
    """A strongSwan End-User in namespace `ns` asking for an IPv4 address
    (and an IPv6 one, `dual_stack`); PSK, or with `eap` = (password, PKI
    paths) EAP-MSCHAPv2, trusting the gateway's CA."""
    conn = ikegw.site_conn("gwA", True, esp_proposals=["aes128gcm16-noesn"])
    conn.name = "home"
    if eap:
        password, paths = eap
        conn.auth = "eap-mschapv2"
        conn.psk = password
        conn.ca = paths["ca"]
        conn.remote_id = pki.identity("gwB", "fqdn")
    conn.local_addr = local_addr
    conn.local_id = identity
    conn.vips = ["0.0.0.0", "::"] if dual_stack else ["0.0.0.0"]
    conn.mobike = mobike
    conn.children[0].local_ts = ["dynamic"]
    conn.children[0].remote_ts = list(phxnet.SITEB) if dual_stack else [phxnet.SITEB[0]]
    charon = swan.Charon(topo, ns, name="charon-" + identity.split("@")[0])
    charon.configure(conn, install_virtual_ip=True)
    charon.start()
    charon.load()
    return charon


def virtual_ips(charon):
    """Every address strongSwan got."""
    sas = charon.list_sas()
    assert sas, "no IKE SA: " + charon.log()[-3000:]
    return sas[0].get("local-vips", [])


def virtual_ip(charon):
    """The address strongSwan got (`local-vips` of its IKE SA)."""
    vips = virtual_ips(charon)
    assert len(vips) == 1, vips
    return vips[0]


def ping_from(topo, ns, dest, count=3):
    return topo.run(ns, ["ping", "-c", str(count), "-i", "0.2", "-W", "2", dest], check=False).returncode == 0


def gw_leases(gw):
    """{remote identity: virtual IPs} of gwB's established IKE SAs."""
    return {sa["remote_id"]: sa.get("virtual_ips", []) for sa in gw.gateway.ctl("ike")
            if sa["state"] == "ESTABLISHED"}


def test_two_clients_each_get_an_address_and_reach_hostb(topo):
    """(a) and (b) of the module doc."""
    gw = gateway(topo)
    alice = client(topo, "gwA", "alice@example.com", phxnet.GWA_WAN_V4)
    topo.run("hostA", ["ip", "route", "replace", phxnet.GWB_WAN_V4, "via", GWA_CLEAR_V4])
    bob = client(topo, "hostA", "bob@example.com", phxnet.HOSTA_V4)
    alice.initiate("net")
    bob.initiate("net")
    a_vip, b_vip = virtual_ip(alice), virtual_ip(bob)
    assert a_vip != b_vip, (a_vip, b_vip)
    for vip in (a_vip, b_vip):
        assert re.fullmatch(r"10\.3\.0\.\d+", vip), vip
    assert gw_leases(gw) == {"alice@example.com": [a_vip], "bob@example.com": [b_vip]}, gw.gateway.ctl("ike")
    # Each client's TSi was narrowed to its address.
    for sa in gw.gateway.ctl("ike"):
        child = sa["children"][0]
        assert child["remote_ts"] == [sa["virtual_ips"][0] + "/32"], sa
    for ns, vip in (("gwA", a_vip), ("hostA", b_vip)):
        assert ping_from(topo, ns, phxnet.HOSTB_V4), "{} ({}) cannot reach hostB".format(ns, vip)
    per_client = [p for p in gw.gateway.ctl("policies") if "@" in p["name"]]
    assert sorted(p["destination"] for p in per_client) == sorted([a_vip + "/32", b_vip + "/32"]), per_client
    for sa in gw.gateway.ctl("ike"):
        child = sa["children"][0]
        assert child["packets_in"] >= 3 and child["packets_out"] >= 3, sa
    # What an operator sees: phalanxctl clients and pools.
    clients = {c["identity"]: c for c in gw.gateway.ctl("clients")}
    assert sorted(clients) == ["alice@example.com", "bob@example.com"], clients
    assert clients["alice@example.com"]["virtual_ips"] == [a_vip]
    assert clients["alice@example.com"]["auth"] == "psk", clients
    assert clients["alice@example.com"]["remote"].startswith(phxnet.GWA_WAN_V4 + ":"), clients
    assert clients["bob@example.com"]["remote"].startswith(phxnet.HOSTA_V4 + ":"), clients
    assert all(c["bytes_in"] > 0 and c["bytes_out"] > 0 for c in clients.values()), clients
    pools = gw.gateway.ctl("pools")
    assert [(p["name"], p["size"], p["online"], p["offline"]) for p in pools] == [("rw4", 254, 2, 0)], pools

    # (b): alice leaves and comes back.
    alice.terminate("home")
    assert ikegw.wait_for(lambda: "alice@example.com" not in gw_leases(gw), 10), gw.gateway.ctl("ike")
    assert ping_from(topo, "hostA", phxnet.HOSTB_V4), "bob lost his tunnel when alice left"
    assert [(p["online"], p["offline"]) for p in gw.gateway.ctl("pools")] == [(1, 1)]
    # One line per End-User event, with identity and address.
    log = gw.log()
    assert re.search(r"client connected .*identity=alice@example.com virtual_ips={}".format(re.escape(a_vip)), log), log[-3000:]
    assert re.search(r"client disconnected .*identity=alice@example.com virtual_ips={}".format(re.escape(a_vip)), log), log[-3000:]
    alice.initiate("net")
    assert virtual_ip(alice) == a_vip, "a reconnecting End-User gets its address again"
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4)

    # (d): the operator disconnects bob by his virtual IP.
    out = gw.gateway.ctl("disconnect", b_vip)
    assert out["outcome"] == "terminating", out
    assert ikegw.wait_for(lambda: "bob@example.com" not in gw_leases(gw), 10), gw.gateway.ctl("ike")
    assert ikegw.wait_for(lambda: not bob.list_sas(), 10), bob.list_sas()
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4), "alice lost her tunnel when bob was disconnected"
    refused = gw.gateway.ctl_raw("disconnect", "nobody@example.com")
    assert refused.returncode == 1, refused
    for c in (alice, bob):
        assert c.alive()
    assert gw.alive(), gw.log()[-3000:]


def test_empty_pool_refuses_the_child_not_the_first_client(topo):
    """(c) of the module doc."""
    gw = gateway(topo, pools=(("rw4", "10.3.0.9/32"),))
    alice = client(topo, "gwA", "alice@example.com", phxnet.GWA_WAN_V4)
    topo.run("hostA", ["ip", "route", "replace", phxnet.GWB_WAN_V4, "via", GWA_CLEAR_V4])
    bob = client(topo, "hostA", "bob@example.com", phxnet.HOSTA_V4)
    alice.initiate("net")
    assert virtual_ip(alice) == "10.3.0.9"
    proc = bob.initiate("net", check=False, timeout=10)
    assert proc.returncode != 0, "bob got a Child SA from an empty pool"
    counters = ikegw.flatten_counters(gw.gateway.ctl("counters"))
    assert ikegw.counter(counters, "virtual_ips_refused") == 1, counters
    assert "INTERNAL_ADDRESS_FAILURE" in bob.log() or "internal address" in bob.log().lower(), bob.log()[-3000:]
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4), "alice lost her tunnel"


def cert_gateway_conn(paths, remote_auth=None):
    """gwB's road-warrior connection: it signs with its certificate of
    `paths` (pki.build's), End-Users authenticate as `remote_auth` says
    (as gwB does when None), addresses from the pool, site B behind."""
    conn = ikegw.site_conn("gwB", False, ids=("fqdn", "fqdn"), auth="pubkey", pki_paths=paths,
                           esp_proposals=["aes128gcm16-noesn"])
    conn.name = "rw"
    conn.remote_addr = None
    conn.remote_id = None
    conn.remote_auth = remote_auth
    conn.pools = [("rw4", POOL)]
    conn.children[0].local_ts = [phxnet.SITEB[0]]
    conn.children[0].remote_ts = ["0.0.0.0/0"]
    return conn


def eap_gateway(topo, paths):
    """phalanxd on gwB: its certificate for itself, EAP-MSCHAPv2 for the
    End-Users, the pool."""
    conn = cert_gateway_conn(paths, "eap-mschapv2")
    conn.eap_secrets = [("alice@example.com", "alice's password"), ("bob@example.com", "bob's password")]
    return start_gateway(topo, conn)


def eap_client(topo, ns, identity, password, local_addr, paths):
    """A strongSwan End-User with EAP-MSCHAPv2."""
    return client(topo, ns, identity, local_addr, eap=(password, paths))


def test_eap_mschapv2_end_users(topo):
    """(e) of the module doc."""
    paths = pki.build(topo.run_dir, "ecdsa-p256")
    gw = eap_gateway(topo, paths)
    alice = eap_client(topo, "gwA", "alice@example.com", "alice's password", phxnet.GWA_WAN_V4, paths)
    topo.run("hostA", ["ip", "route", "replace", phxnet.GWB_WAN_V4, "via", GWA_CLEAR_V4])
    bob = eap_client(topo, "hostA", "bob@example.com", "not bob's password", phxnet.HOSTA_V4, paths)
    alice.initiate("net")
    vip = virtual_ip(alice)
    assert re.fullmatch(r"10\.3\.0\.\d+", vip), vip
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4), "alice cannot reach hostB"
    assert "EAP method EAP_MSCHAPV2 succeeded" in alice.log(), alice.log()[-3000:]
    clients = {c["identity"]: c for c in gw.gateway.ctl("clients")}
    assert list(clients) == ["alice@example.com"], clients
    assert clients["alice@example.com"]["virtual_ips"] == [vip]
    assert clients["alice@example.com"]["auth"] == "eap-mschapv2", clients

    proc = bob.initiate("net", check=False, timeout=10)
    assert proc.returncode != 0, "a wrong password got through"
    # strongSwan gives up on the MSCHAPv2 Failure (E=691) with an
    # INFORMATIONAL AUTHENTICATION_FAILED.
    assert "ERROR_AUTHENTICATION_FAILURE" in bob.log(), bob.log()[-3000:]
    assert ikegw.wait_for(lambda: ikegw.counter(ikegw.flatten_counters(gw.gateway.ctl("counters")),
                                                "eap_failed") == 1, 5), gw.gateway.ctl("counters")
    counters = ikegw.flatten_counters(gw.gateway.ctl("counters"))
    assert ikegw.counter(counters, "eap_succeeded") == 1, counters
    assert 'wrong password for "bob@example.com"' in gw.log(), gw.log()[-3000:]
    assert not [sa for sa in gw.gateway.ctl("ike") if sa["remote_id"] == "bob@example.com"], gw.gateway.ctl("ike")
    # An identity the gateway does not know fails the same way.
    bob.stop()
    carol = eap_client(topo, "hostA", "carol@example.com", "anything", phxnet.HOSTA_V4, paths)
    assert carol.initiate("net", check=False, timeout=10).returncode != 0
    assert ikegw.wait_for(lambda: 'unknown identity "carol@example.com"' in gw.log(), 5), gw.log()[-3000:]
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4), "alice lost her tunnel"
    assert [c["identity"] for c in gw.gateway.ctl("clients")] == ["alice@example.com"]
    assert gw.alive(), gw.log()[-3000:]


def test_expired_client_certificate_is_refused(topo):
    """An End-User authenticating with a certificate that expired
    yesterday: phalanxd answers AUTHENTICATION_FAILED, says why in its log,
    counts it (auth_failed) and keeps no IKE SA (valid certificates:
    test_ike_interop.py)."""
    expired = pki.build(os.path.join(topo.run_dir, "expired"), "ecdsa-p256", expired=("gwA",))
    gw = start_gateway(topo, cert_gateway_conn(expired))

    def cert_client(paths):
        c = ikegw.site_conn("gwA", True, ids=("fqdn", "fqdn"), auth="pubkey", pki_paths=paths,
                            esp_proposals=["aes128gcm16-noesn"])
        c.name = "home"
        c.vips = ["0.0.0.0"]
        c.children[0].local_ts = ["dynamic"]
        c.children[0].remote_ts = [phxnet.SITEB[0]]
        charon = swan.Charon(topo, "gwA", name="charon-cert")
        charon.configure(c, install_virtual_ip=True)
        charon.start()
        charon.load()
        return charon

    alice = cert_client(expired)
    assert alice.initiate("net", check=False, timeout=10).returncode != 0, "an expired certificate got through"
    assert "AUTHENTICATION_FAILED" in alice.log(), alice.log()[-3000:]
    assert ikegw.wait_for(lambda: "certificate expired" in gw.log(), 5), gw.log()[-3000:]
    counters = ikegw.flatten_counters(gw.gateway.ctl("counters"))
    assert ikegw.counter(counters, "auth_failed", scope="ike") == 1, {k: v for k, v in counters.items() if "auth" in k}
    assert not [sa for sa in gw.gateway.ctl("ike") if sa["state"] == "ESTABLISHED"], gw.gateway.ctl("ike")
    assert gw.alive(), gw.log()[-3000:]


def test_gateway_signs_and_the_end_user_shows_a_psk(topo):
    """Local and remote authentication apart: phalanxd signs with its
    certificate (`auth = "pubkey"`) and takes the End-User's PSK
    (`remote_auth = "psk"`); strongSwan authenticates with the PSK and
    checks the gateway's certificate (`remote { auth = pubkey }`)."""
    paths = pki.build(topo.run_dir, "ecdsa-p256")
    gw = start_gateway(topo, cert_gateway_conn(paths, "psk"))
    c = ikegw.site_conn("gwA", True, esp_proposals=["aes128gcm16-noesn"])
    c.name = "home"
    c.local_id = "alice@example.com"
    c.remote_id = pki.identity("gwB", "fqdn")
    c.swan_remote_auth = "pubkey"
    c.ca = paths["ca"]
    c.vips = ["0.0.0.0"]
    c.children[0].local_ts = ["dynamic"]
    c.children[0].remote_ts = [phxnet.SITEB[0]]
    alice = swan.Charon(topo, "gwA", name="charon-mixed")
    alice.configure(c, install_virtual_ip=True)
    alice.start()
    alice.load()
    alice.initiate("net")
    assert re.fullmatch(r"10\.3\.0\.\d+", virtual_ip(alice))
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4), "alice cannot reach hostB"
    log = alice.log()
    assert "authentication of 'gw-b.example' with ECDSA" in log or "with ECDSA" in log, log[-3000:]
    clients = {cl["identity"]: cl for cl in gw.gateway.ctl("clients")}
    assert clients["alice@example.com"]["auth"] == "psk", clients


def test_dual_stack_client_gets_an_address_of_each_family(topo):
    """(f) An End-User asking for both families (`vips = 0.0.0.0,::`) gets
    one address from the IPv4 pool and one from the IPv6 pool, and reaches
    hostB over both."""
    gw = gateway(topo, pools=(("rw4", POOL), ("rw6", "fd03::/64")), dual_stack=True)
    topo.run("gwB", ["ip", "-6", "route", "replace", "fd03::/64", "dev", phxnet.TUN])
    alice = client(topo, "gwA", "alice@example.com", phxnet.GWA_WAN_V4, dual_stack=True)
    alice.initiate("net")
    vips = sorted(virtual_ips(alice), key=lambda a: ":" in a)
    assert len(vips) == 2 and vips[0] == "10.3.0.1" and vips[1] == "fd03::1", vips
    assert gw_leases(gw) == {"alice@example.com": ["10.3.0.1", "fd03::1"]}, gw.gateway.ctl("ike")
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4), "IPv4 through the tunnel"
    assert topo.run("gwA", ["ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", phxnet.HOSTB_V6],
                    check=False).returncode == 0, "IPv6 through the tunnel"
    pools = {p["name"]: p["online"] for p in gw.gateway.ctl("pools")}
    assert pools == {"rw4": 1, "rw6": 1}, pools


def mobike_alice(topo):
    """The gateway and alice in gwA with MOBIKE, up and reaching hostB:
    (gateway, charon, virtual IP, IKE SPIs)."""
    gw = gateway(topo)
    alice = client(topo, "gwA", "alice@example.com", "%any", mobike=True)
    alice.initiate("net")
    vip = virtual_ip(alice)
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4)
    spis = [(sa["spi_i"], sa["spi_r"]) for sa in gw.gateway.ctl("ike")]
    return gw, alice, vip, spis


def move_alice(topo, new):
    """alice's WAN address in gwA becomes `new` (added, then the old one
    removed; the new address must outlive the old primary of its subnet)."""
    topo.run("gwA", ["sysctl", "-qw", "net.ipv4.conf.wan0.promote_secondaries=1"])
    topo.run("gwA", ["ip", "addr", "add", new + "/24", "dev", "wan0"])
    topo.run("gwA", ["ip", "addr", "del", phxnet.GWA_WAN_V4 + "/24", "dev", "wan0"])


def client_remote(gw):
    """The outer address and port of the gateway's (first) client."""
    clients = gw.gateway.ctl("clients")
    return clients[0]["remote"] if clients else ""


def test_mobike_client_moves_to_another_address(topo):
    """(g) of the module doc."""
    gw, alice, vip, spis = mobike_alice(topo)
    before = {c["identity"]: c for c in gw.gateway.ctl("clients")}["alice@example.com"]
    assert before["remote"].startswith(phxnet.GWA_WAN_V4 + ":"), before
    moved = "192.0.2.11"
    move_alice(topo, moved)
    assert ikegw.wait_for(lambda: client_remote(gw).startswith(moved + ":"), 15), (
        client_remote(gw), alice.log()[-3000:])
    assert "UPDATE_SA_ADDRESSES" in alice.log() or "UPD_SA_ADDR" in alice.log(), alice.log()[-3000:]
    assert [(sa["spi_i"], sa["spi_r"]) for sa in gw.gateway.ctl("ike")] == spis, "a new IKE SA"
    assert virtual_ip(alice) == vip
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4), "no traffic from the new address"
    counters = ikegw.flatten_counters(gw.gateway.ctl("counters"))
    assert ikegw.counter(counters, "mobike_updates") >= 1, counters


def test_mobike_client_moves_behind_a_masquerade_under_traffic(topo):
    """MOBIKE through a NAT (RFC 4555 §3.5, RFC 7296 §2.23): alice in
    hostA reaches the gateway through gwA, routed, not translated. She
    moves to another address of her link (10.1.0.22) that gwA now
    masquerades (nftables) behind 192.0.2.1, under a 10 ms ping to hostB
    and a TCP download from hostB (iperf3 -R, 20 Mbit/s, 5 s, which must
    finish):
    strongSwan announces the move with UPDATE_SA_ADDRESSES (and NAT
    detection), the gateway follows it to the translated address and port
    at once, the IKE SA and Child SA are the same, and at most one ping
    sent after the announcement is lost (one round trip here is ~1 ms,
    under one 10 ms ping)."""
    gw = gateway(topo)
    topo.run("hostA", ["ip", "route", "replace", phxnet.GWB_WAN_V4, "via", GWA_CLEAR_V4])
    alice = client(topo, "hostA", "alice@example.com", "%any", mobike=True)
    alice.initiate("net")
    vip = virtual_ip(alice)
    assert ping_from(topo, "hostA", phxnet.HOSTB_V4)
    assert client_remote(gw).startswith(phxnet.HOSTA_V4 + ":"), client_remote(gw)
    spis = [(sa["spi_i"], sa["spi_r"]) for sa in gw.gateway.ctl("ike")]

    # A ping and a TCP download across the move (hostB sends to alice).
    traffic = swan.MoveTraffic(topo, "hostA", vip, "hostB", phxnet.HOSTB_V4)
    moved = "10.1.0.22"
    topo.run("gwA", ["nft", "add", "table", "ip", "phx_nat"])
    topo.run("gwA", ["nft", "add", "chain", "ip", "phx_nat", "post",
                     "{ type nat hook postrouting priority 100 ; }"])
    topo.run("gwA", ["nft", "add", "rule", "ip", "phx_nat", "post", "ip", "saddr", moved, "oifname", "wan0",
                     "masquerade"])
    topo.run("hostA", ["sysctl", "-qw", "net.ipv4.conf.eth0.promote_secondaries=1"])
    topo.run("hostA", ["ip", "addr", "add", moved + "/24", "dev", "eth0"])
    topo.run("hostA", ["ip", "addr", "del", phxnet.HOSTA_V4 + "/24", "dev", "eth0"])
    topo.run("hostA", ["ip", "route", "replace", phxnet.GWB_WAN_V4, "via", GWA_CLEAR_V4])
    assert ikegw.wait_for(lambda: client_remote(gw).startswith(phxnet.GWA_WAN_V4 + ":"), 15), (
        client_remote(gw), alice.log()[-3000:])
    traffic.check(alice)
    assert [(sa["spi_i"], sa["spi_r"]) for sa in gw.gateway.ctl("ike")] == spis, "a new IKE SA"
    assert virtual_ip(alice) == vip
    assert ping_from(topo, "hostA", phxnet.HOSTB_V4), "no traffic from behind the NAT"
    counters = ikegw.flatten_counters(gw.gateway.ctl("counters"))
    assert ikegw.counter(counters, "mobike_updates", scope="ike") >= 1, counters


def outbound_remote(gw):
    """The outer remote address of the gateway's outbound SAs."""
    return sorted({sa["remote"] for sa in gw.gateway.ctl("sas") if str(sa["direction"]).lower().startswith("out")})


def test_mobike_new_address_must_answer_before_traffic_moves(topo):
    """(l) of the module doc. alice (MOBIKE) moves to 192.0.2.11 while an
    nftables rule in her namespace drops every IKE *request* from the
    gateway (R flag clear; responses pass). Her UPDATE_SA_ADDRESSES is
    answered and the IKE SA follows, but the return-routability check
    (HDR, SK {N(COOKIE2)}) never arrives: the outbound SA must stay on
    her old address, however long we wait. Once the rule goes, the
    gateway's retransmitted check is answered with its COOKIE2 and the
    outbound SA moves; pings pass from the new address on the same SAs.
    A gateway that moved its data plane on the UPDATE alone fails the
    first half."""
    gw, alice, vip, spis = mobike_alice(topo)
    assert outbound_remote(gw) == [phxnet.GWA_WAN_V4], outbound_remote(gw)
    # IKE requests from the gateway: R flag (0x20, IKE header octet 19)
    # clear; on port 4500 after the non-ESP marker (four zero octets).
    gwb = phxnet.GWB_WAN_V4
    topo.run("gwA", ["nft", "add", "table", "inet", "phx_rr"])
    topo.run("gwA", ["nft", "add", "chain", "inet", "phx_rr", "in", "{ type filter hook input priority 0 ; }"])
    topo.run("gwA", ["nft", "add", "rule", "inet", "phx_rr", "in", "ip", "saddr", gwb, "udp", "sport", "4500",
                     "@th,64,32", "==", "0", "@th,248,8", "&", "0x20", "==", "0", "counter", "drop"])
    topo.run("gwA", ["nft", "add", "rule", "inet", "phx_rr", "in", "ip", "saddr", gwb, "udp", "sport", "500",
                     "@th,216,8", "&", "0x20", "==", "0", "counter", "drop"])
    moved = "192.0.2.11"
    move_alice(topo, moved)

    def counter(name):
        return ikegw.counter(ikegw.flatten_counters(gw.gateway.ctl("counters")), name, scope="ike")

    assert ikegw.wait_for(lambda: client_remote(gw).startswith(moved + ":"), 15), (
        client_remote(gw), alice.log()[-3000:])
    assert ikegw.wait_for(lambda: counter("mobike_path_checks") >= 1, 5), "no return-routability check sent"
    # The checks go unanswered for 3 s: the data plane must not move.
    time.sleep(3)
    dropped = topo.run("gwA", ["nft", "list", "table", "inet", "phx_rr"]).stdout
    assert re.search(r"counter packets [1-9]", dropped), "the rule dropped no request of the gateway:\n" + dropped
    assert outbound_remote(gw) == [phxnet.GWA_WAN_V4], (
        "the data plane moved to an address that never answered the check: {}; {}; gateway log: {}".format(
            outbound_remote(gw), dropped, gw.log()[-6000:]))
    assert counter("mobike_path_verified") == 0
    topo.run("gwA", ["nft", "delete", "table", "inet", "phx_rr"])
    assert ikegw.wait_for(lambda: outbound_remote(gw) == [moved], 20), (
        outbound_remote(gw), ikegw.flatten_counters(gw.gateway.ctl("counters")), alice.log()[-3000:])
    assert counter("mobike_path_verified") == 1
    assert counter("mobike_path_check_failed") == 0
    assert "COOKIE2" in alice.log() or "COOK2" in alice.log(), alice.log()[-3000:]
    assert [(sa["spi_i"], sa["spi_r"]) for sa in gw.gateway.ctl("ike")] == spis, "a new IKE SA"
    assert virtual_ip(alice) == vip
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4), "no traffic from the new address"


def eap_tls_gateway(topo, paths, eap_tls13=None):
    """phalanxd on gwB: its certificate for IKE and as the EAP-TLS server,
    End-Users' certificates of the same CA (`ca`), the pool."""
    conn = cert_gateway_conn(paths, "eap-tls")
    conn.eap_tls13 = eap_tls13
    return start_gateway(topo, conn)


def eap_tls_client(topo, ns, identity, local_addr, paths, cert, tls_version):
    """A strongSwan End-User with EAP-TLS in namespace `ns`: certificate and
    key `cert` (a pki.build pair) naming `identity` (its IDi and EAP
    identity), TLS `tls_version` only, trusting the gateway's CA of
    `paths`."""
    conn = ikegw.site_conn("gwA", True, esp_proposals=["aes128gcm16-noesn"])
    conn.name = "home"
    conn.auth = "eap-tls"
    conn.cert, conn.key = cert
    conn.ca = paths["ca"]
    conn.remote_id = pki.identity("gwB", "fqdn")
    conn.local_addr = local_addr
    conn.local_id = identity
    conn.vips = ["0.0.0.0"]
    conn.children[0].local_ts = ["dynamic"]
    conn.children[0].remote_ts = [phxnet.SITEB[0]]
    charon = swan.Charon(topo, ns, name="charon-tls-" + ns)
    charon.configure(conn, install_virtual_ip=True, tls_version=tls_version)
    charon.start()
    charon.load()
    return charon


def eap_tls_counts(gw):
    """The eap_tls_* counters of gwB that are not zero, by name."""
    flat = ikegw.flatten_counters(gw.gateway.ctl("counters"))
    shown = {k.rsplit(".", 1)[-1]: v for k, v in flat.items() if k.rsplit(".", 1)[-1].startswith("eap_tls_")}
    assert "eap_tls_succeeded" in shown, "no eap_tls counters: {}".format(sorted(flat))
    return {k: v for k, v in shown.items() if v}


def check_eap_tls_end_user(topo, gw, alice, identity, version):
    """alice (in gwA) authenticated with EAP-TLS `version`, got her address,
    reaches hostB; phalanxctl and the counters say so."""
    alice.initiate("net", timeout=20)
    log = alice.log()
    assert "EAP method EAP_TLS succeeded" in log, log[-3000:]
    assert "negotiated TLS {}".format(version) in log, log[-3000:]
    vip = virtual_ip(alice)
    assert re.fullmatch(r"10\.3\.0\.\d+", vip), vip
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4), "alice cannot reach hostB"
    clients = {c["identity"]: c for c in gw.gateway.ctl("clients")}
    assert list(clients) == [identity], clients
    assert clients[identity]["auth"] == "eap-tls", clients
    assert clients[identity]["virtual_ips"] == [vip], clients
    assert eap_tls_counts(gw) == {"eap_tls_succeeded": 1}, gw.gateway.ctl("counters")
    counters = ikegw.flatten_counters(gw.gateway.ctl("counters"))
    assert ikegw.counter(counters, "eap_succeeded") == 1, counters
    assert gw.alive(), gw.log()[-3000:]


def test_eap_tls_end_user_with_tls12(topo):
    """(j) of the module doc, TLS 1.2 (RFC 5216)."""
    paths = pki.build(topo.run_dir, "ecdsa-p256")
    gw = eap_tls_gateway(topo, paths)
    identity = pki.identity("gwA", "email")
    alice = eap_tls_client(topo, "gwA", identity, phxnet.GWA_WAN_V4, paths, paths["gwA"], "1.2")
    check_eap_tls_end_user(topo, gw, alice, identity, "1.2")


def test_eap_tls_end_user_with_tls13(topo):
    """(j) of the module doc, TLS 1.3 as strongSwan 5.9.8 does it (before
    RFC 9190: no commitment message, the keys of the TLS 1.2 label)."""
    paths = pki.build(topo.run_dir, "ecdsa-p256")
    gw = eap_tls_gateway(topo, paths, eap_tls13="pre-rfc9190")
    identity = pki.identity("gwA", "email")
    alice = eap_tls_client(topo, "gwA", identity, phxnet.GWA_WAN_V4, paths, paths["gwA"], "1.3")
    check_eap_tls_end_user(topo, gw, alice, identity, "1.3")


def test_eap_tls_client_of_an_untrusted_ca_is_refused(topo):
    """(k) of the module doc: mallory (hostA) shows a certificate of
    another CA; alice (gwA) a good one."""
    paths = pki.build(topo.run_dir, "ecdsa-p256")
    # Another key type: another CA name too (pki.build names its CA by
    # key type; a CA of the same name would fail as BadSignature).
    strangers = pki.build(os.path.join(topo.run_dir, "strangers"), "ecdsa-p384")
    gw = eap_tls_gateway(topo, paths)
    identity = pki.identity("gwA", "email")
    alice = eap_tls_client(topo, "gwA", identity, phxnet.GWA_WAN_V4, paths, paths["gwA"], "1.2")
    alice.initiate("net", timeout=20)
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4), "alice cannot reach hostB"

    topo.run("hostA", ["ip", "route", "replace", phxnet.GWB_WAN_V4, "via", GWA_CLEAR_V4])
    mallory_id = pki.identity("gwB", "email")
    mallory = eap_tls_client(topo, "hostA", mallory_id, phxnet.HOSTA_V4, paths, strangers["gwB"], "1.2")
    proc = mallory.initiate("net", check=False, timeout=10)
    assert proc.returncode != 0, "a certificate of an unknown CA got through"
    assert ikegw.wait_for(lambda: "eap_tls_untrusted_certificate" in eap_tls_counts(gw), 5), \
        gw.gateway.ctl("counters")
    assert eap_tls_counts(gw) == {"eap_tls_succeeded": 1, "eap_tls_untrusted_certificate": 1}, \
        gw.gateway.ctl("counters")
    assert re.search(r"EAP authentication failed.*client certificate not trusted.*UnknownIssuer", gw.log()), \
        gw.log()[-3000:]
    assert "unknown ca" in mallory.log().lower(), mallory.log()[-3000:]
    assert not [sa for sa in gw.gateway.ctl("ike") if sa["remote_id"] == mallory_id], gw.gateway.ctl("ike")
    assert [c["identity"] for c in gw.gateway.ctl("clients")] == [identity]
    assert ping_from(topo, "gwA", phxnet.HOSTB_V4), "alice lost her tunnel"
    assert gw.alive(), gw.log()[-3000:]
