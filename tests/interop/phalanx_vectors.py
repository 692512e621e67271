"""Shared scapy plumbing for the Phalanx ESP/AH interop vectors.

Used by gen_scapy_vectors.py (which writes the committed vectors) and by
test_scapy_esp.py (which checks Phalanx against scapy both ways).

scapy 2.5.0 (Debian python3-scapy) is the reference; where it lacks an
algorithm or gets an RFC detail wrong, this module plugs the gap *inside*
scapy's own SecurityAssociation machinery and says why:

* AES-GMAC (RFC 4543) is not in scapy: `AesGmac` is a scapy `CryptAlgo`
  built on python3-cryptography's AESGCM with an empty plaintext and the
  whole ESP payload as additional data (INTEROP-NOTES.md).
* scapy 2.5.0 ignores ESN for ESP with a separate integrity algorithm: its
  `_encrypt_esp` / `_decrypt_esp` call `auth_algo.sign/verify` without the
  high-order bits, but RFC 4303 §2.2.1 / §3.3.2.1 put Seq# High after the
  trailer for the ICV. `EsnEspAuth` appends them (AH and the AEADs already
  get ESN right in scapy).
* NAT-T (RFC 3948): scapy 2.5.0 leaves the UDP length at 8, and with an
  IPv6 extension header in front it leaves that header's Next Header at 50.
  `fix_nat_t` repairs both and sets the checksum (IPv4: 0, RFC 3948 §2.1;
  IPv6: computed, RFC 8200 §8.1).
"""

import ipaddress
import struct

try:
    from scapy.all import IP, IPv6, UDP, Raw, raw
    from scapy.layers import ipsec as scapy_ipsec
    from scapy.layers.ipsec import (
        AH,
        ESP,
        AuthAlgo,
        CryptAlgo,
        IPSecIntegrityError,
        SecurityAssociation,
        _ESPPlain,
    )
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    import scapy

    SCAPY_VERSION = scapy.VERSION
    IMPORT_ERROR = None
except ImportError as err:  # reported by the callers with the install hint
    IMPORT_ERROR = err
    SCAPY_VERSION = None

INSTALL_HINT = (
    "scapy/cryptography not importable by this interpreter ({}); run the tests with "
    "/usr/bin/python3 and install them: apt-get install python3-scapy python3-cryptography"
)


def require_scapy():
    """Raises RuntimeError with the install hint when scapy is missing."""
    if IMPORT_ERROR is not None:
        raise RuntimeError(INSTALL_HINT.format(IMPORT_ERROR))


# IANA IKEv2 transform ids (RFC 7296 §3.3.2 and later registrations).
ENCR_AES_CBC = 12
ENCR_NULL = 11
ENCR_AES_GCM_16 = 20
ENCR_NULL_AUTH_AES_GMAC = 21
ENCR_CHACHA20_POLY1305 = 28
INTEG_NONE = 0
INTEG_HMAC_SHA2_256_128 = 12
INTEG_HMAC_SHA2_384_192 = 13
INTEG_HMAC_SHA2_512_256 = 14

# encr id -> (scapy algorithm name, salt bytes appended to the key)
# Salt: RFC 4106 §8.1 (GCM), RFC 4543 §3.2 (GMAC), RFC 7634 §2 (ChaCha20).
_CRYPT = {
    ENCR_AES_GCM_16: ("AES-GCM", 4),
    ENCR_NULL_AUTH_AES_GMAC: ("AES-GMAC", 4),
    ENCR_CHACHA20_POLY1305: ("CHACHA20-POLY1305", 4),
    ENCR_AES_CBC: ("AES-CBC", 0),
    ENCR_NULL: ("NULL", 0),
}
# integ id -> (scapy algorithm name, key bytes) (RFC 4868 §2.1.1)
_AUTH = {
    INTEG_NONE: (None, 0),
    INTEG_HMAC_SHA2_256_128: ("SHA2-256-128", 32),
    INTEG_HMAC_SHA2_384_192: ("SHA2-384-192", 48),
    INTEG_HMAC_SHA2_512_256: ("SHA2-512-256", 64),
}
AEADS = (ENCR_AES_GCM_16, ENCR_NULL_AUTH_AES_GMAC, ENCR_CHACHA20_POLY1305)


def encr_key_len(encr, key_bits):
    """Key length in bytes including the salt where the RFC puts one."""
    return key_bits // 8 + _CRYPT[encr][1]


def integ_key_len(integ):
    """HMAC key length in bytes (RFC 4868 §2.1.1: the full hash output size)."""
    return _AUTH[integ][1]


def iv_len(encr):
    """Explicit IV length: 8 for the counter-mode AEADs, 16 for CBC, 0 for NULL."""
    return {ENCR_AES_CBC: 16, ENCR_NULL: 0}.get(encr, 8)


if IMPORT_ERROR is None:

    class AesGmac(CryptAlgo):
        """ENCR_NULL_AUTH_AES_GMAC (RFC 4543) as a scapy CryptAlgo.

        RFC 4543 §3: nothing is encrypted; the GCM tag covers
        AAD = SPI || Seq (|| with ESN: SPI || Seq High || Seq Low, §3.3)
        || IV || payload || padding || pad length || next header, with the
        nonce salt || IV (§3.1) and a 16-byte ICV. Padding aligns to 4 (§3.2
        refers to RFC 4303 §2.4), which block_size=1 gives in scapy.
        """

        def __init__(self):
            super().__init__(
                "AES-GMAC",
                cipher=AESGCM,
                mode=None,
                key_size=(16, 32),
                block_size=1,
                iv_size=8,
                salt_size=4,
                icv_size=16,
            )

        @staticmethod
        def _aad(esp, iv, body, esn_en, esn):
            if esn_en:
                head = struct.pack("!LLL", esp.spi, esn, esp.seq)
            else:
                head = struct.pack("!LL", esp.spi, esp.seq)
            return head + iv + body

        def encrypt(self, sa, esp, key, icv_size=None, esn_en=False, esn=0):
            body = esp.data_for_encryption()
            aad = self._aad(esp, esp.iv, body, esn_en, esn)
            tag = AESGCM(key).encrypt(sa.crypt_salt + esp.iv, b"", aad)
            return ESP(spi=esp.spi, seq=esp.seq, data=esp.iv + body + tag)

        def decrypt(self, sa, esp, key, icv_size=None, esn_en=False, esn=0):
            data = bytes(esp.data)
            iv, body, icv = data[:8], data[8:-16], data[-16:]
            aad = self._aad(esp, iv, body, esn_en, esn)
            try:
                AESGCM(key).decrypt(sa.crypt_salt + iv, icv, aad)
            except Exception as err:  # cryptography's InvalidTag
                raise IPSecIntegrityError(err)
            padlen, nh = body[-2], body[-1]
            return _ESPPlain(
                spi=esp.spi,
                seq=esp.seq,
                iv=iv,
                data=body[: len(body) - padlen - 2],
                padding=body[len(body) - padlen - 2 : -2],
                padlen=padlen,
                nh=nh,
                icv=icv,
            )

    scapy_ipsec.CRYPT_ALGOS["AES-GMAC"] = AesGmac()

    class EsnEspAuth(AuthAlgo):
        """A scapy HMAC AuthAlgo that includes Seq# High in the ESP ICV.

        RFC 4303 §2.2.1 and §3.3.2.1: with ESN the high-order 32 bits are
        authenticated as if appended after the Next Header field (for
        encryption + separate integrity). scapy 2.5.0 passes no ESN to the
        ESP ICV, so this subclass carries the high bits itself.
        """

        def __init__(self, base, esn_high):
            super().__init__(base.name, base.mac, base.digestmod, base.icv_size, base.key_size)
            self.esn_high = esn_high

        def _icv(self, esp_bytes, key):
            mac = self.new_mac(key)
            mac.update(esp_bytes + struct.pack("!L", self.esn_high))
            return mac.finalize()[: self.icv_size]

        def sign(self, pkt, key, esn_en=False, esn=0):
            if not pkt.haslayer(ESP):
                return super().sign(pkt, key, esn_en, esn)
            pkt[ESP].data += self._icv(raw(pkt[ESP]), key)
            return pkt

        def verify(self, pkt, key, esn_en=False, esn=0):
            if not isinstance(pkt, ESP):
                return super().verify(pkt, key, esn_en, esn)
            data = bytes(pkt.data)
            clone = pkt.copy()
            clone.data = data[: -self.icv_size]
            if data[-self.icv_size :] != self._icv(raw(clone), key):
                raise IPSecIntegrityError("ICV mismatch (ESN)")


def ip_class(version):
    """scapy's IP or IPv6 class for an IP version number."""
    return IP if version == 4 else IPv6


def parse_ip(data):
    """Parses an IPv4 or IPv6 packet by its version nibble."""
    return ip_class(data[0] >> 4)(data)


def make_sa(v):
    """A scapy SecurityAssociation for one vector dict (see the JSON schema)."""
    require_scapy()
    seq = v["seq"]
    esn_high, seq_low = seq >> 32, seq & 0xFFFFFFFF
    kwargs = dict(seq_num=seq_low, esn_en=v["esn"], esn=esn_high if v["esn"] else 0)
    integ_name = _AUTH[v["integ"]][0]
    if integ_name:
        kwargs.update(auth_algo=integ_name, auth_key=bytes.fromhex(v["integ_key"]))
    if v["protocol"] == "esp":
        kwargs.update(crypt_algo=_CRYPT[v["encr"]][0])
        if v["encr_key"]:
            kwargs.update(crypt_key=bytes.fromhex(v["encr_key"]))
        if v["udp_encap"]:
            u = v["udp_encap"]
            kwargs.update(nat_t_header=UDP(sport=u["sport"], dport=u["dport"]))
    if v["mode"] == "tunnel":
        kwargs.update(tunnel_header=tunnel_header(v))
    sa = SecurityAssociation(ESP if v["protocol"] == "esp" else AH, v["spi"], **kwargs)
    if v["protocol"] == "esp" and v["esn"] and integ_name:
        sa.auth_algo = EsnEspAuth(sa.auth_algo, esn_high)
    return sa


def outer_ident(v):
    """The IPv4 outer Identification of vector `v` (see tunnel_header)."""
    ident = v["seq"] & 0xFFFF
    return 1 if v["protocol"] == "ah" and ident == 0 else ident


def tunnel_header(v):
    """The outer header per the esp.md outer-header rules.

    IPv4 outer: TOS copied from the inner packet (inner IPv6: its traffic
    class; RFC 4301 §5.1.2.1 DSCP copy, RFC 6040 normal-mode ECN copy),
    identification = low 16 bits of the sequence number (AH: 1 where those
    are 0, phalanx_esp::ah_ident: a kernel sending the header as it is would
    replace a 0, and AH's ICV covers it), DF copied from an
    IPv4 inner packet (else 0), TTL 64. IPv6 outer: traffic class copied,
    flow label 0, hop limit 64.
    """
    inner = parse_ip(bytes.fromhex(v["inner"]))
    tos = inner.tos if inner.version == 4 else inner.tc
    df = inner.version == 4 and bool(inner.flags & 0x2)
    src, dst = v["tunnel_src"], v["tunnel_dst"]
    if ipaddress.ip_address(src).version == 4:
        return IP(src=src, dst=dst, tos=tos, id=outer_ident(v), flags="DF" if df else 0, ttl=64)
    return IPv6(src=src, dst=dst, tc=tos, fl=0, hlim=64)


def fix_nat_t(pkt):
    """Repairs scapy 2.5.0's UDP-encapsulated output (see module doc)."""
    udp = pkt[UDP]
    under = udp.underlayer
    if not isinstance(under, (IP, IPv6)):
        under.nh = 17  # an IPv6 extension header kept in front (transport mode)
    udp.len = None
    udp.chksum = 0 if pkt.version == 4 else None
    if pkt.version == 4:
        pkt.len = None
        pkt.chksum = None
    else:
        pkt.plen = None
    return ip_class(pkt.version)(raw(pkt))


def encrypt(v):
    """scapy's outer packet (bytes) for a vector's inner packet, seq and IV."""
    sa = make_sa(v)
    inner = parse_ip(bytes.fromhex(v["inner"]))
    seq = v["seq"]
    if v["protocol"] == "esp":
        iv = bytes.fromhex(v["iv"])
        out = sa.encrypt(inner, seq_num=seq & 0xFFFFFFFF, iv=iv)
        if v["udp_encap"]:
            return raw(fix_nat_t(out))
    else:
        out = sa.encrypt(inner, seq_num=seq & 0xFFFFFFFF)
    return raw(out)


def check_udp_encap(pkt, v):
    """Checks the RFC 3948 UDP header of an outer packet; returns a list of problems."""
    u = v["udp_encap"]
    udp = pkt[UDP]
    problems = []
    if (udp.sport, udp.dport) != (u["sport"], u["dport"]):
        problems.append("UDP ports {}->{} != {}".format(udp.sport, udp.dport, u))
    if udp.len != 8 + len(raw(udp.payload)):
        problems.append("UDP length {} wrong".format(udp.len))
    if pkt.version == 4 and udp.chksum != 0:
        problems.append("IPv4 UDP checksum should be 0 (RFC 3948 §2.1)")
    if pkt.version == 6:
        fixed = IPv6(raw(pkt))
        fixed[UDP].chksum = None
        if udp.chksum != IPv6(raw(fixed))[UDP].chksum:
            problems.append("IPv6 UDP checksum wrong")
    return problems


def strip_nat_t(pkt):
    """The same packet with the UDP encapsulation header removed (protocol 50)."""
    udp = pkt[UDP]
    esp_bytes = raw(udp.payload)
    under = udp.underlayer
    under.remove_payload()
    under.add_payload(Raw(esp_bytes))
    if isinstance(under, IP):
        under.proto = 50
    else:
        under.nh = 50
    if pkt.version == 4:
        pkt.len = None
        pkt.chksum = None
    else:
        pkt.plen = None
    return ip_class(pkt.version)(raw(pkt))


def decrypt(v, outer_hex=None):
    """scapy's decryption (ICV verified) of a vector's outer packet, as bytes."""
    sa = make_sa(v)
    pkt = parse_ip(bytes.fromhex(outer_hex or v["outer"]))
    if v["protocol"] == "esp" and v["udp_encap"]:
        pkt = strip_nat_t(pkt)
    seq = v["seq"]
    esn = seq >> 32 if v["esn"] else 0
    return raw(sa.decrypt(pkt, verify=True, esn_en=v["esn"], esn=esn))
