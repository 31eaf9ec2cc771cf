//! `fakekube serve`: the in-memory API server ([`fakekube::ApiServer`]) behind the real
//! Kubernetes REST API, so kubectl (1.27-1.34) and kube-rs can be pointed at the simulated
//! cluster (`karpenter-sim serve` embeds it; plain HTTP, no authentication).
//!
//! Served: `/version`, `/healthz`, `/readyz`; discovery and OpenAPI ([`discovery`]); for every
//! kind in [`kinds`]: list and watch (label and field selectors, `resourceVersion`,
//! `allowWatchBookmarks`, `timeoutSeconds`; a watch from an expired version ends with an
//! `ERROR` event carrying a 410 `Status`), get, create, update, patch (JSON, merge, strategic
//! merge, server-side apply), delete (finalizers, grace periods, `propagationPolicy` accepted),
//! the `status`, `scale`, `eviction` and `binding` subresources, Events (read from fakekube's
//! recorded events), and Table output ([`table`]). Errors are `Status` objects ([`status`]).
//!
//! Deliberate differences from a real API server (each is invisible to what the project's
//! clients do, or documented in `docs/serve.md`):
//! - server-side apply is a merge of the applied configuration into the live object: no
//!   `managedFields`, no field ownership, no conflicts between managers;
//! - `fieldValidation=Strict` is accepted but unknown fields are not rejected (fakekube stores
//!   objects as JSON and validates no schema);
//! - `limit` is honoured as "everything" (no `continue` tokens): lists are small;
//! - `dryRun=All` answers the object as it would be created, without storing it (create only).
//!
//! Modules: [`kinds`] (the served kinds), [`discovery`], [`rest`] (the verbs), [`patch`]
//! (strategic merge and update as merge patches), [`table`], [`status`].

pub mod discovery;
pub mod kinds;
pub mod patch;
pub mod rest;
pub mod status;
pub mod table;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use fakekube::ApiServer;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use rest::Reply;

/// Largest request body accepted (the real server's limit is 3 MiB per object).
pub const BODY_BYTES_MAX: usize = 3 << 20;

/// One HTTP request, read whole.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub accept: String,
    pub content_type: String,
    pub body: Bytes,
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Server {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`: the kubeconfig's `server`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting connections and waits for the accept loop to end (open watches end when
    /// the runtime drops their connections).
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// A kubeconfig for `url`: plain HTTP, a dummy token, namespace `default`.
pub fn kubeconfig(url: &str, cluster: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster}\n  cluster:\n    server: {url}\n\
         users:\n- name: {cluster}\n  user:\n    token: fakekube\ncontexts:\n- name: {cluster}\n  \
         context:\n    cluster: {cluster}\n    user: {cluster}\n    namespace: default\n\
         current-context: {cluster}\n"
    )
}

/// Serves `api` on `addr` (port 0 picks a free port) in the current tokio runtime.
pub async fn serve(api: Arc<ApiServer>, addr: SocketAddr) -> std::io::Result<Server> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let (stop, mut stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = &mut stopped => break,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else { continue };
            let api = api.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let api = api.clone();
                    async move { Ok::<_, Infallible>(respond(api, request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(Server {
        addr,
        stop: Some(stop),
        task,
    })
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

async fn respond(api: Arc<ApiServer>, request: Request<Incoming>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let query = parts
        .uri
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let body = match Limited::new(body, BODY_BYTES_MAX).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => {
            let error = status::ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("request body unreadable or over {BODY_BYTES_MAX} bytes: {e}"),
            );
            return into_response(Reply::error(&error));
        }
    };
    let call = Call {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query,
        accept: header("accept"),
        content_type: header("content-type"),
        body,
    };
    into_response(rest::handle(&api, &call).await)
}

fn into_response(reply: Reply) -> Response<Body> {
    let (status, content_type, body): (u16, String, Body) = match reply {
        Reply::Json {
            status,
            content_type,
            body,
        } => (
            status,
            content_type,
            Full::new(Bytes::from(body.to_string())).boxed_unsync(),
        ),
        Reply::Text { status, body } => (
            status,
            "text/plain; charset=utf-8".into(),
            Full::new(Bytes::from(body)).boxed_unsync(),
        ),
        Reply::Stream { content_type, body } => (200, content_type, body),
    };
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("cache-control", "no-cache, private")
        .body(body)
        .unwrap_or_else(|_| {
            Response::new(Full::new(Bytes::from_static(b"bad response")).boxed_unsync())
        })
}
