//! A small blocking client: one connection, one request at a time.

use std::io::{BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use crate::codec::{
    decode_response, encode_request, read_line_bounded, LineRead, MAX_RESPONSE_LINE_BYTES,
};
use crate::error::ControlError;
use crate::types::{Request, Response};

/// A connection to the daemon's control socket.
#[derive(Debug)]
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    line: Vec<u8>,
}

impl Client {
    /// How long a call waits for the daemon unless [`Client::set_timeout`]
    /// says otherwise. A reload re-reads and validates the whole file, so
    /// this is generous.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

    /// Connects to the socket at `path`.
    pub fn connect(path: impl AsRef<Path>) -> Result<Client, ControlError> {
        let path = path.as_ref();
        let writer = UnixStream::connect(path).map_err(|source| ControlError::Connect {
            path: path.to_owned(),
            source,
        })?;
        let reader = BufReader::new(writer.try_clone()?);
        let mut client = Client {
            reader,
            writer,
            next_id: 1,
            line: Vec::new(),
        };
        client.set_timeout(Some(Client::DEFAULT_TIMEOUT))?;
        Ok(client)
    }

    /// Bounds how long one read or write may block (`None`: forever).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) -> Result<(), ControlError> {
        self.writer.set_read_timeout(timeout)?;
        self.writer.set_write_timeout(timeout)?;
        Ok(())
    }

    /// Sends `request` and waits for its answer. A daemon error comes back
    /// as [`ControlError::Remote`].
    pub fn call(&mut self, request: Request) -> Result<Response, ControlError> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        if let Err(e) = self
            .writer
            .write_all(encode_request(id, &request).as_bytes())
        {
            // A daemon that refuses the connection (busy) answers and closes
            // before reading: the write fails, yet its answer is waiting.
            if !matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) {
                return Err(e.into());
            }
        }
        match read_line_bounded(&mut self.reader, MAX_RESPONSE_LINE_BYTES, &mut self.line)? {
            LineRead::Line => {}
            LineRead::Eof => return Err(ControlError::Closed),
            LineRead::TooLong => return Err(ControlError::LineTooLong),
        }
        let envelope = decode_response(&self.line)?;
        // Id 0 answers what the daemon could not attribute to a request
        // (it was busy, or could not read our line): its error is the news.
        if let (0, Err(error)) = (envelope.id, &envelope.outcome) {
            return Err(ControlError::Remote(error.clone()));
        }
        if envelope.id != id {
            return Err(ControlError::IdMismatch {
                expected: id,
                found: envelope.id,
            });
        }
        let response = envelope.outcome.map_err(ControlError::Remote)?;
        if !response.answers(&request) {
            return Err(ControlError::UnexpectedResponse);
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use std::io::BufRead;
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::thread;

    use super::*;
    use crate::codec::{decode_request, encode_response};
    use crate::error::{ErrorBody, ErrorCode};
    use crate::types::ReloadSummary;

    fn socket_path() -> PathBuf {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        std::env::temp_dir().join(format!("phx-ctl-client-{}-{n}.sock", std::process::id()))
    }

    /// A one-connection fake daemon: answers each request line with what
    /// `answer` returns for its id (`None`: close without answering).
    fn fake_daemon(
        answer: impl Fn(u64) -> Option<String> + Send + 'static,
    ) -> (PathBuf, thread::JoinHandle<()>) {
        let path = socket_path();
        let listener = UnixListener::bind(&path).expect("bind");
        let handle = thread::spawn(move || {
            let (stream, _) = listener.accept().expect("accept");
            let mut writer = stream.try_clone().expect("clone");
            for line in std::io::BufReader::new(stream).lines() {
                let line = line.expect("line");
                let id = decode_request(line.as_bytes()).expect("valid request").id;
                match answer(id) {
                    Some(reply) => writer.write_all(reply.as_bytes()).expect("write"),
                    None => return,
                }
            }
        });
        (path, handle)
    }

    fn run(
        answer: impl Fn(u64) -> Option<String> + Send + 'static,
    ) -> Result<Response, ControlError> {
        let (path, daemon) = fake_daemon(answer);
        let result = Client::connect(&path).and_then(|mut c| c.call(Request::Reload));
        drop(std::fs::remove_file(&path));
        daemon.join().expect("fake daemon");
        result
    }

    #[test]
    fn calls_get_answers_with_increasing_ids() {
        let (path, daemon) = fake_daemon(|id| {
            let summary = ReloadSummary {
                unchanged: u32::try_from(id).ok()?,
                ..Default::default()
            };
            Some(encode_response(id, &Ok(Response::Reload(summary))))
        });
        let mut client = Client::connect(&path).expect("connect");
        for expected in 1..=3 {
            match client.call(Request::Reload).expect("answer") {
                Response::Reload(r) => assert_eq!(r.unchanged, expected),
                other => panic!("unexpected {other:?}"),
            }
        }
        drop(client);
        drop(std::fs::remove_file(&path));
        daemon.join().expect("fake daemon");
    }

    #[test]
    fn unreachable_socket_is_a_connect_error() {
        let e = Client::connect(socket_path()).expect_err("nothing listens");
        assert!(matches!(e, ControlError::Connect { .. }));
        assert!(e.to_string().contains("is phalanxd running"));
    }

    #[test]
    fn daemon_errors_come_back_as_remote() {
        let body = ErrorBody::new(ErrorCode::RELOAD_FAILED, "bad file");
        let sent = body.clone();
        let e = run(move |id| Some(encode_response(id, &Err(sent.clone())))).expect_err("error");
        assert!(matches!(e, ControlError::Remote(b) if b == body));
    }

    #[test]
    fn unattributed_errors_come_back_as_remote() {
        let e = run(|_| {
            Some(encode_response(
                0,
                &Err(ErrorBody::new(ErrorCode::BUSY, "busy")),
            ))
        })
        .expect_err("error");
        assert!(matches!(e, ControlError::Remote(b) if b.code == ErrorCode::BUSY));
    }

    #[test]
    fn closed_connection_is_reported() {
        assert!(matches!(run(|_| None), Err(ControlError::Closed)));
    }

    #[test]
    fn wrong_id_is_reported() {
        let e = run(|id| {
            Some(encode_response(
                id + 1,
                &Ok(Response::Reload(ReloadSummary::default())),
            ))
        })
        .expect_err("error");
        assert!(matches!(
            e,
            ControlError::IdMismatch {
                expected: 1,
                found: 2
            }
        ));
    }

    #[test]
    fn wrong_kind_of_answer_is_reported() {
        let e = run(|id| Some(encode_response(id, &Ok(Response::Sas(vec![]))))).expect_err("error");
        assert!(matches!(e, ControlError::UnexpectedResponse));
    }

    #[test]
    fn garbage_answer_is_malformed() {
        let e = run(|_| Some("hello\n".to_owned())).expect_err("error");
        assert!(matches!(e, ControlError::Malformed(_)));
    }
}
