//! The `Ec2` and `Sqs` seams of `karpenter-core` over aws-sdk-rust (EC2, SQS, and the SSM, IAM,
//! EKS and pricing calls the seams grow), and the live instance catalog (types, offerings and
//! prices from the region).
//!
//! Empty today: issue 18 ("The AWS adapter") builds it. Until then the controller runs only against
//! `fakecloud`. Only this crate and `controller/cli` may depend on aws-sdk-* (they take 8 GB and
//! minutes to build).
