//! The InstanceActor: owns everything of one Karmada instance and nothing of another.

pub mod stats;
