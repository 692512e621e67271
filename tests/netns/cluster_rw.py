"""End-Users on the 3-node cluster of tests/netns/cluster.py: the
cluster's road-warrior connection with a pool, strongSwan at gwB as the
End-User, and views of the leases (tests/netns/test_cluster_road_warrior.py,
bench/rw-cluster-download.py)."""

import os
import shutil

import cluster
import ikegw
import phxnet
import swan
from cluster_ike import ESP, SITE_A, SWAN_REPLAY_WINDOW, WAN

POOL = "10.3.0.0/24"
# EAP-MSCHAPv2 End-Users of the cluster (identity -> password).
EAP_USERS = {"carol@example.com": "carol-password", "dave@example.com": "dave-password"}
IDENTITY = "carol@example.com"
# The shared secret of the cluster nodes and the RADIUS server.
RADIUS_SECRET = "cluster radius secret"


def cluster_conn(eap_paths=None, radius=None, node=1):
    """The cluster's side: any End-User with the PSK, site A, the pool;
    with `eap_paths` (pki.build's), its certificate (gwA's, which names
    192.0.2.1) and EAP-MSCHAPv2 for the End-Users: against its own
    [[eap_secret]]s, or relayed to the RADIUS server at address `radius`
    (no accounting: a cluster node refuses it) from the LAN address of
    `node` (the inside virtual address is the kernel's first choice, and
    the server's answers to it would go to the cluster's data plane)."""
    vip, _ = WAN["v4"]
    child = ikegw.Child(local_ts=[SITE_A], remote_ts=["0.0.0.0/0"], esp_proposals=ESP,
                        peer_replay_window=SWAN_REPLAY_WINDOW)
    conn = ikegw.Conn(local_addr=vip, remote_addr=None, local_id=vip, remote_id=None, children=[child],
                      initiator=False, dpd_delay="3s")
    conn.name = "rw"
    conn.pools = [("rw4", POOL)]
    if eap_paths:
        conn.auth = "pubkey"
        conn.cert, conn.key = eap_paths["gwA"]
        conn.ca = eap_paths["ca"]
        conn.remote_auth = "eap-mschapv2"
        conn.eap_secrets = list(EAP_USERS.items())
    if eap_paths and radius:
        conn.remote_auth = "eap-radius"
        conn.eap_secrets = []
        conn.radius = "\n".join(["[radius]", 'timeout = "1s"', "retransmits = 2",
                                 'source = "{}"'.format(cluster.node_addr(node, "lan")), "",
                                 "[[radius.server]]", 'address = "{}"'.format(radius),
                                 'secret = "{}"'.format(RADIUS_SECRET), "acct_port = 0", ""])
    return conn


def end_user_conn(identity=IDENTITY, local_addr=None, mobike=False, eap_paths=None):
    """strongSwan as an End-User (at gwB by default): PSK, asks for an
    address, site A; MOBIKE (RFC 4555) with `mobike`; EAP-MSCHAPv2 with
    its password from EAP_USERS, checking the cluster's certificate, with
    `eap_paths`."""
    vip, gwb = WAN["v4"]
    child = ikegw.Child(local_ts=["dynamic"], remote_ts=[SITE_A], esp_proposals=ESP)
    conn = ikegw.Conn(local_addr=local_addr or gwb, remote_addr=vip, local_id=identity, remote_id=vip,
                      children=[child], dpd_delay="2s")
    conn.name = "home"
    conn.vips = ["0.0.0.0"]
    conn.mobike = mobike
    if eap_paths:
        conn.auth = "eap-mschapv2"
        conn.psk = EAP_USERS.get(identity, "not a known password")
        conn.ca = eap_paths["ca"]
    return conn


def start(cl, lease_len=4096, mobike=False, eap_paths=None, radius=None):
    """Corosync, strongSwan at gwB as the End-User (from any of its
    addresses with `mobike`; EAP-MSCHAPv2 with `eap_paths`, through the
    RADIUS server at address `radius` if given), phalanxd on every node;
    the view complete."""
    cl.config_paths = {}
    for i in range(1, cl.nodes + 1):
        d = cl.node_dir(i)
        conn = cluster_conn(eap_paths, radius, node=i)
        if eap_paths:
            certs = os.path.join(d, "certs")
            os.makedirs(certs, exist_ok=True)
            for src, dst in ((conn.cert, "cert.pem"), (conn.key, "key.pem"), (conn.ca, "ca.pem")):
                shutil.copy(src, os.path.join(certs, dst))
        text = ikegw.render_phalanx_toml(conn, "A", d)
        text = text.replace(os.path.join(d, "gwA.sock"), os.path.join(d, "phalanxd.sock"))
        text += cluster.cluster_table(i, cl.nodes, "packet-rr", lease_len=lease_len, outside=WAN["v4"][0],
                                      inside=cl.vips_in)
        path = os.path.join(d, "phalanxd.toml")
        with open(path, "w") as f:
            f.write(text)
        cl.config_paths["n{}".format(i)] = path
    ids = list(range(1, cl.nodes + 1))
    for i in ids:
        cl.start_corosync(i)
    cl.wait_corosync(ids)
    charon = swan.Charon(cl, "gwB")
    conn = end_user_conn(local_addr="%any", mobike=True) if mobike else end_user_conn(eap_paths=eap_paths)
    charon.configure(conn, retransmit_tries=5, retransmit_timeout=1.0, install_virtual_ip=True)
    charon.start()
    charon.load()
    for i in ids:
        cl.start_node(i)
        # The pool's addresses live behind the tunnel.
        cl._ip("-n", cl.ns["n{}".format(i)], "route", "replace", POOL, "dev", phxnet.TUN)
    cl.wait_cluster_view(ids)
    return charon


def second_end_user(cl, identity, address="192.0.2.3", mac="02:00:00:02:00:fd"):
    """Another End-User on the WAN: its own namespace `gwC` (address
    `address`) with strongSwan, connected."""
    cl.ns["gwC"] = "{}-gwC".format(cl.prefix)
    cl._ns_add("gwC")
    cl._port("gwC", "wan0", "br-wan", "gC-wan", mac, address + "/24")
    charon = swan.Charon(cl, "gwC")
    charon.configure(end_user_conn(identity, address), retransmit_tries=5, retransmit_timeout=1.0,
                     install_virtual_ip=True)
    charon.start()
    charon.load()
    return charon


def leased(cl, i):
    """The virtual IPs of the IKE SAs node i runs."""
    return [ip for sa in cl.gateways["n{}".format(i)].ctl("ike") if sa["state"].upper() == "ESTABLISHED"
            for ip in sa.get("virtual_ips", [])]


def pool_online(gw):
    return {p["name"]: p["online"] for p in gw.ctl("pools")}


def ping_from_vip(cl, count=10, interval=0.05, ns="gwB"):
    """Pings hostA from End-User namespace `ns` (its virtual IP)."""
    return cl.run(ns, ["ping", "-c", str(count), "-i", str(interval), "-W", "1", cluster.HOSTA], check=False)


