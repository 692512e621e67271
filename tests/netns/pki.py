#!/usr/bin/env python3
"""A throw-away test PKI for the IKE interop tests (python3-cryptography).

One CA per key type signs one certificate per gateway. Key types:

    ecdsa-p256   ECDSA P-256, certificates signed with ecdsa-with-SHA256
    ecdsa-p384   ECDSA P-384, ecdsa-with-SHA384
    rsa-pkcs1    RSA-2048, sha256WithRSAEncryption (PKCS#1 v1.5, RFC 8017 §8.2)
    rsa-pss      RSA-2048, RSASSA-PSS (RFC 4055 §3.1: SHA-256, MGF1-SHA-256,
                 salt 32); python3-cryptography 38 cannot sign certificates
                 with PSS, so the TBSCertificate is re-encoded here with the
                 PSS AlgorithmIdentifier and signed by hand (RFC 5280 §4.1)
    ed25519      Ed25519 (RFC 8410)

Every gateway certificate carries the subject DN
`C=CH, O=Phalanx, CN=<fqdn>` and the subjectAltNames IP (v4 and v6 WAN
address), DNS (`<fqdn>`) and email (`<name>@example.org`), so each of the
four identity types (RFC 7296 §3.5: ID_IPV4_ADDR, ID_FQDN, ID_RFC822_ADDR,
ID_DER_ASN1_DN) can be checked against the same certificate.

Files (PEM) under `<dir>/<keytype>/`: `ca.pem`, `ca.key`, `<gw>.pem`,
`<gw>.key` (PKCS#8). Keys are generated fresh on every run (not secret).

CLI: `pki.py DIR [KEYTYPE...]` writes the files and prints their paths.
"""

import datetime
import ipaddress
import os
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.x509.oid import NameOID

KEY_TYPES = ("ecdsa-p256", "ecdsa-p384", "rsa-pkcs1", "rsa-pss", "ed25519")

# The gateways of tests/netns/lib.sh: name -> (fqdn, email, IPv4, IPv6).
GATEWAYS = {
    "gwA": ("gw-a.example", "gw-a@example.org", "192.0.2.1", "2001:db8:f::1"),
    "gwB": ("gw-b.example", "gw-b@example.org", "192.0.2.2", "2001:db8:f::2"),
}


def subject_dn(gw):
    """The DN of gateway `gw` in strongSwan's string syntax (also the
    phalanxd config syntax, ike-config-format.md)."""
    return "C=CH, O=Phalanx, CN={}".format(GATEWAYS[gw][0])


def identity(gw, kind):
    """Gateway `gw`'s identity of `kind` ("ip", "fqdn", "email", "dn") in
    strongSwan syntax; every one of them is in the certificate."""
    fqdn, email, v4, _ = GATEWAYS[gw]
    return {"ip": v4, "fqdn": fqdn, "email": email, "dn": subject_dn(gw)}[kind]


def _name(cn):
    return x509.Name([
        x509.NameAttribute(NameOID.COUNTRY_NAME, "CH"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Phalanx"),
        x509.NameAttribute(NameOID.COMMON_NAME, cn),
    ])


def new_key(kind):
    """A fresh private key of `kind`."""
    if kind == "ecdsa-p256":
        return ec.generate_private_key(ec.SECP256R1())
    if kind == "ecdsa-p384":
        return ec.generate_private_key(ec.SECP384R1())
    if kind in ("rsa-pkcs1", "rsa-pss"):
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if kind == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError("unknown key type " + kind)


def _hash_for(kind):
    if kind == "ed25519":
        return None  # Ed25519 signs the message itself (RFC 8032)
    return hashes.SHA384() if kind == "ecdsa-p384" else hashes.SHA256()


# ------------------------------------------------------------ minimal DER
def _der_len(n):
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _tlv(tag, body):
    return bytes([tag]) + _der_len(len(body)) + body


def _der_elements(data):
    """The top-level TLVs of `data` as raw byte strings (X.690 §8.1)."""
    out, pos = [], 0
    while pos < len(data):
        start = pos
        pos += 1
        first = data[pos]
        pos += 1
        if first < 0x80:
            length = first
        else:
            count = first & 0x7F
            length = int.from_bytes(data[pos:pos + count], "big")
            pos += count
        pos += length
        out.append(data[start:pos])
    return out


def _der_body(tlv):
    """The contents of one TLV."""
    first = tlv[1]
    skip = 2 if first < 0x80 else 2 + (first & 0x7F)
    return tlv[skip:]


# RSASSA-PSS with SHA-256, MGF1-SHA-256, salt length 32 (RFC 4055 §3.1),
# hash parameters as NULL, the encoding OpenSSL and webpki use.
_OID_PSS = bytes.fromhex("06092a864886f70d01010a")
_SHA256_ALG = bytes.fromhex("300d06096086480165030402010500")
_MGF1_SHA256 = _tlv(0x30, bytes.fromhex("06092a864886f70d010108") + _SHA256_ALG)
PSS_SHA256_ALG_ID = _tlv(0x30, _OID_PSS + _tlv(0x30, _tlv(0xA0, _SHA256_ALG) + _tlv(0xA1, _MGF1_SHA256)
                                                 + _tlv(0xA2, bytes.fromhex("020120"))))


def _resign_pss(cert, ca_key):
    """`cert` with its signature algorithm replaced by RSASSA-PSS and
    signed again by `ca_key` (RFC 5280 §4.1.1.2: the TBSCertificate's
    `signature` field equals the outer `signatureAlgorithm`)."""
    fields = _der_elements(_der_body(cert.tbs_certificate_bytes))
    # TBSCertificate: [0] version, serialNumber, signature, issuer, ...
    assert fields[0][0] == 0xA0 and fields[1][0] == 0x02, "unexpected TBSCertificate layout"
    fields[2] = PSS_SHA256_ALG_ID
    tbs = _tlv(0x30, b"".join(fields))
    sig = ca_key.sign(tbs, padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32), hashes.SHA256())
    der = _tlv(0x30, tbs + PSS_SHA256_ALG_ID + _tlv(0x03, b"\x00" + sig))
    return x509.load_der_x509_certificate(der)


# ------------------------------------------------------------ certificates
def _builder(subject, issuer, public_key, days=30, expired=False):
    """Valid from an hour ago for `days`; `expired`: valid 60 days until
    yesterday."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days)
    if expired:
        start, end = now - datetime.timedelta(days=60), now - datetime.timedelta(days=1)
    return (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end))


def _sign(builder, kind, ca_key):
    cert = builder.sign(ca_key, _hash_for(kind))
    return _resign_pss(cert, ca_key) if kind == "rsa-pss" else cert


def make_ca(kind):
    """(key, certificate) of a self-signed CA of `kind`."""
    key = new_key(kind)
    name = _name("Phalanx Test CA " + kind)
    b = (_builder(name, name, key.public_key(), days=60)
         .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
         .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                      data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                      crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
         .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    return key, _sign(b, kind, key)


def make_gateway_cert(kind, gw, ca_key, ca_cert, expired=False):
    """(key, certificate) for gateway `gw`, issued by the CA (`expired`:
    its validity ended yesterday)."""
    fqdn, email, v4, v6 = GATEWAYS[gw]
    key = new_key(kind)
    sans = [x509.IPAddress(ipaddress.ip_address(v4)), x509.IPAddress(ipaddress.ip_address(v6)),
            x509.DNSName(fqdn), x509.RFC822Name(email)]
    b = (_builder(_name(fqdn), ca_cert.subject, key.public_key(), expired=expired)
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
         .add_extension(x509.SubjectAlternativeName(sans), critical=False)
         .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False))
    return key, _sign(b, kind, ca_key)


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def _key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def build(directory, kind, gateways=("gwA", "gwB"), expired=()):
    """Writes the CA and the gateways' certificates and keys of `kind`
    under directory/kind/ (those of `expired` no longer valid); returns
    {"ca": path, gw: (cert path, key path)}."""
    out_dir = os.path.join(directory, kind)
    os.makedirs(out_dir, exist_ok=True)
    ca_key, ca_cert = make_ca(kind)
    paths = {"ca": os.path.join(out_dir, "ca.pem")}
    _write(paths["ca"], ca_cert.public_bytes(serialization.Encoding.PEM))
    _write(os.path.join(out_dir, "ca.key"), _key_pem(ca_key))
    for gw in gateways:
        key, cert = make_gateway_cert(kind, gw, ca_key, ca_cert, expired=gw in expired)
        cert_path, key_path = os.path.join(out_dir, gw + ".pem"), os.path.join(out_dir, gw + ".key")
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
        _write(key_path, _key_pem(key))
        paths[gw] = (cert_path, key_path)
    return paths


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for kind in argv[2:] or KEY_TYPES:
        print(kind, build(argv[1], kind))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
