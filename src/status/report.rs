//! What one controller says of its instance: the conditions it owns and the status fields
//! it sets. Each controller writes only its own [`Report`] (the runner hands it over);
//! [`super::build`] merges them in the table's order, so a new controller that reports a
//! condition touches its own file and the table, not the status writer.

use crate::crd::{CertificateStatus, ClassDrift, ControlPlaneUsage, LastBackup};

/// One condition as a controller says it; its `lastTransitionTime` and generation are the
/// status writer's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    pub type_: &'static str,
    /// `None`: Unknown.
    pub status: Option<bool>,
    pub reason: String,
    pub message: String,
}

/// A controller's part of the status. A field left `None` is not this controller's to say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub conditions: Vec<Said>,
    /// The certificates as last read, the first to expire first (empty: keep the last).
    pub certificates: Option<Vec<CertificateStatus>>,
    pub control_plane: Option<ControlPlaneUsage>,
    pub drift: Option<Vec<ClassDrift>>,
    pub shared_members: Option<Vec<crate::crd::SharedMember>>,
    pub last_backup: Option<LastBackup>,
}

impl Report {
    /// Sets the condition `type_`, replacing what this report said of it before.
    pub fn say(
        &mut self,
        type_: &'static str,
        status: Option<bool>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) {
        let said = Said {
            type_,
            status,
            reason: reason.into(),
            message: message.into(),
        };
        match self.conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) => *c = said,
            None => self.conditions.push(said),
        }
    }

    /// Stops saying anything of condition `type_`.
    pub fn unsay(&mut self, type_: &str) {
        self.conditions.retain(|c| c.type_ != type_);
    }

    pub fn said(&self, type_: &str) -> Option<&Said> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// Every controller's report of one instance, in the table's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reports(Vec<(&'static str, Report)>);

impl Reports {
    pub fn get(&self, controller: &str) -> Option<&Report> {
        self.0
            .iter()
            .find(|(n, _)| *n == controller)
            .map(|(_, r)| r)
    }

    /// Takes `controller`'s report out (empty if it has none), for it to change while it
    /// reads the rest of what the actor observed; [`Reports::put`] puts it back.
    pub fn take(&mut self, controller: &'static str) -> Report {
        match self.0.iter_mut().find(|(n, _)| *n == controller) {
            Some((_, r)) => std::mem::take(r),
            None => Report::default(),
        }
    }

    pub fn put(&mut self, controller: &'static str, report: Report) {
        match self.0.iter_mut().find(|(n, _)| *n == controller) {
            Some((_, r)) => *r = report,
            None => self.0.push((controller, report)),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Report> {
        self.0.iter().map(|(_, r)| r)
    }

    /// A condition said by any controller.
    pub fn said(&self, type_: &str) -> Option<&Said> {
        self.iter().find_map(|r| r.said(type_))
    }
}
