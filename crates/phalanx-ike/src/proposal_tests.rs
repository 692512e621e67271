use super::*;
use phalanx_wire::ike::iana::TransformAttributeType;
use phalanx_wire::ike::TransformAttr;
use proptest::prelude::*;

fn ike(text: &str) -> IkeProposal {
    IkeProposal::parse(text).unwrap()
}

fn esp(text: &str) -> ChildProposal {
    ChildProposal::parse(text).unwrap()
}

fn ike_payload(texts: &[&str]) -> SaPayload {
    let ours: Vec<IkeProposal> = texts.iter().map(|t| ike(t)).collect();
    ike_sa_payload(&ours, None)
}

#[test]
fn ike_offer_layout() {
    let sa = ike_sa_payload(
        &[ike("aes256gcm16-chacha20poly1305-prfsha256-x25519")],
        None,
    );
    let [p] = sa.proposals.as_slice() else {
        panic!("one proposal")
    };
    assert_eq!(
        (p.number, p.protocol_id, p.spi),
        (1, ProtocolId::IKE, Spi::None)
    );
    let gcm = &p.transforms[0];
    assert_eq!(gcm.transform_id, EncrId::AES_GCM_16.0);
    assert_eq!(gcm.key_length(), Some(256));
    assert_eq!(
        p.transforms[1].key_length(),
        None,
        "RFC 7634: no Key Length"
    );
    assert_eq!(p.transforms_of(TransformType::INTEG).count(), 0);
    let rekey = ike_sa_payload(&IkeProposal::default_set(), Some([1, 2, 3, 4, 5, 6, 7, 8]));
    assert_eq!(rekey.proposals.len(), 2);
    assert_eq!(rekey.proposals[1].number, 2);
    assert_eq!(rekey.proposals[1].spi, Spi::Ike(0x0102_0304_0506_0708));
    assert_eq!(
        rekey.proposals[1]
            .transforms_of(TransformType::INTEG)
            .count(),
        1
    );
}

#[test]
fn esp_offer_has_esn_always_and_ke_only_when_asked() {
    let ours = [esp("aes128gcm16-x25519-esn-noesn")];
    let auth = child_sa_payload(IpsecProtocol::Esp, &ours, 0xc001_d00d, false);
    let p = &auth.proposals[0];
    assert_eq!(p.spi, Spi::Child(0xc001_d00d));
    assert_eq!(p.transforms_of(TransformType::KE).count(), 0);
    let esn: Vec<u16> = p
        .transforms_of(TransformType::ESN)
        .map(|t| t.transform_id)
        .collect();
    assert_eq!(esn, vec![1, 0]);
    let rekey = child_sa_payload(IpsecProtocol::Esp, &ours, 1, true);
    assert_eq!(
        rekey.proposals[0].transforms_of(TransformType::KE).count(),
        1
    );
    let no_esn = ChildProposal {
        esn: Vec::new(),
        ..esp("aes128gcm16")
    };
    let sa = child_sa_payload(IpsecProtocol::Esp, &[no_esn], 1, false);
    assert_eq!(sa.proposals[0].transforms_of(TransformType::ESN).count(), 1);
}

fn ah(text: &str) -> ChildProposal {
    ChildProposal::parse_ah(text).unwrap()
}

// RFC 7296 §3.3.3: AH takes INTEG and ESN (mandatory) and KE (optional),
// never ENCR; the Protocol ID is AH (2).
#[test]
fn ah_offer_has_integ_esn_and_no_encr() {
    let sa = child_sa_payload(
        IpsecProtocol::Ah,
        &[ah("sha256-sha384-x25519-esn")],
        7,
        true,
    );
    let p = &sa.proposals[0];
    assert_eq!(p.protocol_id, ProtocolId::AH);
    assert_eq!(p.spi, Spi::Child(7));
    assert_eq!(p.transforms_of(TransformType::ENCR).count(), 0);
    assert_eq!(p.transforms_of(TransformType::INTEG).count(), 2);
    assert_eq!(p.transforms_of(TransformType::KE).count(), 1);
    assert_eq!(p.transforms_of(TransformType::ESN).count(), 1);
}

#[test]
fn ah_selection_answer_and_acceptance() {
    let ours = [ah("sha384-sha256-noesn")];
    let offered = child_sa_payload(
        IpsecProtocol::Ah,
        &[ah("sha256-sha384-esn-noesn")],
        9,
        false,
    );
    let n = select_child(IpsecProtocol::Ah, &ours, &offered, None).unwrap();
    // The initiator's order: HMAC-SHA2-256 first, and the ESN both allow.
    assert_eq!(n.suite, Suite::ah(IntegId::HMAC_SHA2_256_128));
    assert_eq!(n.protocol(), IpsecProtocol::Ah);
    assert!(!n.esn);
    assert_eq!((n.encr_key_len(), n.integ_key_len()), (0, 32));
    let answer = n.answer_payload(0x4242);
    assert_eq!(answer.proposals[0].protocol_id, ProtocolId::AH);
    assert_eq!(
        answer.proposals[0]
            .transforms_of(TransformType::ENCR)
            .count(),
        0
    );
    let accepted = accept_child_answer(&offered, &answer).unwrap();
    assert_eq!(accepted.suite, n.suite);
    assert_eq!(accepted.peer_spi, 0x4242);
}

#[test]
fn ah_and_esp_never_select_each_other() {
    let esp_offer = child_sa_payload(IpsecProtocol::Esp, &[esp("aes128-sha256")], 1, false);
    let ah_offer = child_sa_payload(IpsecProtocol::Ah, &[ah("sha256")], 1, false);
    assert_eq!(
        select_child(IpsecProtocol::Ah, &[ah("sha256")], &esp_offer, None),
        Err(ProposalError::NoProposalChosen)
    );
    assert_eq!(
        select_child(IpsecProtocol::Esp, &[esp("aes128-sha256")], &ah_offer, None),
        Err(ProposalError::NoProposalChosen)
    );
    // An ESP answer to an AH offer is not one of our proposals.
    let esp_answer = select_child(
        IpsecProtocol::Esp,
        &[esp("aes128-sha256")],
        &esp_offer,
        None,
    )
    .unwrap()
    .answer_payload(5);
    assert_eq!(
        accept_child_answer(&ah_offer, &esp_answer),
        Err(ProposalError::UnacceptableAnswer)
    );
}

// An AH proposal with an ENCR transform, or without INTEG, is
// unacceptable whatever we configure (§3.3.3).
#[test]
fn malformed_ah_proposals_are_refused() {
    let ours = [ah("sha256-esn-noesn")];
    let mut with_encr = child_sa_payload(IpsecProtocol::Ah, &ours, 1, false);
    with_encr.proposals[0]
        .transforms
        .insert(0, Transform::encr(EncrId::AES_CBC, Some(128)));
    assert!(select_child(IpsecProtocol::Ah, &ours, &with_encr, None).is_err());
    let mut no_integ = child_sa_payload(IpsecProtocol::Ah, &ours, 1, false);
    no_integ.proposals[0]
        .transforms
        .retain(|t| t.transform_type != TransformType::INTEG);
    assert!(select_child(IpsecProtocol::Ah, &ours, &no_integ, None).is_err());
}

#[test]
fn ah_proposal_strings() {
    assert_eq!(ah("sha256").encr, Vec::new());
    assert_eq!(ah("sha256").esn, vec![false]);
    let err = ChildProposal::parse_ah("aes128-sha256").unwrap_err();
    assert_eq!(
        (err.token.as_str(), err.reason),
        ("aes128", "AH has no encryption")
    );
    let err = ChildProposal::parse_ah("x25519-esn").unwrap_err();
    assert_eq!(err.reason, "no integrity algorithm");
    let all = ChildProposal::parse_ah_list("default").unwrap();
    assert_eq!(all, ChildProposal::ah_default_set());
}

#[test]
fn responder_follows_the_initiators_order() {
    let offered = ike_payload(&["aes128-sha256-modp2048", "aes256gcm16-prfsha384-x25519"]);
    let ours = [
        ike("aes256gcm16-prfsha384-x25519"),
        ike("aes128-sha256-modp2048"),
    ];
    let n = select_ike(&ours, &offered).unwrap();
    assert_eq!(n.proposal_num, 1);
    assert_eq!(n.encr, EncrAlg::AES128_CBC);
    assert_eq!(n.integ, Some(IntegId::HMAC_SHA2_256_128));
    assert_eq!(n.prf, PrfId::HMAC_SHA2_256);
    assert_eq!(n.ke, KeId::MODP_2048);
    assert_eq!(n.peer_spi, None);
}

#[test]
fn within_a_proposal_the_initiators_first_acceptable_transform() {
    let offered = ike_payload(&["aes128gcm16-aes256gcm16-prfsha256-prfsha512-ecp384-x25519"]);
    let ours = [ike(
        "aes256gcm16-aes128gcm16-prfsha512-prfsha256-x25519-ecp384",
    )];
    let n = select_ike(&ours, &offered).unwrap();
    assert_eq!(n.encr, EncrAlg::AES128_GCM16);
    assert_eq!(n.prf, PrfId::HMAC_SHA2_256);
    assert_eq!(n.ke, KeId::ECP_384);
    assert_eq!(n.integ, None);
}

#[test]
fn key_length_must_match() {
    let offered = ike_payload(&["aes128gcm16-prfsha256-x25519"]);
    let ours = [ike("aes256gcm16-prfsha256-x25519")];
    assert_eq!(
        select_ike(&ours, &offered),
        Err(ProposalError::NoProposalChosen)
    );
}

#[test]
fn kei_group_is_preferred_then_asked_for() {
    let offered = ike_payload(&["aes256gcm16-prfsha256-ecp256-x25519"]);
    let ours = IkeProposal::default_set();
    let n = select_ike_for_kei(&ours, &offered, KeId::CURVE25519).unwrap();
    assert_eq!(n.ke, KeId::CURVE25519);
    // A group we hold but the proposal does not: ask for the proposal's
    // first acceptable one (RFC 7296 §1.2).
    assert_eq!(
        select_ike_for_kei(&ours, &offered, KeId::ECP_384),
        Err(ProposalError::InvalidKe {
            wanted: KeId::ECP_256
        })
    );
    let err = ProposalError::InvalidKe {
        wanted: KeId::ECP_256,
    };
    assert_eq!(err.notify_type(), NotifyType::INVALID_KE_PAYLOAD);
    assert_eq!(err.notify_data(), vec![0, 19]);
    // A later proposal that takes the KEi group wins over INVALID_KE.
    let offered = ike_payload(&["aes256gcm16-prfsha256-ecp256", "aes256-sha256-x25519"]);
    let n = select_ike_for_kei(&ours, &offered, KeId::CURVE25519).unwrap();
    assert_eq!((n.proposal_num, n.encr), (2, EncrAlg::AES256_CBC));
}

#[test]
fn unknown_transform_type_rejects_only_that_proposal() {
    let mut offered = ike_payload(&["aes256gcm16-prfsha256-x25519", "aes256-sha256-x25519"]);
    offered.proposals[0]
        .transforms
        .push(Transform::new(TransformType(200), 1));
    let n = select_ike(&IkeProposal::default_set(), &offered).unwrap();
    assert_eq!(n.proposal_num, 2);
    // ESN has no place in an IKE proposal (RFC 7296 §3.3.3).
    offered.proposals[1]
        .transforms
        .push(Transform::esn(EsnId::NO));
    assert_eq!(
        select_ike(&IkeProposal::default_set(), &offered),
        Err(ProposalError::NoProposalChosen)
    );
}

#[test]
fn unknown_ids_and_attributes_are_skipped() {
    let mut offered = ike_payload(&["aes256gcm16-prfsha256-x25519"]);
    let p = &mut offered.proposals[0];
    p.transforms
        .insert(0, Transform::encr(EncrId(1000), Some(128)));
    p.transforms.insert(0, Transform::prf(PrfId(999)));
    let mut odd = Transform::encr(EncrId::AES_GCM_16, Some(256));
    odd.attributes.push(TransformAttr::Tv {
        ty: TransformAttributeType(99),
        value: 1,
    });
    p.transforms.insert(0, odd);
    let n = select_ike(&IkeProposal::default_set(), &offered).unwrap();
    assert_eq!(n.encr, EncrAlg::AES256_GCM16);
    assert_eq!(n.prf, PrfId::HMAC_SHA2_256);
}

#[test]
fn missing_mandatory_type_is_unacceptable() {
    let mut offered = ike_payload(&["aes256gcm16-prfsha256-x25519"]);
    offered.proposals[0]
        .transforms
        .retain(|t| t.transform_type != TransformType::PRF);
    assert_eq!(
        select_ike(&IkeProposal::default_set(), &offered),
        Err(ProposalError::NoProposalChosen)
    );
    let mut offered = child_sa_payload(IpsecProtocol::Esp, &[esp("aes256gcm16")], 7, false);
    offered.proposals[0]
        .transforms
        .retain(|t| t.transform_type != TransformType::ESN);
    assert_eq!(
        select_child(
            IpsecProtocol::Esp,
            &ChildProposal::default_set(),
            &offered,
            None
        ),
        Err(ProposalError::NoProposalChosen)
    );
}

#[test]
fn wrong_spi_size_is_malformed() {
    let mut offered = ike_payload(&["aes256gcm16-prfsha256-x25519"]);
    offered.proposals[0].spi = Spi::Child(5);
    let err = select_ike(&IkeProposal::default_set(), &offered).unwrap_err();
    assert_eq!(err, ProposalError::Malformed);
    assert_eq!(err.notify_type(), NotifyType::INVALID_SYNTAX);
}

#[test]
fn aead_with_integrity_transforms_is_not_chosen() {
    let mut offered = ike_payload(&["aes256gcm16-prfsha256-x25519"]);
    offered.proposals[0]
        .transforms
        .push(Transform::integ(IntegId::HMAC_SHA2_256_128));
    assert!(select_ike(&IkeProposal::default_set(), &offered).is_err());
    offered.proposals[0].transforms.pop();
    offered.proposals[0]
        .transforms
        .push(Transform::integ(IntegId::NONE));
    let n = select_ike(&IkeProposal::default_set(), &offered).unwrap();
    assert_eq!(n.integ, None);
}

#[test]
fn additional_key_exchanges_are_negotiated_per_type() {
    let offered =
        ike_payload(&["aes256gcm16-prfsha384-ecp384-ke1_mlkem768-ke1_none-ke2_x25519-ke2_none"]);
    let ours = [ike("aes256gcm16-prfsha384-ecp384-ke1_mlkem768")];
    let n = select_ike(&ours, &offered).unwrap();
    assert_eq!(n.additional_ke, vec![KeId::ML_KEM_768, KeId::NONE]);
    assert_eq!(
        n.additional_exchanges().collect::<Vec<_>>(),
        vec![KeId::ML_KEM_768]
    );
    let answer = n.answer_payload(None);
    assert_eq!(accept_ike_answer(&offered, &answer), Ok(n));
    // We require ML-KEM; an initiator without it gets NO_PROPOSAL_CHOSEN.
    let plain = ike_payload(&["aes256gcm16-prfsha384-ecp384"]);
    assert_eq!(
        select_ike(&ours, &plain),
        Err(ProposalError::NoProposalChosen)
    );
    // ADDKE2 without ADDKE1 is refused.
    let mut gap = plain.clone();
    gap.proposals[0]
        .transforms
        .push(Transform::ke(TransformType::ADDKE2, KeId::ML_KEM_768));
    let relaxed = [IkeProposal {
        additional_ke: vec![vec![KeId::NONE], vec![KeId::ML_KEM_768]],
        ..ike("aes256gcm16-prfsha384-ecp384")
    }];
    assert!(select_ike(&relaxed, &gap).is_err());
}

#[test]
fn esp_in_ike_auth_ignores_key_exchange() {
    let ours = ChildProposal::default_set();
    let offered = child_sa_payload(
        IpsecProtocol::Esp,
        &[esp("aes128gcm16-aes256gcm16-x25519-noesn")],
        0x1234,
        true,
    );
    let n = select_child(IpsecProtocol::Esp, &ours, &offered, None).unwrap();
    assert_eq!(n.suite, Suite::esp(EncrId::AES_GCM_16, 256, IntegId::NONE));
    assert_eq!((n.ke, n.esn, n.peer_spi), (None, false, 0x1234));
    assert_eq!(n.encr_key_len(), 36);
    assert_eq!(n.integ_key_len(), 0);
    let answer = n.answer_payload(0xabcd);
    assert_eq!(
        answer.proposals[0].transforms_of(TransformType::KE).count(),
        0
    );
}

#[test]
fn esp_create_child_with_and_without_pfs() {
    let ours = ChildProposal::default_set();
    let pfs = child_sa_payload(
        IpsecProtocol::Esp,
        &[esp("aes256gcm16-ecp256-x25519-esn")],
        9,
        true,
    );
    let n = select_child_create(IpsecProtocol::Esp, &ours, &pfs, Some(KeId::CURVE25519)).unwrap();
    assert_eq!((n.pfs_group(), n.esn), (Some(KeId::CURVE25519), true));
    assert_eq!(
        select_child(IpsecProtocol::Esp, &ours, &pfs, Some(KeId::MODP_2048)),
        Err(ProposalError::InvalidKe {
            wanted: KeId::ECP_256
        })
    );
    // No KEi while the proposal asks for PFS: refused.
    assert!(select_child_create(IpsecProtocol::Esp, &ours, &pfs, None).is_err());
    // No KEi, no KE transforms, and we require PFS: refused.
    let none = child_sa_payload(IpsecProtocol::Esp, &[esp("aes256gcm16")], 9, true);
    assert!(select_child_create(IpsecProtocol::Esp, &ours, &none, None).is_err());
    let relaxed = [ChildProposal {
        ke: Vec::new(),
        ..esp("aes256gcm16-esn-noesn")
    }];
    let n = select_child_create(IpsecProtocol::Esp, &relaxed, &none, None).unwrap();
    assert_eq!((n.ke, n.pfs_group()), (None, None));
    // NONE offered alongside groups: NONE echoed.
    let mut optional = pfs.clone();
    optional.proposals[0]
        .transforms
        .push(Transform::ke(TransformType::KE, KeId::NONE));
    let n = select_child_create(IpsecProtocol::Esp, &relaxed, &optional, None).unwrap();
    assert_eq!((n.ke, n.pfs_group()), (Some(KeId::NONE), None));
    assert_eq!(
        accept_child_answer(&optional, &n.answer_payload(3))
            .unwrap()
            .ke,
        Some(KeId::NONE)
    );
}

#[test]
fn esp_cbc_with_hmac() {
    let offered = child_sa_payload(IpsecProtocol::Esp, &[esp("aes128-sha512-sha256")], 2, false);
    let ours = [esp("aes128-sha256-sha512")];
    let n = select_child(IpsecProtocol::Esp, &ours, &offered, None).unwrap();
    assert_eq!(
        n.suite,
        Suite::esp(EncrId::AES_CBC, 128, IntegId::HMAC_SHA2_512_256)
    );
    assert_eq!((n.encr_key_len(), n.integ_key_len()), (16, 64));
}

#[test]
fn answers_must_be_one_of_our_offers() {
    let offered = ike_payload(&["aes256gcm16-prfsha256-x25519", "aes256-sha256-modp2048"]);
    let n = select_ike(&IkeProposal::default_set(), &offered).unwrap();
    let good = n.answer_payload(None);
    assert_eq!(accept_ike_answer(&offered, &good), Ok(n.clone()));

    let bad = |edit: &dyn Fn(&mut SaPayload)| {
        let mut answer = good.clone();
        edit(&mut answer);
        accept_ike_answer(&offered, &answer)
    };
    let unacceptable = Err(ProposalError::UnacceptableAnswer);
    assert_eq!(
        bad(&|a| a.proposals.push(a.proposals[0].clone())),
        unacceptable
    );
    assert_eq!(bad(&|a| a.proposals[0].number = 3), unacceptable);
    assert_eq!(bad(&|a| a.proposals[0].number = 2), unacceptable);
    let extra_prf = Transform::prf(PrfId::HMAC_SHA2_384);
    assert_eq!(
        bad(&|a| a.proposals[0].transforms.push(extra_prf.clone())),
        unacceptable
    );
    assert_eq!(
        bad(&|a| {
            a.proposals[0].transforms.pop();
        }),
        unacceptable
    );
    let modp = Transform::ke(TransformType::KE, KeId::MODP_2048);
    assert_eq!(
        bad(&|a| a.proposals[0].transforms[2] = modp.clone()),
        unacceptable
    );
    assert_eq!(bad(&|a| a.proposals[0].spi = Spi::Ike(1)), unacceptable);
    assert_eq!(
        bad(&|a| a.proposals[0].protocol_id = ProtocolId::ESP),
        unacceptable
    );
    // INTEG NONE with an AEAD is tolerated.
    let none = Transform::integ(IntegId::NONE);
    assert_eq!(
        bad(&|a| a.proposals[0].transforms.push(none.clone())),
        Ok(n)
    );
}

#[test]
fn esp_answers_carry_the_peer_spi() {
    let offered = child_sa_payload(
        IpsecProtocol::Esp,
        &ChildProposal::default_set(),
        0x1111,
        false,
    );
    let n = select_child(
        IpsecProtocol::Esp,
        &ChildProposal::default_set(),
        &offered,
        None,
    )
    .unwrap();
    assert_eq!(n.peer_spi, 0x1111);
    let answer = n.answer_payload(0x2222);
    let accepted = accept_child_answer(&offered, &answer).unwrap();
    assert_eq!(accepted.peer_spi, 0x2222);
    assert_eq!((accepted.suite, accepted.esn), (n.suite, n.esn));
}

#[test]
fn key_lengths_follow_the_suite() {
    let offered = ike_payload(&["aes256-sha384-prfsha512-ecp384"]);
    let n = select_ike(&[ike("aes256-sha384-prfsha512-ecp384")], &offered).unwrap();
    let lengths = n.key_lengths().unwrap();
    assert_eq!((lengths.prf, lengths.integ, lengths.encr), (64, 48, 32));
    let chacha = NegotiatedIke {
        encr: EncrAlg::CHACHA20_POLY1305,
        integ: None,
        ..n.clone()
    };
    assert_eq!(chacha.key_lengths().unwrap().encr, 36);
    let bogus = NegotiatedIke {
        prf: PrfId::AES128_XCBC,
        ..n
    };
    assert!(bogus.key_lengths().is_err());
}

// ---- properties ----

fn encr_choices() -> impl Strategy<Value = Vec<EncrAlg>> {
    prop_oneof![
        proptest::sample::subsequence(
            vec![
                EncrAlg::AES128_GCM16,
                EncrAlg::AES256_GCM16,
                EncrAlg::CHACHA20_POLY1305
            ],
            1..=3
        ),
        proptest::sample::subsequence(vec![EncrAlg::AES128_CBC, EncrAlg::AES256_CBC], 1..=2),
    ]
    .prop_shuffle()
}

const INTEGS: [IntegId; 3] = [
    IntegId::HMAC_SHA2_256_128,
    IntegId::HMAC_SHA2_384_192,
    IntegId::HMAC_SHA2_512_256,
];
const PRFS: [PrfId; 3] = [
    PrfId::HMAC_SHA2_256,
    PrfId::HMAC_SHA2_384,
    PrfId::HMAC_SHA2_512,
];
const GROUPS: [KeId; 5] = [
    KeId::MODP_2048,
    KeId::ECP_256,
    KeId::ECP_384,
    KeId::CURVE25519,
    KeId::ML_KEM_768,
];

fn pick<T: Clone + core::fmt::Debug + 'static>(all: &[T]) -> impl Strategy<Value = Vec<T>> {
    proptest::sample::subsequence(all.to_vec(), 1..=all.len()).prop_shuffle()
}

fn additional() -> impl Strategy<Value = Vec<Vec<KeId>>> {
    proptest::collection::vec(
        proptest::sample::subsequence(vec![KeId::ML_KEM_768, KeId::NONE, KeId::CURVE25519], 1..=3)
            .prop_shuffle(),
        0..3,
    )
}

fn ike_proposal() -> impl Strategy<Value = IkeProposal> {
    (
        encr_choices(),
        pick(&INTEGS),
        pick(&PRFS),
        pick(&GROUPS),
        additional(),
    )
        .prop_map(|(encr, integ, prf, ke, additional_ke)| IkeProposal {
            integ: if encr[0].is_aead() { Vec::new() } else { integ },
            encr,
            prf,
            ke,
            additional_ke,
        })
}

fn esp_proposal() -> impl Strategy<Value = ChildProposal> {
    let esn = prop_oneof![
        Just(vec![true]),
        Just(vec![false]),
        Just(vec![true, false]),
        Just(vec![false, true])
    ];
    (
        encr_choices(),
        pick(&INTEGS),
        pick(&GROUPS),
        esn,
        additional(),
    )
        .prop_map(|(encr, integ, ke, esn, additional_ke)| ChildProposal {
            integ: if encr[0].is_aead() { Vec::new() } else { integ },
            encr,
            ke,
            esn,
            additional_ke,
        })
}

/// An arbitrary SA payload: any types, ids near the registries, odd
/// attributes, any SPI size.
fn wild_payload() -> impl Strategy<Value = SaPayload> {
    let attr = prop_oneof![
        (any::<u16>()).prop_map(|v| TransformAttr::Tv {
            ty: TransformAttributeType::KEY_LENGTH,
            value: v
        }),
        (0u16..20, any::<u16>()).prop_map(|(t, v)| TransformAttr::Tv {
            ty: TransformAttributeType(t),
            value: v
        }),
        proptest::collection::vec(any::<u8>(), 0..4).prop_map(|v| TransformAttr::Tlv {
            ty: TransformAttributeType::KEY_LENGTH,
            value: v
        }),
    ];
    let transform = (0u8..15, 0u16..40, proptest::collection::vec(attr, 0..2)).prop_map(
        |(ty, id, attributes)| Transform {
            transform_type: TransformType(ty),
            transform_id: id,
            attributes,
        },
    );
    let spi = prop_oneof![
        Just(Spi::None),
        any::<u32>().prop_map(Spi::Child),
        any::<u64>().prop_map(Spi::Ike)
    ];
    let proposal = (
        any::<u8>(),
        0u8..5,
        spi,
        proptest::collection::vec(transform, 0..12),
    )
        .prop_map(|(number, protocol, spi, transforms)| Proposal {
            number,
            protocol_id: ProtocolId(protocol),
            spi,
            transforms,
        });
    proptest::collection::vec(proposal, 0..5).prop_map(|proposals| SaPayload { proposals })
}

proptest! {
    #[test]
    fn responder_picks_the_first_of_its_own_offer(
        ours in proptest::collection::vec(ike_proposal(), 1..4),
    ) {
        let offered = ike_sa_payload(&ours, None);
        let n = select_ike(&ours, &offered).unwrap();
        let first = &ours[0];
        prop_assert_eq!(n.proposal_num, 1);
        prop_assert_eq!(n.encr, first.encr[0]);
        prop_assert_eq!(n.integ, first.integ.first().copied());
        prop_assert_eq!(n.prf, first.prf[0]);
        prop_assert_eq!(n.ke, first.ke[0]);
        let expected_addke: Vec<KeId> = first.additional_ke.iter().map(|ids| ids[0]).collect();
        prop_assert_eq!(&n.additional_ke, &expected_addke);
        let answer = n.answer_payload(None);
        prop_assert_eq!(accept_ike_answer(&offered, &answer), Ok(n.clone()));
        let kei = *first.ke.last().unwrap();
        let with_kei = select_ike_for_kei(&ours, &offered, kei).unwrap();
        prop_assert_eq!(with_kei.ke, kei);
        prop_assert_eq!(with_kei.proposal_num, 1);
    }

    #[test]
    fn esp_responder_picks_the_first_of_its_own_offer(
        ours in proptest::collection::vec(esp_proposal(), 1..4),
        spi in any::<u32>(),
        our_spi in any::<u32>(),
        pfs in any::<bool>(),
    ) {
        let offered = child_sa_payload(IpsecProtocol::Esp, &ours, spi, pfs);
        let want = pfs.then(|| ours[0].ke[0]);
        let n = select_child(IpsecProtocol::Esp, &ours, &offered, want).unwrap();
        let first = &ours[0];
        prop_assert_eq!(n.proposal_num, 1);
        prop_assert_eq!(n.suite.encr, first.encr[0].id);
        prop_assert_eq!(n.suite.encr_key_bits, first.encr[0].key_bits);
        prop_assert_eq!(n.esn, first.esn[0]);
        prop_assert_eq!(n.ke, want);
        prop_assert_eq!(n.peer_spi, spi);
        let answer = n.answer_payload(our_spi);
        let accepted = accept_child_answer(&offered, &answer).unwrap();
        prop_assert_eq!(accepted.peer_spi, our_spi);
        prop_assert_eq!(NegotiatedChild { peer_spi: spi, ..accepted }, n);
    }

    #[test]
    fn wild_sa_payloads_never_panic(
        offered in wild_payload(),
        answer in wild_payload(),
        kei in 0u16..40,
    ) {
        let ike_ours = IkeProposal::default_set();
        let esp_ours = ChildProposal::default_set();
        let _ = select_ike(&ike_ours, &offered);
        let _ = select_ike_for_kei(&ike_ours, &offered, KeId(kei));
        let _ = select_child(IpsecProtocol::Esp, &esp_ours, &offered, Some(KeId(kei)));
        let _ = select_child(IpsecProtocol::Esp, &esp_ours, &offered, None);
        let _ = select_child_create(IpsecProtocol::Esp, &esp_ours, &offered, None);
        if let Ok(n) = accept_ike_answer(&offered, &answer) {
            let _ = n.key_lengths();
        }
        let _ = accept_child_answer(&offered, &answer);
        // Whatever is selected runs in the crypto layer.
        if let Ok(n) = select_ike(&ike_ours, &offered) {
            prop_assert!(n.key_lengths().is_ok());
        }
        if let Ok(n) = select_child(IpsecProtocol::Esp, &esp_ours, &offered, None) {
            prop_assert!(n.suite.validate().is_ok());
        }
    }

    #[test]
    fn wild_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(sa) = SaPayload::parse(&bytes) {
            let _ = select_ike(&IkeProposal::default_set(), &sa);
            let _ = select_child(IpsecProtocol::Esp, &ChildProposal::default_set(), &sa, Some(KeId::CURVE25519));
        }
    }
}
