//! What the server asked for: `retry-after-ms` and `Retry-After`.
//!
//! OpenAI-style servers send `retry-after-ms` (milliseconds, may be
//! fractional); HTTP's `Retry-After` (RFC 9110 §10.2.3) is either
//! delta-seconds or an HTTP-date. A hint is clamped to a cap so a buggy or
//! hostile `Retry-After: 86400` cannot park a user for a day; a past date means
//! "now".
//!
//! Who turns an HTTP-date into a time is a parameter ([`HttpDates`]): the
//! edge uses core's own parser ([`RustDates`]); the browser SDK hands the
//! text to JavaScript's `Date.parse` ([`HostDates`]), so its wasm carries no
//! date parser (about 1.3 KB gzip of it).

/// The server's requested delay in milliseconds, at most `cap_ms`, from the
/// header values (either may be absent); `retry-after-ms` wins when both
/// parse. `None` when neither parses. HTTP-dates are read by core's parser.
pub fn server_delay_ms(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    now_ms: u64,
    cap_ms: u64,
) -> Option<u64> {
    server_delay_ms_with(retry_after_ms, retry_after, now_ms, cap_ms, &RustDates)
}

/// [`server_delay_ms`], with HTTP-dates read by `dates`.
pub fn server_delay_ms_with(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    now_ms: u64,
    cap_ms: u64,
    dates: &dyn HttpDates,
) -> Option<u64> {
    let asked = retry_after_ms
        .and_then(parse_retry_after_ms)
        .or_else(|| retry_after.and_then(|value| parse_retry_after_with(value, now_ms, dates)))?;
    Some(asked.min(cap_ms))
}

/// A reader of HTTP-dates.
pub trait HttpDates {
    /// An HTTP-date (already trimmed) as milliseconds since the Unix epoch;
    /// `None` when it is not one.
    fn epoch_ms(&self, date: &str) -> Option<u64>;
}

/// Core's own reader of HTTP-dates: [`parse_http_date`].
pub struct RustDates;

impl HttpDates for RustDates {
    fn epoch_ms(&self, date: &str) -> Option<u64> {
        parse_http_date(date)
    }
}

/// HTTP-dates read by the host's date parser (JavaScript's `Date.parse`:
/// milliseconds since the epoch, NaN when unreadable), which reads all three
/// forms. Only text shaped like one of them is handed over, so the host's
/// leniency (`Date.parse("1.5 GMT")` is a day in 2001) stays out: six words
/// ending in `GMT` after a `Sun,` (IMF-fixdate), four likewise (RFC 850), or
/// five (asctime, which names no zone: ` GMT` is appended, since RFC 9110
/// reads it as UTC and `Date.parse` would take local time). A time before
/// 1970 is none, as for [`parse_http_date`]. What the host reads within that
/// shape may differ from core at the edges (V8 reads an RFC 850 year 50–69
/// as 19xx, core as 20xx; it takes `08:49` without seconds).
pub struct HostDates<F: Fn(&str) -> f64>(pub F);

impl<F: Fn(&str) -> f64> HttpDates for HostDates<F> {
    fn epoch_ms(&self, date: &str) -> Option<u64> {
        let (mut words, mut first, mut last) = (0, "", "");
        for word in date.split_ascii_whitespace() {
            if words == 0 {
                first = word;
            }
            words += 1;
            last = word;
        }
        let ms = match words {
            4 | 6 if last == "GMT" && first.ends_with(',') => (self.0)(date),
            5 if last != "GMT" => (self.0)(&[date, " GMT"].concat()),
            _ => return None,
        };
        // NaN (unreadable) is not `>= 0`.
        (ms >= 0.0).then_some(ms as u64)
    }
}

/// Parses `retry-after-ms`: a non-negative decimal number of milliseconds.
pub fn parse_retry_after_ms(value: &str) -> Option<u64> {
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    // The exact ceiling of the decimal, by hand: no float parser (the browser
    // SDK would link one for this alone), saturating like the float did.
    let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return None;
    }
    let ms = whole.bytes().fold(0u64, |ms, d| ms.saturating_mul(10).saturating_add(u64::from(d - b'0')));
    Some(if fraction.bytes().any(|d| d != b'0') { ms.saturating_add(1) } else { ms })
}

/// Parses `Retry-After`: delta-seconds, or an HTTP-date read against `now_ms`
/// (milliseconds since the Unix epoch). A date in the past yields 0.
pub fn parse_retry_after(value: &str, now_ms: u64) -> Option<u64> {
    parse_retry_after_with(value, now_ms, &RustDates)
}

/// [`parse_retry_after`], with an HTTP-date read by `dates`.
pub fn parse_retry_after_with(value: &str, now_ms: u64, dates: &dyn HttpDates) -> Option<u64> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Saturate absurdly long numbers instead of failing: they mean "long"
        // (folded here rather than `str::parse`, which the SDK would link).
        let seconds = value.bytes().fold(0u64, |s, d| s.saturating_mul(10).saturating_add(u64::from(d - b'0')));
        return Some(seconds.saturating_mul(1000));
    }
    let at_ms = dates.epoch_ms(value)?;
    Some(at_ms.saturating_sub(now_ms))
}

/// Parses the three date formats RFC 9110 §5.6.7 requires recipients to
/// accept, to milliseconds since the Unix epoch:
/// `Sun, 06 Nov 1994 08:49:37 GMT` (IMF-fixdate), `Sunday, 06-Nov-94 08:49:37 GMT`
/// (RFC 850) and `Sun Nov  6 08:49:37 1994` (asctime).
pub fn parse_http_date(value: &str) -> Option<u64> {
    let words: Vec<&str> = value.split_ascii_whitespace().collect();
    let (day, month, year, time) = match words.as_slice() {
        [weekday, day, month, year, time, "GMT"] if weekday.ends_with(',') => {
            (day.parse().ok()?, *month, year.parse().ok()?, *time)
        }
        [weekday, date, time, "GMT"] if weekday.ends_with(',') => {
            let mut parts = date.split('-');
            let (day, month, yy) = (parts.next()?, parts.next()?, parts.next()?);
            let yy: i64 = yy.parse().ok()?;
            // RFC 9110: a two-digit year more than 50 years ahead is in the past century.
            let year = if yy < 70 { 2000 + yy } else { 1900 + yy };
            (day.parse().ok()?, month, year, *time)
        }
        [_weekday, month, day, time, year] => (day.parse().ok()?, *month, year.parse().ok()?, *time),
        _ => return None,
    };
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = MONTHS.iter().position(|m| *m == month)? as u32 + 1;
    let mut hms = time.split(':').map(|part| part.parse::<u32>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if hms.next().is_some() || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 || year < 1970 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + i64::from(h * 3600 + m * 60 + s);
    u64::try_from(seconds).ok()?.checked_mul(1000)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = i64::from((month + 9) % 12);
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const NOV_6_1994_08_49_37: u64 = 784_111_777_000;

    #[test]
    fn all_three_http_date_formats() {
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(NOV_6_1994_08_49_37));
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), Some(NOV_6_1994_08_49_37));
        assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), Some(NOV_6_1994_08_49_37));
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse_http_date("Tue, 29 Feb 2028 12:00:00 GMT"), Some(1_835_438_400_000));
    }

    #[test]
    fn malformed_dates_are_none() {
        for bad in [
            "",
            "soon",
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 32 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn delta_seconds_and_dates_relative_to_now() {
        assert_eq!(parse_retry_after("2", 0), Some(2_000));
        assert_eq!(parse_retry_after(" 0 ", 0), Some(0));
        assert_eq!(parse_retry_after("99999999999999999999999", 0), Some(u64::MAX));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", NOV_6_1994_08_49_37 - 1_500), Some(1_500));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", NOV_6_1994_08_49_37 + 9_000), Some(0));
        assert_eq!(parse_retry_after("-1", 0), None);
        assert_eq!(parse_retry_after("1.5", 0), None);
    }

    /// A host that reads dates as core does (NaN when core would not),
    /// asctime with the zone `HostDates` adds to it.
    fn faithful_host(text: &str) -> f64 {
        parse_http_date(text)
            .or_else(|| parse_http_date(text.strip_suffix(" GMT")?).filter(|_| !text.contains(',')))
            .map_or(f64::NAN, |ms| ms as f64)
    }

    #[test]
    fn a_host_parser_is_handed_the_three_forms_only() {
        let seen = std::cell::RefCell::new(Vec::new());
        let host = HostDates(|text: &str| {
            seen.borrow_mut().push(text.to_owned());
            faithful_host(text)
        });
        assert_eq!(host.epoch_ms("Sun, 06 Nov 1994 08:49:37 GMT"), Some(NOV_6_1994_08_49_37));
        assert_eq!(host.epoch_ms("Sunday, 06-Nov-94 08:49:37 GMT"), Some(NOV_6_1994_08_49_37));
        // asctime names no zone: the host is told it is GMT.
        assert_eq!(host.epoch_ms("Sun Nov  6 08:49:37 1994"), Some(NOV_6_1994_08_49_37));
        assert_eq!(seen.borrow().last().map(String::as_str), Some("Sun Nov  6 08:49:37 1994 GMT"));
        seen.borrow_mut().clear();
        for not_shaped in [
            "",
            "soon",
            "1.5",
            "-1",
            "2 GMT",
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT extra",
            "Sun Nov 6 08:49:37 GMT",
        ] {
            assert_eq!(host.epoch_ms(not_shaped), None, "{not_shaped:?}");
        }
        assert!(seen.borrow().is_empty(), "handed over: {:?}", seen.borrow());
    }

    #[test]
    fn a_host_date_it_cannot_read_or_before_1970_is_none() {
        assert_eq!(HostDates(|_: &str| f64::NAN).epoch_ms("Sun, 06 Foo 1994 08:49:37 GMT"), None);
        assert_eq!(HostDates(|_: &str| -1000.0).epoch_ms("Wed, 31 Dec 1969 23:59:59 GMT"), None);
        assert_eq!(HostDates(|_: &str| 0.0).epoch_ms("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
    }

    #[test]
    fn a_faithful_host_reads_retry_after_as_core_does() {
        let host = HostDates(faithful_host);
        for value in [
            "2",
            " 0 ",
            "99999999999999999999999",
            "-1",
            "1.5",
            "soon",
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 32 Nov 1994 08:49:37 GMT",
        ] {
            for now in [0, NOV_6_1994_08_49_37 - 1_500, NOV_6_1994_08_49_37 + 9_000] {
                assert_eq!(
                    parse_retry_after_with(value, now, &host),
                    parse_retry_after(value, now),
                    "{value:?} at {now}"
                );
            }
        }
        assert_eq!(server_delay_ms_with(None, Some("Sun, 06 Nov 1994 08:49:37 GMT"), 0, 60_000, &host), Some(60_000));
    }

    #[test]
    fn retry_after_ms_accepts_fractions_and_rejects_junk() {
        assert_eq!(parse_retry_after_ms("250"), Some(250));
        assert_eq!(parse_retry_after_ms("0.2"), Some(1));
        assert_eq!(parse_retry_after_ms("-5"), None);
        assert_eq!(parse_retry_after_ms("1e3"), None);
        assert_eq!(parse_retry_after_ms(""), None);
        assert_eq!(parse_retry_after_ms("1."), Some(1));
        assert_eq!(parse_retry_after_ms(".5"), Some(1));
        assert_eq!(parse_retry_after_ms("."), None);
        assert_eq!(parse_retry_after_ms("1.2.3"), None);
        assert_eq!(parse_retry_after_ms("99999999999999999999999"), Some(u64::MAX));
    }

    #[test]
    fn ms_header_wins_and_everything_is_clamped() {
        assert_eq!(server_delay_ms(Some("300"), Some("5"), 0, 60_000), Some(300));
        assert_eq!(server_delay_ms(Some("junk"), Some("5"), 0, 60_000), Some(5_000));
        assert_eq!(server_delay_ms(None, Some("86400"), 0, 60_000), Some(60_000));
        assert_eq!(server_delay_ms(None, None, 0, 60_000), None);
    }
}
