//! Graceful shutdown of the API, as kube-apiserver does it on SIGTERM: `/readyz` fails at
//! once while everything is still served (the shutdown delay, so endpoints and kube-proxy
//! stop sending new connections here), then the listeners close, watches end cleanly (the
//! client resumes from its last resourceVersion on another replica), and requests in
//! flight finish, within a bound.
//!
//! During the delay, HTTP/1.1 answers carry `Connection: close`, so keep-alive clients
//! reconnect through the Service (to a replica that stays) before the listener closes;
//! watches begun before the shutdown end when it starts, so their clients' next request
//! gets such an answer too (the proxy's `until_closing`).

use std::time::Duration;

use tokio::sync::watch;

/// Where the API is in its shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Serving,
    /// Not ready, still serving: endpoints converge.
    Draining,
    /// Listeners closed, watches ended; requests in flight finish.
    Closing,
}

/// What request handlers read: the phase now, and a future for the moment to close.
/// `None`: an API context without a server, which never drains.
#[derive(Clone, Debug)]
pub struct Drain(Option<watch::Receiver<Phase>>);

/// The one writer, held by the server that runs the shutdown.
#[derive(Debug)]
pub struct DrainControl(watch::Sender<Phase>);

impl Drain {
    /// A pair whose phase moves only when the control says so.
    pub fn new() -> (DrainControl, Drain) {
        let (tx, rx) = watch::channel(Phase::Serving);
        (DrainControl(tx), Drain(Some(rx)))
    }

    /// Never drains (tests and tools that build an API context without a server).
    pub fn never() -> Drain {
        Drain(None)
    }

    pub fn phase(&self) -> Phase {
        self.0.as_ref().map_or(Phase::Serving, |rx| *rx.borrow())
    }

    pub fn serving(&self) -> bool {
        self.phase() == Phase::Serving
    }

    /// Resolves once the API is closing (or its control is gone).
    pub async fn closing(&self) {
        self.reached(Phase::Closing).await
    }

    /// Resolves once the shutdown has reached `phase` (or its control is gone).
    pub async fn reached(&self, phase: Phase) {
        match self.0.clone() {
            Some(mut rx) => {
                let _ = rx.wait_for(|p| *p >= phase).await;
            }
            None => std::future::pending().await,
        }
    }
}

impl DrainControl {
    /// Not ready from now on, still serving for `delay` and until `also` is done (a
    /// sharded replica hands its instances over meanwhile); then closing.
    pub async fn run(&self, delay: Duration, also: impl std::future::Future<Output = ()>) {
        self.0.send_replace(Phase::Draining);
        if !delay.is_zero() {
            tracing::info!(
                delay_secs = delay.as_secs_f64(),
                "not ready; serving while endpoints converge"
            );
        }
        tokio::join!(tokio::time::sleep(delay), also);
        self.0.send_replace(Phase::Closing);
    }
}

/// Adds `Connection: close` to HTTP/1.1 answers while draining, so clients reconnect.
pub async fn close_keepalives(
    axum::extract::State(drain): axum::extract::State<Drain>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let h1 = req.version() <= http::Version::HTTP_11;
    let mut resp = next.run(req).await;
    if h1 && !drain.serving() {
        resp.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn closing_follows_the_delay() {
        let (control, drain) = Drain::new();
        assert!(drain.serving());
        let waiter = {
            let drain = drain.clone();
            tokio::spawn(async move { drain.closing().await })
        };
        let run = tokio::spawn(async move { control.run(Duration::from_secs(5), async {}).await });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(drain.phase(), Phase::Draining);
        assert!(!waiter.is_finished());
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(drain.phase(), Phase::Closing);
        waiter.await.expect("waiter");
        run.await.expect("run");
    }

    #[tokio::test]
    async fn a_context_without_a_server_never_closes() {
        let drain = Drain::never();
        let closing = tokio::time::timeout(Duration::from_millis(50), drain.closing()).await;
        assert!(closing.is_err());
        assert!(drain.serving());
    }
}
