//! Test certificates (rcgen) and the configurations both sides build from
//! them.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, SanType, SignatureAlgorithm,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, KeyLog, RootCertStore, SupportedProtocolVersion};

use super::{FixedTime, TlsPeer, TlsServerConfig};

/// The time every test checks certificates at: rcgen's certificates are
/// valid from 1975 to 4096.
pub(crate) fn now() -> UnixTime {
    UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_800_000_000))
}

/// A CA and what it issues.
pub(crate) struct Ca {
    key: KeyPair,
    cert: rcgen::Certificate,
    alg: &'static SignatureAlgorithm,
}

/// A certificate and its key.
pub(crate) struct Leaf {
    pub(crate) cert: CertificateDer<'static>,
    pub(crate) key: PrivateKeyDer<'static>,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Ca {
        Ca::with_alg(name, &rcgen::PKCS_ECDSA_P256_SHA256)
    }

    pub(crate) fn with_alg(name: &str, alg: &'static SignatureAlgorithm) -> Ca {
        let key = KeyPair::generate_for(alg).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Ca { key, cert, alg }
    }

    pub(crate) fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// A certificate with subject `C=CH, O=Phalanx, CN=<cn>` and these
    /// subjectAltNames.
    pub(crate) fn issue(&self, cn: &str, sans: Vec<SanType>) -> Leaf {
        self.issue_for(cn, sans, Vec::new())
    }

    /// As [`Ca::issue`], with an extended key usage extension listing
    /// `purposes` (none: no extension).
    pub(crate) fn issue_for(
        &self,
        cn: &str,
        sans: Vec<SanType>,
        purposes: Vec<ExtendedKeyUsagePurpose>,
    ) -> Leaf {
        let key = KeyPair::generate_for(self.alg).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        // rcgen starts with a CN of its own; the subject is ours, in order.
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CountryName, "CH");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Phalanx");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.subject_alt_names = sans;
        params.extended_key_usages = purposes;
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        Leaf {
            cert: cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
        }
    }
}

pub(crate) fn dns(name: &str) -> SanType {
    SanType::DnsName(name.try_into().unwrap())
}

pub(crate) fn email(address: &str) -> SanType {
    SanType::Rfc822Name(address.try_into().unwrap())
}

/// The gateway, the End-Users and a CA nobody trusts.
pub(crate) struct Pki {
    pub(crate) ca: Ca,
    pub(crate) gateway: Leaf,
    /// alice@example.com (rfc822Name), CN=alice.
    pub(crate) alice: Leaf,
    /// Issued by `other_ca`.
    pub(crate) mallory: Leaf,
}

impl Pki {
    pub(crate) fn new() -> Pki {
        Pki::with_alg(&rcgen::PKCS_ECDSA_P256_SHA256)
    }

    pub(crate) fn with_alg(alg: &'static SignatureAlgorithm) -> Pki {
        let ca = Ca::with_alg("Phalanx EAP-TLS test CA", alg);
        let other_ca = Ca::with_alg("Someone else's CA", alg);
        Pki {
            gateway: ca.issue("gw.example", vec![dns("gw.example")]),
            alice: ca.issue("alice", vec![email("alice@example.com")]),
            mallory: other_ca.issue("mallory", vec![email("alice@example.com")]),
            ca,
        }
    }

    /// The gateway's configuration: its certificate, End-Users of `ca`.
    pub(crate) fn server(&self) -> TlsServerConfig {
        let chain = vec![self.gateway.cert.clone()];
        TlsServerConfig::new(chain, self.gateway.key.clone_key(), &[self.ca.der()]).unwrap()
    }
}

/// A client configuration: `leaf` as its certificate, trusting `ca`.
pub(crate) fn client_config(
    leaf: &Leaf,
    ca: &CertificateDer<'static>,
    provider: Arc<CryptoProvider>,
    versions: &[&'static SupportedProtocolVersion],
    key_log: Option<Arc<dyn KeyLog>>,
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let mut config = ClientConfig::builder_with_details(provider, Arc::new(FixedTime(now())))
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![leaf.cert.clone()], leaf.key.clone_key())
        .unwrap();
    if let Some(key_log) = key_log {
        config.key_log = key_log;
    }
    Arc::new(config)
}

pub(crate) fn aws_lc() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A peer with `leaf`'s certificate and EAP identity `identity`, trusting
/// `pki`'s CA, TLS `versions`, for the gateway `gw.example`.
pub(crate) fn peer(
    pki: &Pki,
    leaf: &Leaf,
    identity: &str,
    versions: &[&'static SupportedProtocolVersion],
) -> TlsPeer {
    let config = client_config(leaf, &pki.ca.der(), aws_lc(), versions, None);
    TlsPeer::new(identity.as_bytes(), config, server_name()).unwrap()
}

pub(crate) fn server_name() -> ServerName<'static> {
    ServerName::try_from("gw.example").unwrap()
}
