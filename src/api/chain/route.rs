//! Routing, after authorization: a request on an instance another replica owns (the
//! fleet sharded) is answered by that replica, which decides again and audits it; this
//! replica's own requests go on to the handler.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::audit::Record;
use super::resolve::Target;
use super::{refusal, Authorized, Chain};
use crate::api::request_info::RequestInfo;

/// The routing layer.
pub async fn layer(State(chain): State<Arc<Chain>>, req: Request, next: Next) -> Response {
    let on = req
        .extensions()
        .get::<Target>()
        .and_then(|t| Some((t.routed_to()?.to_string(), t.writes)));
    let record = req
        .extensions()
        .get::<Authorized>()
        .map(|a| a.record().clone());
    let (Some((instance, writes)), Some(record)) = (on, record) else {
        return next.run(req).await;
    };
    match forward_if_elsewhere(&chain, (instance.as_str(), writes), req, &record).await {
        Ok(req) => next.run(req).await,
        Err(answer) => *answer,
    }
}

/// `req` back when this replica answers for `instance`; else the owner's answer (or why
/// no replica can answer now), in the request's surface's words.
async fn forward_if_elsewhere(
    chain: &Chain,
    (instance, writes): (&str, bool),
    req: Request,
    record: &Record,
) -> Result<Request, Box<Response>> {
    use crate::api::forward::{pass, Passed};
    let Some(shards) = chain.ctx.tree.shards() else {
        return Ok(req);
    };
    let surface = RequestInfo::surface_of(&req);
    let lookup = |n: &str| chain.ctx.instance(n).ok();
    let forwarding = |replica: &str| {
        record.update(|f| f.forwarded_to = Some(replica.to_string()));
    };
    let forwarder = chain.ctx.forwarder.as_deref();
    // The owner holds a request for a hibernated instance while it wakes.
    let patience = match lookup(instance).is_some_and(|i| i.asleep()) {
        true => chain.ctx.tree.settings().wake_timeout,
        false => std::time::Duration::ZERO,
    };
    match pass(
        forwarder,
        shards,
        lookup,
        instance,
        (req, !writes),
        patience,
        forwarding,
    )
    .await
    {
        Ok(Passed::Here(req)) => Ok(req),
        Ok(Passed::Answered { answer, .. }) => Err(Box::new(answer)),
        Ok(Passed::Misdirected(answer)) => {
            // The forwarding peer sends it on; it audits the request, not this hop.
            forwarding("(the forwarding replica)");
            Err(Box::new(answer))
        }
        Err(e) => {
            // No owner answered: this replica audits the attempt (a write) itself.
            record.update(|f| f.forwarded_to = None);
            Err(Box::new(refusal(surface, &e)))
        }
    }
}
