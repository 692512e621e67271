//! Fuzz target: the gateway's RADIUS client and EAP relay (phalanx-eap)
//! fed what a hostile or broken RADIUS server (or anyone spoofing one)
//! may send. Three End-Users start conversations and one accounting
//! session runs; the input is cut into steps at each 0xFF octet. A step's
//! first octet picks what happens:
//!
//! - 0: the clock moves on by the rest's first octet in 100 ms units;
//! - 1: the rest arrives as a datagram from server A, 2 from server B
//!   (raw: it must verify to count);
//! - 3: the rest is Code | attributes of an answer to the last request
//!   sent, signed with the right secret and Identifier (so the fuzzer
//!   reaches the code that reads Challenges, Accepts and MS-MPPE keys);
//! - 4: an End-User answers what it got (the rest as its EAP message).
//!
//! Any panic is a finding.
#![no_main]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use phalanx_eap::radius::client::{ClientConfig, RadiusClient, ServerConfig, SessionInfo};
use phalanx_eap::radius::relay::{EapRelay, RelayEvent, Usage};
use phalanx_eap::radius::client::TerminateCause;
use phalanx_eap::radius::RadiusPacket;
use zeroize::Zeroizing;

const SECRET: &[u8] = b"fuzz secret";

fuzz_target!(|data: &[u8]| {
    let a = SocketAddr::from(([10, 2, 0, 2], 1812));
    let b = SocketAddr::from(([10, 2, 0, 3], 1812));
    let server = |auth: SocketAddr| ServerConfig {
        auth,
        acct: Some(SocketAddr::new(auth.ip(), 1813)),
        secret: Zeroizing::new(SECRET.to_vec()),
    };
    let client = RadiusClient::new(
        ClientConfig {
            servers: vec![server(a), server(b)],
            timeout: Duration::from_secs(1),
            retransmits: 1,
            dead_time: Duration::from_secs(5),
            nas_identifier: "fuzz".to_owned(),
        },
        [9; 32],
    );
    let mut relay = EapRelay::new(client, Some(Duration::from_secs(2)), 1);
    let mut now = Instant::now();
    let info = SessionInfo {
        user_name: "ike".to_owned(),
        ..SessionInfo::default()
    };
    for session in 1..=3u64 {
        let _ = relay.start(session, info.clone(), session as u8);
        relay.message(now, session, &[2, session as u8, 0, 9, 1, b'u', b's', b'e', b'r']);
    }
    let mut last_sent: Option<(SocketAddr, Vec<u8>)> = None;
    let mut pending_eap: Vec<u64> = Vec::new();
    for step in data.split(|b| *b == 0xff) {
        let Some((&op, rest)) = step.split_first() else {
            continue;
        };
        match op % 5 {
            0 => {
                now += Duration::from_millis(100 * u64::from(rest.first().copied().unwrap_or(1)));
                relay.handle_timeout(now);
                for spis in relay.interim_due(now) {
                    relay.interim(now, spis, Usage::default());
                }
            }
            1 => relay.client_mut().handle_datagram(now, a, rest),
            2 => relay.client_mut().handle_datagram(now, b, rest),
            3 => {
                let Some((to, request)) = &last_sent else {
                    continue;
                };
                let Ok(request) = RadiusPacket::parse(request) else {
                    continue;
                };
                let Some((&code, attrs)) = rest.split_first() else {
                    continue;
                };
                let mut bytes = vec![code, request.identifier, 0, 0];
                bytes.extend_from_slice(&[0; 16]);
                bytes.extend_from_slice(attrs);
                let Ok(len) = u16::try_from(bytes.len()) else {
                    continue;
                };
                bytes[2..4].copy_from_slice(&len.to_be_bytes());
                let Ok(mut answer) = RadiusPacket::parse(&bytes) else {
                    continue;
                };
                let signed = answer.emit_answer(&request.authenticator, SECRET);
                relay.client_mut().handle_datagram(now, *to, &signed);
            }
            _ => {
                if let Some(session) = pending_eap.pop() {
                    relay.message(now, session, rest);
                }
            }
        }
        while let Some(t) = relay.client_mut().poll_transmit() {
            last_sent = Some((t.to, t.bytes));
        }
        while let Some(event) = relay.poll_event() {
            match event {
                RelayEvent::Continue { session, .. } => pending_eap.push(session),
                RelayEvent::Success { session, .. } => {
                    if relay.up(now, (session, session), &[]) {
                        relay.rekeyed((session, session), (session, session + 100));
                    }
                }
                RelayEvent::Failure { .. } | RelayEvent::AccountingLost { .. } => {}
            }
        }
        let _ = relay.poll_timeout();
    }
    for session in 1..=3u64 {
        relay.down(now, (session, session + 100), Usage::default(), TerminateCause::NasRequest);
    }
});
