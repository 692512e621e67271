//! The IKEv2 key schedule: IKE SA keys (RFC 7296 §2.14), IKE SA rekey
//! (§2.18), additional key exchanges (RFC 9370 §2.2.2, §2.2.4) and Child
//! SA keying material (§2.17).
//!
//! Each derivation follows the RFC pseudo-code line by line; the RFC text
//! is quoted above the line that implements it.
//!
//! Only HMAC PRFs exist here (see [`PrfAlgorithm`]), so the PRF that makes
//! SKEYSEED is keyed with `Ni | Nr` whole. RFC 7296 §2.14 keeps only the
//! first 64 bits of each nonce for PRFs that take fixed-size keys (such as
//! AES-XCBC); that case does not arise.

use super::prf::{prf_once, prf_plus_parts, PrfAlgorithm};
use crate::{CryptoError, CryptoProvider};
use zeroize::Zeroizing;

/// Key lengths of one IKE SA, in bytes: what prf+ has to produce
/// (RFC 7296 §2.14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyLengths {
    /// Length of SK_d, SK_pi and SK_pr: the PRF's preferred key length
    /// ([`PrfAlgorithm::key_len`]).
    pub prf: usize,
    /// Length of SK_ai and SK_ar: the integrity key length (0 with an
    /// AEAD, RFC 5282 §7.1).
    pub integ: usize,
    /// Length of SK_ei and SK_er, salt included for AEADs (RFC 5282 §7.1,
    /// RFC 7634 §3); see [`super::sk_key_lengths`].
    pub encr: usize,
}

impl KeyLengths {
    /// The lengths for `prf` with the given integrity and encryption key
    /// lengths.
    pub const fn new(prf: PrfAlgorithm, integ: usize, encr: usize) -> KeyLengths {
        KeyLengths {
            prf: prf.key_len(),
            integ,
            encr,
        }
    }

    /// Bytes of prf+ output the seven keys take.
    pub const fn total(&self) -> usize {
        3 * self.prf + 2 * self.integ + 2 * self.encr
    }
}

/// The nonces and SPIs an IKE SA's keys are bound to.
///
/// For the initial IKE SA these are the nonces of IKE_SA_INIT and the SPIs
/// of its header; for a rekeyed IKE SA the nonces of the CREATE_CHILD_SA
/// exchange and the SPIs of the new IKE SA (RFC 7296 §2.18).
#[derive(Clone, Copy, Debug)]
pub struct KdfInputs<'a> {
    /// The initiator's nonce, Ni.
    pub ni: &'a [u8],
    /// The responder's nonce, Nr.
    pub nr: &'a [u8],
    /// The initiator's IKE SPI, as in the IKE header.
    pub spi_i: [u8; 8],
    /// The responder's IKE SPI, as in the IKE header.
    pub spi_r: [u8; 8],
}

/// The seven secrets of one IKE SA (RFC 7296 §2.14), wiped on drop.
///
/// "i" and "r" name the original initiator and responder of the IKE SA:
/// the initiator protects what it sends with SK_ei/SK_ai, the responder
/// with SK_er/SK_ar.
pub struct IkeSaKeys {
    /// SK_d: keys Child SA derivation and the next rekey.
    pub sk_d: Zeroizing<Vec<u8>>,
    /// SK_ai: integrity key of messages from the initiator.
    pub sk_ai: Zeroizing<Vec<u8>>,
    /// SK_ar: integrity key of messages from the responder.
    pub sk_ar: Zeroizing<Vec<u8>>,
    /// SK_ei: encryption key (salt included) of messages from the initiator.
    pub sk_ei: Zeroizing<Vec<u8>>,
    /// SK_er: encryption key (salt included) of messages from the responder.
    pub sk_er: Zeroizing<Vec<u8>>,
    /// SK_pi: keys the initiator's AUTH payload (§2.15).
    pub sk_pi: Zeroizing<Vec<u8>>,
    /// SK_pr: keys the responder's AUTH payload (§2.15).
    pub sk_pr: Zeroizing<Vec<u8>>,
    prf: PrfAlgorithm,
    lengths: KeyLengths,
}

impl IkeSaKeys {
    /// The keys of a new IKE SA from the shared secret of IKE_SA_INIT
    /// (RFC 7296 §2.14).
    pub fn derive(
        provider: &dyn CryptoProvider,
        prf: PrfAlgorithm,
        lengths: KeyLengths,
        inputs: &KdfInputs<'_>,
        shared_secret: &[u8],
    ) -> Result<IkeSaKeys, CryptoError> {
        // RFC 7296 §2.14:
        //   SKEYSEED = prf(Ni | Nr, g^ir)
        let key = [inputs.ni, inputs.nr].concat();
        let key = Zeroizing::new(key);
        let skeyseed = prf_once(provider, prf, &key, &[shared_secret])?;
        IkeSaKeys::expand(provider, prf, lengths, inputs, &skeyseed)
    }

    /// The keys of the IKE SA that replaces another (RFC 7296 §2.18, and
    /// RFC 9370 §2.2.4 when the CREATE_CHILD_SA exchange was followed by
    /// additional key exchanges).
    ///
    /// `shared_secrets` are SK(0) = g^ir (new) of the CREATE_CHILD_SA
    /// exchange followed by SK(1) … SK(n) of any IKE_FOLLOWUP_KE
    /// exchanges; `inputs` holds that exchange's nonces and the new IKE
    /// SA's SPIs. SKEYSEED uses the old IKE SA's PRF, the keys the new one's.
    pub fn derive_rekey(
        provider: &dyn CryptoProvider,
        old_prf: PrfAlgorithm,
        old_sk_d: &[u8],
        new_prf: PrfAlgorithm,
        lengths: KeyLengths,
        inputs: &KdfInputs<'_>,
        shared_secrets: &[&[u8]],
    ) -> Result<IkeSaKeys, CryptoError> {
        // RFC 7296 §2.18 "Because the rekeying exchange belongs to the old
        // IKE SA, it is the old IKE SA's PRF that is used to generate
        // SKEYSEED.":
        //   SKEYSEED = prf(SK_d (old), g^ir (new) | Ni | Nr)
        // RFC 9370 §2.2.4, with additional key exchanges:
        //   SKEYSEED = prf(SK_d, SK(0) | Ni | Nr | SK(1) | ... SK(n))
        let (first, rest) = shared_secrets.split_first().ok_or(CryptoError::BadLength)?;
        let mut parts: Vec<&[u8]> = vec![first, inputs.ni, inputs.nr];
        parts.extend_from_slice(rest);
        let skeyseed = prf_once(provider, old_prf, old_sk_d, &parts)?;
        // §2.18: "SK_d, SK_ai, SK_ar, SK_ei, SK_er, SK_pi, and SK_pr are
        // computed from SKEYSEED as specified in Section 2.14, using SPIi,
        // SPIr, Ni, and Nr from the new exchange, and using the new IKE
        // SA's PRF."
        IkeSaKeys::expand(provider, new_prf, lengths, inputs, &skeyseed)
    }

    /// The next set of keys after an additional key exchange in
    /// IKE_INTERMEDIATE (RFC 9370 §2.2.2): this set is SK_*(n-1),
    /// `shared_secret` is SK(n), `inputs` the IKE_SA_INIT nonces and SPIs.
    pub fn update_with_additional_ke(
        &self,
        provider: &dyn CryptoProvider,
        inputs: &KdfInputs<'_>,
        shared_secret: &[u8],
    ) -> Result<IkeSaKeys, CryptoError> {
        // RFC 9370 §2.2.2:
        //   SKEYSEED(n) = prf(SK_d(n-1), SK(n) | Ni | Nr)
        let parts: [&[u8]; 3] = [shared_secret, inputs.ni, inputs.nr];
        let skeyseed = prf_once(provider, self.prf, &self.sk_d, &parts)?;
        //   {SK_d(n) | SK_ai(n) | SK_ar(n) | SK_ei(n) | SK_er(n) | SK_pi(n) |
        //    SK_pr(n)} = prf+ (SKEYSEED(n), Ni | Nr | SPIi | SPIr)
        IkeSaKeys::expand(provider, self.prf, self.lengths, inputs, &skeyseed)
    }

    /// The PRF of this IKE SA.
    pub fn prf(&self) -> PrfAlgorithm {
        self.prf
    }

    /// The key lengths of this IKE SA.
    pub fn lengths(&self) -> KeyLengths {
        self.lengths
    }

    /// The seven keys from SKEYSEED (RFC 7296 §2.14).
    /// The keys of an IKE SA derived elsewhere (a cluster node taking
    /// over the SA from a replicated snapshot): `secrets` in the order
    /// prf+ produces them (RFC 7296 §2.14: SK_d, SK_ai, SK_ar, SK_ei,
    /// SK_er, SK_pi, SK_pr), each of the length `lengths` gives it;
    /// [`CryptoError::BadLength`] otherwise.
    pub fn from_secrets(
        prf: PrfAlgorithm,
        lengths: KeyLengths,
        secrets: [Zeroizing<Vec<u8>>; 7],
    ) -> Result<IkeSaKeys, CryptoError> {
        let want = [
            lengths.prf,
            lengths.integ,
            lengths.integ,
            lengths.encr,
            lengths.encr,
            lengths.prf,
            lengths.prf,
        ];
        if secrets.iter().zip(want).any(|(k, n)| k.len() != n) {
            return Err(CryptoError::BadLength);
        }
        let [sk_d, sk_ai, sk_ar, sk_ei, sk_er, sk_pi, sk_pr] = secrets;
        Ok(IkeSaKeys {
            sk_d,
            sk_ai,
            sk_ar,
            sk_ei,
            sk_er,
            sk_pi,
            sk_pr,
            prf,
            lengths,
        })
    }

    fn expand(
        provider: &dyn CryptoProvider,
        prf: PrfAlgorithm,
        lengths: KeyLengths,
        inputs: &KdfInputs<'_>,
        skeyseed: &[u8],
    ) -> Result<IkeSaKeys, CryptoError> {
        // RFC 7296 §2.14:
        //   {SK_d | SK_ai | SK_ar | SK_ei | SK_er | SK_pi | SK_pr}
        //                   = prf+ (SKEYSEED, Ni | Nr | SPIi | SPIr)
        let key = provider.prf(prf, skeyseed)?;
        let seed: [&[u8]; 4] = [inputs.ni, inputs.nr, &inputs.spi_i, &inputs.spi_r];
        let stream = prf_plus_parts(key.as_ref(), &seed, lengths.total())?;
        // "(indicating that the quantities SK_d, SK_ai, SK_ar, SK_ei,
        // SK_er, SK_pi, and SK_pr are taken in order from the generated
        // bits of the prf+)"
        let mut taker = Taker::new(&stream);
        Ok(IkeSaKeys {
            sk_d: taker.take(lengths.prf),
            sk_ai: taker.take(lengths.integ),
            sk_ar: taker.take(lengths.integ),
            sk_ei: taker.take(lengths.encr),
            sk_er: taker.take(lengths.encr),
            sk_pi: taker.take(lengths.prf),
            sk_pr: taker.take(lengths.prf),
            prf,
            lengths,
        })
    }
}

impl core::fmt::Debug for IkeSaKeys {
    /// Names the PRF and lengths; never prints key material.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IkeSaKeys")
            .field("prf", &self.prf)
            .field("lengths", &self.lengths)
            .finish_non_exhaustive()
    }
}

/// KEYMAT for a Child SA, `len` bytes (RFC 7296 §2.17; RFC 9370 §2.2.4).
///
/// `shared_secrets` is empty without PFS; otherwise SK(0) = g^ir (new) of
/// the CREATE_CHILD_SA exchange followed by SK(1) … SK(n) of any
/// additional key exchanges. `ni` and `nr` are the nonces of the exchange
/// that created the Child SA (IKE_SA_INIT's for the first Child SA).
/// [`ChildKeys::split`] cuts the result into the four keys.
///
/// Errors: [`CryptoError::BadLength`] when `len` exceeds 255 PRF outputs.
pub fn child_keymat(
    provider: &dyn CryptoProvider,
    prf: PrfAlgorithm,
    sk_d: &[u8],
    shared_secrets: &[&[u8]],
    ni: &[u8],
    nr: &[u8],
    len: usize,
) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    let key = provider.prf(prf, sk_d)?;
    let mut seed: Vec<&[u8]> = Vec::with_capacity(shared_secrets.len() + 2);
    match shared_secrets.split_first() {
        // RFC 7296 §2.17:
        //   KEYMAT = prf+(SK_d, Ni | Nr)
        None => seed.extend_from_slice(&[ni, nr]),
        // "For CREATE_CHILD_SA exchanges including an optional Diffie-
        // Hellman exchange, the keying material is defined as:
        //   KEYMAT = prf+(SK_d, g^ir (new) | Ni | Nr )"
        // RFC 9370 §2.2.4:
        //   KEYMAT = prf+ (SK_d, SK(0) | Ni | Nr | SK(1) | ... SK(n))
        Some((first, rest)) => {
            seed.extend_from_slice(&[first, ni, nr]);
            seed.extend_from_slice(rest);
        }
    }
    prf_plus_parts(key.as_ref(), &seed, len)
}

/// The four keys of a Child SA pair cut from KEYMAT (RFC 7296 §2.17),
/// wiped on drop.
///
/// "If a single protocol has both encryption and authentication keys, the
/// encryption key is taken from the first octets of KEYMAT and the
/// authentication key is taken from the next octets." and "All keys for
/// SAs carrying data from the initiator to the responder are taken before
/// SAs going from the responder to the initiator."
pub struct ChildKeys {
    /// Encryption key (salt included for AEADs) of the initiator-to-responder SA.
    pub encr_i: Zeroizing<Vec<u8>>,
    /// Integrity key of the initiator-to-responder SA (empty for AEADs).
    pub integ_i: Zeroizing<Vec<u8>>,
    /// Encryption key (salt included for AEADs) of the responder-to-initiator SA.
    pub encr_r: Zeroizing<Vec<u8>>,
    /// Integrity key of the responder-to-initiator SA (empty for AEADs).
    pub integ_r: Zeroizing<Vec<u8>>,
}

impl ChildKeys {
    /// Bytes of KEYMAT a Child SA pair with these key lengths needs.
    pub const fn keymat_len(encr_len: usize, integ_len: usize) -> usize {
        2 * (encr_len + integ_len)
    }

    /// Cuts `keymat` into the four keys, in the order of RFC 7296 §2.17:
    /// encr i→r, integ i→r, encr r→i, integ r→i.
    ///
    /// Errors: [`CryptoError::BadLength`] when `keymat` is not exactly
    /// [`keymat_len`](Self::keymat_len) bytes.
    pub fn split(
        keymat: &[u8],
        encr_len: usize,
        integ_len: usize,
    ) -> Result<ChildKeys, CryptoError> {
        if keymat.len() != ChildKeys::keymat_len(encr_len, integ_len) {
            return Err(CryptoError::BadLength);
        }
        let mut taker = Taker::new(keymat);
        Ok(ChildKeys {
            encr_i: taker.take(encr_len),
            integ_i: taker.take(integ_len),
            encr_r: taker.take(encr_len),
            integ_r: taker.take(integ_len),
        })
    }
}

impl core::fmt::Debug for ChildKeys {
    /// Names the key lengths; never prints key material.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ChildKeys")
            .field("encr_len", &self.encr_i.len())
            .field("integ_len", &self.integ_i.len())
            .finish_non_exhaustive()
    }
}

/// Takes consecutive keys from a keystream whose length the caller checked.
struct Taker<'a> {
    rest: &'a [u8],
}

impl<'a> Taker<'a> {
    fn new(stream: &'a [u8]) -> Taker<'a> {
        Taker { rest: stream }
    }

    /// The next `len` bytes; the callers sized the stream to the sum of
    /// the lengths taken, so the short tail never occurs (and would only
    /// yield a shorter key, never a panic).
    fn take(&mut self, len: usize) -> Zeroizing<Vec<u8>> {
        let (key, rest) = self.rest.split_at(len.min(self.rest.len()));
        self.rest = rest;
        Zeroizing::new(key.to_vec())
    }
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
