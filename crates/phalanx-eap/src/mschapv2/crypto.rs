//! The MS-CHAPv2 computations (RFC 2759 §8) and the MPPE keys they lead
//! to (RFC 3079 §3), written after the RFCs' pseudo-code, plus the MSK
//! EAP-MSCHAPv2 exports for IKEv2.
//!
//! The MSK: MasterReceiveKey | MasterSendKey | 32 zero octets, where
//! MasterKey = GetMasterKey(PasswordHashHash, NT-Response) and the two
//! halves are GetAsymmetricStartKey with Magic2 and Magic3 (RFC 3079
//! §3.4), taken the same on both sides (strongSwan's `GenerateMSK` in
//! `eap_mschapv2.c`, which interoperates with Windows, orders them so: the
//! Magic2 key first).

use des::cipher::{BlockEncrypt, KeyInit};
use md4::{Digest as _, Md4};
use sha1::Sha1;
use zeroize::Zeroizing;

/// RFC 2759 §8.7: "Magic server to client signing constant".
const MAGIC1: &[u8] = b"Magic server to client signing constant";
/// RFC 2759 §8.7: "Pad to make it do more than one iteration".
const MAGIC2: &[u8] = b"Pad to make it do more than one iteration";
/// RFC 3079 §3.4: GetMasterKey's constant.
const MASTER_MAGIC: &[u8] = b"This is the MPPE Master Key";
/// RFC 3079 §3.4: Magic2 of GetAsymmetricStartKey.
const KEY_MAGIC2: &[u8] =
    b"On the client side, this is the send key; on the server side, it is the receive key.";
/// RFC 3079 §3.4: Magic3 of GetAsymmetricStartKey.
const KEY_MAGIC3: &[u8] =
    b"On the client side, this is the receive key; on the server side, it is the send key.";
/// RFC 3079 §3.4: SHSpad1 and SHSpad2.
const SHS_PAD1: [u8; 40] = [0x00; 40];
const SHS_PAD2: [u8; 40] = [0xf2; 40];

/// Octets of the MSK (RFC 5247 §2.1: at least 64).
pub const MSK_LEN: usize = 64;

/// NtPasswordHash (§8.3): MD4 of the password in UTF-16 little-endian.
pub fn nt_password_hash(password: &str) -> Zeroizing<[u8; 16]> {
    let unicode: Zeroizing<Vec<u8>> =
        Zeroizing::new(password.encode_utf16().flat_map(u16::to_le_bytes).collect());
    Zeroizing::new(Md4::digest(&*unicode).into())
}

/// HashNtPasswordHash (§8.4).
pub fn hash_nt_password_hash(hash: &[u8; 16]) -> Zeroizing<[u8; 16]> {
    Zeroizing::new(Md4::digest(hash).into())
}

/// The user name MS-CHAPv2 hashes: without a `DOMAIN\` prefix (§8.2;
/// strongSwan and Windows strip it).
pub fn user_name(identity: &str) -> &str {
    identity
        .rsplit_once('\\')
        .map_or(identity, |(_, user)| user)
}

/// ChallengeHash (§8.2): SHA-1(PeerChallenge | AuthenticatorChallenge |
/// UserName), first 8 octets.
pub fn challenge_hash(peer: &[u8; 16], authenticator: &[u8; 16], user: &str) -> [u8; 8] {
    let digest = Sha1::new()
        .chain_update(peer)
        .chain_update(authenticator)
        .chain_update(user.as_bytes())
        .finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

/// A DES key from 7 octets: 56 key bits spread over 8 octets, the low bit
/// of each left for parity (§8.6; the cipher ignores it).
fn des_key(seven: &[u8]) -> [u8; 8] {
    let mut bits: u64 = 0;
    for b in seven {
        bits = (bits << 8) | u64::from(*b);
    }
    let mut key = [0u8; 8];
    for (i, k) in key.iter_mut().enumerate() {
        // Octet i takes key bits 7i..7i+7 from the top, shifted left one.
        let shift = 49 - 7 * i;
        *k = (((bits >> shift) & 0x7f) as u8) << 1;
    }
    key
}

/// DesEncrypt (§8.6) of `clear` under 7 key octets.
fn des_encrypt(clear: &[u8; 8], seven: &[u8]) -> [u8; 8] {
    let key = des_key(seven);
    // A DES key is always 8 octets: new_from_slice cannot fail here.
    let cipher = des::Des::new_from_slice(&key).unwrap_or_else(|_| unreachable!());
    let mut block = des::cipher::generic_array::GenericArray::clone_from_slice(clear);
    cipher.encrypt_block(&mut block);
    let mut out = [0u8; 8];
    out.copy_from_slice(&block);
    out
}

/// ChallengeResponse (§8.5): the 8-octet challenge DES-encrypted under
/// the three 7-octet thirds of the zero-padded password hash.
pub fn challenge_response(challenge: &[u8; 8], password_hash: &[u8; 16]) -> [u8; 24] {
    let mut z = Zeroizing::new([0u8; 21]);
    z[..16].copy_from_slice(password_hash);
    let mut out = [0u8; 24];
    for (i, third) in z.chunks(7).enumerate() {
        out[8 * i..8 * i + 8].copy_from_slice(&des_encrypt(challenge, third));
    }
    out
}

/// GenerateNTResponse (§8.1).
pub fn nt_response(
    authenticator: &[u8; 16],
    peer: &[u8; 16],
    user: &str,
    password_hash: &[u8; 16],
) -> [u8; 24] {
    challenge_response(&challenge_hash(peer, authenticator, user), password_hash)
}

/// GenerateAuthenticatorResponse (§8.7): `S=` and 40 upper-case hex
/// digits.
pub fn authenticator_response(
    password_hash: &[u8; 16],
    nt_response: &[u8; 24],
    peer: &[u8; 16],
    authenticator: &[u8; 16],
    user: &str,
) -> String {
    let hash_hash = hash_nt_password_hash(password_hash);
    let digest = Sha1::new()
        .chain_update(*hash_hash)
        .chain_update(nt_response)
        .chain_update(MAGIC1)
        .finalize();
    let challenge = challenge_hash(peer, authenticator, user);
    let digest = Sha1::new()
        .chain_update(digest)
        .chain_update(challenge)
        .chain_update(MAGIC2)
        .finalize();
    format!("S={}", hex_upper(&digest))
}

/// Octets as upper-case hex digits (how MS-CHAPv2 writes S= and C=).
pub fn hex_upper(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// GetMasterKey (RFC 3079 §3.4): 16 octets.
pub fn master_key(password_hash_hash: &[u8; 16], nt_response: &[u8; 24]) -> Zeroizing<[u8; 16]> {
    let digest = Sha1::new()
        .chain_update(password_hash_hash)
        .chain_update(nt_response)
        .chain_update(MASTER_MAGIC)
        .finalize();
    let mut out = Zeroizing::new([0u8; 16]);
    out.copy_from_slice(&digest[..16]);
    out
}

/// GetAsymmetricStartKey (RFC 3079 §3.4), 16 octets: Magic2 when the key
/// is the client's send key (= the server's receive key), else Magic3.
pub fn asymmetric_start_key(
    master: &[u8; 16],
    is_send: bool,
    is_server: bool,
) -> Zeroizing<[u8; 16]> {
    let magic = if is_send == is_server {
        KEY_MAGIC3
    } else {
        KEY_MAGIC2
    };
    let digest = Sha1::new()
        .chain_update(master)
        .chain_update(SHS_PAD1)
        .chain_update(magic)
        .chain_update(SHS_PAD2)
        .finalize();
    let mut out = Zeroizing::new([0u8; 16]);
    out.copy_from_slice(&digest[..16]);
    out
}

/// The MSK of EAP-MSCHAPv2 (module doc), the same on both sides.
pub fn msk(password_hash: &[u8; 16], nt_response: &[u8; 24]) -> Zeroizing<Vec<u8>> {
    let master = master_key(&hash_nt_password_hash(password_hash), nt_response);
    // The server's receive key (Magic2), then its send key (Magic3).
    let receive = asymmetric_start_key(&master, false, true);
    let send = asymmetric_start_key(&master, true, true);
    let mut out = Zeroizing::new(Vec::with_capacity(MSK_LEN));
    out.extend_from_slice(&*receive);
    out.extend_from_slice(&*send);
    out.resize(MSK_LEN, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h<const N: usize>(s: &str) -> [u8; N] {
        hex::decode(s.replace(' ', "")).unwrap().try_into().unwrap()
    }

    // RFC 2759 §9.2.
    const AUTH: &str = "5B5D7C7D7B3F2F3E3C2C602132262628";
    const PEER: &str = "21402324255E262A28295F2B3A337C7E";
    const NT_RESPONSE: &str = "82309ECD8D708B5EA08FAA3981CD83544233114A3D85D6DF";

    #[test]
    fn rfc2759_section_9_2() {
        let (auth, peer) = (h::<16>(AUTH), h::<16>(PEER));
        let hash = nt_password_hash("clientPass");
        assert_eq!(*hash, h::<16>("44EBBA8D5312B8D611474411F56989AE"));
        assert_eq!(
            *hash_nt_password_hash(&hash),
            h::<16>("41C00C584BD2D91C4017A2A12FA59F3F")
        );
        assert_eq!(
            challenge_hash(&peer, &auth, "User"),
            h::<8>("D02E4386BCE91226")
        );
        let nt = nt_response(&auth, &peer, "User", &hash);
        assert_eq!(nt, h::<24>(NT_RESPONSE));
        assert_eq!(
            authenticator_response(&hash, &nt, &peer, &auth, "User"),
            "S=407A5589115FD0D6209F510FE9C04566932CDA56"
        );
        // A wrong password gives another response.
        assert_ne!(
            nt_response(&auth, &peer, "User", &nt_password_hash("clientpass")),
            nt
        );
    }

    #[test]
    fn rfc3079_section_3_5_3() {
        let hash_hash = h::<16>("41C00C584BD2D91C4017A2A12FA59F3F");
        let master = master_key(&hash_hash, &h::<24>(NT_RESPONSE));
        assert_eq!(*master, h::<16>("FDECE3717A8C838CB388E527AE3CDD31"));
        // SendStartKey128 of the example: the server's send key (Magic3),
        // which is the client's receive key.
        let want = h::<16>("8B7CDC149B993A1BA118CB153F56DCCB");
        assert_eq!(*asymmetric_start_key(&master, true, true), want);
        assert_eq!(*asymmetric_start_key(&master, false, false), want);
        assert_ne!(*asymmetric_start_key(&master, true, false), want);
    }

    #[test]
    fn msk_is_receive_then_send_then_zeros() {
        let hash = nt_password_hash("clientPass");
        let msk = msk(&hash, &h::<24>(NT_RESPONSE));
        assert_eq!(msk.len(), MSK_LEN);
        assert_eq!(&msk[16..32], &h::<16>("8B7CDC149B993A1BA118CB153F56DCCB"));
        assert!(msk[32..].iter().all(|b| *b == 0));
    }

    #[test]
    fn domain_prefixes_are_stripped() {
        assert_eq!(user_name("CORP\\alice"), "alice");
        assert_eq!(user_name("alice@example.com"), "alice@example.com");
    }
}
