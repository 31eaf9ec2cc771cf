//! The controller's HTTP endpoints: `/metrics` on `METRICS_PORT` (the core's registry in the
//! Prometheus/OpenMetrics text format) and `/healthz` (liveness) and `/readyz` (readiness) on
//! `HEALTH_PROBE_PORT`, over hyper 1 (already in the graph through kube and the AWS SDK).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use karpenter_core::metrics::Metrics;
use tokio::net::TcpListener;

/// What the probes answer.
#[derive(Debug, Default)]
pub struct Health {
    /// Cleared when a controller loop died: the kubelet restarts the pod.
    dead: AtomicBool,
    /// Set once the API server answered and, on the leader, every cache has listed; cleared
    /// when shutting down so no new traffic is routed here.
    ready: AtomicBool,
}

impl Health {
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    pub fn set_dead(&self) {
        self.dead.store(true, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}

/// Pause after a failed accept.
const ACCEPT_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// One answer: status, content type, body.
type Answer = (StatusCode, &'static str, String);

const TEXT: &str = "text/plain; charset=utf-8";
/// prometheus-client writes OpenMetrics text (Prometheus scrapes it as is).
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub fn metrics_answer(metrics: &Metrics, path: &str) -> Answer {
    match path {
        "/metrics" => (StatusCode::OK, OPENMETRICS, metrics.encode()),
        _ => (StatusCode::NOT_FOUND, TEXT, "not found\n".into()),
    }
}

pub fn health_answer(health: &Health, path: &str) -> Answer {
    match path {
        "/healthz" if health.dead.load(Ordering::SeqCst) => (
            StatusCode::SERVICE_UNAVAILABLE,
            TEXT,
            "a controller loop stopped\n".into(),
        ),
        "/healthz" => (StatusCode::OK, TEXT, "ok\n".into()),
        "/readyz" if health.is_ready() => (StatusCode::OK, TEXT, "ok\n".into()),
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            TEXT,
            "not ready: caches have not synced\n".into(),
        ),
        _ => (StatusCode::NOT_FOUND, TEXT, "not found\n".into()),
    }
}

/// Binds `port` on every interface now (so a taken port fails the start), then serves `answer`
/// for every GET on a task of its own.
pub async fn serve(
    port: u16,
    answer: Arc<dyn Fn(&str) -> Answer + Send + Sync>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port))).await?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of file descriptors, say: wait instead of spinning.
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let (status, content_type, body) = answer(request.uri().path());
                    async move {
                        let mut response = Response::new(Full::new(Bytes::from(body)));
                        *response.status_mut() = status;
                        response.headers_mut().insert(
                            hyper::header::CONTENT_TYPE,
                            hyper::header::HeaderValue::from_static(content_type),
                        );
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }))
}
