//! The control plane's handle on the IKE thread ([`IkeControl`]): commands
//! go over a bounded queue and are answered on a channel of their own,
//! waited for a bounded time, so a stuck IKE thread makes a control
//! request fail with a clear error instead of hanging the control socket.
//! Listings and counters are read from the status the IKE thread publishes
//! after every change ([`IkeStatus`]): no waiting at all.

use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use crate::config::EapSettings;
use phalanx_control::{ActionResult, ErrorCode, NamedCounter};
use phalanx_ike::config::EndpointConfig;
use phalanx_ike::pool::PoolUsage;
use phalanx_ike::{IkeCounters, IkeSaInfo};
use phalanx_io::poll::Waker;

use crate::limits::IKE_CONTROL_TIMEOUT;

/// Why a command failed; the code goes on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The error code for `phalanxctl`.
    pub code: ErrorCode,
    /// What happened.
    pub message: String,
}

impl Failure {
    /// A failure with `code`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

/// The answer to a command.
pub type Reply = Result<ActionResult, Failure>;

/// What the control plane asks of the IKE thread.
#[derive(Debug)]
pub enum Command {
    /// `phalanxctl initiate NAME [--wait S]`.
    Initiate {
        /// The connection.
        connection: String,
        /// Answer once everything is up (or failed), within this time.
        wait: Option<Duration>,
        /// Where the answer goes.
        reply: SyncSender<Reply>,
    },
    /// `phalanxctl terminate NAME`.
    Terminate {
        /// The connection.
        connection: String,
        /// Where the answer goes.
        reply: SyncSender<Reply>,
    },
    /// `phalanxctl disconnect PEER`: one End-User's IKE SAs, by identity or
    /// virtual IP.
    Disconnect {
        /// The identity or virtual IP.
        peer: String,
        /// Where the answer goes.
        reply: SyncSender<Reply>,
    },
    /// A reload's connections (`Endpoint::reconfigure`) and EAP
    /// passwords; not answered.
    Reconfigure(Box<EndpointConfig>, Arc<EapSettings>),
}

/// What the IKE thread last published.
#[derive(Clone, Debug, Default)]
pub struct IkeStatus {
    /// Every IKE SA (`Endpoint::ike_sas`).
    pub sas: Vec<IkeSaInfo>,
    /// The endpoint's counters.
    pub counters: IkeCounters,
    /// The IKE thread's own counters (queue drops, send errors, ...).
    pub daemon: Vec<NamedCounter>,
    /// Virtual-IP pools (`Endpoint::pool_usage`).
    pub pools: Vec<PoolUsage>,
    /// The EAP method (`remote_auth`) of each connection with EAP
    /// End-Users.
    pub eap_methods: HashMap<String, &'static str>,
}

/// A handle on the IKE thread, for the control socket and reloads.
#[derive(Clone, Debug)]
pub struct IkeControl {
    tx: SyncSender<Command>,
    waker: Arc<Waker>,
    status: Arc<parking_lot::Mutex<IkeStatus>>,
    timeout: Duration,
}

impl IkeControl {
    /// A handle sending on `tx`, waking `waker`, reading `status`.
    pub fn new(
        tx: SyncSender<Command>,
        waker: Arc<Waker>,
        status: Arc<parking_lot::Mutex<IkeStatus>>,
    ) -> IkeControl {
        IkeControl {
            tx,
            waker,
            status,
            timeout: IKE_CONTROL_TIMEOUT,
        }
    }

    /// The same handle waiting `timeout` (plus any `--wait`) for answers.
    pub fn with_timeout(mut self, timeout: Duration) -> IkeControl {
        self.timeout = timeout;
        self
    }

    /// What the IKE thread last published.
    pub fn status(&self) -> IkeStatus {
        self.status.lock().clone()
    }

    /// Starts IKE for `connection`; with `wait`, answers once its IKE SA
    /// and Child SAs are up, or with the reason they are not.
    pub fn initiate(&self, connection: &str, wait: Option<Duration>) -> Reply {
        let (reply, answer) = mpsc::sync_channel(1);
        let command = Command::Initiate {
            connection: connection.to_owned(),
            wait,
            reply,
        };
        self.call(command, &answer, wait.unwrap_or_default())
    }

    /// Deletes `connection`'s IKE SAs and their children.
    pub fn terminate(&self, connection: &str) -> Reply {
        let (reply, answer) = mpsc::sync_channel(1);
        let command = Command::Terminate {
            connection: connection.to_owned(),
            reply,
        };
        self.call(command, &answer, Duration::ZERO)
    }

    /// Deletes the IKE SAs of the peer with identity or virtual IP `peer`.
    pub fn disconnect(&self, peer: &str) -> Reply {
        let (reply, answer) = mpsc::sync_channel(1);
        let command = Command::Disconnect {
            peer: peer.to_owned(),
            reply,
        };
        self.call(command, &answer, Duration::ZERO)
    }

    /// Hands a reload's connections to the IKE thread (queued, not waited
    /// for: the reload has already been applied to the data plane).
    pub fn reconfigure(
        &self,
        config: EndpointConfig,
        eap: Arc<EapSettings>,
    ) -> Result<(), Failure> {
        self.queue(Command::Reconfigure(Box::new(config), eap))
    }

    fn queue(&self, command: Command) -> Result<(), Failure> {
        match self.tx.try_send(command) {
            Ok(()) => {
                // If the eventfd write fails the command waits for the IKE
                // thread's next timeout (at most IKE_HOUSEKEEPING).
                let _ = self.waker.wake();
                Ok(())
            }
            Err(TrySendError::Full(_)) => Err(Failure::new(
                ErrorCode::BUSY,
                "the IKE thread has too many requests queued; try again",
            )),
            Err(TrySendError::Disconnected(_)) => Err(Failure::new(
                ErrorCode::INTERNAL,
                "the IKE thread is not running",
            )),
        }
    }

    fn call(&self, command: Command, answer: &Receiver<Reply>, wait: Duration) -> Reply {
        self.queue(command)?;
        let limit = self.timeout + wait;
        match answer.recv_timeout(limit) {
            Ok(reply) => reply,
            Err(RecvTimeoutError::Timeout) => Err(Failure::new(
                ErrorCode::TIMED_OUT,
                format!(
                    "the IKE thread did not answer within {:.1} s",
                    limit.as_secs_f64()
                ),
            )),
            Err(RecvTimeoutError::Disconnected) => Err(Failure::new(
                ErrorCode::INTERNAL,
                "the IKE thread dropped the request",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No IKE thread answering: the caller gets an error after the bounded
    /// wait instead of hanging; a full queue is refused at once.
    #[test]
    fn a_silent_ike_thread_times_out() {
        let (tx, rx) = mpsc::sync_channel(1);
        let control = IkeControl::new(tx, Arc::new(Waker::new().unwrap()), Arc::default())
            .with_timeout(Duration::from_millis(50));
        let started = std::time::Instant::now();
        let e = control.terminate("site").unwrap_err();
        assert_eq!(e.code, ErrorCode::TIMED_OUT, "{e:?}");
        assert!(started.elapsed() >= Duration::from_millis(50));
        // The first command still sits in the queue of one.
        let e = control
            .reconfigure(EndpointConfig::default(), Arc::default())
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::BUSY);
        drop(rx);
        let e = control.terminate("site").unwrap_err();
        assert_eq!(e.code, ErrorCode::INTERNAL);
    }
}
