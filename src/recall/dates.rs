//! The calendar days a text names ("May 4th", "the 4th of July", "8 May, 2023",
//! "2023-05-04", "5月4日", "2023年5月4号"), English and Chinese, read up to
//! [`MAX_DAY_BYTES`].
//!
//! Recall reads them twice: in a question ("what did we talk about on June 28?" names a day,
//! not a topic, so its words match nothing said that day) and in the session date or
//! timestamp a message carries, so the messages said on a named day can be brought back.
//! A day without a year matches that day in any year.

use std::sync::LazyLock;

use fancy_regex::{Captures, Regex};

use super::head;

/// How much of a text is read.
pub const MAX_DAY_BYTES: usize = 4096;

/// A calendar day; the year when the text gives one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Day {
    pub year: Option<u16>,
    pub month: u8,
    pub day: u8,
}

impl Day {
    /// Whether `self` and `other` can be the same day: month and day equal, and the years
    /// equal where both are known.
    pub fn matches(&self, other: &Day) -> bool {
        self.month == other.month
            && self.day == other.day
            && (self.year.is_none() || other.year.is_none() || self.year == other.year)
    }
}

const MONTH: &str = concat!(
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?",
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
);

static DAYS: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = [
        // 2023-05-04, 2023/5/4, 2023.05.04 (and an ISO timestamp's date)
        r"(?<!\d)(?<iy>\d{4})[-/.](?<im>\d{1,2})[-/.](?<id>\d{1,2})(?!\d)".to_string(),
        // 5月4日, 5月4号, 2023年5月4日
        r"(?:(?<cy>\d{4})\s*年\s*)?(?<!\d)(?<cm>\d{1,2})\s*月\s*(?<cd>\d{1,2})\s*[日号號]".to_string(),
        // May 4, May 4th, May 4, 2023 (a number must follow: "I may" is not a month)
        format!(r"(?i:\b(?<m1>{MONTH})\.?\s+(?<d1>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?<y1>\d{{4}})\b)?)"),
        // 4 May, 4th of May, 8 May, 2023
        format!(r"(?i:\b(?<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?<m2>{MONTH})\b\.?(?:,?\s+(?<y2>\d{{4}})\b)?)"),
    ]
    .join("|");
    Regex::new(&pattern).expect("the days pattern compiles")
});

fn number<T: std::str::FromStr>(caps: &Captures<'_, str>, name: &str) -> Option<T> {
    caps.name(name).and_then(|m| m.as_str().parse().ok())
}

fn month_named(name: &str) -> Option<u8> {
    let head: String = name.chars().take(3).flat_map(char::to_lowercase).collect();
    let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    months.iter().position(|&m| m == head).map(|k| k as u8 + 1)
}

fn day_of(caps: &Captures<'_, str>) -> Option<Day> {
    let (year, month, day) = if caps.name("iy").is_some() {
        (number(caps, "iy"), number(caps, "im")?, number(caps, "id")?)
    } else if caps.name("cm").is_some() {
        (number(caps, "cy"), number(caps, "cm")?, number(caps, "cd")?)
    } else if let Some(m) = caps.name("m1") {
        (number(caps, "y1"), month_named(m.as_str())?, number(caps, "d1")?)
    } else {
        (number(caps, "y2"), month_named(caps.name("m2")?.as_str())?, number(caps, "d2")?)
    };
    ((1..=12).contains(&month) && (1..=31).contains(&day)).then_some(Day { year, month, day })
}

/// The days `text` names, in order, each once.
pub fn named_days(text: &str) -> Vec<Day> {
    let mut out: Vec<Day> = Vec::new();
    for caps in DAYS.captures_iter(head(text, MAX_DAY_BYTES)).flatten() {
        if let Some(day) = day_of(&caps) {
            if !out.contains(&day) {
                out.push(day);
            }
        }
    }
    out
}

/// `text` with the days it names blanked out (each character of a day made a space), so
/// that a question's lexical search does not match the numbers and month of the day it names
/// ("what did I say on May 7th?" is not about a 7).
/// Only the part [`named_days`] reads is blanked.
pub fn without_days(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for caps in DAYS.captures_iter(head(text, MAX_DAY_BYTES)).flatten() {
        let whole = caps.get(0).expect("a match has a whole");
        if day_of(&caps).is_none() {
            continue;
        }
        out.push_str(&text[at..whole.start()]);
        out.extend(std::iter::repeat_n(' ', whole.as_str().chars().count()));
        at = whole.end();
    }
    out.push_str(&text[at..]);
    out
}

/// The day a session date or timestamp falls on: the first it names. Read once per stamp and
/// remembered by the caller (a history states the same few stamps on every call).
pub fn stamp_day(stamp: &str) -> Option<Day> {
    named_days(stamp).first().copied()
}

/// For each of `stamp_days` (the days of the stamps messages carry, [`stamp_day`]), whether it
/// is a day `query` names.
pub fn on_named_days(query: &str, stamp_days: &[Option<Day>]) -> Vec<bool> {
    let days = named_days(query);
    stamp_days.iter().map(|own| own.is_some_and(|own| days.iter().any(|d| d.matches(&own)))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(year: Option<u16>, month: u8, day: u8) -> Day {
        Day { year, month, day }
    }

    #[test]
    fn english_days_with_and_without_a_year() {
        assert_eq!(named_days("On May 4th, I shared some problems."), [day(None, 5, 4)]);
        assert_eq!(named_days("What did we talk about on June 28?"), [day(None, 6, 28)]);
        assert_eq!(named_days("DATE: 1:56 pm on 8 May, 2023"), [day(Some(2023), 5, 8)]);
        assert_eq!(named_days("on Sept. 7 2024 and the 4th of July"), [day(Some(2024), 9, 7), day(None, 7, 4)]);
        assert_eq!(named_days("AUGUST 18, we talked"), [day(None, 8, 18)]);
    }

    #[test]
    fn numeric_and_chinese_days() {
        assert_eq!(named_days("2023-05-04T10:00:00Z"), [day(Some(2023), 5, 4)]);
        assert_eq!(named_days("[2023/5/4 16:13]"), [day(Some(2023), 5, 4)]);
        assert_eq!(named_days("在5月3日，你给我推荐了哪些书？"), [day(None, 5, 3)]);
        assert_eq!(named_days("4月30号的天气如何？"), [day(None, 4, 30)]);
        assert_eq!(named_days("2023年5月4日 我们聊了什么"), [day(Some(2023), 5, 4)]);
    }

    #[test]
    fn words_and_numbers_that_are_not_days() {
        for text in [
            "I may 3D print it",
            "May 40 people come?",
            "2023-13-01",
            "version 12.5.4 is out",
            "I may go",
            "15月3日",
            "march on",
            "",
        ] {
            assert_eq!(named_days(text), [], "{text}");
        }
    }

    #[test]
    fn each_day_once_and_the_text_read_up_to_its_limit() {
        assert_eq!(named_days("May 4 and 4 May and May 4th"), [day(None, 5, 4)]);
        let long = format!("{}May 4", "x ".repeat(MAX_DAY_BYTES));
        assert_eq!(named_days(&long), []);
    }

    #[test]
    fn stamps_on_the_days_a_question_names() {
        let stamps = ["2023-05-04", "1:56 pm on 4 May, 2022", "2023-05-05T09:00", "no date", "5月4日"];
        let days: Vec<Option<Day>> = stamps.iter().map(|s| stamp_day(s)).collect();
        assert_eq!(days[1], Some(day(Some(2022), 5, 4)));
        assert_eq!(days[3], None);
        assert_eq!(on_named_days("What did I say on May 4th?", &days), [true, true, false, false, true]);
        assert_eq!(on_named_days("What did I say on 4 May 2023?", &days), [true, false, false, false, true]);
        assert_eq!(on_named_days("What did I say?", &days), [false; 5]);
    }

    #[test]
    fn the_days_a_question_names_are_blanked_out_of_its_words() {
        assert_eq!(without_days("What did I say on May 7th?"), format!("What did I say on {}?", " ".repeat(7)));
        assert_eq!(without_days("5月7日我说了什么"), format!("{}我说了什么", " ".repeat(4)));
        assert_eq!(without_days("May 40 people come?"), "May 40 people come?");
        assert_eq!(without_days("no day here"), "no day here");
        let long = format!("May 4 {}May 5", "x ".repeat(MAX_DAY_BYTES));
        assert_eq!(without_days(&long), format!("      {}May 5", "x ".repeat(MAX_DAY_BYTES)));
    }

    #[test]
    fn a_day_without_a_year_matches_any_year() {
        assert!(day(None, 5, 4).matches(&day(Some(2023), 5, 4)));
        assert!(day(Some(2023), 5, 4).matches(&day(Some(2023), 5, 4)));
        assert!(!day(Some(2022), 5, 4).matches(&day(Some(2023), 5, 4)));
        assert!(!day(None, 5, 4).matches(&day(None, 4, 5)));
    }
}
