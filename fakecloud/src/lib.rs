//! fakecloud: an in-memory EC2 and SQS that implement the `Ec2` and `Sqs` seams, seeded and
//! deterministic, with fault knobs. Not built yet: see the fakecloud issue.
