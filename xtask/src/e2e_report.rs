//! What `cargo xtask e2e` says about the suite besides pass/fail: every case's time against
//! its bound (so a margin shrinking on a slower machine shows before it fails), and a digest of
//! the failed cases that ends the run's output.
//!
//! Why a digest: a failed case prints its steps, objects, events and the controllers' last log
//! lines, and the harness then prints every process's log. A reader who sees only the end of a
//! long run (a CI summary) would see logs and not which case failed at which step.

/// Longest line of the digest, in characters (an object's summary can run to kilobytes).
const DIGEST_LINE_CHARS_MAX: usize = 300;
/// Steps of a failed case the digest keeps (its last ones: the step that never finished).
const DIGEST_STEPS_MAX: usize = 6;
/// Events of a failed case the digest keeps (its last ones).
const DIGEST_EVENTS_MAX: usize = 8;

/// One line of the timings file the cases append to (`E2E_TIMINGS`).
#[derive(Debug, PartialEq)]
pub struct Timing {
    pub case: String,
    pub seconds: f64,
    pub bound_seconds: f64,
    pub passed: bool,
}

/// The timings file's lines (malformed ones skipped), smallest margin (bound minus time) first.
pub fn timings(text: &str) -> Vec<Timing> {
    let mut rows: Vec<Timing> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let case = fields.next()?.to_string();
            let seconds = fields.next()?.parse().ok()?;
            let bound_seconds = fields.next()?.parse().ok()?;
            let passed = fields.next()? == "passed";
            Some(Timing {
                case,
                seconds,
                bound_seconds,
                passed,
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        (a.bound_seconds - a.seconds)
            .total_cmp(&(b.bound_seconds - b.seconds))
            .then_with(|| a.case.cmp(&b.case))
    });
    rows
}

/// The timings as report lines: `case: 152 s of 270 s (56%)`, failed cases marked.
pub fn margin_lines(rows: &[Timing]) -> Vec<String> {
    rows.iter()
        .map(|t| {
            format!(
                "{}: {:.0} s of {:.0} s ({:.0}%){}",
                t.case,
                t.seconds,
                t.bound_seconds,
                100.0 * t.seconds / t.bound_seconds.max(1.0),
                if t.passed { "" } else { ", FAILED" }
            )
        })
        .collect()
}

/// Which section of a failure report a line is in.
#[derive(Clone, Copy, PartialEq)]
enum Section {
    Outside,
    Steps,
    Objects,
    Events,
}

/// One failed case's report as the digest keeps it.
#[derive(Default)]
struct Report<'a> {
    headline: &'a str,
    steps: Vec<&'a str>,
    objects: Vec<&'a str>,
    events: Vec<&'a str>,
}

impl Report<'_> {
    fn lines(&self) -> impl Iterator<Item = String> + '_ {
        let steps = &self.steps[self.steps.len().saturating_sub(DIGEST_STEPS_MAX)..];
        let events = &self.events[self.events.len().saturating_sub(DIGEST_EVENTS_MAX)..];
        std::iter::once(cut(self.headline))
            .chain(steps.iter().map(|l| cut(&format!("  step {l}"))))
            .chain(self.objects.iter().map(|l| cut(&format!("  object {l}"))))
            .chain(events.iter().map(|l| cut(&format!("  event {l}"))))
    }
}

/// The failed cases' reports from the suite's output, cut down to each case's headline, its
/// last steps, its objects and its last events (controller logs left out), lines shortened.
pub fn failure_digest(suite_out: &str) -> Vec<String> {
    let mut reports: Vec<Report> = Vec::new();
    let mut section = Section::Outside;
    for line in suite_out.lines() {
        if line.starts_with("==== e2e ") {
            reports.push(Report {
                headline: line,
                ..Report::default()
            });
            section = Section::Steps;
            continue;
        }
        let Some(report) = reports.last_mut() else {
            continue;
        };
        section = match (section, line) {
            (Section::Outside, _) => Section::Outside,
            (_, "---- steps") => Section::Steps,
            (_, "---- objects") => Section::Objects,
            (_, "---- events about them") => Section::Events,
            (_, l) if l.starts_with("---- ") => Section::Outside,
            (Section::Steps, l) => {
                report.steps.push(l);
                Section::Steps
            }
            (Section::Objects, l) => {
                report.objects.push(l);
                Section::Objects
            }
            (Section::Events, l) => {
                report.events.push(l);
                Section::Events
            }
        };
    }
    reports.iter().flat_map(Report::lines).collect()
}

/// `line` cut to [`DIGEST_LINE_CHARS_MAX`] characters, marked when cut.
fn cut(line: &str) -> String {
    match line.char_indices().nth(DIGEST_LINE_CHARS_MAX) {
        Some((at, _)) => format!("{} […]", &line[..at]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_come_smallest_margin_first_and_say_which_failed() {
        let rows =
            timings("a\t100.0\t300\tpassed\nb\t240.5\t240\tfailed\nbad line\nc\t10\t60\tpassed\n");
        assert_eq!(
            margin_lines(&rows),
            [
                "b: 240 s of 240 s (100%), FAILED",
                "c: 10 s of 60 s (17%)",
                "a: 100 s of 300 s (33%)",
            ]
        );
    }

    #[test]
    fn the_digest_keeps_each_failed_cases_headline_last_steps_objects_and_events_but_no_logs() {
        let mut out = String::from("running 2 tests\n---- drift stdout ----\n");
        out.push_str("==== e2e drift FAILED: did not finish within 270 s\n---- steps\n");
        for i in 0..10 {
            out.push_str(&format!("[{i}.0 s] step {i}\n"));
        }
        out.push_str("---- objects\nNodeClaim d-1: {}\n---- events about them\nNormal NodeClaim/d-1: Launched x\n");
        out.push_str("---- /logs/controller-a.out (last 2 lines)\n{\"level\":\"info\"}\n{\"level\":\"warn\"}\n");
        out.push_str(&format!(
            "==== e2e scale FAILED: {}\n---- steps\n[1.0 s] only\n",
            "x".repeat(400)
        ));
        let digest = failure_digest(&out);
        assert_eq!(
            digest[0],
            "==== e2e drift FAILED: did not finish within 270 s"
        );
        assert_eq!(digest[1], "  step [4.0 s] step 4");
        assert_eq!(digest[6], "  step [9.0 s] step 9");
        assert_eq!(digest[7], "  object NodeClaim d-1: {}");
        assert_eq!(digest[8], "  event Normal NodeClaim/d-1: Launched x");
        assert!(digest[9].starts_with("==== e2e scale FAILED: xxx"));
        assert!(digest[9].ends_with(" […]"));
        assert_eq!(digest[9].chars().count(), DIGEST_LINE_CHARS_MAX + 4);
        assert_eq!(digest[10], "  step [1.0 s] only");
        assert_eq!(digest.len(), 11);
        assert!(!digest.iter().any(|l| l.contains("level")));
    }
}
