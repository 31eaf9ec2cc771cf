//! NodePools: the controllers that write a NodePool's status. [`counter`]: how many nodes and how
//! much capacity each NodePool has (upstream's `nodepool/counter`; limits are enforced by
//! provisioning, which reads the same claims); [`readiness`]: its status conditions (upstream's
//! `nodepool/{validation,readiness,registrationhealth}`).

pub mod counter;
pub mod readiness;

pub use counter::Counter;
pub use readiness::Readiness;
