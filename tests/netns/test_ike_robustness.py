"""IKE robustness of the responder (Phalanx on gwA, responder for any peer)
while an established tunnel to strongSwan (gwB, initiator) carries pings.

    hostA -- gwA (responder) ===== WAN ===== gwB (charon, initiator) -- hostB
               ^  192.0.2.1:500/4500              |
               |                                  +-- ikecraft.py in gwB's
               +--- IKE_SA_INIT from 198.18.x.y       namespace: spoofed
                    (routed back via gwB, where       floods, malformed
                     a blackhole drops them)          datagrams, port 4500

(a) flood: 5000 IKE_SA_INIT requests from 5000 spoofed sources in
    198.18.0.0/16 in ~5 s: the responder turns COOKIEs on (RFC 7296 §2.6:
    seen on the wire and counted), answers few requests with a full
    SA/KE/Nr (its half-open table stays bounded), and the established
    tunnel loses no ping (10 ms) and keeps its SPIs;
(b) malformed datagrams (truncated, header length too long, payload length
    too short, unknown critical payload, unknown IKE SPIs, a forged message
    on the established SA, wrong major version): each is dropped (or
    answered with an unauthenticated notify), counted, and the daemon
    keeps running with its tunnel untouched;
(c) IKE on port 4500 after the non-ESP marker reaches IKE (answered from
    4500, marker included); NAT-T keepalives (0xFF, RFC 3948 §2.3) are
    counted and never answered.

The counter assertions need phalanxd's IKE counters (`phalanxctl counters
--json`); with PHX_IKE_UNDER_TEST=strongswan (harness validation) the wire
and liveness checks run against charon instead.
"""

import json
import os
import secrets

import pytest

import ikecraft
import ikegw
import phxnet

IMPL = ikegw.under_test()
HERE = os.path.dirname(os.path.abspath(__file__))
CRAFT = os.path.join(HERE, "ikecraft.py")
SPOOF_PREFIX = "198.18"
COOKIE_THRESHOLD, HALF_OPEN_MAX = 32, 256
FLOOD_COUNT, FLOOD_RATE = 5000, 1000


def tunnel(topo):
    """gwA: the responder under test (any peer); gwB: strongSwan initiator."""
    a = ikegw.site_conn("gwA", False, esp_proposals=["aes128gcm16-esn-noesn"])
    a.remote_addr = None
    b = ikegw.site_conn("gwB", True, esp_proposals=["aes128gcm16-noesn"])
    ike = {"cookie_threshold": COOKIE_THRESHOLD, "half_open_max": HALF_OPEN_MAX}
    dut = ikegw.make_gateway(IMPL, topo, "gwA", a, ike=ike, cookie_threshold=COOKIE_THRESHOLD,
                             cookie_threshold_ip=COOKIE_THRESHOLD)
    ref = ikegw.SwanIke(topo, "gwB", b)
    try:
        ikegw.start_all(dut, ref)
    except ikegw.DaemonMissing as e:
        pytest.fail(str(e), pytrace=False)
    ref.initiate()
    assert ikegw.wait_for(lambda: ikegw.established(dut), 10), "tunnel not up: {}".format(dut.view())
    assert topo.wait_ping("hostA", phxnet.HOSTB_V4, 10), "no ping through the tunnel"
    return dut, ref


def counters(dut):
    """The DUT's counters; phalanxd must expose its IKE counters."""
    flat = dut.counters()
    if dut.impl == "phalanx":
        assert ikegw.counter(flat, "CookiesSent", scope="ike") is not None, (
            "phalanxctl counters --json shows no IKE counters (CookiesSent): {}".format(sorted(flat)[:80]))
    return flat


def delta(before, after, *names):
    """Sum over `names` of after - before (missing counters: assertion)."""
    total = 0
    for name in names:
        a, b = ikegw.counter(after, name, scope="ike"), ikegw.counter(before, name, scope="ike")
        assert a is not None, "no counter {} in {}".format(name, sorted(after)[:80])
        total += a - (b or 0)
    return total


def craft(topo, mode, *args):
    out = os.path.join(topo.run_dir, "craft-{}-{}.json".format(mode, secrets.token_hex(4)))
    topo.run("gwB", ["/usr/bin/python3", CRAFT, mode] + [str(a) for a in args] + [out], timeout=120)
    with open(out) as f:
        return json.load(f)


def send(topo, port, datagrams):
    """Sends each datagram from gwB (ephemeral port) to gwA:port; returns
    the answers to each (bytes)."""
    path = os.path.join(topo.run_dir, "datagrams-{}.json".format(secrets.token_hex(4)))
    with open(path, "w") as f:
        json.dump([d.hex() for d in datagrams], f)
    return [[bytes.fromhex(h) for h in got] for got in craft(topo, "send", phxnet.GWA_WAN_V4, port, path)]


def check_untouched(topo, dut, ref, spis_before):
    assert dut.alive(), "{} exited".format(dut.name)
    assert ref.alive(), "charon on gwB exited"
    assert ikegw.current_spis(dut) == spis_before, "the established SAs changed: {} -> {}".format(
        spis_before, ikegw.current_spis(dut))
    assert topo.ping("hostA", phxnet.HOSTB_V4, count=3, interval=0.1), "tunnel broken"


def test_init_flood(topo):
    """(a) 5000 spoofed IKE_SA_INIT in ~5 s against the responder."""
    dut, ref = tunnel(topo)
    spis = ikegw.current_spis(dut)
    topo.run("gwA", ["ip", "route", "add", SPOOF_PREFIX + ".0.0/16", "via", phxnet.GWB_WAN_V4])
    topo.run("gwB", ["ip", "route", "add", "blackhole", SPOOF_PREFIX + ".0.0/16"])
    before = counters(dut)
    pings = int((FLOOD_COUNT / FLOOD_RATE + 4) * 100)
    pinger = ikegw.start_pinger(topo, "hostA", phxnet.HOSTB_V4, 0.01, pings)
    wire = craft(topo, "flood", phxnet.GWA_WAN_V4, FLOOD_COUNT, FLOOD_RATE, SPOOF_PREFIX, "wan0")
    half_open = [sa for sa in dut.view() if "HALF" in str(sa.get("state") or "").upper()
                 or str(sa.get("state") or "").upper() in ("CONNECTING",)]
    ping = ikegw.pinger_result(topo, pinger, timeout=pings / 100 + 20)
    after = counters(dut)
    print("flood against {}: {}; half-open now {}; ping {} sent, {} lost".format(
        dut.impl, wire, len(half_open), ping["sent"], ping["sent"] - ping["received"]))
    assert wire["seconds"] <= 10, "the flood took {} s".format(wire["seconds"])
    assert wire["cookie"] > 0, "no COOKIE on the wire: {}".format(wire)
    # Before cookies, each request may cost a half-open SA: bounded by the
    # threshold (plus requests in flight when it was crossed).
    assert wire["sa"] <= COOKIE_THRESHOLD + 32, "{} full IKE_SA_INIT responses".format(wire["sa"])
    assert wire["cookie"] + wire["sa"] + wire["other"] >= FLOOD_COUNT // 2, (
        "the responder answered only {} of {}".format(wire["cookie"] + wire["sa"] + wire["other"], FLOOD_COUNT))
    assert len(half_open) <= min(HALF_OPEN_MAX, COOKIE_THRESHOLD + 32), "{} half-open SAs".format(len(half_open))
    assert ping["received"] == ping["sent"], "lost {} pings during the flood at {} s".format(
        ping["sent"] - ping["received"], ping["lost_at_s"][:20])
    if dut.impl == "phalanx":
        cookies = delta(before, after, "CookiesSent")
        assert cookies >= wire["cookie"], "CookiesSent +{} < {} COOKIEs seen".format(cookies, wire["cookie"])
    check_untouched(topo, dut, ref, spis)


def malformed_cases(dut_spis):
    """(name, datagram, phalanxd counters one of which must grow)."""
    good = ikecraft.ike_sa_init(os.urandom(8))
    truncated = good[:20]
    too_long = bytearray(good)
    too_long[24:28] = (len(good) + 100).to_bytes(4, "big")
    short_payload = bytearray(good)
    short_payload[30:32] = (2).to_bytes(2, "big")  # SA payload length 2 < 4
    critical = ikecraft.ike_sa_init(os.urandom(8), extra=(60, b"\x01" * 8, True))
    unknown_spi = ikecraft.encrypted_request(os.urandom(8), os.urandom(8), ikecraft.IKE_AUTH, 1)
    (spi_i, spi_r), _ = dut_spis
    forged = ikecraft.encrypted_request(bytes.fromhex(spi_i), bytes.fromhex(spi_r), 37, 2)
    version3 = ikecraft.ike_sa_init(os.urandom(8), version=0x30)
    return [
        ("truncated", truncated, ("Malformed",)),
        ("length-too-long", bytes(too_long), ("Malformed",)),
        ("payload-length-short", bytes(short_payload), ("Malformed",)),
        ("unknown-critical", critical, ("UnsupportedCritical",)),
        ("unknown-spi", unknown_spi, ("UnknownSpi",)),
        ("forged-on-sa", forged, ("IntegrityFailed", "InvalidMessageId")),
        ("major-version-3", version3, ("UnsupportedVersion",)),
    ]


def test_malformed(topo):
    """(b) malformed datagrams to port 500: dropped or refused, counted;
    the daemon and its tunnel live on."""
    dut, ref = tunnel(topo)
    spis = ikegw.current_spis(dut)
    cases = malformed_cases(spis)
    before = counters(dut)
    answers = send(topo, 500, [c[1] for c in cases])
    after = counters(dut)
    parsed = {name: [ikecraft.parse(a) for a in got] for (name, _, _), got in zip(cases, answers)}
    print("answers from {}: {}".format(dut.impl, {k: [(m or {}).get("notifies") for m in v]
                                                  for k, v in parsed.items()}))
    # RFC 7296 §2.5: a request with an unknown critical payload is refused
    # with UNSUPPORTED_CRITICAL_PAYLOAD.
    crit = parsed["unknown-critical"]
    assert any(m and ikecraft.UNSUPPORTED_CRITICAL_PAYLOAD in m["notifies"] for m in crit), crit
    # Nothing forged or broken gets a response that carries an SA
    # (strongSwan 5.9.8 answers an IKE_SA_INIT whose header Length exceeds
    # the datagram as if it were whole: not held against the stand-in).
    lenient = {"length-too-long"} if dut.impl == "strongswan" else set()
    for name, msgs in parsed.items():
        if name in lenient:
            continue
        for m in msgs:
            assert m is None or ikecraft.SA not in m["payloads"], "{} answered with an SA: {}".format(name, m)
    if dut.impl == "phalanx":
        assert delta(before, after, "Malformed") >= 3, "Malformed counter did not count the 3 broken datagrams"
        for name, _, names in cases[3:]:
            assert delta(before, after, *names) >= 1, "{}: none of {} grew".format(name, names)
    check_untouched(topo, dut, ref, spis)


def test_port_4500(topo):
    """(c) IKE_SA_INIT after the non-ESP marker on 4500 is answered on 4500
    with the marker; NAT-T keepalives are counted, never answered."""
    dut, ref = tunnel(topo)
    spis = ikegw.current_spis(dut)
    before = counters(dut)
    spi = os.urandom(8)
    keepalives = 10
    answers = send(topo, 4500, [ikecraft.with_marker(ikecraft.ike_sa_init(spi))] + [b"\xff"] * keepalives)
    after = counters(dut)
    init_answers = answers[0]
    assert init_answers, "no answer to IKE_SA_INIT on port 4500"
    first = init_answers[0]
    assert first[:4] == ikecraft.NON_ESP_MARKER, "answer without the non-ESP marker: {}".format(first[:8].hex())
    msg = ikecraft.parse(first[4:])
    assert msg and msg["spi_i"] == spi.hex() and msg["exchange"] == ikecraft.IKE_SA_INIT, msg
    assert msg["flags"] & ikecraft.FLAG_RESPONSE and (ikecraft.SA in msg["payloads"]
                                                      or ikecraft.COOKIE in msg["notifies"]), msg
    assert not any(answers[1:]), "a keepalive was answered: {}".format(answers[1:])
    if dut.impl == "phalanx":
        ka = [n for n in after if "keepalive" in n.lower()]
        assert ka, "no keepalive counter in phalanxctl counters: {}".format(sorted(after)[:80])
        assert sum(after[n] - before.get(n, 0) for n in ka) >= keepalives, {n: after[n] for n in ka}
        assert delta(before, after, "DatagramsReceived") >= 1
    check_untouched(topo, dut, ref, spis)
