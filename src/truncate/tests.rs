//! Tests of truncation against the real tokenizers.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

// ---- test backends (self-contained: bpe-openai / tiktoken-rs directly) -------------------

/// Exact, with pieces: what the crate's OpenAI backend does.
struct Bpe {
    name: &'static str,
    tok: &'static bpe_openai::Tokenizer,
}

fn cl100k() -> Bpe {
    Bpe { name: "cl100k_base", tok: bpe_openai::cl100k_base() }
}

fn o200k() -> Bpe {
    Bpe { name: "o200k_base", tok: bpe_openai::o200k_base() }
}

impl Backend for Bpe {
    fn name(&self) -> &str {
        self.name
    }
    fn is_exact(&self) -> bool {
        true
    }
    fn count(&self, text: &str) -> usize {
        self.tok.count(text)
    }
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.tok.encode(text))
    }
    fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        Ok(self.tok.bpe.decode_tokens(ids))
    }
    fn pieces<'a>(&'a self, text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
        Some(Box::new(self.tok.split(text)))
    }
    fn count_piece(&self, piece: &str) -> usize {
        self.tok.bpe.count(piece.as_bytes())
    }
    fn count_until(&self, text: &str, limit: usize) -> Option<usize> {
        count_until_by_pieces(self, text, limit)
    }
}

/// `count_until` as a piece-by-piece backend does it: stop once past the limit, without
/// counting a piece whose length alone passes it when the longest token is known.
fn count_until_by_pieces(b: &dyn Backend, text: &str, limit: usize) -> Option<usize> {
    let mut n = 0usize;
    for piece in b.pieces(text)? {
        let at_least = b.longest_token().map_or(0, |l| piece.len() / l);
        n += if n + at_least > limit { at_least } else { b.count_piece(piece) };
        if n > limit {
            return None;
        }
    }
    Some(n)
}

/// Exact, no pieces: tiktoken-rs (the reference implementation).
struct Tiktoken(&'static tiktoken_rs::CoreBPE);

impl Backend for Tiktoken {
    fn name(&self) -> &str {
        "tiktoken-cl100k"
    }
    fn is_exact(&self) -> bool {
        true
    }
    fn count(&self, text: &str) -> usize {
        self.0.encode_ordinary(text).len()
    }
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.0.encode_ordinary(text))
    }
    fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        self.0.decode_bytes(ids).map_err(|e| Error::UnknownToken(e.token))
    }
}

/// Delegates everything but `pieces` (and optionally breaks decoding / pieces).
struct Wrap<B> {
    inner: B,
    pieces: bool,
    /// Decoding no longer reproduces the text (like SentencePiece's "▁" handling).
    lossy_decode: bool,
    /// Pieces that do not tile the text.
    bad_pieces: bool,
}

fn no_pieces<B: Backend>(inner: B) -> Wrap<B> {
    Wrap { inner, pieces: false, lossy_decode: false, bad_pieces: false }
}

impl<B: Backend> Backend for Wrap<B> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn is_exact(&self) -> bool {
        self.inner.is_exact()
    }
    fn count(&self, text: &str) -> usize {
        self.inner.count(text)
    }
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        self.inner.encode(text)
    }
    fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let mut bytes = self.inner.decode_bytes(ids)?;
        if self.lossy_decode {
            bytes.insert(0, b'#');
        }
        Ok(bytes)
    }
    fn pieces<'a>(&'a self, text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
        if !self.pieces {
            return None;
        }
        let it = self.inner.pieces(text)?;
        Some(if self.bad_pieces { Box::new(it.skip(1)) } else { it })
    }
    fn count_piece(&self, piece: &str) -> usize {
        self.inner.count_piece(piece)
    }
}

/// A heuristic-like estimate with no vocabulary: ASCII letter/digit runs cost a token per 4
/// bytes, other non-space chars a token each, whitespace runs one token.
struct Estimate {
    pieces: bool,
}

fn estimate_runs(text: &str) -> impl Iterator<Item = &str> {
    let class = |c: char| {
        if c.is_whitespace() {
            0
        } else if c.is_ascii_alphanumeric() {
            1
        } else {
            2
        }
    };
    let mut rest = text;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let k = class(first);
        let end = if k == 2 { first.len_utf8() } else { rest.find(|c: char| class(c) != k).unwrap_or(rest.len()) };
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

fn estimate_piece(piece: &str) -> usize {
    if piece.is_empty() {
        0
    } else if piece.chars().all(char::is_whitespace) {
        1
    } else {
        piece.chars().map(|c| if c.is_ascii_alphanumeric() { 1 } else { 4 }).sum::<usize>().div_ceil(4)
    }
}

impl Backend for Estimate {
    fn name(&self) -> &str {
        "estimate"
    }
    fn is_exact(&self) -> bool {
        false
    }
    fn count(&self, text: &str) -> usize {
        estimate_runs(text).map(estimate_piece).sum()
    }
    fn encode(&self, _text: &str) -> Result<Vec<u32>> {
        Err(Error::Unsupported("estimate has no vocabulary".into()))
    }
    fn decode_bytes(&self, _ids: &[u32]) -> Result<Vec<u8>> {
        Err(Error::Unsupported("estimate has no vocabulary".into()))
    }
    fn pieces<'a>(&'a self, text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
        self.pieces.then(|| Box::new(estimate_runs(text)) as Box<dyn Iterator<Item = &'a str>>)
    }
    fn count_piece(&self, piece: &str) -> usize {
        estimate_piece(piece)
    }
}

/// Counts the bytes each method is given, to check the work done.
struct Metered<B> {
    inner: B,
    counted: AtomicUsize,
    encoded: AtomicUsize,
    split: AtomicUsize,
}

impl<B: Backend> Backend for Metered<B> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn is_exact(&self) -> bool {
        self.inner.is_exact()
    }
    fn count(&self, text: &str) -> usize {
        self.counted.fetch_add(text.len(), Ordering::Relaxed);
        self.inner.count(text)
    }
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        self.encoded.fetch_add(text.len(), Ordering::Relaxed);
        self.inner.encode(text)
    }
    fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        self.inner.decode_bytes(ids)
    }
    fn pieces<'a>(&'a self, text: &'a str) -> Option<Box<dyn Iterator<Item = &'a str> + 'a>> {
        let split = &self.split;
        Some(Box::new(self.inner.pieces(text)?.inspect(move |p| {
            split.fetch_add(p.len(), Ordering::Relaxed);
        })))
    }
    fn count_piece(&self, piece: &str) -> usize {
        self.counted.fetch_add(piece.len(), Ordering::Relaxed);
        self.inner.count_piece(piece)
    }
    fn longest_token(&self) -> Option<usize> {
        self.inner.longest_token()
    }
    fn count_until(&self, text: &str, limit: usize) -> Option<usize> {
        match self.inner.pieces("") {
            Some(_) => count_until_by_pieces(self, text, limit),
            None => {
                let n = self.count(text);
                (n <= limit).then_some(n)
            }
        }
    }
}

fn metered<B>(inner: B) -> Metered<B> {
    Metered { inner, counted: AtomicUsize::new(0), encoded: AtomicUsize::new(0), split: AtomicUsize::new(0) }
}

// ---- generated text ------------------------------------------------------------------------

/// SplitMix64: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn range_char(&mut self, lo: u32, hi: u32) -> char {
        char::from_u32(lo + self.below((hi - lo + 1) as usize) as u32).unwrap_or('?')
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "the",
    "context",
    "window",
    "token",
    "agent",
    "Überprüfung",
    "naïve",
    "résumé",
    "über",
    "data",
    "return",
    "function",
    "internationalization",
    "x",
    "I'm",
    "don't",
    "we'll",
];

fn unicode_text(rng: &mut Rng, target: usize) -> String {
    let mut s = String::new();
    while s.len() < target {
        match rng.below(20) {
            0..=3 => s.push_str(rng.pick(WORDS)),
            4 | 5 => s.push(' '),
            6 => s.push_str(rng.pick(&["\n", "\r\n", "\n\n", "\t", "   ", "\u{3000}", " \n "])),
            7 | 8 => (0..1 + rng.below(8)).for_each(|_| s.push(rng.range_char(0x4E00, 0x9FFF))),
            9 => (0..1 + rng.below(5)).for_each(|_| s.push(rng.range_char(0x3041, 0x3096))),
            10 => {
                s.push(rng.range_char(0x1F600, 0x1F64F));
                if rng.below(2) == 0 {
                    s.push(rng.range_char(0x1F3FB, 0x1F3FF));
                }
            }
            11 => s.push_str(rng.pick(&[
                "👨\u{200D}👩\u{200D}👧\u{200D}👦",
                "🏳\u{FE0F}\u{200D}🌈",
                "🇫🇷",
                "🇯🇵🇺🇸",
                "❤\u{FE0F}",
                "🏴\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}",
            ])),
            12 => {
                s.push(rng.range_char(0x61, 0x7A));
                (0..1 + rng.below(3)).for_each(|_| s.push(rng.range_char(0x300, 0x36F)));
            }
            13 => (0..2 + rng.below(6)).for_each(|_| s.push(rng.range_char(0x627, 0x64A))),
            14 => s.push_str(rng.pick(&["क्षि", "नमस्ते", "हिन्दी", "ि"])),
            15 => (0..2 + rng.below(6)).for_each(|_| s.push(rng.range_char(0x430, 0x44F))),
            16 => s.push_str(&rng.next().to_string()[..1 + rng.below(8)]),
            17 => s.push_str(rng.pick(&[".", ",", "!?", "...", "—", "«»", "「", "」", "()", "->"])),
            18 => s.push(rng.range_char(0x1D400, 0x1D7FF)),
            _ => {
                // Zalgo-ish: a long run of combining marks.
                s.push('Z');
                (0..rng.below(24)).for_each(|_| s.push(rng.range_char(0x300, 0x36F)));
            }
        }
    }
    s
}

fn code_text(rng: &mut Rng, target: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < target {
        i += 1;
        let n = rng.below(1000);
        s.push_str(&match rng.below(5) {
            0 => format!("fn handler_{i}(ctx: &mut Context, n: usize) -> Result<u32> {{\n"),
            1 => format!("    let value_{i} = ctx.items[{n}].map(|x| x * {n} + 1)?;\n"),
            2 => format!("    // 注释: retry #{n} — see issue {i}\n"),
            3 => "    }\n}\n\n".to_string(),
            _ => format!("\tif (x_{i} >= {n} && !done) {{ return \"{}\"; }}\n", rng.pick(WORDS)),
        });
    }
    s
}

fn log_text(rng: &mut Rng, target: usize) -> String {
    let mut s = String::new();
    let mut t = 0;
    while s.len() < target {
        t += rng.below(900);
        let level = rng.pick(&["INFO", "WARN", "ERROR", "DEBUG"]);
        s.push_str(&format!(
            "2026-01-01T{:02}:{:02}:{:02}.{:03}Z {level} [worker-{}] req={:016x} path=/api/v1/items/{} took={}ms msg=\"{}\"\n",
            t / 3_600_000 % 24,
            t / 60_000 % 60,
            t / 1000 % 60,
            t % 1000,
            rng.below(16),
            rng.next(),
            rng.below(100_000),
            rng.below(5000),
            rng.pick(&["ok", "timeout talking to upstream", "用户未找到", "retrying…", "cache miss 🚫"]),
        ));
    }
    s
}

fn json_text(rng: &mut Rng, target: usize) -> String {
    let mut s = String::from("[");
    let mut i = 0;
    while s.len() < target {
        if i > 0 {
            s.push(',');
        }
        i += 1;
        s.push_str(&format!(
            "\n  {{\"id\": {i}, \"title\": \"{} {}\", \"tags\": [\"{}\", \"日本語\"], \"score\": {}.{}, \"ok\": {}, \"note\": null}}",
            rng.pick(WORDS),
            rng.pick(&["会议", "réunion", "meeting 📅", "встреча"]),
            rng.pick(WORDS),
            rng.below(100),
            rng.below(1000),
            rng.below(2) == 0
        ));
    }
    s.push_str("\n]\n");
    s
}

fn gen_text(rng: &mut Rng, kind: usize, target: usize) -> String {
    match kind % 4 {
        0 => unicode_text(rng, target),
        1 => code_text(rng, target),
        2 => log_text(rng, target),
        _ => json_text(rng, target),
    }
}

// ---- the property check ----------------------------------------------------------------------

fn fits_all(backend: &dyn Backend, s: &str, limits: &Limits) -> bool {
    limits.max_tokens.is_none_or(|t| backend.count(s) <= t)
        && limits.max_lines.is_none_or(|l| count_lines(s) <= l)
        && limits.max_bytes.is_none_or(|b| s.len() <= b)
}

/// What `truncate` must return for kept parts `text[..a]`, `text[b..]`.
fn assemble(backend: &dyn Backend, text: &str, a: usize, b: usize, marker: Option<&str>) -> (String, usize) {
    let count = |s: &str| if s.is_empty() { 0 } else { backend.count(s) };
    let omitted = backend.count(text).saturating_sub(count(&text[..a]) + count(&text[b..]));
    let mut s = text[..a].to_string();
    if let Some(m) = marker {
        s.push_str(&fill_marker(m, omitted));
    }
    s.push_str(&text[b..]);
    (s, omitted)
}

fn digits(n: usize) -> usize {
    n.to_string().len()
}

/// Runs `truncate` and checks every rule; returns the result.
#[track_caller]
fn check(backend: &dyn Backend, text: &str, limits: Limits, opts: TruncateOptions<'_>) -> Truncation {
    let ctx =
        format!("{} {:?} {:?} text={:?}", backend.name(), limits, opts, text.chars().take(200).collect::<String>());
    let counted = TruncateOptions { count_total: true, ..opts };
    let r = truncate(backend, text, &limits, &counted).unwrap_or_else(|e| panic!("{e} for {ctx}"));
    // Without the whole count (unless the marker shows it) the cut is the same.
    let lazy = TruncateOptions { count_total: false, ..opts };
    let l = truncate(backend, text, &limits, &lazy).unwrap_or_else(|e| panic!("{e} for {ctx}"));
    assert_eq!((&l.text, l.head_end, l.tail_start, l.tokens), (&r.text, r.head_end, r.tail_start, r.tokens), "{ctx}");
    assert_eq!((l.head_tokens, l.tail_tokens, l.marker_used), (r.head_tokens, r.tail_tokens, r.marker_used), "{ctx}");
    let orig = backend.count(text);
    // Counted only when needed (see without_the_total_the_work_follows_the_output_not_the_input),
    // and then exact.
    assert!(l.original_tokens.is_none_or(|n| n == orig), "{ctx}");
    if l.truncated && opts.marker_needs_total() && l.marker_used {
        assert_eq!(l.original_tokens, Some(orig), "{ctx}");
    }
    assert_eq!(r.original_tokens, Some(orig), "{ctx}");
    assert_eq!(r.original_bytes, text.len(), "{ctx}");
    assert_eq!(r.original_lines, Some(count_lines(text)), "{ctx}");
    if fits_all(backend, text, &limits) {
        assert!(!r.truncated, "{ctx}");
        assert_eq!(r.text, text, "{ctx}");
        assert_eq!((r.tokens, r.omitted_tokens), (orig, Some(0)), "{ctx}");
        return r;
    }
    assert!(r.truncated, "{ctx}");
    // Limits, re-counted.
    let tokens = backend.count(&r.text);
    assert_eq!(r.tokens, tokens, "{ctx}");
    assert_eq!(r.kept_bytes, r.text.len(), "{ctx}");
    assert_eq!(r.kept_lines, count_lines(&r.text), "{ctx}");
    assert!(
        fits_all(backend, &r.text, &limits),
        "limit broken: {} tokens, {} lines, {} bytes: {ctx}\nresult={:?}",
        tokens,
        r.kept_lines,
        r.kept_bytes,
        r.text
    );
    if limits.max_tokens == Some(0) {
        assert_eq!(r.text, "", "{ctx}");
    }
    // Shape: prefix + marker + suffix.
    let (a, b) = (r.head_end, r.tail_start);
    assert!(a <= b && b <= text.len(), "{ctx}");
    match opts.direction {
        Direction::Head => assert_eq!(b, text.len(), "{ctx}"),
        Direction::Tail => assert_eq!(a, 0, "{ctx}"),
        Direction::HeadTail => {}
    }
    let full_marker = fill_marker(opts.marker, orig);
    let marker_fits = !opts.marker.is_empty() && fits_all(backend, &full_marker, &limits);
    assert_eq!(r.marker_used, marker_fits, "{ctx}");
    let marker = r.marker_used.then_some(opts.marker);
    let (expected, omitted) = assemble(backend, text, a, b, marker);
    assert_eq!(r.omitted_tokens, Some(omitted), "{ctx}");
    let head_tokens = if a == 0 { 0 } else { backend.count(&text[..a]) };
    let tail_tokens = if b == text.len() { 0 } else { backend.count(&text[b..]) };
    assert_eq!((r.head_tokens, r.tail_tokens), (head_tokens, tail_tokens), "{ctx}");
    assert_eq!(r.text, expected, "{ctx}");
    // Maximal: growing either side by one more cluster breaks a limit, unless at most a
    // couple of tokens (or the bytes reserved for the marker's number) are unused.
    let token_slack_ok = limits.max_tokens.is_some_and(|t| tokens + 2 >= t);
    let reserved = if r.marker_used { digits(orig) - digits(omitted) } else { 0 };
    let byte_slack_ok = limits.max_bytes.is_some_and(|m| r.kept_bytes + reserved >= m);
    if !token_slack_ok && !byte_slack_ok {
        if opts.direction != Direction::Tail && a < b {
            let a2 = next_cluster(text, a);
            if a2 <= b {
                let (s, _) = assemble(backend, text, a2, b, marker);
                assert!(!fits_all(backend, &s, &limits), "head could grow {a}->{a2} ({tokens} tokens, {} lines, {} bytes; grown: {} tokens {} lines {} bytes) around {:?}: {ctx}\nresult={:?}", r.kept_lines, r.kept_bytes, backend.count(&s), count_lines(&s), s.len(), &text[floor_boundary(text, a.saturating_sub(12))..ceil_boundary(text, a2 + 12)], r.text);
            }
        }
        if opts.direction != Direction::Head && a < b {
            let b2 = prev_cluster(text, b);
            if b2 >= a {
                let (s, _) = assemble(backend, text, a, b2, marker);
                assert!(!fits_all(backend, &s, &limits), "tail could grow {b}->{b2} ({tokens} tokens, {} lines, {} bytes; grown: {} tokens {} lines {} bytes) around {:?}: {ctx}\nresult={:?}", r.kept_lines, r.kept_bytes, backend.count(&s), count_lines(&s), s.len(), &text[floor_boundary(text, b2.saturating_sub(12))..ceil_boundary(text, b + 12)], r.text);
            }
        }
    }
    r
}

const DIRECTIONS: [Direction; 3] = [Direction::Head, Direction::Tail, Direction::HeadTail];
/// A marker that shows the omitted count (the default shows none), so cuts must count the whole.
const COUNTED_MARKER: &str = TOKENS_OMITTED_MARKER;
const MARKERS: [&str; 6] =
    [DEFAULT_MARKER, COUNTED_MARKER, "", "[{omitted}]", "\n…\n", " <<{omitted} tokens cut; {omitted}>> "];

fn opts(direction: Direction, marker: &str, head_ratio: f64) -> TruncateOptions<'_> {
    TruncateOptions { direction, marker, head_ratio, ..TruncateOptions::default() }
}

/// Token limits from 0 to above the text's size.
fn token_limits(rng: &mut Rng, total: usize) -> Vec<usize> {
    let mut v = vec![0, 1, 2, 3, 7, 12, 20, total / 3, total / 2, total.saturating_sub(1), total, total + 3];
    v.push(rng.below(total + 2));
    v.push(rng.below(total + 2));
    v
}

fn run_random(backend: &dyn Backend, seed: u64, cases: usize, max_len: usize) {
    let mut rng = Rng(seed);
    for case in 0..cases {
        let kind = case % 4;
        let target = 1 + rng.below(max_len);
        let text = gen_text(&mut rng, kind, target);
        let total = backend.count(&text);
        for &direction in &DIRECTIONS {
            for t in token_limits(&mut rng, total) {
                let marker = MARKERS[rng.below(MARKERS.len())];
                let ratio = [0.0, 0.25, 0.5, 0.8, 1.0][rng.below(5)];
                check(backend, &text, Limits::tokens(t), opts(direction, marker, ratio));
            }
            // Lines and bytes, alone and together with tokens.
            let lines = count_lines(&text);
            for _ in 0..4 {
                let limits = Limits {
                    max_tokens: (rng.below(3) == 0).then(|| rng.below(total + 2)),
                    max_lines: (rng.below(2) == 0).then(|| rng.below(lines + 2)),
                    max_bytes: (rng.below(2) == 0).then(|| rng.below(text.len() + 2)),
                };
                let marker = MARKERS[rng.below(MARKERS.len())];
                let ratio = [0.0, 0.3, 0.5, 1.0][rng.below(4)];
                check(backend, &text, limits, opts(direction, marker, ratio));
            }
        }
    }
}

// ---- randomized properties -------------------------------------------------------------------

#[test]
fn random_cl100k() {
    run_random(&cl100k(), 1, 60, 3000);
}

#[test]
fn random_o200k() {
    run_random(&o200k(), 2, 60, 3000);
}

#[test]
fn random_exact_without_pieces() {
    run_random(&no_pieces(o200k()), 3, 25, 2000);
    run_random(&Tiktoken(tiktoken_rs::cl100k_base_singleton()), 4, 15, 2000);
}

#[test]
fn random_estimate() {
    run_random(&Estimate { pieces: true }, 5, 40, 3000);
    run_random(&Estimate { pieces: false }, 6, 40, 3000);
}

#[test]
fn random_broken_backends() {
    // Decoding that does not reproduce the text: cut by counts instead of ids.
    let lossy = Wrap { inner: cl100k(), pieces: true, lossy_decode: true, bad_pieces: false };
    run_random(&lossy, 7, 15, 2000);
    let lossy_whole = Wrap { inner: cl100k(), pieces: false, lossy_decode: true, bad_pieces: false };
    run_random(&lossy_whole, 8, 15, 2000);
    // Pieces that do not tile the text: the whole text is one piece.
    let bad = Wrap { inner: cl100k(), pieces: true, lossy_decode: false, bad_pieces: true };
    run_random(&bad, 9, 15, 2000);
}

#[test]
fn random_larger_texts() {
    // Long enough that the tail window has to grow and pieces are many.
    run_random(&cl100k(), 10, 4, 60_000);
    run_random(&o200k(), 11, 4, 60_000);
}

#[test]
fn tiny_and_degenerate_texts() {
    let texts = [
        "",
        "a",
        "\n",
        "\n\n\n",
        " ",
        "     ",
        "é",
        "e\u{301}",
        "👨\u{200D}👩\u{200D}👧",
        "🇫🇷🇩🇪🇮🇹",
        "\r\n\r\n",
        "中",
        "中文字符",
        "a\u{300}\u{301}\u{302}\u{303}",
        "\u{301}\u{301}",
        "\u{200D}",
        "x\n",
        "\nx",
        "1234567890",
        "                                                   x",
    ];
    let backends: [&dyn Backend; 4] = [&cl100k(), &o200k(), &Estimate { pieces: false }, &no_pieces(cl100k())];
    for backend in backends {
        for text in texts {
            for direction in DIRECTIONS {
                for marker in MARKERS {
                    for t in 0..6 {
                        for ratio in [0.0, 0.5, 1.0] {
                            check(backend, text, Limits::tokens(t), opts(direction, marker, ratio));
                            let limits = Limits { max_tokens: None, max_lines: Some(t / 2), max_bytes: Some(t * 3) };
                            check(backend, text, limits, opts(direction, marker, ratio));
                        }
                    }
                }
            }
        }
    }
}

// ---- specific rules -----------------------------------------------------------------------

fn lorem(n: usize) -> String {
    (0..n).map(|i| format!("line {i}: the quick brown fox jumps over the lazy dog\n")).collect()
}

#[test]
fn fits_unchanged() {
    let b = cl100k();
    let text = lorem(10);
    let n = b.count(&text);
    for direction in DIRECTIONS {
        let limits = Limits { max_tokens: Some(n), max_lines: Some(10), max_bytes: Some(text.len()) };
        let r = truncate(&b, &text, &limits, &opts(direction, COUNTED_MARKER, 0.5)).unwrap();
        assert!(!r.truncated);
        assert_eq!(r.text, text);
        assert_eq!((r.original_tokens, r.tokens, r.omitted_tokens), (Some(n), n, Some(0)));
        let r = truncate(&b, &text, &Limits::default(), &opts(direction, "", 0.5)).unwrap();
        assert!(!r.truncated && r.text == text);
    }
}

#[test]
fn head_tail_shapes_and_omitted() {
    let b = cl100k();
    let text = lorem(200);
    let n = b.count(&text);
    let head = check(&b, &text, Limits::tokens(100), opts(Direction::Head, "", 0.5));
    assert!(text.starts_with(&head.text) && head.tokens >= 98 && head.tokens <= 100);
    assert_eq!(head.omitted_tokens, Some(n - head.tokens));

    let tail = check(&b, &text, Limits::tokens(100), opts(Direction::Tail, "", 0.5));
    assert!(text.ends_with(&tail.text) && tail.tokens >= 98);

    let m = "\n[{omitted} omitted]\n";
    let ht = check(&b, &text, Limits::tokens(100), opts(Direction::HeadTail, m, 0.5));
    let kept_head = &text[..ht.head_end];
    let kept_tail = &text[ht.tail_start..];
    let omitted = n - b.count(kept_head) - b.count(kept_tail);
    assert_eq!(ht.omitted_tokens, Some(omitted));
    assert_eq!(ht.text, format!("{kept_head}\n[{omitted} omitted]\n{kept_tail}"));
    // The ratio splits the room: each side gets about half.
    let (h, t) = (b.count(kept_head) as i64, b.count(kept_tail) as i64);
    assert!((h - t).abs() <= 6, "{h} vs {t}");

    let skewed = check(&b, &text, Limits::tokens(100), opts(Direction::HeadTail, m, 0.8));
    let (h, t) = (b.count(&text[..skewed.head_end]), b.count(&text[skewed.tail_start..]));
    assert!(h > 3 * t, "{h} vs {t}");
    // All room to one side.
    let all_tail = check(&b, &text, Limits::tokens(100), opts(Direction::HeadTail, m, 0.0));
    assert_eq!(all_tail.head_end, 0);
    let all_head = check(&b, &text, Limits::tokens(100), opts(Direction::HeadTail, m, 1.0));
    assert!(all_head.head_end > 0 && all_head.tail_start >= text.len() - 2);
}

#[test]
fn marker_dropped_when_it_alone_does_not_fit() {
    let b = cl100k();
    let text = lorem(50);
    let mt = b.count(&fill_marker(COUNTED_MARKER, b.count(&text)));
    for direction in DIRECTIONS {
        let r = check(&b, &text, Limits::tokens(mt - 1), opts(direction, COUNTED_MARKER, 0.5));
        assert!(!r.marker_used && !r.text.contains('…'));
        assert!(r.tokens < mt && !r.text.is_empty());
        let r = check(&b, &text, Limits::tokens(mt), opts(direction, COUNTED_MARKER, 0.5));
        assert!(r.marker_used && r.text.contains("tokens omitted"));
        // Lines and bytes too.
        let r =
            check(&b, &text, Limits { max_lines: Some(1), ..Limits::default() }, opts(direction, COUNTED_MARKER, 0.5));
        assert!(!r.marker_used && r.kept_lines == 1);
    }
}

#[test]
fn zero_tokens_gives_empty() {
    for direction in DIRECTIONS {
        let r = check(&cl100k(), "hello world", Limits::tokens(0), opts(direction, COUNTED_MARKER, 0.5));
        assert_eq!(r.text, "");
        assert!(r.truncated && !r.marker_used);
        assert_eq!(r.omitted_tokens, Some(2));
        let r = truncate(&cl100k(), "", &Limits::tokens(0), &opts(direction, COUNTED_MARKER, 0.5)).unwrap();
        assert!(!r.truncated && r.text.is_empty());
    }
}

#[test]
fn lines_and_bytes_limits() {
    let b = o200k();
    let text = lorem(100);
    let r = check(&b, &text, Limits { max_lines: Some(10), ..Default::default() }, opts(Direction::Head, "", 0.5));
    assert_eq!(r.text, lorem(10));
    let r = check(&b, &text, Limits { max_lines: Some(10), ..Default::default() }, opts(Direction::Tail, "", 0.5));
    assert_eq!(r.kept_lines, 10);
    assert!(r.text.starts_with("line 90:"));
    let r = check(
        &b,
        &text,
        Limits { max_lines: Some(10), ..Default::default() },
        opts(Direction::HeadTail, "\n--\n", 0.5),
    );
    assert_eq!(r.kept_lines, 10);
    let r = check(
        &b,
        &text,
        Limits { max_bytes: Some(500), ..Default::default() },
        opts(Direction::HeadTail, COUNTED_MARKER, 0.5),
    );
    assert!(r.kept_bytes <= 500 && r.kept_bytes >= 495);
    // The tightest limit wins.
    let limits = Limits { max_tokens: Some(40), max_lines: Some(10), max_bytes: Some(5000) };
    let r = check(&b, &text, limits, opts(Direction::Head, COUNTED_MARKER, 0.5));
    assert!(r.tokens <= 40 && r.tokens >= 38);
    let limits = Limits { max_tokens: Some(4000), max_lines: Some(3), max_bytes: Some(5000) };
    let r = check(&b, &text, limits, opts(Direction::Head, "", 0.5));
    assert_eq!(r.text, lorem(3));
}

#[test]
fn never_splits_chars_or_clusters() {
    let b = cl100k();
    let family = "👨\u{200D}👩\u{200D}👧\u{200D}👦";
    let accented = "e\u{301}\u{302}";
    for unit in [family, accented, "🇫🇷", "中", "🏳\u{FE0F}\u{200D}🌈", "\r\n"] {
        let text = unit.repeat(200);
        for direction in DIRECTIONS {
            for t in 1..40 {
                let r = check(&b, &text, Limits::tokens(t), opts(direction, "", 0.5));
                let (h, tl) = (&text[..r.head_end], &text[r.tail_start..]);
                assert_eq!(h.len() % unit.len(), 0, "{unit:?} head cut inside a cluster at t={t}");
                assert_eq!(tl.len() % unit.len(), 0, "{unit:?} tail cut inside a cluster at t={t}");
            }
        }
    }
}

#[test]
fn bad_arguments() {
    assert_eq!("head".parse::<Direction>().unwrap(), Direction::Head);
    assert_eq!("tail".parse::<Direction>().unwrap(), Direction::Tail);
    assert_eq!("head_tail".parse::<Direction>().unwrap(), Direction::HeadTail);
    for d in DIRECTIONS {
        assert_eq!(d.as_str().parse::<Direction>().unwrap(), d);
        assert_eq!(d.to_string(), d.as_str());
    }
    match "middle".parse::<Direction>() {
        Err(Error::Value(msg)) => assert!(msg.contains("\"middle\"") && msg.contains("head_tail"), "{msg}"),
        other => panic!("{other:?}"),
    }
    for ratio in [f64::NAN, -0.1, 1.01, f64::INFINITY, f64::NEG_INFINITY] {
        match truncate(&cl100k(), "abc", &Limits::tokens(1), &opts(Direction::HeadTail, "", ratio)) {
            Err(Error::Value(msg)) => assert!(msg.contains("head_ratio"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn marker_placeholder_filled() {
    assert_eq!(fill_marker("[{omitted}|{omitted}]", 42), "[42|42]");
    assert_eq!(fill_marker("{omitted", 1), "{omitted");
    assert_eq!(fill_marker("", 1), "");
    assert_eq!(count_lines(""), 0);
    assert_eq!(count_lines("a"), 1);
    assert_eq!(count_lines("a\n"), 1);
    assert_eq!(count_lines("a\nb"), 2);
    assert_eq!(count_lines("\n\n"), 2);
}

#[test]
fn newlines_are_counted_across_blocks_without_overflow() {
    // Byte counters gain up to 4 per 64-byte step and are summed every 63 steps: an
    // all-newline block is the worst case, and lengths around the step and block sizes
    // reach the remainders.
    for len in [0, 1, 15, 16, 63, 64, 65, 127, 4031, 4032, 4033, 8064, 8065, 16_321, 20_000] {
        for text in ["\n".repeat(len), "a\n".repeat(len), "é\nxyz".repeat(len), "x".repeat(len)] {
            assert_eq!(count_newlines(&text), text.bytes().filter(|&b| b == b'\n').count(), "len {len}");
        }
    }
}

#[test]
fn seams_that_merge_are_backed_off() {
    // Cuts where the marker merges with the kept text ("x" + "yz..."): limits must still hold.
    let b = cl100k();
    let text = "abc".repeat(500);
    for direction in DIRECTIONS {
        for marker in ["abc", "c", "bca{omitted}abc", " ", "  "] {
            for t in 0..30 {
                check(&b, &text, Limits::tokens(t), opts(direction, marker, 0.5));
            }
        }
    }
    let spaces = format!("a{}b{}c", " ".repeat(3000), "\n ".repeat(2000));
    for direction in DIRECTIONS {
        for t in [1, 2, 5, 50, 300] {
            check(&b, &spaces, Limits::tokens(t), opts(direction, " ", 0.5));
        }
    }
}

#[test]
fn long_single_pieces() {
    // One huge piece (no separators): only it is encoded, and the cut is inside it.
    let b = cl100k();
    let text = "x".repeat(200_000) + &"漢".repeat(50_000);
    for direction in DIRECTIONS {
        let r = check(&b, &text, Limits::tokens(1000), opts(direction, COUNTED_MARKER, 0.5));
        assert!(r.tokens >= 998);
    }
}

#[test]
fn work_is_one_counting_pass_plus_the_kept_part() {
    let mut rng = Rng(42);
    let text = log_text(&mut rng, 2_000_000) + &unicode_text(&mut rng, 1_000_000);
    for direction in DIRECTIONS {
        let b = metered(cl100k());
        let r = truncate(&b, &text, &Limits::tokens(2000), &opts(direction, COUNTED_MARKER, 0.5)).unwrap();
        assert!(r.tokens <= 2000 && r.tokens >= 1990);
        // The counting pass tokenizes the text once (through `count` or, in parallel, through
        // the pieces, with short overlaps at the seams)...
        let counted = b.counted.load(Ordering::Relaxed);
        let split = b.split.load(Ordering::Relaxed);
        let encoded = b.encoded.load(Ordering::Relaxed);
        let parallel = split >= text.len();
        let (extra_counted, extra_split) =
            if parallel { (counted - text.len(), split - text.len()) } else { (counted - text.len(), split) };
        // ...and the rest is re-counts of ~2000-token candidates and the walked pieces: tens
        // of KB, not MB.
        assert!(extra_counted < 300_000, "{direction}: counted {extra_counted} extra bytes");
        assert!(extra_split < 300_000, "{direction}: split {extra_split} extra bytes");
        assert!(encoded < 10_000, "{direction}: encoded {encoded} bytes");
    }
}

#[test]
fn without_the_total_the_work_follows_the_output_not_the_input() {
    // The same cut of a 1 MB and a 16 MB text reads about the same bytes: what is kept plus
    // the look-ahead, whatever the input's size.
    let mut rng = Rng(43);
    let unit = log_text(&mut rng, 1_000_000);
    let big = unit.repeat(16);
    for direction in DIRECTIONS {
        for lines in [false, true] {
            let mut work = Vec::new();
            for text in [&unit, &big] {
                let b = metered(cl100k());
                let o = TruncateOptions { lines, ..opts(direction, "\n…\n", 0.5) };
                let r = truncate(&b, text, &Limits::tokens(2000), &o).unwrap();
                assert!(r.truncated && r.tokens <= 2000 && r.tokens >= 1900, "{direction} {lines}: {}", r.tokens);
                assert_eq!((r.original_tokens, r.omitted_tokens, r.original_lines), (None, None, None));
                let read = b.counted.load(Ordering::Relaxed)
                    + b.split.load(Ordering::Relaxed)
                    + b.encoded.load(Ordering::Relaxed);
                assert!(read < 200_000, "{direction} lines={lines}: read {read} bytes of {}", text.len());
                work.push(read);
            }
            let (small, large) = (work[0] as f64, work[1] as f64);
            assert!(large < small * 1.5 + 20_000.0, "{direction} lines={lines}: {small} vs {large} bytes read");
        }
    }
}

#[test]
fn lines_mode_keeps_whole_lines_within_the_limits() {
    let mut rng = Rng(9);
    let backends: [&dyn Backend; 3] = [&cl100k(), &o200k(), &no_pieces(cl100k())];
    for (case, backend) in (0..60).zip(backends.iter().cycle()) {
        let target = 1 + rng.below(4000);
        let text = gen_text(&mut rng, case % 4, target);
        let total = backend.count(&text);
        for direction in DIRECTIONS {
            for t in token_limits(&mut rng, total) {
                let marker = MARKERS[rng.below(MARKERS.len())];
                let o = TruncateOptions { lines: true, count_total: true, ..opts(direction, marker, 0.5) };
                let r = truncate(*backend, &text, &Limits::tokens(t), &o).unwrap();
                let ctx = format!("{direction} {t} {marker:?} {:?}", text.chars().take(80).collect::<String>());
                assert!(backend.count(&r.text) <= t && r.tokens == backend.count(&r.text), "{ctx}");
                if !r.truncated {
                    assert!(total <= t, "{ctx}");
                    continue;
                }
                let (a, b) = (r.head_end, r.tail_start);
                // Whole lines: the head ends after a newline, the tail starts after one.
                assert!(a == 0 || text.as_bytes()[a - 1] == b'\n', "{ctx}: head ends mid-line at {a}");
                assert!(b == text.len() || b == 0 || text.as_bytes()[b - 1] == b'\n', "{ctx}: tail mid-line");
                let marker_text =
                    if r.marker_used { fill_marker(marker, r.omitted_tokens.unwrap()) } else { String::new() };
                assert_eq!(r.text, format!("{}{}{}", &text[..a], marker_text, &text[b..]), "{ctx}");
                // Maximal: one more line on a kept side breaks the limit.
                let grown = |a2: usize, b2: usize| {
                    let kept = backend.count(&text[..a2]) + backend.count(&text[b2..]);
                    let m = if r.marker_used { fill_marker(marker, total.saturating_sub(kept)) } else { String::new() };
                    backend.count(&format!("{}{}{}", &text[..a2], m, &text[b2..]))
                };
                if direction == Direction::Head && a < b {
                    let a2 = next_line_start(&text, a).min(b);
                    assert!(a2 == a || grown(a2, b) > t, "{ctx}: head could keep one more line");
                }
                if direction == Direction::Tail && a < b {
                    let b2 = prev_line_start(&text, b).max(a);
                    assert!(b2 == b || grown(a, b2) > t, "{ctx}: tail could keep one more line");
                }
            }
        }
    }
}

#[test]
fn parallel_count_is_exact() {
    let mut rng = Rng(77);
    let backends: [&dyn Backend; 2] = [&cl100k(), &o200k()];
    let mut joined = 0;
    for case in 0..25 {
        let size = 20_000 + rng.below(40_000);
        let mut text = gen_text(&mut rng, case, size);
        if case % 5 == 4 {
            // Seams inside long whitespace runs and long single pieces.
            for (div, filler) in [(2, " ".repeat(3000)), (3, "\n \n\t".repeat(500)), (4, "z".repeat(5000))] {
                let at = floor_boundary(&text, text.len() / div);
                text.insert_str(at, &filler);
            }
        }
        for backend in backends {
            let exact = backend.count(&text);
            for (chunks, sync) in [(2, 64), (7, 256), (16, 1024), (40, 4096), (200, 8192)] {
                if let Some(n) = count_pieces_parallel(backend, &text, chunks, sync) {
                    assert_eq!(n, exact, "case {case} chunks {chunks} sync {sync}");
                    joined += 1;
                }
            }
        }
    }
    assert!(joined > 150, "seams rarely met: {joined}");
    // Pieces that do not tile the text: no parallel count.
    let bad = Wrap { inner: cl100k(), pieces: true, lossy_decode: false, bad_pieces: true };
    assert_eq!(count_pieces_parallel(&bad, &"abc def\n".repeat(1000), 4, 1024), None);
    // The public entry point agrees on a long text.
    let long = log_text(&mut rng, 3 << 20);
    assert_eq!(count_text(&cl100k(), &long), cl100k().count(&long));
}

/// Many more random cases: `STRESS=50 cargo test --release -- --ignored stress`.
#[test]
#[ignore]
fn stress() {
    let n: u64 = std::env::var("STRESS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    for seed in 100..100 + n {
        run_random(&cl100k(), seed, 20, 5000);
        run_random(&o200k(), seed, 20, 5000);
        run_random(&no_pieces(cl100k()), seed, 8, 3000);
        run_random(&Estimate { pieces: seed % 2 == 0 }, seed, 10, 3000);
        run_random(&Wrap { inner: o200k(), pieces: true, lossy_decode: true, bad_pieces: false }, seed, 5, 3000);
    }
}

/// Process CPU seconds (Linux; 0 elsewhere): timings on a loaded machine are more stable in
/// CPU time than in wall time.
fn cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Timing of the counting pass alone: `cargo test --release -- --ignored --nocapture bench_count`.
#[test]
#[ignore]
fn bench_count() {
    use std::time::Instant;
    let mut rng = Rng(9);
    let text = log_text(&mut rng, 10_000_000);
    let b = cl100k();
    let dynb: &dyn Backend = &b;
    for _ in 0..2 {
        let c0 = cpu();
        let _ = b.count(&text);
        let c1 = cpu();
        let _ = count_pieces_parallel(dynb, &text, 8, PARALLEL_SYNC_BYTES);
        eprintln!("cpu: count {:.2}s, parallel(8) {:.2}s", c1 - c0, cpu() - c1);
        let t0 = Instant::now();
        let n = b.count(&text);
        let seq = t0.elapsed();
        let t0 = Instant::now();
        let m: usize = dynb.pieces(&text).unwrap().map(|p| dynb.count_piece(p)).sum();
        let dyn_seq = t0.elapsed();
        assert_eq!(n, m);
        let mut par = Vec::new();
        for chunks in [2, 4, 8, 16] {
            let t0 = Instant::now();
            let k = count_pieces_parallel(dynb, &text, chunks, PARALLEL_SYNC_BYTES);
            par.push((chunks, t0.elapsed()));
            assert_eq!(k, Some(n));
        }
        eprintln!(
            "count {seq:.1?} | dyn pieces {dyn_seq:.1?} | parallel {par:.1?} | threads {}",
            rayon::current_num_threads()
        );
    }
}

/// Timing printout, no assertions on time:
/// `cargo test --release -- --ignored --nocapture bench_10mb` (env SIZES=100000,... KINDS=log,...).
/// Compares `truncate` head_tail to 2,000 tokens with encoding the whole text and slicing
/// (bpe-openai, and tiktoken-rs: the core of Python's tiktoken). Best of 3 runs each.
#[test]
#[ignore]
fn bench_10mb() {
    use std::time::{Duration, Instant};
    /// Best wall time of 3 runs, CPU seconds per run, and the result.
    fn best<T>(mut f: impl FnMut() -> T) -> (Duration, f64, T) {
        let mut out = None;
        let mut best = Duration::MAX;
        let c0 = cpu();
        for _ in 0..3 {
            let t0 = Instant::now();
            let r = f();
            best = best.min(t0.elapsed());
            out = Some(r);
        }
        (best, (cpu() - c0) / 3.0, out.unwrap())
    }
    let mut rng = Rng(7);
    let sizes: Vec<usize> =
        std::env::var("SIZES").ok().map_or(vec![10_000_000], |s| s.split(',').map(|x| x.parse().unwrap()).collect());
    let kinds = std::env::var("KINDS").unwrap_or_else(|_| "log,code,json,unicode".into());
    let b = cl100k();
    let tik = tiktoken_rs::cl100k_base_singleton();
    let o = opts(Direction::HeadTail, COUNTED_MARKER, 0.5);
    for kind in kinds.split(',') {
        for &size in &sizes {
            let mut text = String::with_capacity(size + 30_000);
            while text.len() < size {
                text.push_str(&gen_text(
                    &mut rng,
                    match kind {
                        "unicode" => 0,
                        "code" => 1,
                        "log" => 2,
                        _ => 3,
                    },
                    20_000,
                ));
            }
            let (ours, ours_cpu, r) = best(|| truncate(&b, &text, &Limits::tokens(2000), &o).unwrap());
            let (count, count_cpu, n) = best(|| b.count(&text));
            let (bpe, _, _) = best(|| {
                let ids = b.tok.encode(text.as_str());
                let kept: Vec<u32> = ids[..1000].iter().chain(&ids[ids.len() - 1000..]).copied().collect();
                b.tok.bpe.decode_tokens(&kept)
            });
            let (tk, tk_cpu, _) = best(|| {
                let ids = tik.encode_ordinary(&text);
                let kept: Vec<u32> = ids[..1000].iter().chain(&ids[ids.len() - 1000..]).copied().collect();
                tik.decode(&kept).unwrap()
            });
            assert_eq!(r.original_tokens, Some(n));
            let x = |d: Duration| d.as_secs_f64() / ours.as_secs_f64();
            eprintln!(
                "{kind:>8} {:>10} B {:>9} tok | truncate {:>7.1?} (cpu {:.2}s) | bpe count 1 thread {:>7.1?} (cpu {:.2}s) | bpe encode+slice {:>7.1?} ({:.1}x) | tiktoken-rs encode+slice {:>7.1?} (cpu {:.2}s) wall {:.1}x cpu {:.1}x",
                text.len(), n, ours, ours_cpu, count, count_cpu, bpe, x(bpe), tk, tk_cpu, x(tk), tk_cpu / ours_cpu,
            );
        }
    }
}

// ---- calibration and char offsets (what the bindings used to compute) ----------------------

#[test]
fn calibrated_cut_rescounts_within_the_limit() {
    let b = cl100k();
    let text = "The quick brown fox jumps over the lazy dog. ".repeat(400);
    let raw_total = b.count(&text);
    for scale in [0.8, 1.0, 1.3, 2.5] {
        for max in [10usize, 100, 333] {
            let o = opts(Direction::HeadTail, COUNTED_MARKER, 0.5);
            let t = truncate_calibrated(&b, &text, &Limits::tokens(max), &o, scale).unwrap();
            let rescaled = (b.count(&t.text) as f64 * scale).ceil() as usize;
            assert!(rescaled <= max, "scale {scale}, max {max}: {rescaled} tokens as the counter reports them");
            assert_eq!(t.tokens, rescaled);
            assert_eq!(t.original_tokens, Some((raw_total as f64 * scale).ceil() as usize));
        }
    }
}

#[test]
fn char_bounds_index_the_input_by_character() {
    let b = cl100k();
    let text = "é日本語🙂 ".repeat(300);
    let o = opts(Direction::HeadTail, COUNTED_MARKER, 0.5);
    let t = truncate(&b, &text, &Limits::tokens(50), &o).unwrap();
    assert!(t.truncated);
    let (head, tail) = t.char_bounds(&text, text.chars().count());
    let chars: Vec<char> = text.chars().collect();
    assert_eq!(chars[..head].iter().collect::<String>(), text[..t.head_end]);
    assert_eq!(chars[tail..].iter().collect::<String>(), text[t.tail_start..]);
}

#[test]
fn a_head_cut_inside_one_huge_piece_reads_only_what_it_keeps() {
    // No break point in 4 MB (one letter; DNA; base64 of zeros): one pre-tokenizer piece, which
    // the cut used to count and encode whole (seconds) to keep 2,000 tokens of it.
    let reference = bpe_openai::o200k_base();
    for unit in ["z", "ACGTTGCAAGTC", "AAAA"] {
        let text = unit.repeat((4 << 20) / unit.len());
        let b = metered(crate::tokenize::OpenAiEncoding::get("o200k_base").unwrap());
        let limits = Limits { max_tokens: Some(2000), ..Default::default() };
        let r = truncate(&b, &text, &limits, &TruncateOptions::default()).unwrap();
        assert_eq!(r.tokens, reference.count(&r.text), "{unit}: exact");
        assert!(r.tokens <= 2000 && r.truncated, "{unit}: {}", r.tokens);
        // near-maximal: one more char of the head passes the budget (marker included)
        let longer = format!("{}{}", &text[..r.head_end + 1], DEFAULT_MARKER);
        assert!(reference.count(&longer) > 2000 - 4, "{unit}: {} tokens left unused", 2000 - r.tokens);
        let read = b.counted.load(Ordering::Relaxed) + b.encoded.load(Ordering::Relaxed);
        assert!(read < 2 << 20, "{unit}: {read} bytes counted or encoded for a 2,000-token head");
    }
}

#[test]
fn a_tail_cut_inside_one_huge_piece_reads_only_what_it_keeps() {
    // The mirror of the head cut above: the tail walk's window doubled until it held the
    // whole piece, which was then counted and encoded whole (seconds on 16 MB).
    let reference = bpe_openai::o200k_base();
    for unit in ["z", "ACGTTGCAAGTC", "AAAA"] {
        let text = unit.repeat((4 << 20) / unit.len());
        for direction in [Direction::Tail, Direction::HeadTail] {
            let b = metered(crate::tokenize::OpenAiEncoding::get("o200k_base").unwrap());
            let limits = Limits { max_tokens: Some(2000), ..Default::default() };
            let opts = TruncateOptions { direction, ..Default::default() };
            let r = truncate(&b, &text, &limits, &opts).unwrap();
            assert_eq!(r.tokens, reference.count(&r.text), "{unit} {direction}: exact");
            assert!(r.tokens <= 2000 && r.truncated, "{unit} {direction}: {}", r.tokens);
            // near-maximal: one more char of the tail passes the budget (marker included)
            let longer = format!("{}{}{}", &text[..r.head_end], DEFAULT_MARKER, &text[r.tail_start - 1..]);
            assert!(reference.count(&longer) > 2000 - 4, "{unit} {direction}: {} tokens unused", 2000 - r.tokens);
            let read = b.counted.load(Ordering::Relaxed) + b.encoded.load(Ordering::Relaxed);
            assert!(read < 2 << 20, "{unit} {direction}: {read} bytes counted or encoded for 2,000 tokens");
        }
    }
}
