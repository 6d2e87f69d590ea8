//! SystemTap's preprocessor macros, on the token stream:
//!
//! * `@define NAME %( BODY %)` and `@define NAME(a, b) %( BODY %)` define a
//!   macro for the rest of the file (a BODY may hold `%( %? %: %)`
//!   conditionals: they are resolved after expansion);
//! * `@NAME` and `@NAME(x, y + 1)` expand it; inside BODY, `@a` stands for
//!   the tokens of argument `a`. Arguments are split at top-level commas
//!   (commas inside `( )`, `[ ]` or `{ }` belong to the argument).
//!   Expansions are expanded again (a macro may use others), to a depth of
//!   [`MAX_DEPTH`];
//! * `@this1` .. `@this8` (SystemTap 4.1) are built in: a value per thread,
//!   for entry probes to leave to return probes (`@this1 = buf_uaddr` in
//!   `syscall.read`, then `user_string(@this1)` in `syscall.read.return`).
//!   Each is the element of the tapset global `__this1` .. `__this8` keyed by
//!   `tid()`;
//! * library macros (SystemTap's tapset `*.stpm` files), defined for every
//!   script: stdlib/*.stpm, built in ([`LIBRARY`]). A file's own
//!   `@define` of the same name wins. Their expansions are placed at the
//!   use site (diagnostics point at the `@name` written).
//!
//! Errors become [`Tok::Error`] tokens where SystemTap would stop.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::lexer::{LexError, Tok, Token};

/// How deep macro expansions may nest (a macro using itself stops here).
pub const MAX_DEPTH: usize = 64;

#[derive(Clone)]
struct Macro {
    params: Vec<String>,
    body: Vec<Token>,
    /// From [`LIBRARY`]: its tokens' positions are in another text.
    library: bool,
}

/// The library macro files: (name, text).
pub const LIBRARY: &[(&str, &str)] = &[(
    "stdlib/prometheus.stpm",
    include_str!("../../stdlib/prometheus.stpm"),
)];

/// The library macros, read once.
fn library() -> &'static HashMap<String, Macro> {
    static DEFS: OnceLock<HashMap<String, Macro>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let mut defs = HashMap::new();
        for (_, text) in LIBRARY {
            let mut input = crate::lexer::lex(text).into_iter().peekable();
            while let Some(t) = input.next() {
                if matches!(&t.tok, Tok::AtWord(w) if w == "define")
                    && let Ok((name, mut m)) = definition(&t, &mut input)
                {
                    m.library = true;
                    defs.insert(name, m);
                }
            }
        }
        defs
    })
}

/// Whether `text` may use a library macro (a byte scan for the prefixes
/// of their names; [`needed`] decides on the tokens).
pub fn may_use_library(text: &str) -> bool {
    text.contains("@prometheus_")
}

/// Whether `tokens` need this pass: a `@define`, a `@thisN` or a library
/// macro.
pub fn needed(tokens: &[Token]) -> bool {
    tokens.iter().any(|t| match &t.tok {
        Tok::AtWord(w) => {
            w == "define" || this_index(w).is_some() || library().contains_key(w.as_str())
        }
        _ => false,
    })
}

/// `N` of `@thisN`, 1 to 8.
fn this_index(word: &str) -> Option<u8> {
    let n: u8 = word.strip_prefix("this")?.parse().ok()?;
    (1..=8).contains(&n).then_some(n)
}

/// Reads the definitions and expands every use.
pub fn expand(tokens: Vec<Token>) -> Vec<Token> {
    let mut defs: HashMap<String, Macro> = library().clone();
    let mut out = Vec::with_capacity(tokens.len());
    let mut input = tokens.into_iter().peekable();
    while let Some(t) = input.next() {
        match &t.tok {
            Tok::AtWord(w) if w == "define" => match definition(&t, &mut input) {
                Ok((name, m)) => {
                    defs.insert(name, m);
                }
                Err(e) => {
                    out.push(e);
                    return out;
                }
            },
            Tok::AtWord(_) => {
                let mut rest: Vec<Token> = Vec::new();
                if let Err(e) = use_site(t, &mut input, &defs, 0, &mut rest) {
                    out.extend(rest);
                    out.push(e);
                    return out;
                }
                out.extend(rest);
            }
            _ => out.push(t),
        }
    }
    out
}

fn error(message: impl Into<String>, at: &Token) -> Token {
    Token {
        tok: Tok::Error(Box::new(LexError::new(message))),
        start: at.start,
        end: at.end,
        glued: at.glued,
    }
}

/// `NAME [(params)] %( body %)` after `@define`.
fn definition(
    at: &Token,
    input: &mut std::iter::Peekable<impl Iterator<Item = Token>>,
) -> Result<(String, Macro), Token> {
    let name = match input.next() {
        Some(Token {
            tok: Tok::Ident(n), ..
        }) => n,
        Some(Token { tok, .. }) if tok.keyword().is_some() => tok.keyword().unwrap().to_string(),
        _ => return Err(error("expected identifier after @define", at)),
    };
    let mut params = Vec::new();
    if matches!(input.peek().map(|t| &t.tok), Some(Tok::LParen)) {
        input.next();
        loop {
            match input.next() {
                Some(Token {
                    tok: Tok::Ident(p), ..
                }) => params.push(p),
                Some(Token {
                    tok: Tok::RParen, ..
                }) if params.is_empty() => break,
                _ => return Err(error("expected identifier in @define parameters", at)),
            }
            match input.next().map(|t| t.tok) {
                Some(Tok::Comma) => continue,
                Some(Tok::RParen) => break,
                _ => return Err(error("expected ',' or ')' in @define parameters", at)),
            }
        }
    }
    if !matches!(input.next().map(|t| t.tok), Some(Tok::PpIf)) {
        return Err(error(
            format!("expected '%(' to start the body of macro @{name}"),
            at,
        ));
    }
    let mut body = Vec::new();
    let mut depth = 0usize;
    loop {
        let Some(t) = input.next() else {
            return Err(error(
                format!("incomplete macro definition @{name} (missing '%)')"),
                at,
            ));
        };
        match t.tok {
            Tok::PpIf => depth += 1,
            Tok::PpEnd if depth == 0 => break,
            Tok::PpEnd => depth -= 1,
            _ => {}
        }
        body.push(t);
    }
    Ok((
        name,
        Macro {
            params,
            body,
            library: false,
        },
    ))
}

/// An `@word` outside a definition: a macro use is expanded into `out`;
/// any other `@word` (`@count`, `@entry`...) is kept.
fn use_site(
    at: Token,
    input: &mut std::iter::Peekable<impl Iterator<Item = Token>>,
    defs: &HashMap<String, Macro>,
    depth: usize,
    out: &mut Vec<Token>,
) -> Result<(), Token> {
    let Tok::AtWord(word) = &at.tok else {
        out.push(at);
        return Ok(());
    };
    if let Some(n) = this_index(word)
        && !defs.contains_key(word.as_str())
    {
        out.extend(this_tokens(n, &at));
        return Ok(());
    }
    let Some(m) = defs.get(word.as_str()) else {
        out.push(at);
        return Ok(());
    };
    if depth >= MAX_DEPTH {
        return Err(error(
            format!("macro @{word} expands more than {MAX_DEPTH} levels deep"),
            &at,
        ));
    }
    let args = if m.params.is_empty() {
        Vec::new()
    } else {
        arguments(&at, word, m.params.len(), input)?
    };
    // Parameters first, then the macros the body uses.
    let mut body: Vec<Token> = Vec::with_capacity(m.body.len());
    for t in &m.body {
        match &t.tok {
            Tok::AtWord(p) if m.params.contains(p) => {
                let i = m.params.iter().position(|q| q == p).expect("a parameter");
                body.extend(args[i].iter().cloned());
            }
            _ if m.library => body.push(Token {
                tok: t.tok.clone(),
                start: at.start,
                end: at.end,
                glued: t.glued,
            }),
            _ => body.push(t.clone()),
        }
    }
    let mut inner = body.into_iter().peekable();
    while let Some(t) = inner.next() {
        if matches!(t.tok, Tok::AtWord(_)) {
            use_site(t, &mut inner, defs, depth + 1, out)?;
        } else {
            out.push(t);
        }
    }
    Ok(())
}

/// `(a, b)` after a macro's name: the tokens of each argument.
fn arguments(
    at: &Token,
    name: &str,
    count: usize,
    input: &mut std::iter::Peekable<impl Iterator<Item = Token>>,
) -> Result<Vec<Vec<Token>>, Token> {
    if !matches!(input.next().map(|t| t.tok), Some(Tok::LParen)) {
        return Err(error(
            format!("expected '(' after macro @{name}, which takes {count} argument(s)"),
            at,
        ));
    }
    let mut args = vec![Vec::new()];
    let mut depth = 0usize;
    loop {
        let Some(t) = input.next() else {
            return Err(error(format!("incomplete macro call @{name}"), at));
        };
        match t.tok {
            Tok::LParen | Tok::LBracket | Tok::LBrace => depth += 1,
            Tok::RParen if depth == 0 => break,
            Tok::RParen | Tok::RBracket | Tok::RBrace => depth = depth.saturating_sub(1),
            Tok::Comma if depth == 0 => {
                args.push(Vec::new());
                continue;
            }
            _ => {}
        }
        args.last_mut().expect("one").push(t);
    }
    if args.len() != count || (count == 1 && args[0].is_empty()) {
        return Err(error(
            format!(
                "macro @{name} takes {count} argument(s), {} given",
                if args.len() == 1 && args[0].is_empty() {
                    0
                } else {
                    args.len()
                }
            ),
            at,
        ));
    }
    Ok(args)
}

/// `__thisN[tid()]`, placed where `@thisN` was written.
fn this_tokens(n: u8, at: &Token) -> Vec<Token> {
    let tok = |tok: Tok| Token {
        tok,
        start: at.start,
        end: at.end,
        glued: true,
    };
    vec![
        Token {
            tok: Tok::Ident(format!("__this{n}")),
            ..at.clone()
        },
        tok(Tok::LBracket),
        tok(Tok::Ident("tid".into())),
        tok(Tok::LParen),
        tok(Tok::RParen),
        tok(Tok::RBracket),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer;

    fn expanded(text: &str) -> String {
        expand(lexer::lex(text))
            .iter()
            .map(|t| match &t.tok {
                Tok::Ident(s) => s.clone(),
                Tok::Num(n) => n.to_string(),
                Tok::Error(e) => format!("<{}>", e.message),
                other => other.operator().unwrap_or("?").to_string(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn definitions_and_uses() {
        assert_eq!(expanded("@define two %( 2 %) x = @two"), "x = 2");
        assert_eq!(
            expanded("@define add(a, b) %( (@a + @b) %) @add(f(1, 2), [3])"),
            "( f ( 1 , 2 ) + [ 3 ] )"
        );
        // A macro may use another, defined before the use.
        assert_eq!(
            expanded("@define one %( 1 %) @define inc(x) %( @x + @one %) @inc(@one)"),
            "1 + 1"
        );
        assert_eq!(expanded("@this3 = 1"), "__this3 [ tid ( ) ] = 1");
        assert_eq!(
            expanded("@define loop %( @loop %) @loop"),
            "<macro @loop expands more than 64 levels deep>"
        );
        assert_eq!(
            expanded("@define f(a) %( @a %) @f(1, 2)"),
            "<macro @f takes 1 argument(s), 2 given>"
        );
    }
}

#[cfg(test)]
mod library_tests {
    use super::*;

    #[test]
    fn every_library_file_defines_its_macros() {
        let defs = library();
        assert!(defs.keys().all(|k| may_use_library(&format!("@{k}("))));
        for n in 1..=8 {
            for suffix in ["", "_map", "_map_unquoted"] {
                let name = format!("prometheus_dump_array{n}{suffix}");
                assert!(defs.contains_key(&name), "{name} missing");
            }
        }
    }
}
