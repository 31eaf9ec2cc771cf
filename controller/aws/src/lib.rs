//! EC2 and SQS implementations of the `Ec2` and `Sqs` seams over aws-sdk-ec2 / aws-sdk-sqs.
//!
//! Not built yet: the seams are defined in `karpenter-core`; the AWS adapters land with the
//! lifecycle and interruption issues. Only this crate and `controller/cli` may depend on aws-sdk-*.
