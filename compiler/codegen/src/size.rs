//! A cap on the statements of one probe or function body.
//!
//! Each body is one native function, and Cranelift holds all of a
//! function's IR, its machine code before register allocation and the
//! allocator's state at once: about 4 KB per statement. One body of
//! 200,000 statements made `-p4` peak at 0.89 GB (issue 29, point 4).
//! Past the cap the script is refused with a message saying how to
//! compile it (split the body into functions, each its own native
//! function), not left to exhaust the machine's memory.

use utap_compiler::program::{Block, Stmt, StmtKind};

use crate::CodegenError;

/// The most statements one body may have (peak -p4 of such a body,
/// `x = x + N` statements: about 0.24 GB).
pub const MAX_BODY_STATEMENTS: usize = 50_000;

/// Refuses `body` when it has more than [`MAX_BODY_STATEMENTS`]
/// statements, nested ones included; the error points at the first
/// statement past the cap.
pub fn check_body(body: &Block) -> Result<(), CodegenError> {
    let mut count = 0;
    let mut first_over = None;
    for s in &body.stmts {
        count_stmt(s, &mut count, &mut first_over);
    }
    match first_over {
        None => Ok(()),
        Some(span) => Err(CodegenError::new(
            span,
            format!(
                "body too large: {count} statements, more than the {MAX_BODY_STATEMENTS} one \
                 probe or function may have (compiling one body costs about 4 KB of memory \
                 per statement); split it into functions"
            ),
        )),
    }
}

fn count_stmt(s: &Stmt, count: &mut usize, first_over: &mut Option<utap_compiler::ast::Span>) {
    *count += 1;
    if *count > MAX_BODY_STATEMENTS && first_over.is_none() {
        *first_over = Some(s.span);
    }
    let mut inner = |s: &Stmt| count_stmt(s, count, first_over);
    match &s.kind {
        StmtKind::Block(b) => b.stmts.iter().for_each(inner),
        StmtKind::If { then, else_, .. } => {
            inner(then);
            if let Some(e) = else_ {
                inner(e);
            }
        }
        StmtKind::While { body, .. } | StmtKind::For { body, .. } => inner(body),
        StmtKind::Foreach(f) => inner(&f.body),
        StmtKind::Try { body, catch, .. } => {
            body.stmts.iter().for_each(&mut inner);
            catch.stmts.iter().for_each(inner);
        }
        StmtKind::Expr(_)
        | StmtKind::Next
        | StmtKind::Break
        | StmtKind::Continue
        | StmtKind::Return(_)
        | StmtKind::Delete(_) => {}
    }
}
