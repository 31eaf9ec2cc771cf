//! AWS timestamps into the seams' `jiff::Timestamp`s.

use aws_smithy_types::DateTime;
use jiff::Timestamp;

/// An SDK timestamp; `UNIX_EPOCH` if out of jiff's range (years outside -9999..=9999).
pub fn timestamp(time: &DateTime) -> Timestamp {
    Timestamp::new(time.secs(), time.subsec_nanos() as i32).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// An RFC 3339 string (`DescribeImages` reports `CreationDate` as text); `UNIX_EPOCH` when
/// absent or unreadable, which sorts such images last.
pub fn parse_timestamp(text: Option<&str>) -> Timestamp {
    text.and_then(|t| t.parse().ok())
        .unwrap_or(Timestamp::UNIX_EPOCH)
}
