use super::*;

#[test]
fn ike_aead_with_prf_and_group() {
    let p = IkeProposal::parse("aes128gcm16-prfsha256-x25519").unwrap();
    assert_eq!(p.encr, vec![EncrAlg::AES128_GCM16]);
    assert!(p.integ.is_empty());
    assert_eq!(p.prf, vec![PrfId::HMAC_SHA2_256]);
    assert_eq!(p.ke, vec![KeId::CURVE25519]);
    assert!(p.additional_ke.is_empty());
}

#[test]
fn ike_cbc_takes_the_prf_of_its_integrity_algorithm() {
    let p = IkeProposal::parse("aes256-sha256-modp2048").unwrap();
    assert_eq!(p.encr, vec![EncrAlg::AES256_CBC]);
    assert_eq!(p.integ, vec![IntegId::HMAC_SHA2_256_128]);
    assert_eq!(p.prf, vec![PrfId::HMAC_SHA2_256]);
    assert_eq!(p.ke, vec![KeId::MODP_2048]);
    let p = IkeProposal::parse("aes128-sha512-sha384-ecp256").unwrap();
    assert_eq!(p.prf, vec![PrfId::HMAC_SHA2_512, PrfId::HMAC_SHA2_384]);
}

#[test]
fn ike_chacha_with_sha384_prf() {
    let p = IkeProposal::parse("chacha20poly1305-prfsha384-ecp384").unwrap();
    assert_eq!(p.encr, vec![EncrAlg::CHACHA20_POLY1305]);
    assert_eq!(p.prf, vec![PrfId::HMAC_SHA2_384]);
    assert_eq!(p.ke, vec![KeId::ECP_384]);
}

#[test]
fn esp_with_both_esn_settings_in_order() {
    let p = ChildProposal::parse("aes128gcm16-esn-noesn").unwrap();
    assert_eq!(p.encr, vec![EncrAlg::AES128_GCM16]);
    assert_eq!(p.esn, vec![true, false]);
    assert!(p.ke.is_empty() && p.integ.is_empty());
    let p = ChildProposal::parse("aes256-sha384").unwrap();
    assert_eq!(p.esn, vec![false], "no ESN keyword means noesn");
    assert_eq!(p.integ, vec![IntegId::HMAC_SHA2_384_192]);
}

#[test]
fn esp_with_pfs_and_an_additional_key_exchange() {
    let p = ChildProposal::parse("aes256gcm16-x25519-ke1_mlkem768").unwrap();
    assert_eq!(p.encr, vec![EncrAlg::AES256_GCM16]);
    assert_eq!(p.ke, vec![KeId::CURVE25519]);
    assert_eq!(p.additional_ke, vec![vec![KeId::ML_KEM_768]]);
}

#[test]
fn ike_additional_key_exchanges_in_type_order() {
    let p = IkeProposal::parse("aes256gcm16-prfsha384-ecp384-ke1_mlkem768-ke1_none-ke2_x25519")
        .unwrap();
    assert_eq!(
        p.additional_ke,
        vec![vec![KeId::ML_KEM_768, KeId::NONE], vec![KeId::CURVE25519]]
    );
}

#[test]
fn duplicates_are_dropped() {
    let p = IkeProposal::parse("aes256gcm16-aes256gcm-prfsha256-x25519-x25519").unwrap();
    assert_eq!(p.encr, vec![EncrAlg::AES256_GCM16]);
    assert_eq!(p.ke, vec![KeId::CURVE25519]);
}

/// Each bad proposal and the token (or "" for the whole proposal) the
/// error must name.
#[test]
fn errors_name_the_bad_token() {
    let ike_cases: [(&str, &str); 10] = [
        ("aes256-sha256-modp1024", "modp1024"),
        ("aes192-sha256-x25519", "aes192"),
        ("aes128gcm16-x25519", ""),
        ("aes128gcm16-sha256-prfsha256-x25519", "sha256"),
        ("aes128gcm16-aes128-prfsha256-x25519", "aes128"),
        ("aes128-prfsha256-x25519", ""),
        ("aes128-sha256", ""),
        ("aes128-sha256-x25519-esn", "esn"),
        ("aes128gcm16-prfsha256-x25519-ke2_mlkem768", "ke2_mlkem768"),
        ("aes128gcm16-prfsha256-x25519-ke8_mlkem768", "ke8_mlkem768"),
    ];
    for (text, token) in ike_cases {
        let err = IkeProposal::parse(text).unwrap_err();
        assert_eq!(err.token, token, "{text}: {err}");
        assert_eq!(err.proposal, text);
        assert!(err.to_string().contains(token), "{err}");
    }
    let esp_cases: [(&str, &str); 4] = [
        ("aes128gcm16-prfsha256", "prfsha256"),
        ("aes128gcm16-ke1_mlkem768", "ke1_mlkem768"),
        ("sha256-esn", ""),
        ("aes128gcm16-chacha20poly1305-x448", "x448"),
    ];
    for (text, token) in esp_cases {
        let err = ChildProposal::parse(text).unwrap_err();
        assert_eq!(err.token, token, "{text}: {err}");
    }
    let err = IkeProposal::parse("aes128--sha256").unwrap_err();
    assert_eq!(err.reason, "empty algorithm name");
}

#[test]
fn lists_expand_default() {
    let list = IkeProposal::parse_list("aes128gcm16-prfsha256-x25519, default").unwrap();
    assert_eq!(list.len(), 1 + IkeProposal::default_set().len());
    assert_eq!(list[1..], IkeProposal::default_set()[..]);
    let err = ChildProposal::parse_list("default, nonsense").unwrap_err();
    assert_eq!(err.token, "nonsense");
}

#[test]
fn defaults_are_what_the_issue_lists() {
    let ike = IkeProposal::default_set();
    assert_eq!(
        ike[0].encr,
        vec![EncrAlg::AES256_GCM16, EncrAlg::CHACHA20_POLY1305]
    );
    assert!(ike[0].integ.is_empty());
    assert_eq!(ike[1].encr, vec![EncrAlg::AES256_CBC]);
    assert_eq!(ike[1].integ, vec![IntegId::HMAC_SHA2_256_128]);
    for p in &ike {
        assert_eq!(p.ke, DEFAULT_KE.to_vec());
        assert!(!p.prf.is_empty());
    }
    let esp = ChildProposal::default_set();
    assert!(esp[0].integ.is_empty() && esp[1].integ == vec![IntegId::HMAC_SHA2_256_128]);
    assert!(esp.iter().all(|p| p.esn == vec![true, false]));
}

#[test]
fn aead_classification() {
    assert!(EncrAlg::AES128_GCM16.is_aead());
    assert!(EncrAlg::CHACHA20_POLY1305.is_aead());
    assert!(!EncrAlg::AES256_CBC.is_aead());
    assert!(!EncrAlg::CHACHA20_POLY1305.has_key_length_attribute());
    assert!(EncrAlg::AES256_GCM16.has_key_length_attribute());
}

#[test]
fn limits_clamp_the_jitter() {
    let l = SaLifetimeConfig::child_default();
    let limits = l.limits(Duration::from_secs(60));
    assert_eq!(limits.soft_time, Some(Duration::from_secs(3540)));
    assert_eq!(limits.hard_time, Some(Duration::from_secs(3960)));
    let limits = l.limits(Duration::from_secs(100_000));
    assert_eq!(limits.soft_time, Some(Duration::from_secs(3600 - 360)));
}

#[test]
fn endpoint_defaults() {
    let l = EndpointLimits::default();
    assert_eq!(l.retransmit_base, Duration::from_millis(500));
    assert_eq!(
        (l.retransmit_tries, l.window_size, l.fragment_mtu),
        (5, 1, 1280)
    );
    assert!(l.cookie_threshold <= l.half_open_max);
}

#[test]
fn secrets_are_not_printed() {
    let auth = LocalAuth::Psk(Zeroizing::new(b"hunter2".to_vec()));
    assert!(!format!("{auth:?}").contains("hunter2"));
    let auth = RemoteAuth::Psk(Zeroizing::new(b"hunter2".to_vec()));
    assert!(!format!("{auth:?}").contains("hunter2"));
}
