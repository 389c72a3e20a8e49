//! Namespace assignments through the engine's own namespace (see `python_namespace`):
//! `{% set ns.name = value %}` becomes
//! `{% set __sft_py_set = (value)|__sft_py_namespace_field((ns), 'name') %}`, and
//! `{% set ns.name %}...{% endset %}` a set block of `__sft_py_set` whose filters end with that
//! store. The full rewrite makes these edits among its others; [`namespace_assignments`] makes
//! them alone, for a template that keeps minijinja's rules otherwise.

use minijinja::machinery::ast;
use minijinja::syntax::SyntaxConfig;

use super::{applied, expr_start, Edit, Rewrite};
use crate::render::python_namespace::{DISCARDED, FIELD_FILTER};

/// `source` with only its namespace assignments rewritten (see the module documentation);
/// [`Rewrite::Nothing`] where it has none or does not parse.
pub fn namespace_assignments(source: &str, syntax: SyntaxConfig) -> Rewrite {
    let Ok(tree) = minijinja::machinery::parse(source, "chat_template", syntax.clone()) else {
        return Rewrite::Nothing;
    };
    let mut walk = Assignments {
        source,
        edits: Vec::new(),
        unfit: false,
    };
    walk.stmt(&tree);
    if walk.unfit {
        return Rewrite::Failed;
    }
    if walk.edits.is_empty() {
        return Rewrite::Nothing;
    }
    let Some(out) = applied(source, 0, source.len(), walk.edits.iter()) else {
        return Rewrite::Failed;
    };
    match minijinja::machinery::parse(&out, "chat_template", syntax) {
        Ok(_) => Rewrite::Done(out),
        Err(_) => Rewrite::Failed,
    }
}

/// The edits of one namespace assignment whose target is `a` (`ns.name`): the range of the
/// target, which becomes [`DISCARDED`], and the filter suffix that stores the assigned value in
/// the namespace. `None` where the target's text is not at hand.
pub(super) fn store(source: &str, a: &ast::Spanned<ast::GetAttr>) -> Option<(u32, u32, String)> {
    let start = expr_start(source, &a.expr);
    let target = source.get(start as usize..a.expr.span().end_offset as usize)?;
    let suffix = format!("|{FIELD_FILTER}(({target}), '{}')", a.name);
    Some((start, a.span().end_offset, suffix))
}

/// Where the value of `{% set target = value %}` is written: a bare tuple (`= 1, 2`) from its
/// first item to its last (minijinja's span of it starts at its second item).
pub(super) fn value_range(source: &str, value: &ast::Expr) -> (u32, u32) {
    match value {
        ast::Expr::Tuple(t) if !t.items.is_empty() => {
            let start = t.items.iter().map(|i| expr_start(source, i)).min();
            let end = t.items.iter().map(|i| i.span().end_offset).max();
            (
                start.unwrap_or(value.span().start_offset),
                end.unwrap_or(value.span().end_offset),
            )
        }
        _ => (expr_start(source, value), value.span().end_offset),
    }
}

struct Assignments<'s> {
    source: &'s str,
    edits: Vec<Edit>,
    unfit: bool,
}

impl Assignments<'_> {
    fn push(&mut self, start: usize, end: usize, text: String) {
        let order = self.edits.len();
        self.edits.push(Edit {
            start,
            end,
            order,
            text,
        });
    }

    fn stored(&mut self, a: &ast::Spanned<ast::GetAttr>) -> Option<String> {
        let Some((start, end, suffix)) = store(self.source, a) else {
            self.unfit = true;
            return None;
        };
        self.push(start as usize, end as usize, DISCARDED.to_string());
        Some(suffix)
    }

    fn stmts(&mut self, stmts: &[ast::Stmt]) {
        stmts.iter().for_each(|s| self.stmt(s));
    }

    fn stmt(&mut self, stmt: &ast::Stmt) {
        match stmt {
            ast::Stmt::Template(t) => self.stmts(&t.children),
            ast::Stmt::ForLoop(f) => {
                self.stmts(&f.body);
                self.stmts(&f.else_body);
            }
            ast::Stmt::IfCond(c) => {
                self.stmts(&c.true_body);
                self.stmts(&c.false_body);
            }
            ast::Stmt::WithBlock(w) => self.stmts(&w.body),
            ast::Stmt::Set(s) => match &s.target {
                ast::Expr::GetAttr(a) => {
                    if let Some(suffix) = self.stored(a) {
                        let (start, end) = value_range(self.source, &s.expr);
                        self.push(start as usize, start as usize, "(".to_string());
                        self.push(end as usize, end as usize, format!("){suffix}"));
                    }
                }
                // A namespace field among several names (`{% set a, ns.b = 1, 2 %}`) stays
                // minijinja's assignment, which only minijinja's namespace takes.
                ast::Expr::List(names) if has_field(names) => self.unfit = true,
                _ => {}
            },
            ast::Stmt::SetBlock(s) => {
                if let ast::Expr::GetAttr(a) = &s.target {
                    if let Some(suffix) = self.stored(a) {
                        let at = match &s.filter {
                            Some(filter) => filter.span().end_offset,
                            None => s.target.span().end_offset,
                        } as usize;
                        self.push(at, at, format!(" {suffix}"));
                    }
                }
                self.stmts(&s.body);
            }
            ast::Stmt::AutoEscape(a) => self.stmts(&a.body),
            ast::Stmt::FilterBlock(f) => self.stmts(&f.body),
            ast::Stmt::Block(b) => self.stmts(&b.body),
            ast::Stmt::Macro(m) => self.stmts(&m.body),
            ast::Stmt::CallBlock(c) => self.stmts(&c.macro_decl.body),
            _ => {}
        }
    }
}

/// Whether a list of assignment targets names a namespace field, at any depth.
pub(super) fn has_field(names: &ast::List) -> bool {
    names.items.iter().any(|item| match item {
        ast::Expr::GetAttr(_) => true,
        ast::Expr::List(inner) => has_field(inner),
        _ => false,
    })
}
