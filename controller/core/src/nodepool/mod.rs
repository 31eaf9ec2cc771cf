//! NodePools: the controllers that write a NodePool's status. Today [`counter`]: how many nodes
//! and how much capacity each NodePool has (upstream's `nodepool/counter`). Limits are enforced
//! by provisioning, which reads the same claims.

pub mod counter;

pub use counter::Counter;
