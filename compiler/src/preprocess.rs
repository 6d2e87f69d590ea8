//! Script-argument substitution and `%( COND %? THEN %: ELSE %)` conditionals,
//! on the token stream, with SystemTap's semantics (its `parse.cxx`):
//!
//! * `$N` is replaced by the tokens the N-th argument lexes to, `@N` by a
//!   string token holding the argument, `$#`/`@#` by the argument count as a
//!   number/string. A reference outside `1..=count` is "command line
//!   argument out of range"; a reference inside substituted text is an
//!   "invalid nested substitution".
//! * A condition is `L OP R` terms joined by `&&`/`||` (`&&` binds tighter;
//!   every term is evaluated). `L` is `kernel_v`, `kernel_vr`, `systemtap_v`
//!   (version comparison as `strverscmp`, or wildcard match with `==`/`!=`),
//!   `arch`, `runtime`, `systemtap_privilege` (wildcard match, `==`/`!=`),
//!   `guru_mode` (0 or 1), `CONFIG_*` (kernel options: always unset here), or
//!   a string or number literal compared with one of the same kind.
//! * Tokens of the branch not taken are dropped unexamined, errors included.
//!
//! Errors become a [`Tok::Error`] token at the point where SystemTap would
//! stop, so the parser reports whichever problem comes first in the text.

use crate::lexer::{self, LexError, Tok, Token};
use std::cmp::Ordering;

/// The SystemTap release whose language utap tracks (`systemtap_v`).
pub const SYSTEMTAP_VERSION: &str = "5.2";

/// utap's runtime, as `%( runtime == "..." %)` sees it.
pub const RUNTIME: &str = "utrace";

/// What conditionals and argument references are evaluated against.
#[derive(Clone, Debug)]
pub struct PpConfig {
    pub args: Vec<String>,
    pub guru: bool,
    /// SystemTap's name for the machine (`x86_64`, `i386`, `arm64`, ...).
    pub arch: String,
    /// Running kernel release without its `-suffix` (`6.18.0`).
    pub kernel_v: String,
    /// Full running kernel release (`6.18.0-1-amd64`).
    pub kernel_vr: String,
}

impl PpConfig {
    /// Values of this machine and kernel.
    pub fn host(args: Vec<String>, guru: bool) -> PpConfig {
        let kernel_vr = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "0".to_string());
        let kernel_v = kernel_vr.split('-').next().unwrap_or("0").to_string();
        PpConfig {
            args,
            guru,
            arch: stap_arch(std::env::consts::ARCH).to_string(),
            kernel_v,
            kernel_vr,
        }
    }
}

/// SystemTap's architecture name for a machine name.
pub fn stap_arch(machine: &str) -> &str {
    match machine {
        "x86" | "i386" | "i486" | "i586" | "i686" => "i386",
        "aarch64" => "arm64",
        "s390x" => "s390",
        "powerpc64" | "ppc64" | "ppc64le" | "powerpc" => "powerpc",
        "riscv64" => "riscv",
        m if m.starts_with("arm") => "arm",
        m if m.starts_with("mips") => "mips",
        m => m,
    }
}

/// Substitutes arguments, then resolves conditionals.
pub fn preprocess(tokens: Vec<Token>, cfg: &PpConfig) -> Vec<Token> {
    // Most scripts use neither: then the tokens pass through untouched.
    // One scan finds out which passes are needed (a large file's token
    // vector is big enough that every extra scan shows).
    let is_conditional =
        |t: &Token| matches!(t.tok, Tok::PpIf | Tok::PpThen | Tok::PpElse | Tok::PpEnd);
    let (mut args, mut conditional) = (false, false);
    for t in &tokens {
        args |= is_arg_ref(&t.tok);
        conditional |= is_conditional(t);
        if args && conditional {
            break;
        }
    }
    let tokens = if args {
        // An argument's text may itself hold `%(`, so look again.
        let tokens = substitute_args(tokens, &cfg.args);
        conditional = tokens.iter().any(is_conditional);
        tokens
    } else {
        tokens
    };
    // Macros (`@define`, `@thisN`) are expanded before conditionals: a
    // macro's body may hold some.
    let tokens = if crate::macros::needed(&tokens) {
        let tokens = crate::macros::expand(tokens);
        conditional = tokens.iter().any(is_conditional);
        tokens
    } else {
        tokens
    };
    if !conditional {
        return tokens;
    }
    Conditionals::new(tokens, cfg).run()
}

fn error_token(message: impl Into<String>, at: &Token) -> Token {
    Token {
        tok: Tok::Error(Box::new(LexError::new(message))),
        start: at.start,
        end: at.end,
        glued: at.glued,
    }
}

/// Replaces `$N @N $# @#` with what they stand for.
pub fn substitute_args(tokens: Vec<Token>, args: &[String]) -> Vec<Token> {
    let mut out = Vec::with_capacity(tokens.len());
    for t in tokens {
        let with = |tok: Tok| Token { tok, ..t.clone() };
        match &t.tok {
            Tok::ArgNum(digits) => match arg_index(digits, args) {
                Some(i) => {
                    for (k, sub) in lexer::lex(&args[i]).into_iter().enumerate() {
                        let tok = if is_arg_ref(&sub.tok) {
                            Tok::Error(Box::new(LexError::new(
                                "invalid nested substitution of command line arguments",
                            )))
                        } else {
                            sub.tok
                        };
                        out.push(Token {
                            tok,
                            start: t.start,
                            end: t.end,
                            glued: if k == 0 { t.glued } else { sub.glued },
                        });
                    }
                }
                None => out.push(out_of_range(&t, args.len())),
            },
            Tok::ArgStr(digits) => match arg_index(digits, args) {
                Some(i) => out.push(with(Tok::Str(args[i].clone()))),
                None => out.push(out_of_range(&t, args.len())),
            },
            Tok::ArgCountNum => out.push(with(Tok::Num(args.len() as u64))),
            Tok::ArgCountStr => out.push(with(Tok::Str(args.len().to_string()))),
            _ => out.push(t),
        }
    }
    out
}

/// Whether `text` might hold a token [`preprocess`] acts on (`%(` `%?`
/// `%:` `%)`, `$N` `@N` `$#` `@#`, macros). A byte scan, so it may say yes for such
/// characters inside strings or comments, but never says no wrongly: when it
/// says no, the lexer's tokens can go straight to the parser.
pub fn may_need(text: &str) -> bool {
    let after = |lead: char, wanted: fn(u8) -> bool| {
        // `str::find` with one ASCII char is a memchr: fast on large files.
        let mut from = 0;
        while let Some(i) = text[from..].find(lead) {
            let at = from + i + 1;
            if text.as_bytes().get(at).is_some_and(|&b| wanted(b)) {
                return true;
            }
            from = at;
        }
        false
    };
    let arg_ref = |b: u8| b == b'#' || b.is_ascii_digit();
    after('%', |b| matches!(b, b'(' | b'?' | b':' | b')'))
        || after('$', arg_ref)
        || after('@', arg_ref)
        || text.contains("@define")
        || text.contains("@this")
        || crate::macros::may_use_library(text)
}

fn is_arg_ref(tok: &Tok) -> bool {
    matches!(
        tok,
        Tok::ArgNum(_) | Tok::ArgStr(_) | Tok::ArgCountNum | Tok::ArgCountStr
    )
}

/// Zero-based index of a `$N`/`@N` reference, if in range.
fn arg_index(digits: &str, args: &[String]) -> Option<usize> {
    let n: usize = digits.parse().ok()?;
    (1..=args.len()).contains(&n).then(|| n - 1)
}

fn out_of_range(at: &Token, count: usize) -> Token {
    let mut t = error_token(
        format!("command line argument out of range [1-{count}]"),
        at,
    );
    if let Tok::Error(e) = &mut t.tok {
        e.help = Some(match count {
            0 => "no script arguments were given".to_string(),
            1 => "1 script argument was given".to_string(),
            n => format!("{n} script arguments were given"),
        });
    }
    t
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Branch {
    KeepThen,
    SkipThen,
    KeepElse,
    SkipElse,
}

/// The `%( %? %: %)` state machine (SystemTap's `scan_pp`/`skip_pp`).
struct Conditionals<'c> {
    input: std::vec::IntoIter<Token>,
    out: Vec<Token>,
    /// Open conditionals: their `%(` token and which branch we are in.
    open: Vec<(Token, Branch)>,
    cfg: &'c PpConfig,
}

type PpResult<T> = Result<T, Token>;

impl<'c> Conditionals<'c> {
    fn new(tokens: Vec<Token>, cfg: &'c PpConfig) -> Self {
        Conditionals {
            out: Vec::with_capacity(tokens.len()),
            input: tokens.into_iter(),
            open: Vec::new(),
            cfg,
        }
    }

    fn run(mut self) -> Vec<Token> {
        if let Err(err) = self.scan() {
            self.out.push(err);
        }
        self.out
    }

    fn scan(&mut self) -> PpResult<()> {
        loop {
            let state = self.open.last().map(|(_, b)| *b);
            let t = match state {
                Some(Branch::SkipThen | Branch::SkipElse) => self.skip(),
                _ => self.input.next(),
            };
            let Some(t) = t else {
                return match self.open.pop() {
                    Some((start, _)) => {
                        Err(error_token("incomplete conditional at end of file", &start))
                    }
                    None => Ok(()),
                };
            };
            match t.tok {
                Tok::PpThen => {
                    return Err(error_token("incomplete conditional - missing '%('", &t));
                }
                Tok::PpElse => {
                    let next = match state {
                        None => {
                            return Err(error_token("incomplete conditional - missing '%('", &t));
                        }
                        Some(Branch::KeepElse | Branch::SkipElse) => {
                            return Err(error_token("invalid conditional - duplicate '%:'", &t));
                        }
                        Some(Branch::KeepThen) => Branch::SkipElse,
                        Some(Branch::SkipThen) => Branch::KeepElse,
                    };
                    if let Some(top) = self.open.last_mut() {
                        top.1 = next;
                    }
                }
                Tok::PpEnd => {
                    if self.open.pop().is_none() {
                        return Err(error_token("incomplete conditional - missing '%('", &t));
                    }
                }
                Tok::PpIf => {
                    let keep = self.condition(&t)?;
                    let branch = if keep {
                        Branch::KeepThen
                    } else {
                        Branch::SkipThen
                    };
                    self.open.push((t, branch));
                }
                _ => self.out.push(t),
            }
        }
    }

    /// Drops tokens up to the `%:`, `%?` or `%)` of the current level.
    fn skip(&mut self) -> Option<Token> {
        let mut nesting = 0usize;
        for t in self.input.by_ref() {
            match t.tok {
                Tok::PpIf => nesting += 1,
                Tok::PpEnd if nesting > 0 => nesting -= 1,
                Tok::PpElse | Tok::PpThen | Tok::PpEnd if nesting == 0 => return Some(t),
                _ => {}
            }
        }
        None
    }

    /// Reads and evaluates `TERM ((&& | ||) TERM)* %?` after `%(`.
    fn condition(&mut self, start: &Token) -> PpResult<bool> {
        let mut result = false;
        let mut and_result = true;
        loop {
            let mut term = Vec::with_capacity(3);
            for _ in 0..3 {
                match self.input.next() {
                    Some(t) => term.push(t),
                    None => return Err(error_token("incomplete condition after '%('", start)),
                }
            }
            let value = evaluate(&term[0], &term[1], &term[2], self.cfg)?;
            and_result &= value;
            let next = self.input.next();
            if matches!(next.as_ref().map(|t| &t.tok), Some(Tok::AndAnd)) {
                continue;
            }
            result |= and_result;
            and_result = true;
            match next.as_ref().map(|t| &t.tok) {
                Some(Tok::OrOr) => continue,
                Some(Tok::PpThen) => return Ok(result),
                _ => return Err(error_token("expected '%?' marker for conditional", start)),
            }
        }
    }
}

/// Evaluates one `L OP R` term.
fn evaluate(l: &Token, op: &Token, r: &Token, cfg: &PpConfig) -> PpResult<bool> {
    for t in [l, op, r] {
        if let Tok::Error(_) = t.tok {
            return Err(t.clone());
        }
    }
    let err = |msg: &str, at: &Token| Err(error_token(msg, at));
    let name = match &l.tok {
        Tok::Ident(name) => name.as_str(),
        _ => "",
    };
    match (name, &r.tok) {
        ("kernel_v" | "kernel_vr" | "systemtap_v", rhs) => {
            let Tok::Str(query) = rhs else {
                return err("expected string literal", r);
            };
            let target = match name {
                "kernel_v" => &cfg.kernel_v,
                "kernel_vr" => &cfg.kernel_vr,
                _ => SYSTEMTAP_VERSION,
            };
            let Some(cmp) = comparison(op) else {
                return err("expected comparison operator", op);
            };
            let wildcard = query.contains(['*', '?', '[']);
            if wildcard {
                return match cmp {
                    Cmp::Eq => Ok(fnmatch(query, target)),
                    Cmp::Ne => Ok(!fnmatch(query, target)),
                    _ => err("wildcard not allowed with order comparison operators", op),
                };
            }
            Ok(cmp.holds(strverscmp(target, query)))
        }
        ("arch" | "runtime" | "systemtap_privilege", rhs) => {
            let Tok::Str(query) = rhs else {
                return err("expected string literal", r);
            };
            let target = match name {
                "arch" => cfg.arch.as_str(),
                "runtime" => RUNTIME,
                _ if cfg.guru => "stapdev",
                _ => "stapusr",
            };
            let matched = if name == "systemtap_privilege" {
                query == target
            } else {
                fnmatch(query, target)
            };
            match comparison(op) {
                Some(Cmp::Eq) => Ok(matched),
                Some(Cmp::Ne) => Ok(!matched),
                _ => err("expected '==' or '!='", op),
            }
        }
        ("guru_mode", rhs) => {
            let Tok::Num(n) = rhs else {
                return err("expected number", r);
            };
            if *n > 1 {
                return err("expected 0 or 1", op);
            }
            match comparison(op) {
                Some(c @ (Cmp::Eq | Cmp::Ne)) => Ok(c.holds((cfg.guru as u64).cmp(n))),
                _ => err("expected '==' or '!='", op),
            }
        }
        (config, rhs) if config.starts_with("CONFIG_") => {
            // No kernel configuration: every option is unset (the empty string).
            match rhs {
                Tok::Str(query) => match comparison(op) {
                    Some(Cmp::Eq) => Ok(fnmatch(query, "")),
                    Some(Cmp::Ne) => Ok(!fnmatch(query, "")),
                    _ => err("expected '==' or '!='", op),
                },
                Tok::Num(n) => match comparison(op) {
                    Some(c) => Ok(c.holds(0i64.cmp(&(*n as i64)))),
                    None => err("expected comparison operator", op),
                },
                Tok::Ident(other) if other.starts_with("CONFIG_") => match comparison(op) {
                    Some(c) => Ok(c.holds(Ordering::Equal)),
                    None => err("expected comparison operator", op),
                },
                _ => err(
                    "expected string, number literal or other CONFIG_... as right side operand",
                    r,
                ),
            }
        }
        _ => match (&l.tok, &r.tok) {
            (Tok::Str(a), Tok::Str(b)) => match comparison(op) {
                Some(c) => Ok(c.holds(a.as_bytes().cmp(b.as_bytes()))),
                None => err("expected comparison operator", op),
            },
            (Tok::Num(a), Tok::Num(b)) => match comparison(op) {
                Some(c) => Ok(c.holds((*a as i64).cmp(&(*b as i64)))),
                None => err("expected comparison operator", op),
            },
            (Tok::Str(_), Tok::Num(_)) if op.tok.operator().is_some() => {
                err("expected string literal as right value", r)
            }
            (Tok::Num(_), Tok::Str(_)) if op.tok.operator().is_some() => {
                err("expected number literal as right value", r)
            }
            _ => err(
                "expected 'arch', 'kernel_v', 'kernel_vr', 'systemtap_v', 'runtime', \
                 'systemtap_privilege', 'CONFIG_...', or comparison between strings or integers",
                l,
            ),
        },
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Cmp {
    fn holds(self, ord: Ordering) -> bool {
        match self {
            Cmp::Lt => ord.is_lt(),
            Cmp::Le => ord.is_le(),
            Cmp::Gt => ord.is_gt(),
            Cmp::Ge => ord.is_ge(),
            Cmp::Eq => ord.is_eq(),
            Cmp::Ne => ord.is_ne(),
        }
    }
}

fn comparison(op: &Token) -> Option<Cmp> {
    Some(match op.tok {
        Tok::Lt => Cmp::Lt,
        Tok::Le => Cmp::Le,
        Tok::Gt => Cmp::Gt,
        Tok::Ge => Cmp::Ge,
        Tok::EqEq => Cmp::Eq,
        Tok::NotEq => Cmp::Ne,
        _ => return None,
    })
}

/// glibc's `strverscmp`: digit runs compare as numbers, except that runs
/// with leading zeros are fractional parts and sort before integral runs
/// (`"000" < "00" < "01" < "010" < "09" < "0" < "1" < "9" < "10"`).
pub fn strverscmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            let ea = i + a[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            let eb = j + b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
            let ord = compare_digit_runs(&a[i..ea], &b[j..eb]);
            if ord != Ordering::Equal {
                return ord;
            }
            i = ea;
            j = eb;
        } else {
            if a[i] != b[j] {
                return a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (a.len() - i).cmp(&(b.len() - j))
}

fn compare_digit_runs(x: &[u8], y: &[u8]) -> Ordering {
    let fractional = |r: &[u8]| r.len() > 1 && r[0] == b'0';
    match (fractional(x), fractional(y)) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => x.len().cmp(&y.len()).then_with(|| x.cmp(y)),
        (true, true) => {
            let zx = x.iter().take_while(|&&c| c == b'0').count();
            let zy = y.iter().take_while(|&&c| c == b'0').count();
            zy.cmp(&zx).then_with(|| x[zx..].cmp(&y[zy..]))
        }
    }
}

/// `fnmatch(pattern, text, FNM_NOESCAPE)`: `*`, `?` and `[...]` (with `!`
/// or `^` negation and ranges).
pub fn fnmatch(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matcher with backtracking to the last `*`.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let step = match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
                continue;
            }
            Some('?') => Some(pi + 1),
            Some('[') => match bracket(&p, pi, t[ti]) {
                Some((true, end)) => Some(end),
                Some((false, _)) => None,
                None => (t[ti] == '[').then_some(pi + 1),
            },
            Some(&c) => (c == t[ti]).then_some(pi + 1),
            None => None,
        };
        match step {
            Some(next) => {
                pi = next;
                ti += 1;
            }
            None => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Matches `c` against the bracket expression at `p[start]`; returns whether
/// it matched and the index after `]`, or None if the bracket is unclosed.
fn bracket(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = matches!(p.get(i), Some('!' | '^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let &lo = p.get(i)?;
        if lo == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|&h| h != ']') {
            let hi = p[i + 2];
            matched |= lo <= c && c <= hi;
            i += 3;
        } else {
            matched |= lo == c;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn may_need_finds_every_preprocessor_and_argument_token() {
        for text in [
            "%( arch == \"x86_64\" %? a %: b %)",
            "x %?",
            "x %:",
            "%)",
            "probe begin { print($1) }",
            "@2",
            "$#",
            "f(@#)",
        ] {
            assert!(may_need(text), "{text}");
        }
        for text in [
            "",
            "%",
            "$",
            "a % b",
            "$arg1 @count(x) printf(\"%d\")",
            "x$",
        ] {
            assert!(!may_need(text), "{text}");
        }
    }

    fn cfg(args: &[&str]) -> PpConfig {
        PpConfig {
            args: args.iter().map(|s| s.to_string()).collect(),
            guru: false,
            arch: "x86_64".into(),
            kernel_v: "6.18.0".into(),
            kernel_vr: "6.18.0-1-amd64".into(),
        }
    }

    fn run(text: &str, args: &[&str]) -> Vec<Tok> {
        preprocess(lexer::lex(text), &cfg(args))
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    fn error_of(text: &str, args: &[&str]) -> String {
        match run(text, args).pop() {
            Some(Tok::Error(e)) => e.message,
            other => panic!("no error for {text:?}: {other:?}"),
        }
    }

    #[test]
    fn versions() {
        assert_eq!(strverscmp("6.18.0", "2.6"), Ordering::Greater);
        assert_eq!(strverscmp("2.6.9", "2.6.10"), Ordering::Less);
        assert_eq!(strverscmp("5.2", "5.2"), Ordering::Equal);
        let order = ["000", "00", "01", "010", "09", "0", "1", "9", "10"];
        for w in order.windows(2) {
            assert_eq!(strverscmp(w[0], w[1]), Ordering::Less, "{w:?}");
        }
    }

    #[test]
    fn wildcards() {
        assert!(fnmatch("i?86", "i686"));
        assert!(fnmatch("x86*", "x86_64"));
        assert!(fnmatch("[a-c]x", "bx"));
        assert!(!fnmatch("[!a-c]x", "bx"));
        assert!(fnmatch("", ""));
        assert!(!fnmatch("", "x"));
        assert!(fnmatch("*", ""));
    }

    #[test]
    fn keeps_the_right_branch() {
        assert_eq!(
            run("%( arch == \"x86_64\" %? a %: b %)", &[]),
            vec![Tok::Ident("a".into())]
        );
        assert_eq!(
            run("%( arch != \"x86_*\" %? a %: b %)", &[]),
            vec![Tok::Ident("b".into())]
        );
        assert_eq!(
            run("%( kernel_v >= \"2.6\" %? a %)", &[]),
            vec![Tok::Ident("a".into())]
        );
        assert_eq!(
            run("%( runtime == \"utrace\" %? a %)", &[]),
            vec![Tok::Ident("a".into())]
        );
        assert_eq!(
            run(
                "%( systemtap_v >= \"5.0\" && 1 == 2 || 3 < 4 %? a %: b %)",
                &[]
            ),
            vec![Tok::Ident("a".into())]
        );
        assert_eq!(
            run("%( CONFIG_FOO == \"\" %? a %: b %)", &[]),
            vec![Tok::Ident("a".into())]
        );
        // Nested, and errors in the skipped branch are ignored.
        assert_eq!(
            run("%( 1 == 2 %? %( x %? $9 %) %: %( 2 == 2 %? c %) %)", &[]),
            vec![Tok::Ident("c".into())]
        );
    }

    #[test]
    fn arguments() {
        assert_eq!(
            run("$1 @1 $# @#", &["probe foo"]),
            vec![
                Tok::Probe,
                Tok::Ident("foo".into()),
                Tok::Str("probe foo".into()),
                Tok::Num(1),
                Tok::Str("1".into())
            ]
        );
        assert_eq!(
            error_of("$0", &[]),
            "command line argument out of range [1-0]"
        );
        assert_eq!(
            error_of("@2", &["a"]),
            "command line argument out of range [1-1]"
        );
        assert_eq!(
            error_of("$1", &["x $1"]),
            "invalid nested substitution of command line arguments"
        );
    }

    #[test]
    fn condition_errors() {
        assert_eq!(
            error_of("%( kernel_v <= 2.6 %? a %)", &[]),
            "expected string literal"
        );
        assert_eq!(
            error_of("%( kernel_v * \"2\" %? a %)", &[]),
            "expected comparison operator"
        );
        assert_eq!(
            error_of("%( arch >= \"x\" %? a %)", &[]),
            "expected '==' or '!='"
        );
        assert!(error_of("%( foo == \"2.6\" %? a %)", &[]).starts_with("expected 'arch'"));
        assert_eq!(
            error_of("%( arch == \"x\" %)", &[]),
            "expected '%?' marker for conditional"
        );
        assert_eq!(
            error_of("%( arch ==", &[]),
            "incomplete condition after '%('"
        );
        assert_eq!(
            error_of("%( 0 == 0 %? a", &[]),
            "incomplete conditional at end of file"
        );
        assert_eq!(
            error_of("%( $# != \"2\" %? a %)", &[]),
            "expected number literal as right value"
        );
        assert_eq!(
            error_of("%( @# != 2 %? a %)", &[]),
            "expected string literal as right value"
        );
        assert_eq!(
            error_of("%( 1 == 0 %? a %? b %)", &[]),
            "incomplete conditional - missing '%('"
        );
        assert_eq!(
            error_of("%( 1 == 0 %? a %: b %: c %)", &[]),
            "invalid conditional - duplicate '%:'"
        );
        assert_eq!(
            error_of("%( kernel_v > \"2.*\" %? a %)", &[]),
            "wildcard not allowed with order comparison operators"
        );
    }
}
