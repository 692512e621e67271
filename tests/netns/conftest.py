"""pytest fixtures for the network-namespace integration tests.

Run as root from the repository root with Debian's interpreter:

    /usr/bin/python3 -m pytest -v tests/netns

Each test gets its own four namespaces (prefix `phx<pid>t<n>`, built and
removed by tests/netns/lib.sh) and starts the gateways it needs; everything
it started is removed at teardown, also when it fails. Not being root is a
failure, never a skip.
"""

import itertools
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "interop"))

import phxnet  # noqa: E402

_COUNTER = itertools.count()


@pytest.fixture(scope="session")
def binaries():
    """Release builds of phalanxd and phalanxctl (PHX_SKIP_BUILD=1: use what is there)."""
    if os.geteuid() != 0:
        pytest.fail("tests/netns needs root (network namespaces, TUN devices): run as root", pytrace=False)
    if os.environ.get("PHX_SKIP_BUILD") != "1":
        proc = subprocess.run(["cargo", "build", "--release", "-q", "-p", "phalanxd", "-p", "phalanxctl"],
                              cwd=phxnet.REPO, capture_output=True, text=True, timeout=3000)
        if proc.returncode != 0:
            pytest.fail("cargo build --release -p phalanxd -p phalanxctl failed:\n" + proc.stderr[-4000:],
                        pytrace=False)
    for name in ("phalanxd", "phalanxctl"):
        path = os.path.join(phxnet.BIN_DIR, name)
        if not os.access(path, os.X_OK):
            pytest.fail("{} not built".format(path), pytrace=False)
    return phxnet.BIN_DIR


@pytest.fixture
def topo(binaries, request):
    """A fresh hostA -- gwA === gwB -- hostB topology, removed afterwards."""
    t = phxnet.Topology(prefix="phx{}t{}".format(os.getpid(), next(_COUNTER)))
    try:
        t.up()
        yield t
    finally:
        failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
        if failed:
            for name in sorted(t.procs):
                log = t.log_of(name)
                if log:
                    sys.stderr.write("--- {} log (tail)\n{}\n".format(name, log[-3000:]))
        t.down()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Makes the call-phase report available to fixtures (for log dumps)."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)
