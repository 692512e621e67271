"""The soak (bench/soak.sh, an hour) at CI scale: 75 s of Child SA rekeys
every ~10 s and IKE SA rekeys every ~30 s under 5 Mbit/s UDP and a 10 ms
ping, both phalanxd sampled every 5 s. Nothing may accumulate after a 20 s
warm-up (descriptors, threads, SAs, policies, IKE SAs), no ping may be
lost, and RSS may grow by less than 5 % (the hour-long run holds it to
1 %; a minute is too short to tell allocation warm-up from a leak)."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))

import ike_rekey  # noqa: E402
import rekeyload  # noqa: E402
import soak  # noqa: E402


def test_nothing_accumulates_under_rekeys_and_traffic(topo):
    dut, peer = ike_rekey.make_pair(topo, "phalanx", "phalanx")
    sampler = soak.Sampler([dut, peer], 5)
    sampler.start()
    load = rekeyload.run(topo, dut, peer, 75, rate="5M")
    sampler.finish()
    print(rekeyload.summary(load))
    result = soak.verdict(sampler.samples, 20, 5.0)
    for gw, fig in sorted(result.items()):
        print("  {}: {}".format(gw, fig))
    assert not sampler.errors, sampler.errors[:5]
    assert load["child_rekeys"] >= 5, load
    assert load["ping_lost"] == 0, load
    failures = [(gw, f) for gw, fig in result.items() for f in fig["failures"]]
    assert not failures, failures
