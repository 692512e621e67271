//! Seed inputs for the responder harness: whole sessions as an initiator
//! would send them, sealed for a provider whose PRF output is zeros (every
//! key and every shared-key AUTH value is then zeros).
//!
//! ```text
//! IKE_SA_INIT { SA, KE(x25519), Ni, [N(INTERMEDIATE_EXCHANGE_SUPPORTED)] }
//! [IKE_INTERMEDIATE { KE(ML-KEM-768) }]
//! IKE_AUTH { IDi, AUTH(zeros), SA, TSi, TSr }
//! INFORMATIONAL { }                              (liveness)
//! CREATE_CHILD_SA { SA, Ni, KE(x25519), TSi, TSr }
//! INFORMATIONAL { D(IKE) }
//! ```

use phalanx_crypto::ike::{start_initiator, IkeSaKeys, KdfInputs};
use phalanx_crypto::{CryptoProvider, KeGroup};
use phalanx_sa::IpsecProtocol;
use phalanx_wire::ike::iana::{
    AuthMethod, ExchangeType, IdType, NotifyType, PayloadType, ProtocolId,
};
use phalanx_wire::ike::{
    AuthPayload, DeletePayload, IdPayload, IkeHeaderRepr, KePayload, MessageRepr, NoncePayload,
    NotifyPayload, Payload, TsPayload,
};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::{record, CTL_FIX_SPIS};
use crate::config::{ChildProposal, IkeProposal};
use crate::proposal::{child_sa_payload, ike_sa_payload, select_ike, NegotiatedIke};
use crate::protect::Protection;
use crate::ts::ts_any;

/// The initiator SPI of the seeds.
const SPI_I: u64 = 0x5eed_5eed_0000_0001;
/// A second's wait between messages (two Wait units).
const WAIT: u8 = 2;

/// One seed per IKE proposal: plain x25519, then hybrid x25519 +
/// ML-KEM-768 through IKE_INTERMEDIATE. Empty when `provider` cannot run
/// the suites (the seeds are a convenience, not a requirement).
pub fn seed_inputs(provider: &'static dyn CryptoProvider) -> Vec<Vec<u8>> {
    [
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16-prfsha256-x25519-ke1_mlkem768",
    ]
    .iter()
    .filter_map(|ike| Session::new(provider, ike).and_then(Session::input))
    .collect()
}

/// An initiator's side of one seed session.
struct Session {
    provider: &'static dyn CryptoProvider,
    offer: Vec<IkeProposal>,
    negotiated: NegotiatedIke,
    protection: Protection,
    rng: ChaCha20Rng,
    next_id: u32,
    out: Vec<u8>,
}

impl Session {
    fn new(provider: &'static dyn CryptoProvider, ike: &str) -> Option<Session> {
        let offer = IkeProposal::parse_list(ike).ok()?;
        let negotiated = select_ike(&offer, &ike_sa_payload(&offer, None)).ok()?;
        let prf = negotiated.prf_algorithm().ok()?;
        let inputs = KdfInputs {
            ni: &[1; 32],
            nr: &[2; 32],
            spi_i: SPI_I.to_be_bytes(),
            spi_r: [0; 8],
        };
        let keys =
            IkeSaKeys::derive(provider, prf, negotiated.key_lengths().ok()?, &inputs, &[0]).ok()?;
        let protection = Protection::with_provider(provider, &keys, &negotiated, true).ok()?;
        Some(Session {
            provider,
            offer,
            negotiated,
            protection,
            rng: ChaCha20Rng::seed_from_u64(7),
            next_id: 1,
            out: Vec::new(),
        })
    }

    fn input(mut self) -> Option<Vec<u8>> {
        self.init()?;
        for method in self.negotiated.additional_exchanges().collect::<Vec<_>>() {
            let group = KeGroup::try_from(method).ok()?;
            let kex = start_initiator(self.provider, group, &mut self.rng).ok()?;
            let ke = Payload::Ke(KePayload {
                group: method,
                data: kex.public_value().to_vec(),
            });
            self.request(ExchangeType::IKE_INTERMEDIATE, vec![ke])?;
        }
        let auth = self.auth_payloads()?;
        self.request(ExchangeType::IKE_AUTH, auth)?;
        self.request(ExchangeType::INFORMATIONAL, Vec::new())?;
        let create = self.create_child_payloads()?;
        self.request(ExchangeType::CREATE_CHILD_SA, create)?;
        let delete = Payload::Delete(DeletePayload {
            protocol_id: ProtocolId::IKE,
            spis: Vec::new(),
        });
        self.request(ExchangeType::INFORMATIONAL, vec![delete])?;
        Some(self.out)
    }

    fn init(&mut self) -> Option<()> {
        let kex = start_initiator(self.provider, KeGroup::Curve25519, &mut self.rng).ok()?;
        let mut payloads = vec![
            Payload::Sa(ike_sa_payload(&self.offer, None)),
            Payload::Ke(KePayload {
                group: kex.group().into(),
                data: kex.public_value().to_vec(),
            }),
            Payload::Nonce(NoncePayload { data: vec![1; 32] }),
        ];
        if self.negotiated.additional_exchanges().next().is_some() {
            payloads.push(Payload::Notify(NotifyPayload::new(
                NotifyType::INTERMEDIATE_EXCHANGE_SUPPORTED,
                Vec::new(),
            )));
        }
        let message = MessageRepr {
            initiator_spi: SPI_I,
            responder_spi: 0,
            exchange_type: ExchangeType::IKE_SA_INIT,
            initiator: true,
            response: false,
            message_id: 0,
            payloads,
        };
        self.out.extend(record(0, &message.emit_to_vec().ok()?));
        Some(())
    }

    /// IDi, AUTH of zeros (what the zero PRF computes), SAi2, TSi, TSr.
    fn auth_payloads(&self) -> Option<Vec<Payload>> {
        let esp = ChildProposal::parse_list("aes128gcm16-noesn").ok()?;
        let auth_len = self.negotiated.prf_algorithm().ok()?.output_len();
        Some(vec![
            Payload::Idi(IdPayload {
                id_type: IdType::FQDN,
                data: b"initiator.fuzz".to_vec(),
            }),
            Payload::Auth(AuthPayload {
                method: AuthMethod::SHARED_KEY_MIC,
                data: vec![0; auth_len],
            }),
            Payload::Sa(child_sa_payload(
                IpsecProtocol::Esp,
                &esp,
                0x0000_1001,
                false,
            )),
            Payload::Tsi(TsPayload::new(vec![ts_any(false)])),
            Payload::Tsr(TsPayload::new(vec![ts_any(false)])),
        ])
    }

    /// A new Child SA with x25519 PFS (RFC 7296 §1.3.1).
    fn create_child_payloads(&mut self) -> Option<Vec<Payload>> {
        let esp = ChildProposal::parse_list("aes128-sha256-x25519").ok()?;
        let kex = start_initiator(self.provider, KeGroup::Curve25519, &mut self.rng).ok()?;
        Some(vec![
            Payload::Sa(child_sa_payload(
                IpsecProtocol::Esp,
                &esp,
                0x0000_1002,
                true,
            )),
            Payload::Nonce(NoncePayload { data: vec![3; 32] }),
            Payload::Ke(KePayload {
                group: kex.group().into(),
                data: kex.public_value().to_vec(),
            }),
            Payload::Tsi(TsPayload::new(vec![ts_any(false)])),
            Payload::Tsr(TsPayload::new(vec![ts_any(false)])),
        ])
    }

    /// One sealed request with the next Message ID, its SPIs filled in by
    /// the harness.
    fn request(&mut self, exchange: ExchangeType, payloads: Vec<Payload>) -> Option<()> {
        let header = IkeHeaderRepr {
            initiator_spi: SPI_I,
            responder_spi: 0,
            next_payload: PayloadType::SK,
            exchange_type: exchange,
            initiator: true,
            response: false,
            message_id: self.next_id,
            length: 0,
        };
        self.next_id += 1;
        let sealed = self
            .protection
            .seal(&header, &payloads, None, &mut self.rng)
            .ok()?;
        for datagram in sealed {
            self.out.extend(record(CTL_FIX_SPIS | WAIT, &datagram));
        }
        Some(())
    }
}
