//! A controller with its found type erased, so that one table holds them all.

use std::any::Any;
use std::future::Future;
use std::hash::Hasher;
use std::pin::Pin;
use std::time::Duration;

use futures::FutureExt;

use super::{Action, Controller, ControllerError, Next, Observed, Report, Scope};

pub(crate) type AnyWork =
    Pin<Box<dyn Future<Output = Result<Box<dyn Any + Send>, ControllerError>> + Send>>;

pub(crate) trait Erased: Send {
    fn name(&self) -> &'static str;
    fn leader_only(&self) -> bool;
    fn retry_max(&self) -> Duration;
    fn reconcile(
        &mut self,
        scope: &Scope<'_>,
        observed: &Observed,
        report: &mut Report,
    ) -> Next<Box<dyn Any + Send>>;
    /// `None`: what was found is not this controller's type (a bug, named in the error).
    fn record(&mut self, found: Box<dyn Any + Send>, report: &mut Report) -> Option<Action>;
    fn watches(&self, scope: &Scope<'_>, observed: &Observed, key: &mut dyn Hasher);
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
    fn reconcile(
        &mut self,
        scope: &Scope<'_>,
        observed: &Observed,
        report: &mut Report,
    ) -> Next<Box<dyn Any + Send>> {
        match Controller::reconcile(self, scope, observed, report) {
            Next::Start(work) => {
                let work: AnyWork =
                    Box::pin(work.map(|r| r.map(|found| Box::new(found) as Box<dyn Any + Send>)));
                Next::Start(work)
            }
            Next::Idle => Next::Idle,
            Next::Wait(action) => Next::Wait(action),
        }
    }
    fn record(&mut self, found: Box<dyn Any + Send>, report: &mut Report) -> Option<Action> {
        let found = found.downcast::<C::Found>().ok()?;
        Some(Controller::record(self, *found, report))
    }
    fn watches(&self, scope: &Scope<'_>, observed: &Observed, key: &mut dyn Hasher) {
        Controller::watches(self, scope, observed, key)
    }
}
