//! Tests of the IKEv2 codec: captured bytes, malformed input, and property
//! tests over generated representations and arbitrary octets.

mod captured;
mod malformed;
mod roundtrip;
mod strategies;
