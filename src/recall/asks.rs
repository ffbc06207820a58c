//! What a user message asks of recall: whether it asks something at all (a question, a request
//! such as "tell me" or "list", a reference to an earlier time), and whether it asks to go
//! over the conversation as a whole (a recap). English and Chinese; a message is read up to
//! [`MAX_ASK_BYTES`].
//!
//! The manager chooses a recalled block only for a message that asks: a block for every
//! remark moved on most turns of a chatty conversation and broke the provider's cached prefix.
//! A recap request names nothing to look for, so its block is the newest evicted exchanges.

use std::sync::LazyLock;

use fancy_regex::Regex;

use super::head;

/// How much of a message is read.
pub const MAX_ASK_BYTES: usize = 4096;

static ASKS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"[?？]",
        r"|(?i:^\W*(?:who|whom|whose|what|when|where|which|why|how|do|does|did|is|are|was|were",
        r"|can|could|would|will|should|have|has|had)\b)",
        r"|(?i:^\W*(?:please\s+)?(?:tell|list|name|give|show|describe|explain|find|repeat)\b)",
        r"|(?i:\b(?:remind|remember|recall|recap|summari[sz]e|tell me|what was|what were",
        r"|you said|i (?:told|said|mentioned)|recently|lately|earlier|last time|the other day",
        r"|days ago|previously)\b)",
        r"|吗|什么|哪|谁|几[个点天次]|多少|怎么|为什么|是否|有没有|记得|提醒|告诉我|回顾|总结",
        r"|说过|提到过|最近|上次|之前|以前|前几天|那天|请问|帮我(?:想|回忆|找|查)",
    ))
    .expect("the asks pattern compiles")
});

static RECAPS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i:\b(?:recap|summari[sz]e|summary of|sum up|go over|run through",
        r"|remind me of (?:everything|what)",
        r"|what (?:have|did) (?:i|we) (?:tell|told|say|said|talk|talked|discuss|discussed",
        r"|mention|mentioned)",
        r"|everything (?:i|we) (?:told|said|talked|discussed|mentioned))\b)",
        r"|回顾|总结|概括|复述|梳理",
        r"|我(?:之前|以前|都)?(?:跟你|和你|对你|给你)?(?:说|讲|提|告诉你?)过",
    ))
    .expect("the recap pattern compiles")
});

/// Whether `text` (a user message) asks something.
pub fn asks(text: &str) -> bool {
    ASKS.is_match(head(text, MAX_ASK_BYTES)).unwrap_or(true)
}

/// Whether `text` (a user message) asks to go over the conversation as a whole.
pub fn recaps(text: &str) -> bool {
    RECAPS.is_match(head(text, MAX_ASK_BYTES)).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_requests_and_references_to_the_past_ask() {
        for text in [
            "What did we name the parrot",
            "who is the governor",
            "  Did I tell you about Rome",
            "Remind me of the booking code.",
            "Recently I've been exploring different workout methods.",
            "I told you about my sister's wedding",
            "Is it raining",
            "你还记得我养的鹦鹉叫什么",
            "上次说的那家餐厅",
            "我想知道你对这本书的看法吗",
            "ok?",
            "List the places we planned to visit.",
            "Please name the restaurant from our trip.",
            "请问我的航班号",
        ] {
            assert!(asks(text), "{text:?}");
        }
    }

    #[test]
    fn remarks_do_not_ask() {
        for text in [
            "We painted the living room teal.",
            "Thanks, that helps a lot!",
            "Howdy partner, great weather.",
            "This island is beautiful.",
            "我今天去公园散步了。",
            "",
        ] {
            assert!(!asks(text), "{text:?}");
        }
    }

    #[test]
    fn recap_requests() {
        for text in [
            "Before we wrap up, can you recap the important things I have told you?",
            "What have I told you so far?",
            "Could you summarize our conversation?",
            "Remind me of everything we planned.",
            "最后，能帮我回顾一下我之前告诉过你的重要事情吗？",
            "我跟你说过哪些事？",
        ] {
            assert!(recaps(text), "{text:?}");
        }
        for text in [
            "What is the booking code for trip number 5?",
            "你还记得我养的鹦鹉叫什么吗？",
            "Remind me of the booking code.",
            "Thanks!",
        ] {
            assert!(!recaps(text), "{text:?}");
        }
    }

    #[test]
    fn a_long_message_is_read_by_its_head() {
        let long = format!("{}?", "word ".repeat(2000));
        assert!(!asks(&long));
        let ask = format!("What? {}", "word ".repeat(200_000));
        assert!(asks(&ask));
    }
}
