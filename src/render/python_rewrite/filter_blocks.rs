//! The place of a filter block's text among the items of its output, where it can be known
//! before the render. jinja2 writes each item of a template's output (a run of constant text,
//! each value printed, a macro's or a filter block's text) as one item of a list that Python
//! joins at the end of the output (the template, a macro, a `set` or filter block, a recursive
//! loop): what a filter block's filter gives that is not a string (`{% filter length %}`)
//! raises there, as `sequence item N: expected str instance, int found`, N its place.

use std::collections::HashMap;

use minijinja::machinery::ast;

use super::constants::constant;

/// How many items an output holds at a point of the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Count {
    Known(usize),
    /// Known on the first iteration of the loop around (its `loop.first`).
    First(usize),
    /// Not known before the render.
    Unknown,
    /// Not reached: a `continue` or `break` came first.
    Left,
}

impl Count {
    fn add(self, n: usize) -> Count {
        match self {
            Count::Known(k) => Count::Known(k + n),
            Count::First(k) => Count::First(k + n),
            other => other,
        }
    }

    /// Where two branches meet.
    fn join(self, other: Count) -> Count {
        match (self, other) {
            (Count::Left, c) | (c, Count::Left) => c,
            (a, b) if a == b => a,
            _ => Count::Unknown,
        }
    }
}

/// For each filter block of `tree`, by the offset where its filter ends: the argument of
/// `python_semantics::BLOCK_TEXT_FILTER` that says its text's place (`none` where unknown).
pub(super) fn places(tree: &ast::Stmt) -> HashMap<u32, String> {
    let mut out = HashMap::new();
    stmt(tree, Count::Known(0), &mut out);
    out
}

fn stmts(stmts: &[ast::Stmt], mut count: Count, out: &mut HashMap<u32, String>) -> Count {
    // A run of printed values and text between tags is jinja2's one output node: its constant
    // parts joined into one item each, each other value an item.
    let mut constant_run = false;
    for s in stmts {
        match s {
            ast::Stmt::EmitRaw(r) if r.raw.is_empty() => {}
            ast::Stmt::EmitRaw(_) => {
                if !constant_run {
                    count = count.add(1);
                }
                constant_run = true;
            }
            ast::Stmt::EmitExpr(e) if constant(&e.expr) => {
                if !constant_run {
                    count = count.add(1);
                }
                constant_run = true;
            }
            ast::Stmt::EmitExpr(_) => {
                count = count.add(1);
                constant_run = false;
            }
            other => {
                constant_run = false;
                count = stmt(other, count, out);
            }
        }
    }
    count
}

fn stmt(s: &ast::Stmt, count: Count, out: &mut HashMap<u32, String>) -> Count {
    match s {
        ast::Stmt::Template(t) => stmts(&t.children, count, out),
        ast::Stmt::FilterBlock(f) => {
            let place = match count {
                Count::Known(n) => n.to_string(),
                Count::First(n) => format!("({n} if loop.first else none)"),
                Count::Unknown | Count::Left => "none".to_string(),
            };
            out.insert(f.filter_span.end_offset, place);
            stmts(&f.body, Count::Known(0), out);
            count.add(1)
        }
        ast::Stmt::IfCond(c) => {
            let yes = stmts(&c.true_body, count, out);
            let no = stmts(&c.false_body, count, out);
            yes.join(no)
        }
        ast::Stmt::WithBlock(w) => stmts(&w.body, count, out),
        ast::Stmt::AutoEscape(a) => stmts(&a.body, count, out),
        ast::Stmt::Block(b) => stmts(&b.body, count, out),
        ast::Stmt::ForLoop(f) if f.recursive => {
            stmts(&f.body, Count::First(0), out);
            stmts(&f.else_body, Count::Known(0), out);
            count.add(1)
        }
        ast::Stmt::ForLoop(f) => {
            let first = match count {
                Count::Known(n) => Count::First(n),
                _ => Count::Unknown,
            };
            stmts(&f.body, first, out);
            // The `else` block runs where the body never did.
            let otherwise = stmts(&f.else_body, count, out);
            // A body that writes nothing leaves the count as it was, however many times it runs.
            match writes(&f.body) {
                false => count.join(otherwise),
                true => Count::Unknown,
            }
        }
        ast::Stmt::SetBlock(b) => {
            stmts(&b.body, Count::Known(0), out);
            count
        }
        ast::Stmt::Macro(m) => {
            stmts(&m.body, Count::Known(0), out);
            count
        }
        ast::Stmt::CallBlock(c) => {
            stmts(&c.macro_decl.body, Count::Known(0), out);
            count.add(1)
        }
        ast::Stmt::Set(_) | ast::Stmt::Do(_) => count,
        ast::Stmt::Import(_) | ast::Stmt::FromImport(_) => count,
        ast::Stmt::Continue(_) | ast::Stmt::Break(_) => Count::Left,
        _ => Count::Unknown,
    }
}

/// Whether `stmts` can write an item to the output they are in.
fn writes(stmts: &[ast::Stmt]) -> bool {
    stmts.iter().any(|s| match s {
        ast::Stmt::EmitRaw(r) => !r.raw.is_empty(),
        ast::Stmt::IfCond(c) => writes(&c.true_body) || writes(&c.false_body),
        ast::Stmt::ForLoop(f) if !f.recursive => writes(&f.body) || writes(&f.else_body),
        ast::Stmt::WithBlock(w) => writes(&w.body),
        ast::Stmt::AutoEscape(a) => writes(&a.body),
        ast::Stmt::Block(b) => writes(&b.body),
        ast::Stmt::Set(_)
        | ast::Stmt::SetBlock(_)
        | ast::Stmt::Macro(_)
        | ast::Stmt::Do(_)
        | ast::Stmt::Import(_)
        | ast::Stmt::FromImport(_)
        | ast::Stmt::Continue(_)
        | ast::Stmt::Break(_) => false,
        _ => true,
    })
}

#[cfg(test)]
mod tests {
    use crate::render::{ChatTemplate, RenderOptions};

    fn error(source: &str) -> String {
        let template =
            ChatTemplate::compile(source, vec![("s".into(), "q".into())]).expect("a template");
        template
            .render_interpreted(&[], &RenderOptions::default())
            .expect_err(source)
            .message
    }

    // Each place as jinja2 3.1.6 names it.
    #[test]
    fn a_filter_block_that_gives_no_string_names_its_place() {
        let cases = [
            ("{% filter length %}ab{% endfilter %}", 0),
            ("x{{ 1 }}y{% filter length %}ab{% endfilter %}", 1),
            ("{{ s }}/{{ s }}{% filter length %}ab{% endfilter %}", 3),
            ("{{ s }}{% if true %}a{% filter length %}ab{% endfilter %}{% endif %}", 2),
            ("{% set ns = namespace() %}{% macro m() %}{% endmacro %}{{ m() }}{% filter length %}ab{% endfilter %}", 1),
            ("{% for i in [1, 2] %}{{ i }}-{% filter length %}ab{% endfilter %}{% endfor %}", 2),
            ("{% set t %}{{ s }}{% filter length %}ab{% endfilter %}{% endset %}", 1),
            ("{{ [1, 2]|map('string')|join }}{{ 3 }}{% filter length %}ab{% endfilter %}", 2),
            ("{% for x in [1] recursive %}{{ x }}{% endfor %}{{ s }}{% filter length %}ab{% endfilter %}", 2),
            ("{% for x in [] %}{{ x }}{% else %}{{ s }}{% filter length %}ab{% endfilter %}{% endfor %}", 1),
            ("{% set ns = namespace(n=0) %}{% for x in [1, 2] %}{% set ns.n = x %}{% endfor %}{{ s }}{% filter length %}ab{% endfilter %}", 1),
            ("{% for x in [1, 2] %}{% if x %}{% continue %}{% endif %}{% endfor %}{{ s }}{% filter length %}ab{% endfilter %}", 1),
        ];
        for (source, place) in cases {
            let want = format!("sequence item {place}: expected str instance, int found");
            let got = error(source);
            assert!(got.contains(&want), "{source}: {got}");
        }
    }

    #[test]
    fn a_place_known_only_at_the_render_goes_unnamed() {
        // Python names item 1 (the loop's second iteration).
        let source = "a{% for i in [1, 2] %}{% if not loop.first %}{% filter length %}ab{% endfilter %}{% endif %}{% endfor %}";
        let got = error(source);
        assert!(
            got.contains("invalid operation: expected str instance, int found"),
            "{got}"
        );
    }
}
