"""Reload under continuous traffic (ping every 10 ms, bounded count): an
unrelated change applied with SIGHUP on gwA and `phalanxctl reload` on gwB
loses no packet and keeps the unchanged SAs' counters and the unchanged
policies' hit counts; a broken file is refused with FILE:LINE, and changes
nothing (SAs, counters, traffic)."""

import os
import re
import signal
import time

import phxnet
from test_traffic import policy_hits, start_pair

PINGS = 700
INTERVAL = 0.01


def unrelated_sa(side):
    """An SA + policy for a third site (10.9.0.0/24) that no traffic uses."""
    local, remote = ((phxnet.GWA_WAN_V4, phxnet.GWB_WAN_V4) if side == "A"
                     else (phxnet.GWB_WAN_V4, phxnet.GWA_WAN_V4))
    src = "10.1.0.0/24" if side == "A" else "10.2.0.0/24"
    return """
[[sa]]
name = "site9-out"
direction = "out"
spi = 0x{spi:x}
encryption = "aes256gcm16"
integrity = "none"
key = "{key}"
mode = "tunnel"
local = "{local}"
remote = "{remote}"
encap = "udp"
selectors = [ {{ src = "{src}", dst = "10.9.0.0/24" }} ]

[[policy]]
name = "to-site9"
priority = 20
src = "{src}"
dst = "10.9.0.0/24"
action = "protect"
sa = "site9-out"
""".format(spi=0x9000 + (1 if side == "A" else 2), key=phxnet.derive("reload", side, 36).hex(),
           local=local, remote=remote, src=src)


def wait_for(pred, seconds=5):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def ping_result(log):
    m = re.search(r"(\d+) packets transmitted, (\d+) received", log)
    assert m, "no ping summary in: " + log[-500:]
    return int(m.group(1)), int(m.group(2))


def test_reload_under_traffic(topo):
    sas, (gwa, gwb) = start_pair(topo, "aes128gcm16", "udp", seed="reload")
    assert topo.wait_ping("hostA", phxnet.HOSTB_V4, 10)
    before = {g.side: g.sas() for g in (gwa, gwb)}
    hits_before = {g.side: policy_hits(g) for g in (gwa, gwb)}
    ping = topo.popen("ping-stream", "hostA", ["ping", "-n", "-q", "-i", str(INTERVAL), "-c", str(PINGS),
                                                "-w", "30", phxnet.HOSTB_V4])
    time.sleep(1.0)

    # gwA: unrelated change, SIGHUP.
    with open(gwa.config, "a") as f:
        f.write(unrelated_sa("A"))
    os.kill(gwa.proc.pid, signal.SIGHUP)
    assert wait_for(lambda: "site9-out" in gwa.sas()), "SIGHUP did not apply the new SA on gwA"
    time.sleep(1.0)

    # gwB: unrelated change, phalanxctl reload.
    with open(gwb.config, "a") as f:
        f.write(unrelated_sa("B"))
    summary = gwb.ctl("reload")
    # The summary names SAs and policies: the new pair is added, the two
    # SAs and two policies of the running tunnel are unchanged.
    assert sorted(summary["added"]) == ["site9-out", "to-site9"], summary
    assert not summary["changed"] and not summary["removed"], summary
    assert summary["unchanged"] == 4, summary
    time.sleep(1.0)

    # gwA: broken file, both ways of reloading; nothing may change.
    good_text = open(gwa.config).read()
    broken = good_text.replace('encryption = "aes128gcm16"', 'encryption = "aes-gcm"', 1)
    line = broken[: broken.index('"aes-gcm"')].count("\n") + 1
    with open(gwa.config, "w") as f:
        f.write(broken)
    sas_mid = gwa.sas()
    proc = gwa.ctl_raw("reload", json_out=False)
    message = proc.stdout + proc.stderr
    assert proc.returncode != 0, "broken file accepted: " + message
    assert "gwA.toml:{}:".format(line) in message, "error does not name gwA.toml:{}: {}".format(line, message)
    assert "encryption" in message, message
    os.kill(gwa.proc.pid, signal.SIGHUP)
    time.sleep(0.5)
    assert gwa.alive(), "phalanxd exited on a broken file"
    sas_after = gwa.sas()
    assert sorted(sas_after) == sorted(sas_mid), "a broken file changed the SA set"
    for name, sa in sas_mid.items():
        assert sas_after[name]["spi"] == sa["spi"] and sas_after[name]["encryption"] == sa["encryption"]
        assert sas_after[name]["packets"] >= sa["packets"], "counters of {} went back".format(name)

    ping.wait(timeout=40)
    sent, received = ping_result(topo.log_of("ping-stream"))
    assert sent == PINGS and received == sent, "lost {} of {} pings during reloads".format(sent - received, sent)

    # Unchanged SAs kept their state: counters continued, not restarted.
    for g in (gwa, gwb):
        now = g.sas()
        for name, sa in before[g.side].items():
            assert now[name]["packets"] >= sa["packets"] + PINGS, (
                "SA {} on gw{}: {} packets before, {} after {} pings: counters were reset".format(
                    name, g.side, sa["packets"], now[name]["packets"], PINGS))
    # Unchanged policies kept their hit counts: every echo request (gwA)
    # and reply (gwB) of the stream is in them, before and after the reloads.
    time.sleep(0.3)  # workers publish every 100 ms
    for g in (gwa, gwb):
        grown = policy_hits(g)["to-remote-v4"] - hits_before[g.side]["to-remote-v4"]
        assert grown >= PINGS, "to-remote-v4 on gw{}: hits grew by {} over {} pings: reset by a reload".format(
            g.side, grown, PINGS)
    # And traffic still passes after everything.
    assert topo.ping("hostA", phxnet.HOSTB_V4, count=3)
    with open(gwa.config, "w") as f:
        f.write(good_text)
