//! The line codec: one JSON object per line, in both directions.
//!
//! ```text
//! request  {"version":1,"id":7,"request":{"type":"sas"}}
//! result   {"version":1,"id":7,"result":{"type":"sas","data":[...]}}
//! error    {"version":1,"id":7,"error":{"code":3,"message":"..."}}
//! ```
//! Every `encode_*` returns the line with its terminating `\n`; every
//! `decode_*` takes the line without it (a trailing `\r` or `\n` is
//! tolerated). Decoding never panics on any input.

use std::io::{self, BufRead};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ControlError, ErrorBody, ErrorCode};
use crate::types::{Request, Response};

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// The longest request line a server accepts (the `\n` not counted).
/// Requests are tiny; the bound keeps a misbehaving client from making the
/// daemon buffer without end.
pub const MAX_REQUEST_LINE_BYTES: usize = 64 * 1024;

/// The longest answer line a client accepts. Answers list every SA and
/// policy, so the bound is generous: about 100,000 SAs.
pub const MAX_RESPONSE_LINE_BYTES: usize = 64 * 1024 * 1024;

/// A request as written.
#[derive(Serialize)]
struct RequestOut<'a> {
    version: u32,
    id: u64,
    request: &'a Request,
}

/// A decoded request line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestEnvelope {
    /// Always [`PROTOCOL_VERSION`] once decoded.
    pub version: u32,
    /// Chosen by the client, echoed in the answer. Clients use ids from 1:
    /// id 0 answers a line whose id could not be read.
    pub id: u64,
    /// What is asked.
    pub request: Request,
}

/// A request line the server refuses, with what to answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestError {
    /// The request's id when it could be read, else 0.
    pub id: u64,
    /// The error to send back.
    pub error: ErrorBody,
}

/// A decoded answer line.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseEnvelope {
    /// Always [`PROTOCOL_VERSION`] once decoded.
    pub version: u32,
    /// The id of the request answered.
    pub id: u64,
    /// The result or the daemon's error.
    pub outcome: Result<Response, ErrorBody>,
}

/// The answer as written: exactly one of `result` and `error`.
#[derive(Serialize)]
struct ResponseOut<'a> {
    version: u32,
    id: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Response>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorBody>,
}

/// The answer as read.
#[derive(Deserialize)]
struct ResponseIn {
    id: u64,
    #[serde(default)]
    result: Option<Response>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

/// Serializes `value` as one line. The protocol types are plain structs and
/// enums with string keys, which serde_json always serializes; the fallback
/// only guards that invariant.
fn to_line<T: Serialize>(value: &T) -> String {
    let mut line = serde_json::to_string(value).unwrap_or_else(|e| {
        format!(
            r#"{{"version":{PROTOCOL_VERSION},"id":0,"error":{{"code":{},"message":{:?}}}}}"#,
            ErrorCode::INTERNAL.0,
            e.to_string()
        )
    });
    line.push('\n');
    line
}

/// Encodes request `id` asking `request`.
pub fn encode_request(id: u64, request: &Request) -> String {
    to_line(&RequestOut {
        version: PROTOCOL_VERSION,
        id,
        request,
    })
}

/// Encodes the answer to request `id`.
pub fn encode_response(id: u64, outcome: &Result<Response, ErrorBody>) -> String {
    let (result, error) = match outcome {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e)),
    };
    to_line(&ResponseOut {
        version: PROTOCOL_VERSION,
        id,
        result,
        error,
    })
}

/// Encodes an error answer to request `id` (0 when unknown).
pub fn encode_error(id: u64, error: &ErrorBody) -> String {
    encode_response(id, &Err(error.clone()))
}

/// Parses `line` as a JSON object.
fn parse_object(line: &[u8]) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(trim_line_end(line)) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("the line is not a JSON object".to_owned()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

/// Drops a trailing `\n` and `\r`.
fn trim_line_end(mut line: &[u8]) -> &[u8] {
    while let [rest @ .., b'\n' | b'\r'] = line {
        line = rest;
    }
    line
}

/// Decodes a request line, or says what to answer instead.
pub fn decode_request(line: &[u8]) -> Result<RequestEnvelope, RequestError> {
    let malformed = |id: u64, message: String| RequestError {
        id,
        error: ErrorBody::new(ErrorCode::MALFORMED, message),
    };
    let object = parse_object(line).map_err(|m| malformed(0, m))?;
    let id = match object.get("id").map(Value::as_u64) {
        Some(Some(id)) => id,
        _ => return Err(malformed(0, "missing or invalid \"id\"".to_owned())),
    };
    check_request_version(id, object.get("version"))?;
    let Some(body) = object.get("request") else {
        return Err(malformed(id, "missing \"request\"".to_owned()));
    };
    let request = Request::deserialize(body).map_err(|e| request_body_error(id, body, e))?;
    Ok(RequestEnvelope {
        version: PROTOCOL_VERSION,
        id,
        request,
    })
}

/// Refuses a request whose version is absent or not ours.
fn check_request_version(id: u64, version: Option<&Value>) -> Result<(), RequestError> {
    match version.map(Value::as_u64) {
        Some(Some(v)) if v == u64::from(PROTOCOL_VERSION) => Ok(()),
        Some(Some(v)) => Err(RequestError {
            id,
            error: ErrorBody::new(
                ErrorCode::UNSUPPORTED_VERSION,
                format!(
                    "protocol version {v} is not supported; this daemon speaks {PROTOCOL_VERSION}"
                ),
            ),
        }),
        _ => Err(RequestError {
            id,
            error: ErrorBody::new(ErrorCode::MALFORMED, "missing or invalid \"version\""),
        }),
    }
}

/// Tells an unknown request type apart from a malformed request body.
fn request_body_error(id: u64, body: &Value, e: serde_json::Error) -> RequestError {
    let error = match body.get("type").and_then(Value::as_str) {
        Some(kind) => ErrorBody::new(
            ErrorCode::UNKNOWN_REQUEST,
            format!("unknown request type {kind:?}"),
        ),
        None => ErrorBody::new(ErrorCode::MALFORMED, format!("invalid \"request\": {e}")),
    };
    RequestError { id, error }
}

/// Decodes an answer line. The version is checked before the rest, so an
/// answer from a daemon of another version reads as a version mismatch.
pub fn decode_response(line: &[u8]) -> Result<ResponseEnvelope, ControlError> {
    let object = parse_object(line).map_err(ControlError::Malformed)?;
    match object.get("version").map(Value::as_u64) {
        Some(Some(v)) if v == u64::from(PROTOCOL_VERSION) => {}
        Some(Some(v)) => {
            return Err(ControlError::VersionMismatch {
                expected: PROTOCOL_VERSION,
                found: u32::try_from(v).unwrap_or(u32::MAX),
            })
        }
        _ => {
            return Err(ControlError::Malformed(
                "missing or invalid \"version\"".into(),
            ))
        }
    }
    let wire = ResponseIn::deserialize(Value::Object(object))
        .map_err(|e| ControlError::Malformed(e.to_string()))?;
    let outcome = match (wire.result, wire.error) {
        (Some(result), None) => Ok(result),
        (None, Some(error)) => Err(error),
        _ => {
            return Err(ControlError::Malformed(
                "exactly one of \"result\" and \"error\" must be present".into(),
            ))
        }
    };
    Ok(ResponseEnvelope {
        version: PROTOCOL_VERSION,
        id: wire.id,
        outcome,
    })
}

/// What [`read_line_bounded`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineRead {
    /// A line is in the buffer, without its `\n`. A last line the peer
    /// closed without `\n` counts too.
    Line,
    /// The peer closed the stream; the buffer is empty.
    Eof,
    /// More than the limit arrived without a `\n`. The stream is left
    /// somewhere inside that line: the caller should answer and close.
    TooLong,
}

/// Reads one `\n`-terminated line into `buf` (cleared first), refusing to
/// buffer more than `limit` bytes of it.
pub fn read_line_bounded(
    reader: &mut impl BufRead,
    limit: usize,
    buf: &mut Vec<u8>,
) -> io::Result<LineRead> {
    buf.clear();
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(if buf.is_empty() {
                LineRead::Eof
            } else {
                LineRead::Line
            });
        }
        let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..at], true),
            None => (available, false),
        };
        if buf.len() + chunk.len() > limit {
            return Ok(LineRead::TooLong);
        }
        buf.extend_from_slice(chunk);
        let used = chunk.len() + usize::from(found);
        reader.consume(used);
        if found {
            return Ok(LineRead::Line);
        }
    }
}

#[cfg(test)]
mod tests;
