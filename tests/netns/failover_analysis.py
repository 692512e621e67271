#!/usr/bin/env python3
"""What a WAN capture says about a cluster failover (pure functions, no I/O
besides reading the pcap; used by tests/netns/test_cluster.py and
bench/cluster-failover.sh through tests/netns/cluster.py).

* `read_esp(path)`: every ESP packet of a pcap (plain ESP or ESP in UDP 4500,
  RFC 3948 §2.2: a non-zero first word; over IPv4 or IPv6), with time, MACs,
  addresses, SPI, sequence number and the 8-byte explicit IV (RFC 4106 §3.1).
* `read_neighbor_advertisements(path)`: every IPv6 neighbour advertisement
  (RFC 4861 §4.4): who sent it (source MAC), for which target, with which
  flags and target link-layer address.
* `node_of(pkt)`: the sending node from the IV: Phalanx cluster nodes use
  node-partitioned IVs, node id in the top 16 bits.
* `duplicates`: (SPI, IV) and (SPI, seq) pairs seen more than once.
* `handover`: last ESP packet of the failed node -> first ESP packet a
  survivor sends with a sequence number from a takeover lease.
* `read_ike(path)`, `ike_answers`: the IKE messages of a pcap (UDP 500, or
  4500 behind the non-ESP marker) and which node answered the peer's
  requests after a failure (nodes send from their own MAC).
* `markdown_table`, `summary`: the bench's result rows and per-mode summary.

CLI: `failover_analysis.py PCAP [--spi SPI] [--failed N]` prints the summary.
"""

import argparse
import collections
import ipaddress
import json
import struct
import sys

PCAP_MAGIC = {0xa1b2c3d4: 1e-6, 0xa1b23c4d: 1e-9}
LINKTYPE_ETHERNET = 1
NATT_PORT = 4500
ETHERTYPE_IPV4, ETHERTYPE_IPV6 = b"\x08\x00", b"\x86\xdd"
IPV6_HEADER_LEN = 40                     # RFC 8200 §3
IPPROTO_ICMPV6 = 58
# RFC 4861 §4.4: Neighbor Advertisement, its flags, and §4.6.1 the
# Target Link-Layer Address option.
ICMPV6_NA = 136
NA_ROUTER, NA_SOLICITED, NA_OVERRIDE = 0x80, 0x40, 0x20
ND_OPT_TARGET_LLA = 2

EspPacket = collections.namedtuple("EspPacket", "ts src_mac dst_mac src dst spi seq iv length")
NeighborAdvert = collections.namedtuple("NeighborAdvert", "ts src_mac dst_mac src dst target flags tlla")
IkeMessage = collections.namedtuple("IkeMessage", "ts src_mac src dst spi_i spi_r exchange response msg_id")
IKE_PORT = 500
# RFC 7296 §3.1: exchange types and the Response flag.
IKE_SA_INIT, IKE_AUTH, CREATE_CHILD_SA, INFORMATIONAL = 34, 35, 36, 37
EXCHANGE_NAMES = {IKE_SA_INIT: "IKE_SA_INIT", IKE_AUTH: "IKE_AUTH", CREATE_CHILD_SA: "CREATE_CHILD_SA",
                  INFORMATIONAL: "INFORMATIONAL"}
IKE_FLAG_RESPONSE = 0x20


def _mac(b):
    return ":".join("{:02x}".format(x) for x in b)


def _ip(b):
    return ".".join(str(x) for x in b)


class PcapTail:
    """A classic pcap file that may still be written: each `read` returns
    the complete records written since the previous one, [(timestamp,
    frame bytes)], and leaves a truncated last record for the next."""

    def __init__(self, path):
        self.path, self.offset, self.record, self.scale = path, 0, None, None

    def read(self):
        return list(self.frames())

    def frames(self):
        with open(self.path, "rb") as f:
            if self.record is None and not self._header(f):
                return
            f.seek(self.offset)
            while True:
                h = f.read(16)
                if len(h) < 16:
                    return
                sec, frac, caplen, _ = self.record.unpack(h)
                data = f.read(caplen)
                if len(data) < caplen:
                    return
                self.offset += 16 + caplen
                yield sec + frac * self.scale, data

    def _header(self, f):
        head = f.read(24)
        if len(head) < 24:
            return False
        magic = struct.unpack("<I", head[:4])[0]
        endian = "<"
        if magic not in PCAP_MAGIC:
            magic = struct.unpack(">I", head[:4])[0]
            endian = ">"
        if magic not in PCAP_MAGIC:
            raise ValueError("{}: not a pcap file (pcapng?)".format(self.path))
        if struct.unpack(endian + "I", head[20:24])[0] != LINKTYPE_ETHERNET:
            raise ValueError("{}: not an Ethernet capture".format(self.path))
        self.record, self.scale, self.offset = struct.Struct(endian + "IIII"), PCAP_MAGIC[magic], 24
        return True


def _frames(path):
    """(timestamp, frame bytes) of a classic pcap file; a truncated last
    record (capture still running) ends the iteration."""
    return PcapTail(path).frames()


def _ip6(b):
    return str(ipaddress.IPv6Address(bytes(b)))


def _ip_packet(frame):
    """(source, destination, protocol, payload, total length) of the IPv4
    or IPv6 packet in an Ethernet frame, or None. IPv6: the protocol is the
    fixed header's Next Header (RFC 8200 §3); neither gateway sends
    extension headers, so a packet with one is not parsed further."""
    if len(frame) >= 34 and frame[12:14] == ETHERTYPE_IPV4:
        ip = frame[14:]
        ihl = (ip[0] & 0x0f) * 4
        return _ip(ip[12:16]), _ip(ip[16:20]), ip[9], ip[ihl:], struct.unpack("!H", ip[2:4])[0]
    if len(frame) >= 14 + IPV6_HEADER_LEN and frame[12:14] == ETHERTYPE_IPV6:
        ip = frame[14:]
        total = IPV6_HEADER_LEN + struct.unpack("!H", ip[4:6])[0]
        return _ip6(ip[8:24]), _ip6(ip[24:40]), ip[6], ip[IPV6_HEADER_LEN:], total
    return None


def parse_esp(ts, frame):
    """The EspPacket in an Ethernet frame, or None (not ESP over IPv4 or IPv6)."""
    packet = _ip_packet(frame)
    if packet is None:
        return None
    src, dst, proto, payload, total = packet
    if proto == 17:
        if len(payload) < 8 or NATT_PORT not in struct.unpack("!HH", payload[:4]):
            return None
        payload = payload[8:]
        # RFC 3948 §2.2: a zero first word is the non-ESP marker (IKE).
        if len(payload) < 8 or payload[:4] == b"\0\0\0\0":
            return None
    elif proto != 50:
        return None
    if len(payload) < 8:
        return None
    spi, seq = struct.unpack("!II", payload[:8])
    iv = int.from_bytes(payload[8:16], "big") if len(payload) >= 16 else None
    return EspPacket(ts, _mac(frame[6:12]), _mac(frame[0:6]), src, dst, spi, seq, iv, total)


def parse_na(ts, frame):
    """The NeighborAdvert (RFC 4861 §4.4) in an Ethernet frame, or None:
    ICMPv6 type 136 right after the IPv6 header; `flags` is the octet that
    holds R, S and O; `tlla` the Target Link-Layer Address option's MAC
    (§4.6.1), None without one."""
    packet = _ip_packet(frame)
    if packet is None or frame[12:14] != ETHERTYPE_IPV6:
        return None
    src, dst, proto, icmp, _ = packet
    if proto != IPPROTO_ICMPV6 or len(icmp) < 24 or icmp[0] != ICMPV6_NA:
        return None
    tlla, opts = None, icmp[24:]
    while len(opts) >= 8 and opts[1] > 0:
        size = opts[1] * 8
        if opts[0] == ND_OPT_TARGET_LLA and size >= 8:
            tlla = _mac(opts[2:8])
        opts = opts[size:]
    return NeighborAdvert(ts, _mac(frame[6:12]), _mac(frame[0:6]), src, dst, _ip6(icmp[8:24]), icmp[4], tlla)


def parse_ike(ts, frame):
    """The IkeMessage (header fields, RFC 7296 §3.1) in an Ethernet frame,
    or None: UDP to or from port 500, or 4500 with the four zero octets of
    the non-ESP marker (RFC 3948 §2.2)."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return None
    ip = frame[14:]
    udp = ip[(ip[0] & 0x0f) * 4:]
    if len(udp) < 8:
        return None
    ports = struct.unpack("!HH", udp[:4])
    ike = udp[8:]
    if NATT_PORT in ports:
        if ike[:4] != b"\0\0\0\0":
            return None
        ike = ike[4:]
    elif IKE_PORT not in ports:
        return None
    if len(ike) < 28:
        return None
    exchange, flags, msg_id = ike[18], ike[19], struct.unpack("!I", ike[20:24])[0]
    return IkeMessage(ts, _mac(frame[6:12]), _ip(ip[12:16]), _ip(ip[16:20]), ike[0:8].hex(), ike[8:16].hex(),
                      exchange, bool(flags & IKE_FLAG_RESPONSE), msg_id)


def _read(path, parse):
    """What `parse(ts, frame)` finds in each frame of the pcap at `path`, in capture order."""
    return [x for x in (parse(ts, frame) for ts, frame in _frames(path)) if x is not None]


def read_ike(path):
    """Every IKE message in the pcap at `path`, in capture order."""
    return _read(path, parse_ike)


def ike_answers(msgs, mac_to_node, t_from, vip):
    """What the cluster (source address `vip`; the node from the source
    MAC) did in IKE from `t_from` on: the nodes that answered each kind of
    the peer's requests, the nodes that sent requests of their own, and
    the peer's requests no node answered (matched by SPIs, exchange and
    Message ID; retransmissions count once)."""
    late = [m for m in msgs if m.ts >= t_from]
    answered, sent, answers = {}, {}, set()
    for m in late:
        if m.src != vip:
            continue
        name = EXCHANGE_NAMES.get(m.exchange, str(m.exchange))
        node = mac_to_node.get(m.src_mac, 0)
        (answered if m.response else sent).setdefault(name, set()).add(node)
        if m.response:
            answers.add((m.spi_i, m.exchange, m.msg_id))
    asked = {(m.spi_i, m.exchange, m.msg_id) for m in late if m.src != vip and not m.response}
    unanswered = sorted("{} {}".format(EXCHANGE_NAMES.get(x, x), i) for _, x, i in asked - answers)
    # The cluster's own requests: Message IDs go on across the failure
    # (RFC 7296 §2.2) when the successor continues the same IKE SA.
    mine = [m.msg_id for m in msgs if m.src == vip and not m.response]
    before = [m.msg_id for m in msgs if m.src == vip and not m.response and m.ts < t_from]
    return {"answered_by": {k: sorted(v) for k, v in sorted(answered.items())},
            "requests_by": {k: sorted(v) for k, v in sorted(sent.items())},
            "peer_requests": len(asked), "unanswered": unanswered,
            "own_msg_ids": {"before": before[-1:], "after": mine[len(before):]}}


def read_esp(path):
    """Every ESP packet in the pcap at `path`, in capture order."""
    return _read(path, parse_esp)


def read_neighbor_advertisements(path):
    """Every IPv6 neighbour advertisement in the pcap at `path`, in capture order."""
    return _read(path, parse_na)


def read_frames(path, src_mac=None, max_len=None):
    """Raw frames (for re-sending), optionally only from `src_mac` and at
    most `max_len` bytes long: [(ts, bytes)]."""
    return select_frames(_frames(path), src_mac, max_len)


def select_frames(frames, src_mac=None, max_len=None):
    """`read_frames` over (ts, bytes) already read."""
    out = []
    for ts, frame in frames:
        if src_mac and _mac(frame[6:12]) != src_mac:
            continue
        if max_len and len(frame) > max_len:
            continue
        out.append((ts, frame))
    return out


def node_of(pkt):
    """The cluster node id carried in the explicit IV's top 16 bits
    (phalanx-esp IvSource::NodePartitioned), or None without an IV."""
    return None if pkt.iv is None else pkt.iv >> 48


def duplicates(packets, key):
    """How many packets repeat an already seen `key(pkt)`, and up to 5 examples."""
    seen = collections.Counter(key(p) for p in packets)
    dups = {k: n for k, n in seen.items() if n > 1}
    return sum(n - 1 for n in dups.values()), list(dups)[:5]


def wire_checks(packets, mac_to_node=None):
    """Duplicate (SPI, IV) and (SPI, seq) pairs among `packets` (one
    sender's ESP, e.g. everything the cluster sent), and IV/MAC agreement."""
    dup_iv, ex_iv = duplicates([p for p in packets if p.iv is not None], lambda p: (p.spi, p.iv))
    dup_seq, ex_seq = duplicates(packets, lambda p: (p.spi, p.seq))
    mismatched = 0
    if mac_to_node:
        mismatched = sum(1 for p in packets if p.iv is not None and mac_to_node.get(p.src_mac) != node_of(p))
    # NodePartitioned IVs: node id << 48 | the low 48 bits of the sequence
    # number, whose low 32 bits are the header's (RFC 4303 §2.2.1).
    iv_seq = sum(1 for p in packets if p.iv is not None and (p.iv & 0xffffffff) != p.seq)
    per_node = collections.Counter(node_of(p) for p in packets)
    return {"packets": len(packets), "iv_seq_mismatch": iv_seq, "dup_spi_iv": dup_iv, "dup_spi_iv_examples": ex_iv,
            "dup_spi_seq": dup_seq, "dup_spi_seq_examples": ex_seq,
            "iv_mac_mismatch": mismatched, "per_node": dict(sorted((k or 0, v) for k, v in per_node.items()))}


def reorder(packets, windows=(32, 64, 128, 1024)):
    """How far out of order `packets` (one receiver's ESP, in arrival
    order) arrive, per SPI: the depth of a packet is how many sequence
    numbers below the highest already seen on its SPI it is (0 when it is
    the newest). A receiver with a replay window of W refuses a packet of
    depth W or more as too old (RFC 4303 §3.4.3: the window holds the
    highest number and the W - 1 below it), so `refused[W]` is what a
    peer with window W would have dropped. Returns {"packets",
    "reordered" (depth > 0), "max_depth", "refused": {W: n}}."""
    highest = {}
    depths = []
    for p in packets:
        top = highest.get(p.spi)
        if top is None or p.seq > top:
            highest[p.spi] = p.seq
            depths.append(0)
        else:
            depths.append(top - p.seq)
    return {"packets": len(depths), "reordered": sum(1 for d in depths if d > 0),
            "max_depth": max(depths, default=0),
            "refused": {w: sum(1 for d in depths if d >= w) for w in windows}}


def handover(packets, spi, failed, t_fail, takeover_range=None, jump=64):
    """Handover on one outbound SA from the capture: the last packet node
    `failed` sent (at or before `t_fail` + 50 ms of slack for frames in
    flight), then the first packet a survivor sent with a sequence number
    from the takeover lease: inside `takeover_range` (start, end) when the
    node's status named it, otherwise the first survivor packet whose
    sequence number jumps more than `jump` over everything sent before.
    Returns a dict (times in seconds; None where the capture lacks one)."""
    sa = [p for p in packets if p.spi == spi]
    mine = [p for p in sa if node_of(p) == failed and p.ts <= t_fail + 0.05]
    out = {"spi": spi, "failed": failed, "last_failed": None, "first_takeover": None, "handover": None,
           "takeover_node": None, "takeover_seq": None, "method": "range" if takeover_range else "jump"}
    if not mine:
        return out
    last = mine[-1]
    out["last_failed"] = last.ts
    top = max(p.seq for p in sa if p.ts <= last.ts)
    for p in sa:
        if p.ts < last.ts or node_of(p) == failed:
            continue
        if takeover_range:
            hit = takeover_range[0] <= p.seq <= takeover_range[1]
        else:
            hit = p.seq > top + jump
        if hit:
            out.update(first_takeover=p.ts, handover=p.ts - last.ts, takeover_node=node_of(p), takeover_seq=p.seq)
            break
    return out


def largest_gap(packets, t_from, t_to):
    """Longest silence between consecutive packets in [t_from, t_to]."""
    times = [p.ts for p in packets if t_from <= p.ts <= t_to]
    return max((b - a for a, b in zip(times, times[1:])), default=None)


COLUMNS = [
    ("run", "{}"), ("mode", "{}"), ("failed", "n{}"), ("handover ms (WAN capture)", "{:.1f}"),
    ("handover ms (phalanxd)", "{:.1f}"), ("Corosync confirmed s", "{:.2f}"),
    ("ping 10 ms lost", "{}"), ("UDP out lost / sent", "{}"), ("UDP in lost / sent", "{}"),
    ("TCP down Mbit/s", "{:.0f}"), ("replays re-sent / in window / replayed / too old / accepted", "{}"),
    ("delivered twice", "{}"), ("dup (SPI, IV)", "{}"), ("dup (SPI, seq)", "{}"), ("capture drops", "{}"),
]


def _cell(fmt, value):
    if value is None:
        return "n/a"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def markdown_table(rows, columns=None):
    """Rows (dicts keyed by the columns' names; default COLUMNS) as a markdown table."""
    columns = columns or COLUMNS
    lines = ["| " + " | ".join(name for name, _ in columns) + " |",
             "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(fmt, row.get(name)) for name, fmt in columns) + " |")
    return "\n".join(lines)


def summary(results):
    """Per failure mode: median and worst handover (capture), losses and the
    safety counts summed over the runs (results: cluster.failover_run dicts)."""
    lines = []
    for mode in sorted({r["mode"] for r in results}):
        rs = [r for r in results if r["mode"] == mode]
        hos = sorted(r["handover_ms"] for r in rs if r["handover_ms"] is not None)
        med = hos[len(hos) // 2] if hos else None
        lost = sum(r["udp_out"]["lost"] + r["udp_in"]["lost"] for r in rs)
        sent = sum(r["udp_out"]["sent"] + r["udp_in"]["sent"] for r in rs)
        lines.append(
            "- {}: handover (capture) median {} ms, worst {} ms over {} runs (published ClusterIP/strongSwan: "
            "1630 ms); UDP lost {} of {}; replays accepted {}; duplicate (SPI, IV) {}, (SPI, seq) {}".format(
                mode, _cell("{:.1f}", med), _cell("{:.1f}", hos[-1] if hos else None), len(rs), lost, sent,
                sum(r["replays_accepted"] for r in rs), sum(r["wire"]["dup_spi_iv"] for r in rs),
                sum(r["wire"]["dup_spi_seq"] for r in rs)))
        if any("ike_kept" in r for r in rs):
            lines.append("  " + _ike_summary(rs))
    return "\n".join(lines)


def _ike_summary(rs):
    """IKE over the runs of one mode (strongSwan peer): SPIs kept, new
    IKE_SA_INIT, takeover times of the runs that lost the IKE owner."""
    ike = [r for r in rs if "ike_kept" in r]
    takes = sorted(r["ike_takeover_ms"] for r in ike if r.get("ike_takeover_ms") is not None)
    unanswered = sum(len(r["wire_ike"]["unanswered"]) for r in ike)
    split = sum(1 for r in ike if len(r.get("ike_runners_after", [])) > 1 or len(r.get("ike_runners_before", [])) > 1)
    return ("IKE: more than one node ran the IKE SA in {} of {} runs; same IKE SPIs before and after in {} of {} runs; new IKE_SA_INIT {} (charon log) / {} (wire); "
            "IKE takeover (phalanxd log, after the kill) {} over {} owner failures; peer requests unanswered "
            "after the failure {}".format(
                split, len(ike), sum(1 for r in ike if r["ike_kept"]), len(ike), sum(r["ike_sa_init_after"] for r in ike),
                sum(r["wire_ike"]["ike_sa_init"] for r in ike),
                " / ".join("{:.1f} ms".format(t) for t in takes) or "n/a", len(takes), unanswered))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pcap")
    ap.add_argument("--spi", type=lambda s: int(s, 0), help="outbound SPI for the handover")
    ap.add_argument("--src", default=None, help="only packets from this IP (e.g. 192.0.2.1)")
    ap.add_argument("--failed", type=int, help="failed node id")
    ap.add_argument("--at", type=float, default=float("inf"), help="failure time (capture clock)")
    args = ap.parse_args()
    pkts = read_esp(args.pcap)
    if args.src:
        pkts = [p for p in pkts if p.src == args.src]
    report = wire_checks(pkts)
    if args.spi is not None and args.failed is not None:
        report["handover"] = handover(pkts, args.spi, args.failed, args.at)
    json.dump(report, sys.stdout, indent=1, default=str)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
