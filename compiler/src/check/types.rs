//! Type inference by unification.
//!
//! Every variable whose type is not fixed by its syntax (locals, global
//! values and keys, function parameters and return values) is a type
//! variable. Lowering unifies them as it walks the code (operators fix
//! `long` or `string`, `<<<` fixes `stat`, assignments and comparisons tie
//! two sides together), so the whole program is solved in one pass,
//! whatever the order of probes and functions. A conflict is reported at
//! the second site, with the site that first fixed the type labelled.

use super::error::SemError;
use crate::ast::Span;
use crate::program::Type;

/// A type variable.
pub type Tv = usize;

/// The type of an expression while lowering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Known(Type),
    Var(Tv),
    /// Nothing is known and nothing ties it (e.g. a failed sub-expression).
    Unknown,
}

#[derive(Default)]
pub struct Types {
    parent: Vec<Tv>,
    /// The type of a root, with the span that fixed it.
    known: Vec<Option<(Type, Span)>>,
}

/// SystemTap's names for types in messages.
pub fn type_name(t: Type) -> &'static str {
    match t {
        Type::Long => "long",
        Type::String => "string",
        Type::Stats => "stat",
        Type::Hist => "histogram",
        Type::Void => "void",
    }
}

impl Types {
    pub fn fresh(&mut self) -> Tv {
        self.parent.push(self.parent.len());
        self.known.push(None);
        self.parent.len() - 1
    }

    fn root(&mut self, mut v: Tv) -> Tv {
        while self.parent[v] != v {
            self.parent[v] = self.parent[self.parent[v]];
            v = self.parent[v];
        }
        v
    }

    /// The solved type of a variable, if any.
    pub fn get(&mut self, v: Tv) -> Option<Type> {
        let r = self.root(v);
        self.known[r].map(|(t, _)| t)
    }

    /// The solved type of an expression type, if any.
    pub fn resolve(&mut self, t: Ty) -> Option<Type> {
        match t {
            Ty::Known(t) => Some(t),
            Ty::Var(v) => self.get(v),
            Ty::Unknown => None,
        }
    }

    /// Requires `a` and `b` to be the same type; `span` is the site that
    /// requires it. Returns the combined type.
    pub fn unify(&mut self, a: Ty, b: Ty, span: Span) -> Result<Ty, SemError> {
        match (a, b) {
            (Ty::Unknown, x) | (x, Ty::Unknown) => Ok(x),
            (Ty::Known(x), Ty::Known(y)) => {
                if x == y {
                    Ok(a)
                } else {
                    Err(mismatch(span, x, y, None))
                }
            }
            (Ty::Var(v), Ty::Known(t)) | (Ty::Known(t), Ty::Var(v)) => {
                let r = self.root(v);
                match self.known[r] {
                    None => {
                        self.known[r] = Some((t, span));
                        Ok(Ty::Var(r))
                    }
                    Some((k, _)) if k == t => Ok(Ty::Var(r)),
                    Some((k, first)) => Err(mismatch(span, t, k, Some(first))),
                }
            }
            (Ty::Var(v), Ty::Var(w)) => {
                let (rv, rw) = (self.root(v), self.root(w));
                if rv == rw {
                    return Ok(Ty::Var(rv));
                }
                match (self.known[rv], self.known[rw]) {
                    (Some((x, _)), Some((y, first))) if x != y => {
                        Err(mismatch(span, x, y, Some(first)))
                    }
                    (None, k) => {
                        self.parent[rv] = rw;
                        self.known[rw] = k;
                        Ok(Ty::Var(rw))
                    }
                    (k, _) => {
                        self.parent[rw] = rv;
                        self.known[rv] = k;
                        Ok(Ty::Var(rv))
                    }
                }
            }
        }
    }
}

fn mismatch(span: Span, t1: Type, t2: Type, first: Option<Span>) -> SemError {
    let mut e = SemError::new(
        span,
        format!("type mismatch ({} vs. {})", type_name(t1), type_name(t2)),
    )
    .label(format!("used as {} here", type_name(t1)));
    if let Some(first) = first
        && first != span
    {
        e = e.also(
            first,
            format!("type was first inferred here ({})", type_name(t2)),
        );
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(n: usize) -> Span {
        Span::new(0, n, n + 1)
    }

    #[test]
    fn variables_chain_to_a_known_type() {
        let mut t = Types::default();
        let (a, b) = (t.fresh(), t.fresh());
        t.unify(Ty::Var(a), Ty::Var(b), at(0)).unwrap();
        t.unify(Ty::Var(b), Ty::Known(Type::String), at(1)).unwrap();
        assert_eq!(t.get(a), Some(Type::String));
    }

    #[test]
    fn conflict_labels_both_sites() {
        let mut t = Types::default();
        let a = t.fresh();
        t.unify(Ty::Var(a), Ty::Known(Type::Long), at(3)).unwrap();
        let e = t
            .unify(Ty::Var(a), Ty::Known(Type::String), at(9))
            .unwrap_err();
        assert_eq!(e.message, "type mismatch (string vs. long)");
        assert_eq!(e.span, at(9));
        assert_eq!(
            e.others,
            vec![(at(3), "type was first inferred here (long)".to_string())]
        );
    }
}
