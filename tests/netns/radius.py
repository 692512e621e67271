#!/usr/bin/env python3
"""FreeRADIUS 3.2 (Debian `freeradius`) as the RADIUS server of the
network-namespace tests: EAP pass-through (RFC 3579) and accounting
(RFC 2866) for a phalanxd that is a RADIUS client.

* `FreeRadius`: one `freeradius -X -d DIR` inside a namespace of the
  topology (tests/netns/lib.sh), with its own configuration written from
  scratch under `topo.run_dir/<name>/`: the clients and secret, users
  with cleartext passwords (PAP, MS-CHAPv2, EAP-MSCHAPv2), EAP-TLS when
  given certificates, Framed-IP-Address per user, and accounting written
  to a `detail` file that `accounting_records()` parses.
* `TlsFiles`: the CA certificate and the server's certificate and key for
  EAP-TLS (paths, e.g. from `pki.build`: `TlsFiles(p["ca"], *p["gwB"])`).
* `eapol_test`: wpa_supplicant's RADIUS test client (Debian `eapoltest`)
  run in a namespace for one EAP-MSCHAPv2 or EAP-TLS authentication; it
  checks the MS-MPPE keys of the Access-Accept against its own.

Why a minimal configuration and not a copy of /etc/freeradius/3.0: the
Debian tree enables some thirty modules (unix, ntlm_auth, radutmp, sql
stubs, a snake-oil certificate ...), proxies by realm, and writes under
/var/log and /var/run as user freerad; each of those is a way for a test
to depend on the machine. The server needs only a radiusd.conf with the
paths and the clients, five modules (pap, mschap, eap, detail and the
`always` instance `ok`) and one virtual server: about 150 lines, all
written here. The dictionaries are Debian's, read where the binary looks.

Facts (see /work/shared/INTEROP-NOTES.md, "FreeRADIUS"):
- The dictionaries come from /usr/share/freeradius (the built-in `-D`
  default); the configuration directory needs no `dictionary` file.
- Without `user`/`group` in `security {}` the server keeps the identity
  it was started with (root here): nothing needs chown to freerad.
- It refuses to start when the configuration directory or a file it
  reads is writable by others ("... is globally writable. Refusing to
  start due to insecure configuration."): 0750 and 0640 here.
- `-X` is single-threaded and logs every packet with its attributes to
  stdout ("(N) Received Access-Request Id ..."), which `requests_seen`
  counts; "Ready to process requests" marks the end of start-up.
- EAP-MSCHAPv2 and EAP-TLS both put MS-MPPE-Send-Key and MS-MPPE-Recv-Key
  (RFC 2548 §2.4.2/§2.4.3) into the final Access-Accept without any
  configuration (16 octets each for MSCHAPv2, with MS-MPPE-Encryption-
  Policy/Types; 32 for TLS); `eapol_test` compares them with its own.
  The Access-Accept also echoes User-Name (the EAP identity).
- EAP-TLS works with TLS 1.2 and 1.3 (RFC 9190 keys agree with
  wpa_supplicant 2.10) although 3.2.1 prints a "Most supplicants do not
  support EAP-TLS with TLS 1.3" banner; wpa_supplicant offers 1.3 only
  with phase1 "tls_disable_tlsv1_3=0".
- An Accounting-Request with the wrong secret is dropped without an
  answer ("invalid Request Authenticator"). Debian's 3.2.1+deb12u1 has no
  BlastRADIUS (CVE-2024-3596) changes: Message-Authenticator is required
  only with the per-client `require_message_authenticator = yes`.
- Access-Challenge must not carry Framed-IP-Address (RFC 2865 §4.4): the
  per-user reply items are added in `post-auth`, which runs for the
  Access-Accept only.
"""

import collections
import os
import re
import shutil
import stat
import time

FREERADIUS = "freeradius"
EAPOL_TEST = "eapol_test"
READY_LINE = "Ready to process requests"

TlsFiles = collections.namedtuple("TlsFiles", "ca cert key")
TlsFiles.__doc__ = "EAP-TLS server credentials: CA certificate, server certificate, server key (PEM paths)."

# Characters that a value written into a single-quoted FreeRADIUS string
# may not hold (they would need escapes whose rules differ per file).
_UNQUOTABLE = re.compile(r"['\\\x00-\x1f\x7f]")


def _binary(name, package):
    path = shutil.which(name) or shutil.which(os.path.join("/usr/sbin", name))
    if path is None:
        raise RuntimeError("`{}` not found: install the Debian package `{}` (scripts/setup.sh)".format(name, package))
    return path


def _quoted(value, what):
    """`value` as a single-quoted FreeRADIUS string (no xlat expansion)."""
    value = str(value)
    if _UNQUOTABLE.search(value):
        raise ValueError("{} {!r} holds a quote, backslash or control character".format(what, value))
    return "'{}'".format(value)


def _conf_path(path):
    """An absolute path for radiusd.conf: `%` starts an xlat there."""
    path = os.path.abspath(path)
    if "%" in path or "'" in path or '"' in path:
        raise ValueError("path unusable in radiusd.conf: " + path)
    return path


# ------------------------------------------------------------------ configs
def render_radiusd_conf(directory, clients, secret, require_message_authenticator=False):
    """The main file: paths under `directory`, no privilege change, no
    proxying, one client block per address or CIDR of `clients`."""
    d = _conf_path(directory)
    text = """# radiusd.conf written by tests/netns/radius.py
prefix = /usr
exec_prefix = /usr
sysconfdir = /etc
localstatedir = {d}
sbindir = /usr/sbin
logdir = {d}
raddbdir = {d}
radacctdir = {d}
name = freeradius
confdir = {d}
modconfdir = {d}
certdir = {d}
cadir = {d}
run_dir = {d}
db_dir = {d}
libdir = /usr/lib/freeradius
pidfile = {d}/freeradius.pid
max_request_time = 30
cleanup_delay = 5
max_requests = 4096
hostname_lookups = no
proxy_requests = no

log {{
    destination = stdout
    colourise = no
    auth = yes
    auth_badpass = no
    auth_goodpass = no
}}

security {{
    # No user/group: the server keeps the identity it was started with.
    allow_core_dumps = no
    max_attributes = 200
    # Rejects at once: failover and retry tests measure the client.
    reject_delay = 0
    # RFC 5997 Status-Server on the authentication port.
    status_server = yes
}}

thread pool {{
    start_servers = 1
    max_servers = 4
    min_spare_servers = 1
    max_spare_servers = 2
    max_requests_per_server = 0
    auto_limit_acct = no
}}

""".format(d=d)
    for n, network in enumerate(clients):
        text += """client nas{n} {{
    ipaddr = {network}
    secret = {secret}
    require_message_authenticator = {rma}
    nas_type = other
}}

""".format(n=n, network=network, secret=_quoted(secret, "secret"),
           rma="yes" if require_message_authenticator else "no")
    text += "modules {\n    $INCLUDE modules.conf\n}\n\n$INCLUDE site.conf\n"
    return text


def render_modules_conf(directory, tls=None):
    """pap, mschap (MPPE keys on), eap (MSCHAPv2 by default, TLS when
    `tls` is given, no MD5), detail (accounting), always."""
    d = _conf_path(directory)
    eap_tls = ""
    if tls is not None:
        ca, cert, key = (_conf_path(p) for p in tls)
        eap_tls = """
        tls-config tls-common {{
            certificate_file = {cert}
            private_key_file = {key}
            ca_file = {ca}
            # The client's certificate must chain to `ca_file`; its
            # names are not checked (no check_cert_cn / issuer).
            cipher_list = "DEFAULT"
            tls_min_version = "1.2"
            tls_max_version = "1.3"
            cache {{
                enable = no
            }}
        }}
        tls {{
            tls = tls-common
        }}
""".format(ca=ca, cert=cert, key=key)
    return """# modules.conf written by tests/netns/radius.py
pap {{
}}

mschap {{
    # RFC 2548 MS-MPPE-Send-Key / Recv-Key in the Access-Accept.
    use_mppe = yes
    require_encryption = no
    require_strong = no
}}

eap {{
    default_eap_type = mschapv2
    timer_expire = 60
    ignore_unknown_eap_types = no
    max_sessions = 4096
    mschapv2 {{
        send_error = no
    }}
{eap_tls}}}

detail {{
    filename = {d}/accounting.detail
    escape_filenames = no
    permissions = 0600
    header = "%t"
    locking = no
}}

always ok {{
    rcode = ok
}}
""".format(d=d, eap_tls=eap_tls)


def _switch_on_user(entries, update_list, attribute, quote):
    """unlang: `switch &User-Name` with one `update LIST` per identity."""
    if not entries:
        return ""
    case = "        case {} {{\n            update {} {{\n                &{} := {}\n            }}\n        }}\n"
    cases = "".join(case.format(_quoted(identity, "identity"), update_list, attribute, quote(value))
                    for identity, value in sorted(entries.items()))
    return "    switch &User-Name {{\n{}    }}\n".format(cases)


def render_site_conf(address, auth_port, acct_port, users, framed_ips):
    """The one virtual server: listeners, users' passwords in `authorize`,
    their Framed-IP-Address in `post-auth`, accounting to `detail`."""
    addr_key = "ipv6addr" if ":" in address else "ipaddr"
    passwords = _switch_on_user(users, "control", "Cleartext-Password", lambda v: _quoted(v, "password"))
    framed = _switch_on_user(framed_ips or {}, "reply", "Framed-IP-Address", _ipv4)
    return """# site.conf written by tests/netns/radius.py
server default {{
    listen {{
        type = auth
        {key} = {address}
        port = {auth_port}
    }}
    listen {{
        type = acct
        {key} = {address}
        port = {acct_port}
    }}

    authorize {{
{passwords}        mschap
        eap
        pap
    }}

    authenticate {{
        Auth-Type PAP {{
            pap
        }}
        Auth-Type MS-CHAP {{
            mschap
        }}
        eap
    }}

    preacct {{
        ok
    }}

    accounting {{
        detail
        ok
    }}

    post-auth {{
{framed}        ok
        Post-Auth-Type REJECT {{
            ok
        }}
    }}
}}
""".format(key=addr_key, address=address, auth_port=auth_port, acct_port=acct_port,
           passwords=_indent(passwords), framed=_indent(framed))


def _indent(block, by="    "):
    return "".join(by + line + "\n" for line in block.splitlines())


def _ipv4(value):
    if not re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", str(value)):
        raise ValueError("Framed-IP-Address must be an IPv4 address: {!r}".format(value))
    return str(value)


# ---------------------------------------------------------------- accounting
class AccountingRecord(dict):
    """One Accounting-Request from the detail file: attribute name -> value
    (string, quotes removed; the first value of a repeated attribute).
    `pairs` keeps every (name, value) in file order; `all(name)` lists
    the values of a repeated attribute (Class, Vendor-Specific ...)."""

    def __init__(self, pairs, header=""):
        super().__init__()
        self.pairs = list(pairs)
        self.header = header
        for name, value in self.pairs:
            self.setdefault(name, value)

    def all(self, name):
        return [v for n, v in self.pairs if n == name]


def _detail_value(raw):
    """A detail-file value: "quoted" strings lose their quotes and
    backslash escapes; enum names, numbers and addresses stay as written."""
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return re.sub(r"\\(.)", r"\1", raw[1:-1])
    return raw


def parse_detail(text):
    """The records of a FreeRADIUS detail file: a header line (the time),
    then one `\\tName = value` line per attribute, then a blank line."""
    records, header, pairs = [], None, []
    for line in text.splitlines():
        if not line.strip():
            if header is not None:
                records.append(AccountingRecord(pairs, header))
            header, pairs = None, []
        elif line[0] in " \t":
            name, _, value = line.strip().partition(" = ")
            pairs.append((name, _detail_value(value)))
        else:
            header = line
    if header is not None:
        records.append(AccountingRecord(pairs, header))
    return records


# ------------------------------------------------------------------ server
class FreeRadius:
    """A FreeRADIUS server on `address` in namespace `ns`.

    clients: addresses or CIDRs (e.g. ["10.2.0.1", "10.2.0.0/24"]) allowed
    with `secret`. users: identity -> cleartext password (PAP, MS-CHAPv2,
    EAP-MSCHAPv2). tls: a `TlsFiles` (or (ca, cert, key)) to offer EAP-TLS.
    framed_ips: identity -> IPv4 address returned as Framed-IP-Address in
    the Access-Accept. require_message_authenticator: drop Access-Requests
    without Message-Authenticator (RFC 3579 §3.2 makes it mandatory with
    EAP-Message; FreeRADIUS then checks it for every request)."""

    def __init__(self, topo, ns, name, address, secret, clients, users, tls=None, auth_port=1812,
                 acct_port=1813, framed_ips=None, require_message_authenticator=False):
        self.binary = _binary(FREERADIUS, "freeradius")
        self.topo, self.ns, self.name, self.address = topo, ns, name, address
        self.secret, self.clients, self.users = secret, list(clients), dict(users)
        self.tls = TlsFiles(*tls) if tls is not None else None
        self.auth_port, self.acct_port = auth_port, acct_port
        self.framed_ips = dict(framed_ips or {})
        self.require_message_authenticator = require_message_authenticator
        self.dir = os.path.join(topo.run_dir, name)
        self.accounting_file = os.path.join(self.dir, "accounting.detail")
        self.proc = None

    def write_config(self):
        """Writes radiusd.conf, modules.conf and site.conf; returns the directory."""
        os.makedirs(self.dir, exist_ok=True)
        # "Configuration directory ... is globally writable. Refusing to start"
        os.chmod(self.dir, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP)
        files = {
            "radiusd.conf": render_radiusd_conf(self.dir, self.clients, self.secret,
                                                self.require_message_authenticator),
            "modules.conf": render_modules_conf(self.dir, self.tls),
            "site.conf": render_site_conf(self.address, self.auth_port, self.acct_port, self.users,
                                          self.framed_ips),
        }
        for file_name, text in files.items():
            path = os.path.join(self.dir, file_name)
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o640)
        return self.dir

    def check_config(self):
        """`freeradius -C`: raises with the output if the configuration is refused."""
        self.write_config()
        proc = self.topo.run(self.ns, [self.binary, "-XC", "-d", self.dir], check=False, timeout=30)
        if proc.returncode != 0:
            raise RuntimeError("freeradius -C refused {}:\n{}{}".format(
                self.dir, proc.stdout[-4000:], proc.stderr[-2000:]))

    def start(self, timeout=15.0):
        """Writes the configuration, starts the server and waits for
        "Ready to process requests"; raises with the log tail otherwise.
        A restart begins a new log (topo.popen truncates NAME.log), so
        `requests_seen` counts from the last start; the accounting file
        is kept."""
        if self.alive():
            raise RuntimeError("{} already running".format(self.name))
        self.write_config()
        self.proc = self.topo.popen(self.name, self.ns, [self.binary, "-X", "-d", self.dir])
        deadline = time.monotonic() + timeout
        while READY_LINE not in self.log():
            if self.proc.poll() is not None:
                raise RuntimeError("freeradius {} exited ({}) during start-up:\n{}".format(
                    self.name, self.proc.returncode, self.log()[-4000:]))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("freeradius {} not ready after {:.0f} s:\n{}".format(
                    self.name, timeout, self.log()[-4000:]))
            time.sleep(0.1)
        return self

    def stop(self):
        """Stops the process this object started (SIGTERM, then SIGKILL)."""
        if self.proc is not None:
            self.topo.stop(self.name)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        return self.topo.log_of(self.name)

    def requests_seen(self, code="Access-Request"):
        """How many new packets of `code` (Access-Request,
        Accounting-Request, Status-Server) the server accepted for
        processing; one EAP authentication is several Access-Requests. A
        retransmission the server recognises as a duplicate (same source,
        Id and authenticator) is logged as "Discarding duplicate request"
        or "Sending duplicate reply" instead and is not counted; a packet
        from an unknown client or with a bad authenticator is not counted."""
        return len(re.findall(r"Received {} Id \d+ from".format(re.escape(code)), self.log()))

    def replies_sent(self, code="Access-Accept"):
        """How many replies of `code` (Access-Accept, Access-Reject,
        Access-Challenge, Accounting-Response) the server sent."""
        return len(re.findall(r"Sent {} Id \d+ from".format(re.escape(code)), self.log()))

    def tls_versions(self):
        """The TLS version of each EAP-TLS handshake the peer completed,
        oldest first ("1.2", "1.3"), from the client Finished messages
        the server logged. (Not from ServerHello: a TLS 1.3
        HelloRetryRequest is a second ServerHello in another EAP round.)"""
        return re.findall(r"^\(\d+\) eap_tls: \(TLS\) recv TLS (1\.\d) Handshake, Finished$", self.log(), re.M)

    def accounting_records(self):
        """Every Accounting-Request accepted so far, oldest first, as
        `AccountingRecord` dicts ({"Acct-Status-Type": "Start", ...})."""
        try:
            with open(self.accounting_file) as f:
                return parse_detail(f.read())
        except FileNotFoundError:
            return []


# ------------------------------------------------------------------ client
def render_eapol_conf(identity, password=None, ca=None, client_cert=None, client_key=None, tls_version=None):
    """wpa_supplicant network block for eapol_test: EAP-MSCHAPv2 with
    `password`, or EAP-TLS with a client certificate (`tls_version`
    "1.2" or "1.3" pins one version; None lets them agree)."""
    lines = ["network={", "    key_mgmt=WPA-EAP", '    identity="{}"'.format(identity)]
    if client_cert is None:
        lines += ["    eap=MSCHAPV2", '    password="{}"'.format(password)]
    else:
        lines += ["    eap=TLS", '    ca_cert="{}"'.format(ca), '    client_cert="{}"'.format(client_cert),
                  '    private_key="{}"'.format(client_key)]
        # wpa_supplicant 2.10 offers TLS 1.3 only when told to; with
        # tls_disable_tlsv1_2=1 its ClientHello falls back to TLS 1.1.
        phase1 = {None: "tls_disable_tlsv1_3=0", "1.2": "tls_disable_tlsv1_3=1",
                  "1.3": "tls_disable_tlsv1_3=0"}[tls_version]
        lines.append('    phase1="{}"'.format(phase1))
    lines.append("}")
    return "\n".join(lines) + "\n"


EapolResult = collections.namedtuple("EapolResult", "ok mppe_ok output")
EapolResult.__doc__ = ("eapol_test's verdict: ok (EAP-Success and exit 0), mppe_ok (the MS-MPPE keys of the "
                       "Access-Accept equal the peer's), output (its full log).")


def eapol_test(topo, ns, server, secret, conf_text, port=1812, timeout=15, extra_args=()):
    """Runs eapol_test in namespace `ns` against `server`:`port` with the
    wpa_supplicant configuration `conf_text` (see `render_eapol_conf`)."""
    binary = _binary(EAPOL_TEST, "eapoltest")
    conf = os.path.join(topo.run_dir, "eapol_test-{}.conf".format(time.monotonic_ns()))
    with open(conf, "w") as f:
        f.write(conf_text)
    argv = [binary, "-c", conf, "-a", server, "-p", str(port), "-s", secret, "-t", str(timeout)] + list(extra_args)
    proc = topo.run(ns, argv, check=False, timeout=timeout + 10)
    out = proc.stdout + proc.stderr
    return EapolResult(ok=proc.returncode == 0 and re.search(r"^SUCCESS$", out, re.M) is not None,
                       mppe_ok=bool(re.search(r"MPPE keys OK: [1-9]\d*\s+mismatch: 0", out)), output=out)
