//! A controller with its found type erased, so that one table holds them all.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures::FutureExt;

use super::{Controller, Scope};
use crate::status::Observed;

pub(crate) type AnyWork = Pin<Box<dyn Future<Output = Result<Box<dyn Any + Send>, String>> + Send>>;

pub(crate) trait Erased: Send {
    fn name(&self) -> &'static str;
    fn leader_only(&self) -> bool;
    fn retry_max(&self) -> Duration;
    fn reconcile(&mut self, scope: &Scope<'_>, observed: &mut Observed) -> Option<AnyWork>;
    fn record(&mut self, found: Box<dyn Any + Send>, observed: &mut Observed);
}

impl<C: Controller> Erased for C {
    fn name(&self) -> &'static str {
        C::NAME
    }
    fn leader_only(&self) -> bool {
        C::LEADER_ONLY
    }
    fn retry_max(&self) -> Duration {
        C::RETRY_MAX
    }
    fn reconcile(&mut self, scope: &Scope<'_>, observed: &mut Observed) -> Option<AnyWork> {
        let work = Controller::reconcile(self, scope, observed)?;
        Some(Box::pin(work.map(|r| {
            r.map(|found| Box::new(found) as Box<dyn Any + Send>)
        })))
    }
    fn record(&mut self, found: Box<dyn Any + Send>, observed: &mut Observed) {
        if let Ok(found) = found.downcast::<C::Found>() {
            Controller::record(self, *found, observed);
        }
    }
}
