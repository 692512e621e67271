#!/usr/bin/env python3
"""The 3-node Phalanx cluster of tests/netns/cluster.py with IKEv2 instead
of static SAs, strongSwan (charon, kernel-libipsec) at site B. Shared by
tests/netns/test_cluster_ike.py and the failover bench
(`FAILOVER_PEER=strongswan bench/cluster-failover.sh`, through
`StrongSwanPeer`).

    hostA -- [br-lan] -- n1 n2 n3 (phalanxd + Corosync, VIP 192.0.2.1) -- [br-wan] -- gwB (charon) -- hostB

* `start(cl, start_action)`: Corosync, charon at gwB and phalanxd with IKE
  on every node, the cluster view complete. The WAN family follows the
  Cluster (`wan6`: IKE and ESP between 2001:db8:f::1 and gwB's
  2001:db8:f::2), the inner one too (`lan6`: the Child SA also carries
  fd01::/64 <-> fd02::/64); a plain Cluster() is IPv4 throughout.
* `runner`, `wait_runner`: which node runs the IKE SA (the others hold
  standby copies); `ike_counter`: its `cluster_ike_*` counters.
* `swan_sa`, `wait_swan_sa`, `wait_child_rekeyed`, `init_count`,
  `exchanges_since`: strongSwan's side (swanctl --list-sas, charon's log).
* `takeover_logged_at`: when phalanxd logged its takeover of the IKE SA.
* `StrongSwanPeer`: the bench's hooks around `cluster.failover_run`.
"""

import datetime
import os
import time

import cluster
import failover_analysis as fa
import ikegw
import swan

SITE_A, SITE_B = "10.1.0.0/24", "10.2.0.0/24"
SITE_A6, SITE_B6 = "fd01::/64", "fd02::/64"
# The IKE and ESP endpoints per WAN family: (the outside virtual address, gwB).
WAN = {"v4": (cluster.VIP_OUT, cluster.GWB_WAN), "v6": (cluster.VIP_OUT6, cluster.GWB_WAN6)}
ESP = ["aes128gcm16"]       # no ESN: kernel-libipsec refuses it
CHILD = "net"
# phalanxd's line when a node takes over the IKE SA of a node that left
# the dispatch view (crates/phalanxd/src/ike/cluster.rs, take_over).
TAKEOVER_LINE = "cluster IKE: took over the IKE SA"
# kernel-libipsec's replay window (fixed; strongSwan's esp_context.c).
SWAN_REPLAY_WINDOW = 128


def selectors(lan6=False):
    """(site A's, site B's) traffic selectors: IPv4, plus IPv6 with `lan6`."""
    return ([SITE_A, SITE_A6], [SITE_B, SITE_B6]) if lan6 else ([SITE_A], [SITE_B])


def cluster_conn(start_action, family="v4", lan6=False):
    """The cluster's side: from the outside virtual address to gwB (over
    IPv4, or IPv6 with `family` "v6"; `lan6`: IPv6 selectors too)."""
    vip, gwb = WAN[family]
    site_a, site_b = selectors(lan6)
    # strongSwan's userspace ESP checks replay with a fixed 128-packet
    # window (INTEROP-NOTES.md): too small for the nodes' skew, so the
    # cluster sends each Child SA from one node (bench/small-window.py).
    child = ikegw.Child(local_ts=site_a, remote_ts=site_b, esp_proposals=ESP,
                        peer_replay_window=SWAN_REPLAY_WINDOW)
    return ikegw.Conn(local_addr=vip, remote_addr=gwb, local_id=vip, remote_id=gwb, children=[child],
                      initiator=start_action, dpd_delay="3s")


def swan_conn(family="v4", lan6=False):
    """strongSwan's side, with liveness checks every 2 s."""
    vip, gwb = WAN[family]
    site_a, site_b = selectors(lan6)
    child = ikegw.Child(local_ts=site_b, remote_ts=site_a, esp_proposals=ESP)
    return ikegw.Conn(local_addr=gwb, remote_addr=vip, local_id=gwb, remote_id=vip, children=[child],
                      dpd_delay="2s")


def node_config(i, nodes, node_dir, start_action, scheme="packet-rr", family="v4", lan6=False, **cluster_kw):
    """phalanxd TOML of node i: IKE (ikegw's rendering) and [cluster]
    (its outside address the IKE endpoint of `family`)."""
    cluster_kw.setdefault("outside", WAN[family][0])
    text = ikegw.render_phalanx_toml(cluster_conn(start_action, family, lan6), "A", node_dir)
    text = text.replace(os.path.join(node_dir, "gwA.sock"), os.path.join(node_dir, "phalanxd.sock"))
    if start_action:
        text = text.replace('start_action = "none"', 'start_action = "start"')
    return text + cluster.cluster_table(i, nodes, scheme, **cluster_kw)


def start(cl, start_action=False, scheme="packet-rr", **cluster_kw):
    """Corosync, charon at gwB, phalanxd with IKE on every node; the
    cluster view complete; the families of `cl` (wan6, lan6). Returns
    the Charon."""
    cluster_kw.setdefault("inside", cl.vips_in)
    cl.config_paths = {}
    for i in range(1, cl.nodes + 1):
        d = cl.node_dir(i)
        path = os.path.join(d, "phalanxd.toml")
        with open(path, "w") as f:
            f.write(node_config(i, cl.nodes, d, start_action, scheme=scheme, family=cl.wan_family, lan6=cl.lan6,
                                **cluster_kw))
        cl.config_paths["n{}".format(i)] = path
    for i in range(1, cl.nodes + 1):
        cl.start_corosync(i)
    ids = list(range(1, cl.nodes + 1))
    cl.wait_corosync(ids)
    charon = swan.Charon(cl, "gwB")
    charon.configure(swan_conn(cl.wan_family, cl.lan6), retransmit_tries=5, retransmit_timeout=1.0)
    charon.start()
    charon.load()
    for i in ids:
        cl.start_node(i)
    cl.wait_cluster_view(ids)
    return charon


# --------------------------------------------------------- the cluster side
def ike_sas(gw):
    """The IKE SAs this node runs (standby copies are not listed)."""
    return ikegw.phalanx_view(gw.ctl("ike"))


def runner(cl, nodes):
    """{node index: its IKE SAs} for the nodes among `nodes` that run an
    established one."""
    out = {}
    for i in nodes:
        sas = [sa for sa in ike_sas(cl.gateways["n{}".format(i)]) if sa["state"].upper() == "ESTABLISHED"]
        if sas:
            out[i] = sas
    return out


def wait_runner(cl, nodes, seconds=10):
    """(node, its IKE SAs) once exactly one of `nodes` runs the IKE SA."""
    deadline = time.monotonic() + seconds
    while True:
        found = runner(cl, nodes)
        if len(found) == 1:
            (i, sas), = found.items()
            return i, sas
        if time.monotonic() > deadline:
            raise AssertionError("not exactly one node runs the IKE SA: {}".format(found))
        time.sleep(0.2)


def ike_counter(gw, name):
    """A `cluster_ike_*` counter of node `gw` (phalanxctl cluster)."""
    counters = {c["name"]: c["count"] for c in gw.ctl("cluster")["counters"]}
    return counters.get("cluster_ike_" + name, 0)


def same_spi(a, b):
    """Hex SPIs equal up to case and leading zeros."""
    return a.lower().lstrip("0") == b.lower().lstrip("0")


def _log_time(line):
    """Unix time of a phalanxd log line (tracing's RFC 3339 UTC stamp), or None."""
    stamp = line.split(" ", 1)[0].rstrip("Z")
    if "T" not in stamp:
        return None
    whole, _, frac = stamp.partition(".")
    try:
        t = datetime.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None
    return t.timestamp() + (float("0." + frac) if frac.isdigit() else 0.0)


def takeover_logged_at(cl, i):
    """Unix times at which node i's phalanxd logged taking over an IKE SA."""
    return [t for t in (_log_time(line) for line in cl.log_of("phalanxd-n{}".format(i)).splitlines()
                        if TAKEOVER_LINE in line) if t is not None]


# ------------------------------------------------------- strongSwan's side
def swan_sa(charon):
    """strongSwan's one established IKE SA: (spi_i, spi_r, child SPIs)."""
    sas = [sa for sa in charon.list_sas() if sa.get("state") == "ESTABLISHED"]
    assert len(sas) == 1, sas
    sa = sas[0]
    children = sa.get("child-sas", {})
    spis = sorted((c.get("spi-in"), c.get("spi-out")) for c in children.values()
                  if isinstance(c, dict) and c.get("state") == "INSTALLED")
    return sa["initiator-spi"], sa["responder-spi"], spis


def wait_swan_sa(charon, seconds=20):
    """swan_sa once the IKE SA has an installed Child SA."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            sa = swan_sa(charon)
            if sa[2]:
                return sa
        except AssertionError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("strongSwan has no established IKE SA with a Child SA: {}".format(
                charon.list_sas()))
        time.sleep(0.2)


def wait_child_rekeyed(charon, children, seconds=20):
    """swan_sa once exactly one Child SA is installed and it is not one of
    `children` (the SPI pairs before the rekey)."""
    deadline = time.monotonic() + seconds
    while True:
        now = swan_sa(charon)
        if now[2] and now[2] != children and len(now[2]) == 1:
            return now
        if time.monotonic() > deadline:
            raise AssertionError("Child SA not rekeyed: {} -> {}".format(children, now[2]))
        time.sleep(0.2)


def init_count(charon):
    """IKE_SA_INIT messages charon generated or parsed."""
    return sum(1 for e in swan.log_exchanges(charon.log()) if e["exchange"] == "IKE_SA_INIT")


def charon_clock(t):
    """Unix time -> seconds since local midnight (charon's log stamps)."""
    lt = time.localtime(t)
    return lt.tm_hour * 3600 + lt.tm_min * 60 + lt.tm_sec + (t % 1.0)


def exchanges_since(charon, t):
    """charon's logged IKE messages (swan.log_exchanges) at or after unix time t."""
    since = charon_clock(t) - 0.001
    return [e for e in swan.log_exchanges(charon.log()) if e["t"] >= since]


def dpd_answered(log, initiator="swan"):
    """Message ids of liveness checks (INFORMATIONAL without payloads,
    RFC 7296 §1.4) answered, in charon log entries `log`: sent by charon
    and answered (initiator "swan"), or sent by the cluster and answered
    by charon ("cluster")."""
    ask, answer = ("generating", "parsed") if initiator == "swan" else ("parsed", "generating")
    asked = {e["id"] for e in log if e["exchange"] == "INFORMATIONAL" and e["dir"] == ask
             and e["kind"] == "request" and not e["payloads"]}
    return sorted(e["id"] for e in log if e["exchange"] == "INFORMATIONAL" and e["dir"] == answer
                  and e["kind"] == "response" and e["id"] in asked)


# ------------------------------------------------------------ the bench
class StrongSwanPeer(cluster.StaticPeer):
    """strongSwan at site B for `cluster.failover_run`: the cluster comes up
    with IKE, strongSwan initiates; around the failure it records the IKE
    SA (owner, SPIs, IKE_SA_INIT count); after the traffic it rekeys the
    Child SA, checks it carries a ping, waits for one of strongSwan's
    liveness checks to be answered, and reads the WAN capture's IKE
    messages: which node answered each exchange after the failure."""

    name = "strongswan"
    description = "strongSwan 5.9 (charon, kernel-libipsec) at gwB, IKEv2 (the cluster is the responder)"

    def __init__(self, cl, scheme="packet-rr", **cluster_kw):
        super().__init__(cl)
        self.charon = start(cl, scheme=scheme, **cluster_kw)
        self.charon.initiate(CHILD, ike="site", timeout=20)
        self.sa_at_start = wait_swan_sa(self.charon)
        self.owner, _ = wait_runner(cl, range(1, cl.nodes + 1))
        if not cl.wait_ping("hostA", cluster.HOSTB, 15):
            raise RuntimeError("no ping hostA -> hostB through the IKE Child SA")
        # charon's ESP arrives on its UDP socket: what a full buffer drops
        # there is lost before strongSwan sees it (INTEROP-NOTES.md).
        self.rcvbuf_at_start = cluster.udp_rcvbuf_errors(cl, "gwB")

    def out_spi(self):
        """The cluster's outbound SPI: strongSwan's inbound one."""
        spi_in = self.sa_at_start[2][0][0]
        return int(spi_in, 16)

    def before_failure(self, res):
        # Who runs the IKE SA right now (false suspicions may have moved
        # it since the start; more than one is a split the bench reports).
        res["ike_runners_before"] = sorted(runner(self.cl, range(1, self.cl.nodes + 1)))
        res["ike_owner_before"] = self.owner
        res["victim_role"] = "IKE owner" if res["failed"] in res["ike_runners_before"] else "not owner"
        if len(res["ike_runners_before"]) != 1:
            res["victim_role"] += ", IKE SA run by " + "+".join("n{}".format(i) for i in res["ike_runners_before"])
        res["ike_spis_before"] = list(self.sa_at_start[:2])
        res["ike_sa_init_before"] = init_count(self.charon)

    def after_traffic(self, res, t_fail, survivors):
        """The IKE checks after the failure (the capture still runs)."""
        cl, charon = self.cl, self.charon
        deadline = time.monotonic() + 5
        while True:
            found = runner(cl, survivors)
            if len(found) == 1 or (found and time.monotonic() > deadline):
                break
            if time.monotonic() > deadline:
                raise AssertionError("no survivor runs the IKE SA")
            time.sleep(0.2)
        res["ike_runners_after"] = sorted(found)
        after, sas = min(found.items())
        res["ike_owner_after"] = "+".join(str(i) for i in sorted(found))
        res["ike_spis_runner"] = [sas[0]["spi_i"], sas[0]["spi_r"]]
        # Every takeover of the IKE SA after the failure, by node: the first
        # is the handover of the IKE SA; more mean it moved on (a false
        # suspicion of the first successor).
        res["ike_takeovers_ms"] = {i: [(t - t_fail) * 1000.0 for t in takeover_logged_at(cl, i) if t >= t_fail]
                                   for i in survivors}
        first = min((ts[0], i) for i, ts in res["ike_takeovers_ms"].items() if ts) \
            if any(res["ike_takeovers_ms"].values()) else (None, None)
        # The handover of the IKE SA: a takeover within 1 s of the failure.
        if first[0] is not None and first[0] > 1000.0:
            first = (None, None)
        res["ike_takeover_ms"], res["ike_first_successor"] = first
        res["ike_moves"] = sum(len(ts) for ts in res["ike_takeovers_ms"].values())
        res["ike_counters"] = {i: {k: ike_counter(cl.gateways["n{}".format(i)], k)
                                   for k in ("takeovers", "takeover_failures", "demotions", "imported")}
                               for i in survivors}
        _, _, children = swan_sa(charon)
        res["t_rekey"] = time.time()
        charon.rekey(child=CHILD)
        res["ike_spis_after"] = list(wait_child_rekeyed(charon, children)[:2])
        res["ping_after_rekey"] = cl.wait_ping("hostA", cluster.HOSTB, 10)
        deadline = time.monotonic() + 15
        while not dpd_answered(exchanges_since(charon, res["t_rekey"])) and time.monotonic() < deadline:
            time.sleep(0.25)
        log = exchanges_since(charon, t_fail)
        res["swan_dpd_answered"] = dpd_answered(log)
        res["cluster_dpd_answered"] = dpd_answered(log, initiator="cluster")
        res["ike_sa_init_after"] = init_count(charon) - res["ike_sa_init_before"]
        res["charon_alive"] = charon.alive()
        res["charon_rcvbuf_drops"] = cluster.udp_rcvbuf_errors(cl, "gwB") - self.rcvbuf_at_start
        # The WAN capture (no immediate mode) hands a ring block over when
        # it fills or after libpcap's 1 s timeout: let the last one retire.
        time.sleep(1.5)

    def analyse(self, res, pcap, t_fail):
        """Who sent the IKE messages on the wire after the failure."""
        macs = {cluster.node_mac(i, "wan"): i for i in range(1, self.cl.nodes + 1)}
        msgs = fa.read_ike(pcap)
        res["wire_ike"] = fa.ike_answers(msgs, macs, t_fail, self.cl.vip_out)
        res["wire_ike"]["ike_sa_init"] = sum(1 for m in msgs if m.exchange == fa.IKE_SA_INIT)
        res["ike_kept"] = (all(same_spi(a, b) for a, b in zip(res["ike_spis_before"], res["ike_spis_after"]))
                           and all(same_spi(a, b) for a, b in zip(res["ike_spis_before"],
                                                                    res["ike_spis_runner"])))

    def victim(self, rep, mode):
        """Cut: always the IKE owner. Kill: the IKE owner in odd
        repetitions, a node that does not run the IKE SA in even ones."""
        self.planned = "owner" if mode == "cut" or rep % 2 == 1 else "other"
        if self.planned == "owner":
            return self.owner
        others = [i for i in range(1, self.cl.nodes + 1) if i != self.owner]
        return others[(rep // 2 - 1) % len(others)]

    def victim_now(self, planned):
        """The node that runs the IKE SA now (false suspicions may have
        moved it since the start), or one that does not."""
        found = sorted(runner(self.cl, range(1, self.cl.nodes + 1)))
        if len(found) != 1:
            return planned
        if self.planned == "owner":
            return found[0]
        return planned if planned != found[0] else min(set(range(1, self.cl.nodes + 1)) - {found[0]})

    def columns(self):
        return [("IKE runner after", "{}"), ("IKE takeover ms (phalanxd log)", "{:.1f}"),
                ("IKE takeovers", "{}"), ("IKE SPIs kept", "{}"),
                ("new IKE_SA_INIT (log / wire)", "{}"), ("answered after the failure (wire)", "{}"),
                ("strongSwan DPD answered", "{}"), ("gwB UDP buffer drops", "{}")]

    def row(self, res):
        w = res["wire_ike"]
        answered = ", ".join("{} by {}".format(k, "/".join("n{}".format(n) for n in v))
                             for k, v in w["answered_by"].items()) or "none"
        if w["unanswered"]:
            answered += "; unanswered: " + ", ".join(w["unanswered"])
        ids = w["own_msg_ids"]
        if ids["after"]:
            answered += "; own requests by {}, IDs {} → {}..{}".format(
                "/".join("n{}".format(n) for n in w["requests_by"].get("INFORMATIONAL", [])) or "?",
                ids["before"][0] if ids["before"] else "-", ids["after"][0], ids["after"][-1])
        return {"failed": "{} ({})".format(res["failed"], res["victim_role"]),
                "IKE runner after": "+".join("n{}".format(i) for i in res["ike_runners_after"]),
                "IKE takeover ms (phalanxd log)": res["ike_takeover_ms"],
                "IKE takeovers": res["ike_moves"],
                "IKE SPIs kept": "yes" if res["ike_kept"] else "NO",
                "new IKE_SA_INIT (log / wire)": "{} / {}".format(res["ike_sa_init_after"], w["ike_sa_init"]),
                "answered after the failure (wire)": answered,
                "strongSwan DPD answered": "yes" if res["swan_dpd_answered"] else "no",
                "gwB UDP buffer drops": res.get("charon_rcvbuf_drops", "?")}
