//! Authentication of IKE peers (RFC 7296 §2.15, RFC 7427).
