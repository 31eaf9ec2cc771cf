//! Cucumber step definitions over the simulated world. Not built yet: see the behaviour-specs issue.
