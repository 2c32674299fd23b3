//! Time as the specs spell it: five-field cron expressions read in a time zone
//! (hibernation schedules) and weekly maintenance windows (rollouts). Pure, so the CRD
//! types validate with them and every daylight-saving case is tested without a fleet.

pub mod cron;
pub mod window;
