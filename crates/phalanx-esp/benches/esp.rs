//! ESP throughput against bare AES-GCM (filled in below).
fn main() {}
