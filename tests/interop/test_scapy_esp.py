"""Phalanx ESP/AH against scapy, byte for byte, both directions.

Run from the repository root with Debian's interpreter (scapy 2.5.0 is
installed for it):

    /usr/bin/python3 -m pytest tests/interop -q

1. test_committed_vectors_are_scapys: regenerates the vectors in a temp dir
   and compares them with crates/phalanx-esp/tests/vectors/scapy.json, so
   the committed file is provably scapy's output.
2. test_phalanx_reproduces_scapy[<vector>]: `esp_vectors check` — Phalanx
   encrypts each inner packet with the vector's SA, sequence number and IV
   and must produce scapy's outer packet exactly (a), and decrypts scapy's
   outer packet back to the inner one (c).
3. test_scapy_decrypts_phalanx[<vector>]: `esp_vectors encrypt` — Phalanx
   encrypts with a random IV (CBC) / the sequence-number IV (AEADs) and
   another sequence number; scapy (python3-cryptography for GMAC) verifies
   and decrypts the result back to the inner packet, and the outer headers
   follow the rules of esp.md (b).

Missing scapy is a failure with the install hint, never a skip.
"""

import json
import os
import subprocess
import sys

import pytest

import phalanx_vectors as pv

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
VECTORS_FILE = os.path.join(REPO, "crates", "phalanx-esp", "tests", "vectors", "scapy.json")
# No `-p phalanx-esp`: with the workspace's feature set cargo reuses the
# example `cargo test --workspace` built (with `-p` it rebuilt the crate and
# its dependencies for one package's features: minutes in a cold CI).
EXAMPLE = ["cargo", "run", "-q", "--example", "esp_vectors", "--"]


def _load_vectors():
    with open(VECTORS_FILE) as f:
        return json.load(f)


DOC = _load_vectors()
VECTORS = DOC["vectors"]
IDS = [v["name"] for v in VECTORS]


def require_scapy():
    if pv.IMPORT_ERROR is not None:
        pytest.fail(pv.INSTALL_HINT.format(pv.IMPORT_ERROR), pytrace=False)


def test_scapy_installed():
    require_scapy()
    assert pv.SCAPY_VERSION == DOC["header"]["scapy_version"], (
        "vectors were made with scapy {}, this is {}".format(DOC["header"]["scapy_version"], pv.SCAPY_VERSION))


def test_committed_vectors_are_scapys(tmp_path):
    require_scapy()
    out = tmp_path / "scapy.json"
    gen = os.path.join(HERE, "gen_scapy_vectors.py")
    subprocess.run([sys.executable, gen, "--out", str(out)], check=True, capture_output=True)
    with open(out) as f:
        fresh = json.load(f)
    for doc in (fresh, DOC):
        doc["header"].pop("date")
    assert fresh["header"] == DOC["header"]
    differing = [a["name"] for a, b in zip(fresh["vectors"], VECTORS) if a != b]
    assert not differing, "vectors differ from scapy's: {}".format(differing[:10])
    assert len(fresh["vectors"]) == len(VECTORS)


def _run_example(args):
    """Runs the esp_vectors example; returns stdout or raises with its stderr."""
    proc = subprocess.run(EXAMPLE + args, cwd=REPO, capture_output=True, text=True)
    if proc.returncode not in (0, 1):  # 1 = some vectors failed, reported per vector
        raise RuntimeError("esp_vectors {} failed (rc {}):\n{}".format(args[0], proc.returncode, proc.stderr[-4000:]))
    return proc.stdout


@pytest.fixture(scope="session")
def phalanx_check():
    """name -> {"encrypt": "ok" | error, "decrypt": "ok" | error}."""
    results = {}
    for line in _run_example(["check", VECTORS_FILE]).splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            results[r["name"]] = r
    return results


@pytest.fixture(scope="session")
def phalanx_encrypted(tmp_path_factory):
    """name -> the vector as Phalanx encrypted it (new seq, iv, outer) or with "error"."""
    out = tmp_path_factory.mktemp("phalanx") / "phalanx.json"
    _run_example(["encrypt", VECTORS_FILE, str(out)])
    with open(out) as f:
        return {v["name"]: v for v in json.load(f)["vectors"]}


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_phalanx_reproduces_scapy(vector, phalanx_check):
    r = phalanx_check.get(vector["name"])
    assert r is not None, "esp_vectors check did not report this vector"
    assert r["encrypt"] == "ok", "(a) Phalanx encryption != scapy: " + r["encrypt"]
    assert r["decrypt"] == "ok", "(c) Phalanx decryption of scapy's packet: " + r["decrypt"]


def _outer_header_problems(v, pkt):
    """esp.md outer-header rules for a tunnel-mode packet from Phalanx."""
    inner = pv.parse_ip(bytes.fromhex(v["inner"]))
    tos = inner.tos if inner.version == 4 else inner.tc
    problems = []
    if (pkt.src, pkt.dst) != (v["tunnel_src"], v["tunnel_dst"]):
        problems.append("outer addresses {} -> {}".format(pkt.src, pkt.dst))
    if pkt.version == 4:
        df = inner.version == 4 and bool(inner.flags & 0x2)
        want = dict(tos=tos, id=pv.outer_ident(v), ttl=64, frag=0, ihl=5)
        got = dict(tos=pkt.tos, id=pkt.id, ttl=pkt.ttl, frag=pkt.frag, ihl=pkt.ihl)
        if bool(pkt.flags & 0x2) != df or pkt.flags & 0x1:
            problems.append("outer flags {} (inner DF {})".format(pkt.flags, df))
    else:
        want = dict(tc=tos, fl=0, hlim=64)
        got = dict(tc=pkt.tc, fl=pkt.fl, hlim=pkt.hlim)
    if want != got:
        problems.append("outer header {} != {}".format(got, want))
    return problems


def _iv_problems(vector, out, pkt):
    """The explicit IV on the wire: the sequence number for the AEADs
    (IvSource::Sequence, RFC 4106 §3.1), fresh random bytes for CBC."""
    if out["protocol"] != "esp" or out["encr"] == pv.ENCR_NULL:
        return []
    esp = pkt.getlayer(pv.ESP)
    if esp is None:
        return []  # reported by _header_problems
    wire_iv = bytes(esp.data[: pv.iv_len(out["encr"])]).hex()
    problems = []
    if wire_iv != out["iv"]:
        problems.append("IV on the wire {} != the one reported {}".format(wire_iv, out["iv"]))
    if out["encr"] in pv.AEADS and wire_iv != out["seq"].to_bytes(8, "big").hex():
        problems.append("AEAD IV {} is not the sequence number (IvSource::Sequence)".format(wire_iv))
    if out["encr"] == pv.ENCR_AES_CBC and wire_iv == vector["iv"]:
        problems.append("CBC IV equals the committed one: not random")
    return problems


def _header_problems(out, pkt):
    """SPI and the low 32 bits of the sequence number on the wire."""
    layer = pkt.getlayer(pv.ESP if out["protocol"] == "esp" else pv.AH)
    if layer is None:
        return ["no {} header in Phalanx's packet".format(out["protocol"].upper())]
    want = (out["spi"], out["seq"] & 0xFFFFFFFF)
    if (layer.spi, layer.seq) != want:
        return ["SPI/seq on the wire {} != {}".format((layer.spi, layer.seq), want)]
    return []


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_scapy_decrypts_phalanx(vector, phalanx_encrypted):
    require_scapy()
    out = phalanx_encrypted.get(vector["name"])
    assert out is not None, "esp_vectors encrypt did not write this vector"
    assert "error" not in out, "Phalanx could not encrypt: " + out.get("error", "")
    assert out["seq"] != vector["seq"], "(b) must use a different sequence number"
    pkt = pv.parse_ip(bytes.fromhex(out["outer"]))
    problems = _iv_problems(vector, out, pkt) + _header_problems(out, pkt)
    if out["mode"] == "tunnel":
        problems += _outer_header_problems(out, pkt)
    if out["udp_encap"]:
        problems += pv.check_udp_encap(pkt, out)
    assert not problems, problems
    try:
        plain = pv.decrypt(out)
    except Exception as err:  # IPSecIntegrityError, parse errors
        pytest.fail("(b) scapy cannot decrypt Phalanx's packet: {!r}".format(err))
    assert plain.hex() == out["inner"], "(b) scapy's decryption of Phalanx's packet != inner"
