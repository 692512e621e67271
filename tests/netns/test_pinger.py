"""The test pingers count past the ICMP echo's 16-bit sequence number.

An echo's sequence number has 16 bits (RFC 792): a 10 ms ping wraps it
after 655 s. Both pingers the tests use run 70,000 echoes here, on the
loopback of a private network namespace (`unshare -n`, nothing to clean
up), in a few seconds:

1. ikegw.PINGER (the IKE tests' and the rekey bench's): sends echo n as
   n % 65536 and keeps its books by n; it crashed at echo 65,536 before.
2. iputils ping as cluster.Ping reads it: ping prints the wrapped number,
   which cluster.Ping unwraps; before, echoes 65,536..69,999 were counted
   as lost and their wrapped twins as duplicates.

Needs root (CAP_SYS_ADMIN for the namespace, CAP_NET_RAW for the raw
socket); not being root is a failure, never a skip.
"""

import json
import os
import subprocess

import pytest

import cluster
import ikegw

ECHOES = 70_000


def _in_private_netns(argv):
    """Runs argv in a new network namespace with its loopback up."""
    if os.geteuid() != 0:
        pytest.fail("needs root (unshare -n, raw ICMP socket): run as root, as CI does", pytrace=False)
    script = 'ip link set lo up && exec "$0" "$@"'
    return subprocess.run(["unshare", "-n", "sh", "-c", script] + argv, capture_output=True, text=True,
                          timeout=120)


def test_ikegw_pinger_counts_past_the_wrap():
    proc = _in_private_netns(["/usr/bin/python3", "-c", ikegw.PINGER, "127.0.0.1", "0.0002", str(ECHOES), "1"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print("PINGER:", {k: result[k] for k in ("sent", "received", "duplicates", "duration_s")})
    assert result["sent"] == ECHOES
    assert result["duplicates"] == 0, result
    assert result["lost_seqs"] == [], result
    assert result["received"] == ECHOES, result


def test_iputils_ping_is_counted_past_the_wrap():
    proc = _in_private_netns(["ping", "-D", "-n", "-i", "0.0001", "-c", str(ECHOES), "-W", "1", "127.0.0.1"])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "icmp_seq=0 " in proc.stdout, "ping's sequence number wrapped"
    ping = cluster.Ping(None, 1.0)
    ping.count = ECHOES
    result = ping.parse(proc.stdout)
    print("cluster.Ping:", {k: result[k] for k in ("sent", "received", "lost", "duplicates")})
    assert (result["received"], result["lost"], result["duplicates"]) == (ECHOES, 0, 0), result
    assert max(result["first"]) == ECHOES


def test_unwrap_takes_the_nearest_count():
    assert cluster.unwrap_seq16(65_535, 0) == 65_536
    assert cluster.unwrap_seq16(70_000, 70_000 & 0xFFFF) == 70_000
    assert cluster.unwrap_seq16(70_000, 65_530) == 65_530, "a late reply from before the wrap"
    assert cluster.unwrap_seq16(0, 1) == 1
