//! The scheduling simulation: which pods fit where, and which NodeClaims to launch.
