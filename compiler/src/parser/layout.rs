//! Makes SystemTap's hand-written parsing decisions explicit in the token
//! stream, so that the LR(1) grammar needs no lookahead tricks.
//!
//! SystemTap's recursive-descent parser has optional semicolons and parses
//! greedily: an expression statement goes on as long as the next token can
//! continue it (`a = b` newline `-c` is `a = b - c`; `a` newline `++b` is
//! `a++; b`), and one `;` after a simple statement belongs to it. LR(1)
//! cannot prefer "continue" over "end the statement", so this pass decides,
//! with the same rules, where every statement inside a body begins and marks
//! it with a [`Tok::StmtStart`] token. The grammar then requires that marker
//! before every statement and never has to guess. The pass also
//!
//! * glues adjacent string literals (`"a" "b"` is `"ab"`, as SystemTap's
//!   `consume_string_literals`),
//! * turns a keyword after `->` into a member name (`$t->function`),
//! * in probe points, joins the adjacent pieces of a component name into one
//!   [`Tok::Component`] (`sys*call`; `a * b` with spaces stays three tokens
//!   and is rejected), so `*` there is a wildcard, not a multiplication.

use crate::lexer::{LexError, Tok, Token};
use std::collections::VecDeque;
use std::iter::Peekable;

/// Deepest nesting of brackets, blocks and statement bodies accepted, and
/// most operators in one statement: every later pass walks the tree
/// recursively, so pathological input must not overflow the stack.
pub const MAX_NESTING: usize = 256;
pub const MAX_OPERATORS: usize = 1000;

/// Runs the pass.
pub fn layout(tokens: Vec<Token>) -> Vec<Token> {
    laid_out(tokens).collect()
}

/// [`layout`] as a stream: the grammar pulls tokens one by one, so no
/// second copy of a large file's token vector is ever built.
pub fn laid_out<I: IntoIterator<Item = Token>>(tokens: I) -> LaidOut<I::IntoIter> {
    LaidOut {
        pass: Layout {
            out: VecDeque::with_capacity(4),
            frames: Vec::new(),
            prev: Prev::StmtStart,
            probe: None,
            point_groups: 0,
            header_run: 0,
            in_body: false,
            operators: 0,
        },
        input: tokens.into_iter().peekable(),
        after_arrow: false,
        after_close: false,
        done: false,
    }
}

/// The laid-out token stream (see [`laid_out`]).
pub struct LaidOut<I: Iterator<Item = Token>> {
    pass: Layout,
    input: Peekable<I>,
    after_arrow: bool,
    /// The last token was `]` or `)`: a `$`/`$$` now is a pretty suffix.
    after_close: bool,
    /// A limit was exceeded: nothing follows the error token.
    done: bool,
}

impl<I: Iterator<Item = Token>> Iterator for LaidOut<I> {
    type Item = Token;

    #[inline]
    fn next(&mut self) -> Option<Token> {
        loop {
            if let Some(t) = self.pass.out.pop_front() {
                return Some(t);
            }
            if self.done {
                return None;
            }
            let t = self.input.next()?;
            self.step(t);
        }
    }
}

impl<I: Iterator<Item = Token>> LaidOut<I> {
    /// Lays out one input token (and the string pieces glued to it).
    #[inline]
    fn step(&mut self, mut t: Token) {
        let iter = &mut self.input;
        let pass = &mut self.pass;
        if let Tok::Str(s) = &mut t.tok {
            while let Some(next) = iter.next_if(|n| matches!(n.tok, Tok::Str(_))) {
                if let Tok::Str(more) = next.tok {
                    s.push_str(&more);
                }
                t.end = next.end;
            }
        }
        if self.after_arrow
            && let Some(k) = t.tok.keyword()
        {
            t.tok = Tok::Ident(k.to_string());
        }
        self.after_arrow = matches!(t.tok, Tok::Arrow);
        if let Tok::Target(s) = &t.tok
            && self.after_close
            && (1..=2).contains(&(s.len() + 1))
            && s.bytes().all(|b| b == b'$')
        {
            t.tok = Tok::Pretty(s.len() as u8 + 1);
        }
        self.after_close = matches!(t.tok, Tok::RBracket | Tok::RParen);
        if let Some(limit) = pass.over_limit(&t) {
            pass.out.push_back(Token {
                tok: Tok::Error(Box::new(LexError {
                    message: limit,
                    help: Some("utap bounds these so that no pass can run out of stack".into()),
                    opener: None,
                })),
                ..t
            });
            self.done = true;
            return;
        }
        if pass.frames.is_empty() {
            pass.top_level(t, iter);
        } else {
            pass.body(t);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockKind {
    /// The body of a probe or function.
    Body,
    Stmt,
    Try,
    Catch,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ParenKind {
    /// `( expr )`.
    Group,
    /// `name(args)`.
    Call,
    /// `@op(args)`: may be followed by `[index]` (histograms).
    AtCall,
    /// `if (`, `while (`, `for (`, `foreach (`.
    Header,
    /// `catch (`.
    CatchHeader,
}

#[derive(Clone, Copy, Debug)]
enum Frame {
    Block(BlockKind),
    /// `(` or `[`; `prefixed` when the value it belongs to follows `++`/`--`.
    Paren(ParenKind, bool),
    Bracket(bool),
}

/// What the previous token at statement level allows next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prev {
    /// A new statement may begin (after `{`, `;`, `else`, a header, a block).
    StmtStart,
    /// Inside an expression, an operand must come (after an operator).
    Operand {
        /// The operand follows a prefix `++`/`--`.
        prefixed: bool,
    },
    /// An operand just ended; what may continue it.
    OperandEnd {
        crement: bool,
        /// `(` continues as this kind of call (after a name or `@op`).
        call: Option<ParenKind>,
        index: bool,
        /// The value follows a prefix `++`/`--` (kept through `->x`, `[i]`).
        prefixed: bool,
    },
    /// After `->`: a member name.
    Member { prefixed: bool },
    /// After `next`, `break`, `continue`, embedded code: `;` is absorbed.
    KeywordEnd,
    /// After `return`: `;`, `}` or the value.
    Return,
    /// After `if`/`while`/`for`/`foreach`: the header's `(`.
    Header,
    /// After `try` / `catch (x)`: the block.
    BlockOf(BlockKind),
    /// After a try block: `catch`.
    Catch,
    /// After `catch`: `(` or the block.
    CatchRest,
}

/// Probe-point state at top level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProbeState {
    /// A component name may come (after `probe`, `.`, `,`, `=`, `+=`).
    Component,
    /// After a component, `)`, `?` or `!`.
    AfterComponent,
    /// Inside `if ( ... )`: parenthesis depth.
    Condition(u32),
}

struct Layout {
    out: VecDeque<Token>,
    frames: Vec<Frame>,
    prev: Prev,
    probe: Option<ProbeState>,
    /// Open brace groups of the probe point being read (`{open,read}`).
    point_groups: u32,
    /// Statement bodies opened without a block (`if (a) while (b) ...`,
    /// `else if` chains).
    header_run: usize,
    /// The next statement is the body of a header or `else`.
    in_body: bool,
    /// Operators since the current statement began.
    operators: usize,
}

fn is_component_piece(tok: &Tok) -> bool {
    matches!(tok, Tok::Ident(_) | Tok::Star) || tok.keyword().is_some()
}

fn piece_text(tok: &Tok) -> &str {
    match tok {
        Tok::Ident(s) => s,
        Tok::Star => "*",
        other => other.keyword().unwrap_or(""),
    }
}

impl Layout {
    fn top_level(&mut self, t: Token, rest: &mut Peekable<impl Iterator<Item = Token>>) {
        match (self.probe, &t.tok) {
            (_, Tok::Probe) => self.probe = Some(ProbeState::Component),
            (Some(ProbeState::Condition(depth)), tok) => {
                let depth = match tok {
                    Tok::LParen => depth + 1,
                    Tok::RParen => depth.saturating_sub(1),
                    _ => depth,
                };
                self.probe = Some(if depth == 0 && matches!(tok, Tok::RParen) {
                    ProbeState::AfterComponent
                } else {
                    ProbeState::Condition(depth)
                });
            }
            (Some(ProbeState::AfterComponent), Tok::If) => {
                self.probe = Some(ProbeState::Condition(0));
            }
            (Some(_), tok) if is_component_piece(tok) => {
                let mut name = piece_text(tok).to_string();
                let mut end = t.end;
                while let Some(next) = rest.next_if(|n| n.glued && is_component_piece(&n.tok)) {
                    name.push_str(piece_text(&next.tok));
                    end = next.end;
                }
                self.probe = Some(ProbeState::AfterComponent);
                self.out.push_back(Token {
                    tok: Tok::Component(name),
                    end,
                    ..t
                });
                return;
            }
            // A brace group of alternatives where a component may come
            // (`syscall.{open,read}`); after a component, the body.
            (Some(ProbeState::Component), Tok::LBrace) => {
                self.point_groups += 1;
            }
            (Some(_), Tok::RBrace) if self.point_groups > 0 => {
                self.point_groups -= 1;
                self.probe = Some(ProbeState::AfterComponent);
            }
            (Some(_), Tok::LBrace) => {
                self.probe = None;
                self.point_groups = 0;
                self.open_block(t, BlockKind::Body);
                return;
            }
            (Some(_), Tok::Dot | Tok::Comma | Tok::Assign | Tok::AddAssign) => {
                self.probe = Some(ProbeState::Component);
            }
            (Some(_), Tok::RParen | Tok::Question | Tok::Bang) => {
                self.probe = Some(ProbeState::AfterComponent);
            }
            (None, Tok::LBrace) => {
                self.open_block(t, BlockKind::Body);
                return;
            }
            _ => {}
        }
        self.out.push_back(t);
    }

    fn open_block(&mut self, t: Token, kind: BlockKind) {
        self.operators = 0;
        self.frames.push(Frame::Block(kind));
        self.prev = Prev::StmtStart;
        self.out.push_back(t);
    }

    /// Which limit `t` would exceed, if any.
    fn over_limit(&mut self, t: &Token) -> Option<String> {
        if self.frames.len() + self.header_run > MAX_NESTING {
            return Some(format!("nesting too deep: more than {MAX_NESTING} levels"));
        }
        let punctuation = matches!(
            t.tok,
            Tok::LParen
                | Tok::RParen
                | Tok::LBracket
                | Tok::RBracket
                | Tok::LBrace
                | Tok::RBrace
                | Tok::Comma
                | Tok::Semi
        );
        if t.tok.operator().is_some() && !punctuation {
            self.operators += 1;
            if self.operators > MAX_OPERATORS {
                return Some(format!(
                    "expression too complex: more than {MAX_OPERATORS} operators in one statement"
                ));
            }
        }
        None
    }

    fn mark_statement(&mut self, at: &Token) {
        self.operators = 0;
        self.out.push_back(Token {
            tok: Tok::StmtStart,
            start: at.start,
            end: at.start,
            glued: false,
        });
    }

    /// A token inside a probe or function body.
    #[inline]
    fn body(&mut self, t: Token) {
        match self.frames.last() {
            Some(Frame::Block(_)) => self.statement_level(t),
            _ => self.nested(t),
        }
    }

    /// Inside `( )` or `[ ]`: no statements begin here; track nesting.
    fn nested(&mut self, t: Token) {
        match t.tok {
            Tok::LParen => self.frames.push(Frame::Paren(ParenKind::Group, false)),
            Tok::LBracket => self.frames.push(Frame::Bracket(false)),
            Tok::RParen | Tok::RBracket => {
                let frame = self.frames.pop();
                if let Some(Frame::Paren(ParenKind::Header, _)) = frame {
                    self.header_run += 1;
                    self.in_body = true;
                }
                if let Some(Frame::Block(_)) = self.frames.last() {
                    self.prev = after_close(frame);
                }
            }
            _ => {}
        }
        self.out.push_back(t);
    }

    fn statement_level(&mut self, t: Token) {
        if let Tok::RBrace = t.tok {
            let kind = match self.frames.pop() {
                Some(Frame::Block(kind)) => kind,
                _ => BlockKind::Stmt,
            };
            self.prev = match kind {
                BlockKind::Try => Prev::Catch,
                _ => Prev::StmtStart,
            };
            self.out.push_back(t);
            return;
        }
        match self.prev {
            Prev::StmtStart => self.begin_statement_or_else(t),
            Prev::Operand { prefixed } => self.operand(t, prefixed),
            Prev::OperandEnd {
                crement,
                call,
                index,
                prefixed,
            } => {
                let continues = match t.tok {
                    Tok::PlusPlus | Tok::MinusMinus => crement,
                    Tok::LParen => call.is_some(),
                    Tok::LBracket => index,
                    Tok::Pretty(_) => true,
                    Tok::Semi => {
                        self.prev = Prev::StmtStart;
                        self.out.push_back(t);
                        return;
                    }
                    _ => continues_expression(&t.tok),
                };
                if !continues {
                    return self.begin_statement_or_else(t);
                }
                match t.tok {
                    Tok::PlusPlus | Tok::MinusMinus => {
                        self.prev = Prev::OperandEnd {
                            crement: false,
                            call: None,
                            index: false,
                            prefixed,
                        };
                    }
                    Tok::LParen => {
                        let kind = call.unwrap_or(ParenKind::Call);
                        self.frames.push(Frame::Paren(kind, prefixed));
                    }
                    Tok::LBracket => self.frames.push(Frame::Bracket(prefixed)),
                    Tok::Arrow => self.prev = Prev::Member { prefixed },
                    Tok::Pretty(_) => {
                        self.prev = Prev::OperandEnd {
                            crement: false,
                            call: None,
                            index: false,
                            prefixed,
                        }
                    }
                    _ => self.prev = Prev::Operand { prefixed: false },
                }
                self.out.push_back(t);
            }
            Prev::Member { prefixed } => {
                self.prev = Prev::OperandEnd {
                    crement: !prefixed,
                    call: None,
                    index: true,
                    prefixed,
                };
                self.out.push_back(t);
            }
            Prev::KeywordEnd => match t.tok {
                Tok::Semi => {
                    self.prev = Prev::StmtStart;
                    self.out.push_back(t);
                }
                _ => self.begin_statement_or_else(t),
            },
            Prev::Return => match t.tok {
                Tok::Semi => {
                    self.prev = Prev::StmtStart;
                    self.out.push_back(t);
                }
                _ => self.operand(t, false),
            },
            Prev::Header => {
                if let Tok::LParen = t.tok {
                    self.frames.push(Frame::Paren(ParenKind::Header, false));
                }
                self.out.push_back(t);
            }
            Prev::BlockOf(kind) => {
                if let Tok::LBrace = t.tok {
                    return self.open_block(t, kind);
                }
                self.out.push_back(t);
            }
            Prev::Catch => match t.tok {
                Tok::Catch => {
                    self.prev = Prev::CatchRest;
                    self.out.push_back(t);
                }
                _ => self.begin_statement_or_else(t),
            },
            Prev::CatchRest => match t.tok {
                Tok::LParen => {
                    self.frames
                        .push(Frame::Paren(ParenKind::CatchHeader, false));
                    self.out.push_back(t);
                }
                Tok::LBrace => self.open_block(t, BlockKind::Catch),
                _ => self.out.push_back(t),
            },
        }
    }

    fn begin_statement_or_else(&mut self, t: Token) {
        if let Tok::Else = t.tok {
            self.in_body = true;
            self.prev = Prev::StmtStart;
            self.out.push_back(t);
            return;
        }
        if !std::mem::take(&mut self.in_body) {
            self.header_run = 0;
        }
        self.mark_statement(&t);
        match t.tok {
            Tok::Semi => {
                self.prev = Prev::StmtStart;
                self.out.push_back(t);
            }
            Tok::LBrace => self.open_block(t, BlockKind::Stmt),
            Tok::If | Tok::While | Tok::For | Tok::Foreach => {
                self.prev = Prev::Header;
                self.out.push_back(t);
            }
            Tok::Try => {
                self.prev = Prev::BlockOf(BlockKind::Try);
                self.out.push_back(t);
            }
            Tok::Next | Tok::Break | Tok::Continue | Tok::Embedded(_) => {
                self.prev = Prev::KeywordEnd;
                self.out.push_back(t);
            }
            Tok::Return => {
                self.prev = Prev::Return;
                self.out.push_back(t);
            }
            Tok::Delete => {
                self.prev = Prev::Operand { prefixed: false };
                self.out.push_back(t);
            }
            _ => self.operand(t, false),
        }
    }

    /// A token where an operand is expected.
    fn operand(&mut self, t: Token, prefixed: bool) {
        let end = |crement, call, index| Prev::OperandEnd {
            crement: crement && !prefixed,
            call,
            index,
            prefixed,
        };
        self.prev = match t.tok {
            Tok::PlusPlus | Tok::MinusMinus => Prev::Operand { prefixed: true },
            Tok::LParen => {
                self.frames.push(Frame::Paren(ParenKind::Group, prefixed));
                self.prev
            }
            Tok::LBracket => {
                self.frames.push(Frame::Bracket(prefixed));
                self.prev
            }
            Tok::Ident(_) => end(true, Some(ParenKind::Call), true),
            Tok::Target(_) => end(true, None, true),
            Tok::AtWord(_) => end(false, Some(ParenKind::AtCall), false),
            Tok::Num(_) | Tok::Str(_) | Tok::Embedded(_) => end(true, None, false),
            _ => Prev::Operand { prefixed: false },
        };
        self.out.push_back(t);
    }
}

/// What may follow a closed `( )` / `[ ]` at statement level.
fn after_close(frame: Option<Frame>) -> Prev {
    match frame {
        Some(Frame::Paren(ParenKind::Header, _)) => Prev::StmtStart,
        Some(Frame::Paren(ParenKind::CatchHeader, _)) => Prev::BlockOf(BlockKind::Catch),
        Some(Frame::Paren(ParenKind::AtCall, prefixed)) => Prev::OperandEnd {
            crement: !prefixed,
            call: None,
            index: true,
            prefixed,
        },
        Some(Frame::Paren(_, prefixed)) => Prev::OperandEnd {
            crement: !prefixed,
            call: None,
            index: false,
            prefixed,
        },
        Some(Frame::Bracket(prefixed)) => Prev::OperandEnd {
            crement: !prefixed,
            call: None,
            index: true,
            prefixed,
        },
        _ => Prev::StmtStart,
    }
}

/// Tokens that extend an expression after a complete operand.
fn continues_expression(tok: &Tok) -> bool {
    matches!(
        tok,
        Tok::Plus
            | Tok::Minus
            | Tok::Star
            | Tok::Slash
            | Tok::Percent
            | Tok::Shl
            | Tok::Shr
            | Tok::UShr
            | Tok::Amp
            | Tok::Pipe
            | Tok::Caret
            | Tok::AndAnd
            | Tok::OrOr
            | Tok::Lt
            | Tok::Gt
            | Tok::Le
            | Tok::Ge
            | Tok::EqEq
            | Tok::NotEq
            | Tok::Match
            | Tok::NotMatch
            | Tok::Dot
            | Tok::Question
            | Tok::Colon
            | Tok::Assign
            | Tok::StatAdd
            | Tok::AddAssign
            | Tok::SubAssign
            | Tok::MulAssign
            | Tok::DivAssign
            | Tok::ModAssign
            | Tok::ShlAssign
            | Tok::ShrAssign
            | Tok::AndAssign
            | Tok::XorAssign
            | Tok::OrAssign
            | Tok::ConcatAssign
            | Tok::In
            | Tok::Arrow
            | Tok::Comma
            | Tok::RParen
            | Tok::RBracket
            | Tok::Limit
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::lex;

    /// The laid-out stream as text, `|` marking statement starts.
    fn shown(text: &str) -> String {
        layout(lex(text))
            .iter()
            .map(|t| match &t.tok {
                Tok::StmtStart => "|".to_string(),
                Tok::Component(c) => format!("<{c}>"),
                Tok::Ident(s) => s.clone(),
                Tok::Num(n) => n.to_string(),
                Tok::Str(s) => format!("{s:?}"),
                Tok::Target(s) => format!("${s}"),
                Tok::Pretty(n) => format!("<{}>", "$".repeat(*n as usize)),
                other => other
                    .keyword()
                    .or(other.operator())
                    .unwrap_or("?")
                    .to_string(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn marks_where_statements_begin() {
        assert_eq!(
            shown("probe p { a = b -c d }"),
            "probe <p> { | a = b - c | d }"
        );
        assert_eq!(shown("probe p { a ++b }"), "probe <p> { | a ++ | b }");
        assert_eq!(shown("probe p { --a ++b }"), "probe <p> { | -- a | ++ b }");
        assert_eq!(shown("probe p { a; ;b }"), "probe <p> { | a ; | ; | b }");
        assert_eq!(
            shown("probe p { if (x) y else { } }"),
            "probe <p> { | if ( x ) | y else | { } }"
        );
        assert_eq!(shown("probe p { next -1 }"), "probe <p> { | next | - 1 }");
        assert_eq!(
            shown("function f() { return -1 }"),
            "function f ( ) { | return - 1 }"
        );
        assert_eq!(
            shown("probe p { try { } catch (e) { } x }"),
            "probe <p> { | try { } catch ( e ) { } | x }"
        );
    }

    #[test]
    fn a_dollar_after_a_bracket_or_paren_is_a_pretty_suffix() {
        assert_eq!(
            shown("probe p { x = $a[1]$ $b $c[0] $$ }"),
            "probe <p> { | x = $a [ 1 ] <$> | $b | $c [ 0 ] <$$> }"
        );
        assert_eq!(
            shown("probe p { print(@cast(q, \"T\")$) }"),
            // (`shown` writes `@cast` as `?`.)
            "probe <p> { | print ( ? ( q , \"T\" ) <$> ) }"
        );
        // Not after anything else, and `$$vars` stays a variable.
        assert_eq!(
            shown("probe p { f() $$vars $ }"),
            "probe <p> { | f ( ) | $$vars | $ }"
        );
    }

    #[test]
    fn joins_probe_point_components_and_glues_strings() {
        assert_eq!(
            shown("probe sys*call.return, a if (x*y) { f(\"a\" \"b\") }"),
            "probe <sys*call> . <return> , <a> if ( x * y ) { | f ( \"ab\" ) }"
        );
        assert_eq!(shown("probe a * b {}"), "probe <a> <*> <b> { }");
        assert_eq!(
            shown("probe p { $t->function }"),
            "probe <p> { | $t -> function }"
        );
    }
}
