//! The pure parts of the cluster IKE glue: which datagrams open a new IKE
//! SA, start actions taken out of the endpoint's configuration, and what
//! the owner registers with the cluster.

use super::*;
use phalanx_wire::ike::with_non_esp_marker;

/// An IKE header (RFC 7296 §3.1): SPIs, next payload none, version 2.0,
/// exchange, flags, Message ID 0, length 28.
fn header(spi_i: u64, spi_r: u64, exchange: u8, flags: u8) -> Vec<u8> {
    let mut h = Vec::with_capacity(28);
    h.extend_from_slice(&spi_i.to_be_bytes());
    h.extend_from_slice(&spi_r.to_be_bytes());
    h.extend_from_slice(&[0, 0x20, exchange, flags]);
    h.extend_from_slice(&0_u32.to_be_bytes());
    h.extend_from_slice(&28_u32.to_be_bytes());
    h
}

const INIT: u8 = 34;
const AUTH: u8 = 35;
const INFORMATIONAL: u8 = 37;
const I: u8 = 0x08;
const R: u8 = 0x20;

#[test]
fn new_exchanges_are_init_requests_and_unreadable_messages() {
    assert!(is_new_exchange(&header(1, 0, INIT, I)));
    // A response to our own IKE_SA_INIT (a COOKIE or INVALID_KE_PAYLOAD
    // answer keeps SPIr zero) goes to the node that sent the request.
    assert!(!is_new_exchange(&header(1, 0, INIT, R)));
    assert!(
        !is_new_exchange(&header(1, 2, INIT, I)),
        "retransmit with SPIr"
    );
    assert!(!is_new_exchange(&header(1, 2, AUTH, I)));
    assert!(!is_new_exchange(&header(1, 2, INFORMATIONAL, R)));
    assert!(
        is_new_exchange(&[0; 10]),
        "unreadable: the segment owner alone"
    );
    let mut v1 = header(1, 0, INIT, I);
    v1[17] = 0x10;
    assert!(is_new_exchange(&v1), "IKEv1: answered by one node");
    assert_ne!(with_non_esp_marker(&header(1, 0, INIT, I)).len(), 28);
}

#[test]
fn start_actions_are_taken_out() {
    let mut file = String::from("[clear]\ntun = \"phx0\"\n[protected]\nlocal = \"192.0.2.1\"\n");
    for (name, action) in [("a", "start"), ("b", "none")] {
        file.push_str(&format!(
            "[[connection]]\nname = \"{name}\"\nremote_addr = \"192.0.2.2\"\nauth = \"psk\"\n\
             psk = \"a long shared secret\"\nstart_action = \"{action}\"\nforce_encap = true\n\
             [[connection.child]]\nname = \"net\"\nlocal_ts = [\"10.1.0.0/24\"]\n\
             remote_ts = [\"10.2.{}.0/24\"]\n",
            name.len() + usize::from(action == "none")
        ));
    }
    let config = crate::config::Config::parse("gw.toml", &file).unwrap();
    let mut endpoint = config.ike.unwrap().endpoint;
    let peer: IpAddr = "192.0.2.2".parse().unwrap();
    assert_eq!(take_starts(&mut endpoint), vec![("a".to_owned(), peer)]);
    assert!(endpoint
        .connections
        .iter()
        .all(|c| c.start_action == StartAction::None));
}

#[test]
fn the_owner_registers_installs_and_removals() {
    let remove = SaEvent::RemoveOutbound {
        connection: "c".into(),
        child: "n".into(),
        spi: 9,
    };
    assert_eq!(
        registration(&remove),
        Some(ToCluster::Remove {
            direction: Direction::Outbound,
            spi: 9
        })
    );
    let failed = SaEvent::IkeSaFailed {
        connection: "c".into(),
        reason: "x".into(),
    };
    assert_eq!(registration(&failed), None);
}
