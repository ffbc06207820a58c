//! The one message model: what a chat message is to windowfit, whichever layer reads it.
//!
//! A [`Message`] is what counting needs (role, name, parts, tool calls, result ids); a
//! [`MessageInfo`] is what selection needs (role, tokens, call and result ids). OpenAI
//! `tool_calls` / `tool_call_id`, Anthropic `tool_use` / `tool_result` blocks and the legacy
//! `function_call` all reduce to these two, so pairing is decided once, here and in
//! `fit`, never per format.
//!
//! Pairing rule (OpenAI's, applied to every format): the results of a call message are the
//! result messages that immediately follow it; each must answer an open id of that call.
//! [`CallTable`] tracks one call block's ids; `fit`'s analysis turns blocks into units.

use smallvec::SmallVec;
use std::collections::HashMap;

/// The roles a chat message may have; anything else is rejected by the readers.
pub const ROLES: [&str; 6] = ["system", "developer", "user", "assistant", "tool", "function"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageDetail {
    Low,
    High,
    Auto,
}

/// One content part, as counted.
#[derive(Clone, Debug)]
pub enum Part<S> {
    Text(S),
    Image {
        detail: ImageDetail,
        width: Option<u32>,
        height: Option<u32>,
    },
    /// Audio, files: a documented constant.
    Opaque,
}

#[derive(Clone, Debug)]
pub struct ToolCall<S> {
    pub id: S,
    pub name: S,
    /// The arguments as JSON text (Anthropic `input` objects are serialized by the caller).
    pub arguments: S,
}

/// A chat message reduced to what counting and pairing need. `S` is `String` in Rust tests
/// and a borrowed Python string in the bindings.
#[derive(Clone, Debug)]
pub struct Message<S> {
    pub role: S,
    pub name: Option<S>,
    pub parts: Vec<Part<S>>,
    /// OpenAI `tool_calls`, or Anthropic `tool_use` blocks.
    pub tool_calls: Vec<ToolCall<S>>,
    /// OpenAI `tool_call_id`, or the `tool_use_id`s of Anthropic `tool_result` blocks.
    pub result_ids: Vec<S>,
    /// The `parts` read from inside `tool_result` blocks, as index ranges: the rest is the
    /// message's own content, kept when its results answer nothing.
    pub result_parts: Vec<std::ops::Range<usize>>,
    /// The message has a `tool_calls` list with nothing in it (providers reject it): sent
    /// without the list.
    pub empty_calls: bool,
}

impl<S: AsRef<str>> Message<S> {
    /// Bytes of text in the message (to decide whether counting it is worth a thread).
    pub(crate) fn text_len(&self) -> usize {
        let parts: usize = self.parts.iter().map(|p| if let Part::Text(t) = p { t.as_ref().len() } else { 0 }).sum();
        let calls: usize = self.tool_calls.iter().map(|c| c.arguments.as_ref().len()).sum();
        parts + calls
    }

    /// Its text parts, in order (results' text included).
    pub fn text_parts(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| if let Part::Text(t) = p { Some(t.as_ref()) } else { None })
    }

    /// Its text: the non-empty text parts, one per line (what `windowfit.messages.content_text`
    /// gives of its content).
    pub fn content_text(&self) -> String {
        self.text_parts().filter(|t| !t.is_empty()).collect::<Vec<_>>().join("\n")
    }

    /// True when the message says something besides its tool calls.
    pub fn has_content(&self) -> bool {
        self.parts.iter().any(|p| match p {
            Part::Text(t) => !t.as_ref().is_empty(),
            _ => true,
        })
    }

    /// What selection needs to know about this message, given its token count.
    pub fn info(&self, tokens: u64) -> MessageInfo {
        MessageInfo {
            role: Role::parse(self.role.as_ref()),
            tokens,
            call_ids: self.tool_calls.iter().map(|c| c.id.as_ref()).collect(),
            result_ids: self.result_ids.iter().map(|r| r.as_ref()).collect(),
            has_content: self.has_content(),
            own_content: !self.result_parts.is_empty() && self.without_results().has_content(),
            empty_calls: self.empty_calls,
        }
    }

    /// The message without its `tool_result` blocks and their ids: what is left to send when
    /// none of its results answers a call. Only messages whose results came in blocks have
    /// own content to keep (an OpenAI tool message's content is its result).
    pub fn without_results(&self) -> Message<&str> {
        let in_result = |k: usize| self.result_parts.iter().any(|r| r.contains(&k));
        let parts = self
            .parts
            .iter()
            .enumerate()
            .filter(|(k, _)| !in_result(*k))
            .map(|(_, p)| match p {
                Part::Text(t) => Part::Text(t.as_ref()),
                Part::Image { detail, width, height } => {
                    Part::Image { detail: *detail, width: *width, height: *height }
                }
                Part::Opaque => Part::Opaque,
            })
            .collect();
        Message {
            role: self.role.as_ref(),
            name: self.name.as_ref().map(AsRef::as_ref),
            parts,
            tool_calls: Vec::new(),
            result_ids: Vec::new(),
            result_parts: Vec::new(),
            empty_calls: false,
        }
    }
}

/// A message's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
    Tool,
    Function,
    #[default]
    Other,
}

impl Role {
    /// The role named `name` (`Other` for a name outside [`ROLES`]).
    pub fn parse(name: &str) -> Role {
        match name {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "function" => Role::Function,
            _ => Role::Other,
        }
    }

    /// System and developer messages are instructions: pinned when `keep_system`.
    pub fn is_system(self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

/// What fitting needs to know about one message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MessageInfo {
    pub role: Role,
    /// This message's tokens (the counter's `count_message`).
    pub tokens: u64,
    /// Tool call ids this message makes: OpenAI assistant `tool_calls[*].id`, or Anthropic
    /// `tool_use` block ids.
    pub call_ids: Ids,
    /// Ids this message answers: an OpenAI tool message's `tool_call_id` (one), or the
    /// `tool_use_id`s of an Anthropic-style user message's `tool_result` blocks (one or more).
    pub result_ids: Ids,
    /// The message has content besides its tool calls (text, images...); `Default` gives
    /// false. A call message stripped of all its calls is only kept if this is true: an empty
    /// assistant message is an invalid request.
    pub has_content: bool,
    /// Content besides the `tool_result` blocks it carries (a user's new text next to them):
    /// when those results answer no call, the blocks are removed and this is still sent.
    pub own_content: bool,
    /// An empty `tool_calls` list, left out of the message when it is sent.
    pub empty_calls: bool,
}

impl MessageInfo {
    /// A user turn is a user message that is not carrying tool results.
    pub fn is_user_turn(&self) -> bool {
        self.role == Role::User && self.result_ids.is_empty()
    }
}

/// Tool-call ids of one message (the calls it makes, or those it answers), in order. They
/// share one buffer, each after its byte length (LEB128): one id of up to 31 bytes (OpenAI's
/// and Anthropic's are 29 and 30) is kept inline, so a warm read of a long history allocates
/// nothing for its ids, and more or longer ones take one allocation, not one per id.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Ids {
    buf: SmallVec<[u8; 32]>,
}

impl Ids {
    /// No ids.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append `id`.
    pub fn push(&mut self, id: &str) {
        let mut n = id.len();
        while n >= 0x80 {
            self.buf.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        self.buf.push(n as u8);
        self.buf.extend_from_slice(id.as_bytes());
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn iter(&self) -> IdsIter<'_> {
        IdsIter { rest: &self.buf }
    }

    pub fn contains(&self, id: &str) -> bool {
        self.iter().any(|x| x == id)
    }

    /// The ids as owned strings (for results handed to callers).
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_string).collect()
    }
}

impl<S: AsRef<str>> FromIterator<S> for Ids {
    fn from_iter<I: IntoIterator<Item = S>>(ids: I) -> Self {
        let mut out = Ids::new();
        for id in ids {
            out.push(id.as_ref());
        }
        out
    }
}

impl<S: AsRef<str>> From<Vec<S>> for Ids {
    fn from(ids: Vec<S>) -> Self {
        ids.iter().collect()
    }
}

impl std::fmt::Debug for Ids {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a Ids {
    type Item = &'a str;
    type IntoIter = IdsIter<'a>;
    fn into_iter(self) -> IdsIter<'a> {
        self.iter()
    }
}

/// The ids of an [`Ids`], in order.
#[derive(Clone)]
pub struct IdsIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for IdsIter<'a> {
    type Item = &'a str;

    #[inline]
    fn next(&mut self) -> Option<&'a str> {
        let (mut n, mut shift, mut at) = (0usize, 0u32, 0usize);
        loop {
            let b = *self.rest.get(at)?;
            at += 1;
            n |= usize::from(b & 0x7f) << shift;
            if b < 0x80 {
                break;
            }
            shift += 7;
        }
        let (id, rest) = self.rest[at..].split_at(n);
        self.rest = rest;
        // SAFETY: the buffer holds only whole `&str`s written by `push`, each after its length.
        Some(unsafe { std::str::from_utf8_unchecked(id) })
    }
}

/// State of one distinct id of the call block being paired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallState {
    Open,
    /// The id occurs twice in the call: no result can say which entry it answers.
    Duplicate,
    Answered,
}

/// The distinct call ids of one call message, in first-occurrence order. Blocks are usually
/// a handful of ids, so lookups scan; large ones get a hash index to stay linear.
#[derive(Default)]
pub(crate) struct CallTable<'a> {
    ids: Vec<(&'a str, CallState)>,
    index: HashMap<&'a str, usize>,
    indexed: bool,
}

impl<'a> CallTable<'a> {
    const SCAN_MAX: usize = 8;

    pub(crate) fn reset(&mut self, calls: &'a Ids) {
        self.ids.clear();
        let n = calls.len();
        self.indexed = n > Self::SCAN_MAX;
        if self.indexed {
            // Clearing costs the capacity: don't let one huge block tax every later one.
            if self.index.capacity() > 4 * n {
                self.index = HashMap::with_capacity(n);
            } else {
                self.index.clear();
            }
        }
        for id in calls {
            match self.find(id) {
                Some(k) => {
                    if let Some(e) = self.ids.get_mut(k) {
                        e.1 = CallState::Duplicate;
                    }
                }
                None => {
                    if self.indexed {
                        self.index.insert(id, self.ids.len());
                    }
                    self.ids.push((id, CallState::Open));
                }
            }
        }
    }

    fn find(&self, id: &str) -> Option<usize> {
        if self.indexed {
            self.index.get(id).copied()
        } else {
            self.ids.iter().position(|(k, _)| *k == id)
        }
    }

    /// Marks `results` answered if every one is an open id of the call (so not a duplicate,
    /// not already answered, not repeated in `results`); otherwise changes nothing.
    pub(crate) fn answer(&mut self, results: &Ids) -> bool {
        for (n, id) in results.iter().enumerate() {
            let entry = self.find(id).and_then(|k| self.ids.get_mut(k));
            match entry {
                Some(e) if e.1 == CallState::Open => e.1 = CallState::Answered,
                _ => {
                    // Undo this message's marks: they were all open before it.
                    for id in results.iter().take(n) {
                        if let Some(e) = self.find(id).and_then(|k| self.ids.get_mut(k)) {
                            e.1 = CallState::Open;
                        }
                    }
                    return false;
                }
            }
        }
        true
    }

    /// Distinct ids left without a result (duplicates included), in call order.
    pub(crate) fn open(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.ids.iter().filter(|(_, s)| *s != CallState::Answered).map(|(id, _)| *id)
    }

    pub(crate) fn answered(&self) -> usize {
        self.ids.iter().filter(|(_, s)| *s == CallState::Answered).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(ids: &[&str]) -> Ids {
        ids.iter().collect()
    }

    /// The one range of parts read from a `tool_result` block.
    fn parts_at(r: std::ops::Range<usize>) -> Vec<std::ops::Range<usize>> {
        vec![r]
    }

    #[test]
    fn content_text_is_the_text_parts_one_per_line() {
        let m = Message {
            role: "user",
            name: None,
            parts: vec![
                Part::Text("look at this"),
                Part::Image { detail: ImageDetail::Auto, width: None, height: None },
                Part::Text(""),
                Part::Text("and this"),
            ],
            tool_calls: vec![ToolCall { id: "c1", name: "grep", arguments: "{}" }],
            result_ids: Vec::new(),
            result_parts: Vec::new(),
            empty_calls: false,
        };
        assert_eq!(m.text_parts().collect::<Vec<_>>(), ["look at this", "", "and this"]);
        assert_eq!(m.content_text(), "look at this\nand this");
    }

    #[test]
    fn roles_parse_to_their_variant_and_unknown_to_other() {
        let parsed: Vec<Role> = ROLES.iter().map(|r| Role::parse(r)).collect();
        assert_eq!(parsed, [Role::System, Role::Developer, Role::User, Role::Assistant, Role::Tool, Role::Function]);
        assert_eq!(Role::parse("critic"), Role::Other);
        assert!(Role::System.is_system() && Role::Developer.is_system() && !Role::User.is_system());
    }

    #[test]
    fn info_carries_ids_and_content_of_every_format() {
        // An Anthropic-style user message answering two tool_use blocks, no text.
        let m = Message {
            role: "user",
            name: None,
            parts: vec![Part::Text("")],
            tool_calls: vec![],
            result_ids: vec!["a", "b"],
            result_parts: parts_at(0..1),
            empty_calls: false,
        };
        let i = m.info(7);
        assert_eq!((i.role, i.tokens, i.has_content), (Role::User, 7, false));
        assert_eq!(i.result_ids, strs(&["a", "b"]));
        assert!(!i.is_user_turn(), "a user message carrying results is not a user turn");
        let call = Message {
            role: "assistant",
            name: None,
            parts: vec![Part::Image { detail: ImageDetail::Low, width: None, height: None }],
            tool_calls: vec![ToolCall { id: "c1", name: "ls", arguments: "{}" }],
            result_ids: vec![],
            result_parts: vec![],
            empty_calls: false,
        };
        let i = call.info(0);
        assert_eq!(i.call_ids, strs(&["c1"]));
        assert!(i.has_content, "an image is content");
    }

    #[test]
    fn own_content_is_what_lies_outside_the_result_blocks() {
        // [tool_result("out"), text("new words"), tool_result("")]
        let m = Message {
            role: "user",
            name: None,
            parts: vec![Part::Text("out"), Part::Text("new words"), Part::Text("")],
            tool_calls: vec![],
            result_ids: vec!["a", "b"],
            result_parts: [0..1, 2..3].into(),
            empty_calls: false,
        };
        let i = m.info(0);
        assert!(i.has_content && i.own_content);
        let left = m.without_results();
        assert!(matches!(left.parts[..], [Part::Text("new words")]) && left.result_ids.is_empty());
        let only_results = Message { parts: vec![Part::Text("out")], result_parts: parts_at(0..1), ..m.clone() };
        assert!(!only_results.info(0).own_content, "nothing but the result's own output");
        let tool = Message { role: "tool", result_parts: vec![], ..only_results };
        assert!(!tool.info(0).own_content, "an OpenAI tool message's content is its result");
    }

    #[test]
    fn ids_give_back_what_was_pushed_whatever_their_lengths() {
        // lengths around the inline room (31 bytes after a 1-byte length) and the LEB128
        // steps (127/128, 16383/16384), the empty id, multibyte text
        for lens in
            [vec![], vec![0], vec![29], vec![30, 31], vec![31], vec![32], vec![127, 128], vec![16_383, 16_384, 5]]
        {
            let want: Vec<String> =
                lens.iter().enumerate().map(|(i, &n)| "é".repeat(n / 2) + &"x".repeat(n % 2 + i)).collect();
            let ids: Ids = want.iter().collect();
            assert_eq!(ids.to_vec(), want);
            assert_eq!((ids.len(), ids.is_empty()), (want.len(), want.is_empty()));
            assert!(want.iter().all(|w| ids.contains(w)) && !ids.contains("absent"));
            assert_eq!(format!("{ids:?}"), format!("{want:?}"));
            assert_eq!(ids, Ids::from(want.clone()), "equal lists compare equal");
        }
        let one: Ids = ["call_abcdefghijklmnopqrstuvwx"].into_iter().collect();
        assert!(!one.buf.spilled(), "one 29-byte id stays inline");
    }

    #[test]
    fn call_table_answers_open_ids_once_and_undoes_partial_answers() {
        let calls = strs(&["a", "b", "a", "c"]);
        let mut t = CallTable::default();
        t.reset(&calls);
        assert!(!t.answer(&strs(&["a"])), "a duplicated id cannot be answered");
        assert!(t.answer(&strs(&["b"])));
        assert!(!t.answer(&strs(&["c", "b"])), "b is already answered");
        assert_eq!(t.open().collect::<Vec<_>>(), ["a", "c"], "the failed message left c open");
        assert!(t.answer(&strs(&["c"])));
        assert_eq!(t.answered(), 2);
    }

    #[test]
    fn call_table_indexes_large_blocks_with_the_same_answers() {
        let names: Vec<String> = (0..40).map(|i| format!("id{i}")).collect();
        let calls: Ids = names.iter().collect();
        let mut t = CallTable::default();
        t.reset(&calls);
        for id in names.iter().rev() {
            assert!(t.answer(&Ids::from(vec![id])));
        }
        assert!(!t.answer(&strs(&["id3"])));
        assert_eq!((t.answered(), t.open().count()), (40, 0));
    }
}
